import { z } from 'zod';
import { DomainError } from '../shared/errors.ts';
import { atomicToDecimal, feeFor } from '../shared/money.ts';
import { STABLES, type Network } from '../shared/network.ts';
import { FEE_EXTENSION_KEY, FeeExtension } from '../facilitator/schema.ts';
import { networkFromX402, requirementsV2, ResourceInfo, X402RequirementsV1, X402RequirementsV2 } from '../facilitator/wire.ts';
import { acceptOfCharge, MPP_INTENT, MPP_METHOD, solanaCharges, SolanaChargeRequest } from '../facilitator/mpp.ts';
import type { QuoteOption } from './schema.ts';

// The 402 a seller answers, read into quote options. x402 v2 (PAYMENT-REQUIRED header, base64 JSON) first,
// else x402 v1 (the JSON body). Pure: the probe itself is the quote service's (through the guarded outbound port).
// The MPP rail (WWW-Authenticate: Payment, method solana, intent charge) has its own reader: readMppOptions.

const PaymentRequiredV2 = z.looseObject({ x402Version: z.literal(2), resource: ResourceInfo.optional(), accepts: z.array(z.unknown()).min(1).max(64) });
const PaymentRequiredV1 = z.looseObject({ x402Version: z.literal(1), accepts: z.array(z.unknown()).min(1).max(64) });

export interface Challenge {
  version: 1 | 2;
  resource: { url: string; description: string | null; mime_type: string | null } | null;
  /** each accept in its v2 reading */
  accepts: X402RequirementsV2[];
}

function decodeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/**
 * A 402's challenge: `headers` lower-case. Throws challenge_invalid (422) when neither form parses or no accept is a
 * well-formed x402 requirement, naming what was wrong.
 */
export function readChallenge(headers: Record<string, string>, body: Uint8Array): Challenge {
  const problems: string[] = [];
  const header = headers['payment-required'];
  if (header !== undefined) {
    const v2 = PaymentRequiredV2.safeParse(decodeJson(Buffer.from(header, 'base64').toString('utf8')));
    if (v2.success) {
      const accepts = v2.data.accepts.flatMap((a) => {
        const r = X402RequirementsV2.safeParse(a);
        return r.success ? [r.data] : [];
      });
      if (accepts.length > 0) {
        const res = v2.data.resource;
        return { version: 2, accepts, resource: res ? { url: res.url, description: res.description ?? null, mime_type: res.mimeType ?? null } : null };
      }
      problems.push('PAYMENT-REQUIRED holds no well-formed x402 v2 accept');
    } else problems.push('PAYMENT-REQUIRED is not a base64 x402 v2 challenge');
  }
  const v1 = PaymentRequiredV1.safeParse(decodeJson(Buffer.from(body).toString('utf8')));
  if (v1.success) {
    const parsed = v1.data.accepts.flatMap((a) => {
      const r = X402RequirementsV1.safeParse(a);
      return r.success ? [r.data] : [];
    });
    if (parsed.length > 0) {
      const first = parsed[0]!;
      return {
        version: 1,
        accepts: parsed.map(requirementsV2),
        resource: { url: first.resource, description: first.description || null, mime_type: first.mimeType || null },
      };
    }
    problems.push('the body holds no well-formed x402 v1 accept');
  } else problems.push('the body is not an x402 v1 challenge');
  throw new DomainError('challenge_invalid', `The 402 carries no x402 challenge this gateway can read: ${problems.join('; ')}.`, { problems });
}

/** One accept as a quote option; payable when on the caller's network, "exact", in a curated stable. */
export function optionOf(accept: X402RequirementsV2, version: 1 | 2, caller: Network): QuoteOption {
  const network = networkFromX402(accept.network) ?? null;
  const stable = network ? STABLES[network].find((s) => s.mint === accept.asset) : undefined;
  const fee = FeeExtension.safeParse(accept.extra[FEE_EXTENSION_KEY]);
  const terms = fee.success && fee.data.bps > 0 ? fee.data : null;
  const net = BigInt(accept.amount);
  const feeAtomic = terms ? feeFor(net, terms.bps) : 0n;
  const gross = net + feeAtomic;
  const dec = (v: bigint) => (stable ? atomicToDecimal(v, stable.decimals) : null);
  const feePayer = accept.extra.feePayer;
  return {
    kind: 'x402',
    x402_version: version,
    scheme: accept.scheme,
    network,
    network_id: accept.network,
    currency: stable?.symbol ?? null,
    asset: accept.asset,
    decimals: stable?.decimals ?? null,
    pay_to: accept.payTo,
    net: dec(net),
    net_atomic: net.toString(),
    fee: dec(feeAtomic),
    fee_atomic: feeAtomic.toString(),
    gross: dec(gross),
    gross_atomic: gross.toString(),
    fee_bps: terms?.bps ?? 0,
    fee_authority: terms?.feeAuthority ?? null,
    fee_payer: typeof feePayer === 'string' ? feePayer : null,
    max_timeout_seconds: accept.maxTimeoutSeconds,
    payable: network === caller && stable !== undefined && accept.scheme === 'exact',
    mpp: null,
  };
}

/** An MPP charge in quote form: the same money fields as its x402 twin, kind "mpp" and the challenge. */
export function mppOptionOf(
  request: SolanaChargeRequest,
  challenge: { id: string | null; realm: string | null; expires: string | null },
  caller: Network,
): QuoteOption {
  return {
    ...optionOf(acceptOfCharge(request), 2, caller),
    kind: 'mpp',
    x402_version: null,
    max_timeout_seconds: null,
    mpp: { method: MPP_METHOD, intent: MPP_INTENT, challenge_id: challenge.id, realm: challenge.realm, expires: challenge.expires },
  };
}

/** The Solana charge challenges of an MPP 402 (`headers` lower-case) as options, with the resource they name; [] when none. */
export function readMppOptions(headers: Record<string, string>, caller: Network): { options: QuoteOption[]; resource: Challenge['resource'] } {
  const options: QuoteOption[] = [];
  let resource: Challenge['resource'] = null;
  for (const c of solanaCharges(headers['www-authenticate'])) {
    const request = SolanaChargeRequest.safeParse(c.request);
    if (!request.success) continue;
    options.push(mppOptionOf(request.data, { id: c.id, realm: c.realm || null, expires: c.expires ?? null }, caller));
    const url = request.data.methodDetails.resource;
    resource ??= url ? { url, description: request.data.description ?? null, mime_type: null } : null;
  }
  return { options, resource };
}
