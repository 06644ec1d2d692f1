import { z } from 'zod';
import { Address } from '../shared/address.ts';
import { canonicalJson } from '../shared/canonical-json.ts';
import { decodeTransaction } from './decode.ts';
import { isMemo } from './instructions.ts';
import { FEE_EXTENSION_KEY, FeeExtension } from './schema.ts';
import { networkFromX402, type X402RequirementsV2 } from './wire.ts';
import { CAIP2, type Network } from '../shared/network.ts';
import { feeFor } from '../shared/money.ts';

// The MPP rail's Solana "charge" method (fee-facilitator-mpp-tools §2.6, §4.2; DECISIONS "MPP rail"), shared by the
// paywall (challenges), the facilitator (POST /mpp/settle) and the buyer kit (svc-gateway/mpp). Pure, and free of
// node:* imports so the client entry can carry it.
//
// A challenge's `request` is the mpp-specs Solana charge request (draft-solana-charge-00), as @solana/mpp and
// faremeter build from it, with this gateway's disclosures beside the standard fields:
//   { amount: "<gross>", currency: "<mint>", recipient: "<treasury>", description?, externalId: "<reference>",
//     methodDetails: { network: "devnet", decimals, tokenProgram, feePayer: true, feePayerKey: "<facilitator>",
//                      splits?: [{ recipient: "<fee authority>", amount: "<fee>" }],
//                      symbol, resource, "svc.fee"?: { v, bps, feeAuthority } } }
// `amount` is what the buyer pays in total; the protocol fee (§2.2) is the one split, so the seller leg is amount − fee.
// The buyer's transaction is the §2.3 settlement transaction (or the stock clients' order of the same instructions);
// a memo holding the challenge id or its externalId binds it to that challenge, and a memo naming anything else
// (another challenge) refuses it. Older wires are still read: feePayer as the address, a CAIP-2 network, and
// "svc.fee" without splits (then `amount` is the seller leg).

export const MPP_METHOD = 'solana';
export const MPP_INTENT = 'charge';
/** The problem type of an unpaid MPP answer (DECISIONS "MPP rail"). */
export const MPP_PROBLEM_TYPE = 'https://paymentauth.org/problems/payment-required';

const Atomic = z.string().regex(/^[1-9]\d{0,19}$/, 'an atomic amount: a positive integer as a decimal string');

/** draft-solana-charge-00 names clusters, not CAIP-2 ids; a charge names either (older challenges carry CAIP-2). */
export const MPP_CLUSTER: Record<Network, string> = { 'chain-mainnet': 'mainnet-beta', 'chain-devnet': 'devnet' };

/** The gateway network a charge's methodDetails.network names (cluster, CAIP-2 or x402 v1 name); undefined if none. */
export function networkOfCharge(wire: string): Network | undefined {
  for (const [n, cluster] of Object.entries(MPP_CLUSTER)) if (cluster === wire) return n as Network;
  return networkFromX402(wire);
}

/** One payment split (draft-solana-charge-00 `splits`): this gateway issues one, the protocol fee leg. */
export const ChargeSplit = z.looseObject({
  recipient: Address,
  amount: Atomic,
  memo: z.string().max(566).optional(),
  ataCreationRequired: z.boolean().optional(),
});

export const SolanaChargeDetails = z.looseObject({
  /** the cluster ("devnet", "mainnet-beta") or, on older challenges, the CAIP-2 id of the paying network */
  network: z.string().min(1).max(128),
  /** true: the facilitator pays the fees (feePayerKey); older challenges carried the fee payer's address here */
  feePayer: z.union([z.boolean(), Address]),
  feePayerKey: Address.optional(),
  decimals: z.number().int().min(0).max(255),
  tokenProgram: Address,
  splits: z.array(ChargeSplit).max(8).optional(),
  recentBlockhash: z.string().max(64).optional(),
  symbol: z.string().max(32).optional(),
  /** the paid resource (binds a challenge to one link; covered by the challenge id) */
  resource: z.string().max(4096).optional(),
  [FEE_EXTENSION_KEY]: FeeExtension.optional(),
});

/** The fee payer a charge names: feePayerKey when feePayer is true, or the address older challenges put in feePayer. */
export function feePayerOf(details: z.infer<typeof SolanaChargeDetails>): string | undefined {
  if (typeof details.feePayer === 'string') return details.feePayer;
  return details.feePayer ? details.feePayerKey : undefined;
}

export const SolanaChargeRequest = z
  .looseObject({
    /** the total the buyer pays (seller leg + splits), atomic */
    amount: Atomic,
    /** the mint */
    currency: Address,
    /** the owner credited: ATA(recipient, currency, tokenProgram) — the seller agent's treasury */
    recipient: Address,
    description: z.string().max(1024).optional(),
    /** the challenge's reference; a memo holding it binds a transaction to the challenge (draft-solana-charge-00) */
    externalId: z.string().max(256).optional(),
    methodDetails: SolanaChargeDetails,
  })
  .superRefine((r, ctx) => {
    const d = r.methodDetails;
    const issue = (path: (string | number)[], message: string) => ctx.addIssue({ code: 'custom', path: ['methodDetails', ...path], message });
    // §1: the facilitator pays every native fee; a charge whose buyer pays its own fees is not this rail's.
    if (!feePayerOf(d)) issue(['feePayerKey'], 'the facilitator pays the fees: feePayer true with feePayerKey');
    if (d.feePayer === true && !d.feePayerKey) issue(['feePayerKey'], 'feePayer true requires feePayerKey');
    const splits = d.splits ?? [];
    if (splits.length === 0) return;
    // §2.3: the one split there can be is the protocol fee leg, to the fee authority named by the terms.
    const terms = d[FEE_EXTENSION_KEY];
    if (!terms || terms.bps === 0 || splits.length !== 1 || splits[0]!.recipient !== terms.feeAuthority) {
      issue(['splits'], `the only split is the protocol fee, to the fee authority of methodDetails["${FEE_EXTENSION_KEY}"]`);
      return;
    }
    const fee = BigInt(splits[0]!.amount);
    const net = BigInt(r.amount) - fee;
    if (net <= 0n) issue(['splits'], 'the splits consume the whole amount');
    else if (fee !== feeFor(net, terms.bps)) issue(['splits', 0, 'amount'], `the fee split must be ceil(${net} × ${terms.bps} / 10000)`);
  });
export type SolanaChargeRequest = z.infer<typeof SolanaChargeRequest>;

/** base64url of the RFC 8785 canonical JSON, as MPP serialises `request` (mppx PaymentRequest.serialize), no padding. */
export function encodeRequest(request: Record<string, unknown>): string {
  return Buffer.from(canonicalJson(request), 'utf8').toString('base64url');
}

export function decodeBase64UrlJson(text: string): unknown {
  try {
    return JSON.parse(Buffer.from(text, 'base64url').toString('utf8')) as unknown;
  } catch {
    return undefined;
  }
}

/**
 * A challenge as it travels inside a credential and to the facilitator. `request` is accepted both as the base64url
 * string mppx echoes and as the decoded object (DECISIONS' wire); parsing always yields the object.
 */
export const MppChallenge = z.looseObject({
  id: z.string().min(1).max(256),
  realm: z.string().max(512),
  method: z.string().max(64),
  intent: z.string().max(64),
  request: z.preprocess((v) => (typeof v === 'string' ? decodeBase64UrlJson(v) : v), z.record(z.string(), z.unknown())),
  expires: z.string().max(64).optional(),
  description: z.string().max(1024).optional(),
  digest: z.string().max(256).optional(),
  opaque: z.string().max(4096).optional(),
});
export type MppChallenge = z.infer<typeof MppChallenge>;

/** The credential payload: the buyer-signed transaction (base64). mppx methods add `type`; both forms are accepted. */
export const SolanaChargePayload = z.looseObject({
  type: z.literal('transaction').optional(),
  transaction: z.string().min(1).max(4096),
});

/** POST /mpp/settle body (DECISIONS "MPP rail"). */
export const MppSettleRequest = z.object({ challenge: MppChallenge, transaction: z.string().min(1).max(4096) });
export type MppSettleRequest = z.infer<typeof MppSettleRequest>;

/**
 * POST /mpp/settle answer: `{ signature, slot }` on success (DECISIONS), with the x402 settle fields beside them; a
 * refusal is a 200 with success false and the reason, as the x402 settle answers.
 */
export const MppSettleResponse = z.looseObject({
  success: z.boolean(),
  signature: z.string(),
  slot: z.number().int().min(0).nullable(),
  network: z.string(),
  payer: z.string().optional(),
  errorReason: z.string().optional(),
  errorMessage: z.string().optional(),
});
export type MppSettleResponse = z.infer<typeof MppSettleResponse>;

/**
 * The MPP request of one x402 accept (the paywall offers the same terms on both rails): the gross as `amount`, the
 * fee leg as the one split (so a stock client pays it), the facilitator as the fee payer.
 */
export function chargeRequestFor(
  accept: X402RequirementsV2,
  details: {
    decimals: number;
    tokenProgram: string;
    symbol: string;
    resource: string;
    description?: string | undefined;
    /** the challenge's reference (externalId), which the buyer's memo repeats */
    reference?: string | undefined;
  },
): SolanaChargeRequest {
  const fee = accept.extra[FEE_EXTENSION_KEY] as FeeExtension | undefined;
  const net = BigInt(accept.amount);
  const feeAtomic = fee && fee.bps > 0 ? feeFor(net, fee.bps) : 0n;
  const network = networkFromX402(accept.network);
  return {
    amount: (net + feeAtomic).toString(),
    currency: accept.asset,
    recipient: accept.payTo,
    ...(details.description ? { description: details.description } : {}),
    ...(details.reference ? { externalId: details.reference } : {}),
    methodDetails: {
      network: network ? MPP_CLUSTER[network] : accept.network,
      feePayer: true,
      feePayerKey: accept.extra.feePayer as string,
      decimals: details.decimals,
      tokenProgram: details.tokenProgram,
      ...(fee && feeAtomic > 0n ? { splits: [{ recipient: fee.feeAuthority, amount: feeAtomic.toString() }] } : {}),
      // the offer's server blockhash (x402 PR #2693's extra.recentBlockhash) under draft-solana-charge-00's name, which
      // @solana/mpp's client signs on instead of asking its node; clients that ignore it fetch their own
      ...(typeof accept.extra.recentBlockhash === 'string' ? { recentBlockhash: accept.extra.recentBlockhash } : {}),
      symbol: details.symbol,
      resource: details.resource,
      ...(fee ? { [FEE_EXTENSION_KEY]: fee } : {}),
    },
  };
}

/**
 * The x402 v2 accept a charge request stands for: what the facilitator verifies the transaction against — the seller
 * leg (amount minus the fee split), the CAIP-2 network, the fee terms.
 */
export function acceptOfCharge(request: SolanaChargeRequest, maxTimeoutSeconds = 60): X402RequirementsV2 {
  const d = request.methodDetails;
  const extra: Record<string, unknown> = { feePayer: feePayerOf(d) };
  if (d[FEE_EXTENSION_KEY]) extra[FEE_EXTENSION_KEY] = d[FEE_EXTENSION_KEY];
  // the buyer kit signs on the challenge's blockhash as on an x402 offer's (createOfferSigner)
  if (d.recentBlockhash) extra.recentBlockhash = d.recentBlockhash;
  const splits = (d.splits ?? []).reduce((sum, s) => sum + BigInt(s.amount), 0n);
  const network = networkOfCharge(d.network);
  return {
    scheme: 'exact',
    network: network ? CAIP2[network] : d.network,
    asset: request.currency,
    amount: (BigInt(request.amount) - splits).toString(),
    payTo: request.recipient,
    maxTimeoutSeconds,
    extra,
  };
}

/** The memo texts of a transaction (undecodable → []). */
export function memosOf(transaction: Uint8Array): string[] {
  try {
    return decodeTransaction(transaction)
      .instructions.filter(isMemo)
      .map((ix) => new TextDecoder().decode(ix.data));
  } catch {
    return [];
  }
}

/**
 * How a transaction stands to a challenge (DECISIONS "MPP rail"): `bound` when a memo holds the challenge id or its
 * externalId; `foreign` when a memo names anything else (another challenge's binding: it unlocks nothing here); `unbound`
 * when it carries no memo — faremeter's client writes none, and draft-solana-charge-00 makes the memo optional: such a
 * transaction is held to the challenge's terms and settles once like any other.
 */
export function bindingOf(
  transaction: Uint8Array,
  challenge: { id: string; request: { externalId?: string | undefined; methodDetails?: { splits?: { memo?: string | undefined }[] | undefined } } },
): 'bound' | 'unbound' | 'foreign' {
  const memos = memosOf(transaction);
  const binding = [challenge.id, challenge.request.externalId].filter((m): m is string => typeof m === 'string' && m.length > 0);
  const labels = (challenge.request.methodDetails?.splits ?? []).flatMap((s) => (s.memo ? [s.memo] : []));
  if (memos.some((m) => !binding.includes(m) && !labels.includes(m))) return 'foreign';
  return memos.some((m) => binding.includes(m)) ? 'bound' : 'unbound';
}

/** Whether the transaction is bound to this challenge id: one of its memos is the id. */
export function isBoundTo(transaction: Uint8Array, challengeId: string): boolean {
  return memosOf(transaction).includes(challengeId);
}

/** Payment-Receipt (DECISIONS "MPP rail"; mppx Receipt): base64url of { method, reference, status, timestamp, … }. */
export function encodeReceipt(receipt: { reference: string; timestamp: string; slot?: number | null; challengeId: string }): string {
  const body: Record<string, unknown> = {
    method: MPP_METHOD,
    reference: receipt.reference,
    status: 'success',
    timestamp: receipt.timestamp,
    challengeId: receipt.challengeId,
  };
  if (typeof receipt.slot === 'number') body.slot = receipt.slot;
  return Buffer.from(JSON.stringify(body), 'utf8').toString('base64url');
}

/** A Payment-Receipt header read back (the buyer side): the settlement signature when it reports success, else null. */
export function decodeReceipt(header: string | null | undefined): { reference: string; timestamp?: string; slot?: number; challengeId?: string } | null {
  if (!header) return null;
  try {
    const body = JSON.parse(Buffer.from(header, 'base64url').toString('utf8')) as Record<string, unknown>;
    if (body.status !== 'success' || typeof body.reference !== 'string') return null;
    return {
      reference: body.reference,
      ...(typeof body.timestamp === 'string' ? { timestamp: body.timestamp } : {}),
      ...(typeof body.slot === 'number' ? { slot: body.slot } : {}),
      ...(typeof body.challengeId === 'string' ? { challengeId: body.challengeId } : {}),
    };
  } catch {
    return null;
  }
}

/** One `Payment` challenge of a WWW-Authenticate value, its auth-params as given (request still base64url). */
export interface WireChallenge {
  id: string;
  realm: string;
  method: string;
  intent: string;
  request: Record<string, unknown>;
  expires?: string;
  description?: string;
  digest?: string;
  opaque?: string;
}

/**
 * The `Payment` challenges of a WWW-Authenticate value (RFC 9110 auth-params, quoted strings with escapes; several
 * challenges comma-separated), their requests decoded. Malformed challenges are skipped, not thrown.
 */
export function parseChallenges(header: string | null | undefined): WireChallenge[] {
  if (!header) return [];
  const out: WireChallenge[] = [];
  let current: Record<string, string> | null = null;
  const flush = () => {
    if (!current) return;
    const request = current.request ? decodeBase64UrlJson(current.request) : undefined;
    if (current.id && current.method && current.intent && request && typeof request === 'object') {
      const { request: _r, ...rest } = current;
      out.push({ realm: '', ...rest, request: request as Record<string, unknown> } as WireChallenge);
    }
    current = null;
  };
  let i = 0;
  while (i < header.length) {
    while (i < header.length && /[\s,]/.test(header[i]!)) i++;
    const tokenStart = i;
    while (i < header.length && /[A-Za-z0-9_-]/.test(header[i]!)) i++;
    const token = header.slice(tokenStart, i);
    if (!token) break;
    if (header[i] !== '=') {
      // a scheme name: a new challenge begins
      flush();
      current = token.toLowerCase() === 'payment' ? {} : null;
      continue;
    }
    i++;
    let value = '';
    if (header[i] === '"') {
      i++;
      while (i < header.length && header[i] !== '"') {
        if (header[i] === '\\' && i + 1 < header.length) {
          const next = header[i + 1]!;
          if (next === 'u' && /^[0-9A-Fa-f]{4}$/.test(header.slice(i + 2, i + 6))) {
            value += String.fromCharCode(parseInt(header.slice(i + 2, i + 6), 16));
            i += 6;
            continue;
          }
          value += next;
          i += 2;
          continue;
        }
        value += header[i];
        i++;
      }
      i++;
    } else {
      const start = i;
      while (i < header.length && header[i] !== ',') i++;
      value = header.slice(start, i).trim();
    }
    if (current) current[token.toLowerCase()] = value;
  }
  flush();
  return out;
}

/** `Payment <base64url { challenge (request as base64url canonical JSON, as mppx sends it), payload }>`. */
export function encodeCredential(challenge: WireChallenge, transaction: string): string {
  const wire = { challenge: { ...challenge, request: encodeRequest(challenge.request) }, payload: { type: 'transaction', transaction } };
  return `Payment ${Buffer.from(JSON.stringify(wire), 'utf8').toString('base64url')}`;
}

/** The Solana `charge` challenges of a WWW-Authenticate value (the ones this gateway's buyers can pay). */
export function solanaCharges(header: string | null | undefined): WireChallenge[] {
  return parseChallenges(header).filter((c) => c.method === MPP_METHOD && c.intent === MPP_INTENT);
}

/** The paying network a challenge names (methodDetails.network, CAIP-2 or a gateway name): ours, or undefined; `wire` as given. */
export function challengeNetwork(c: WireChallenge): { network: Network | undefined; wire: string } {
  const wire = String((c.request.methodDetails as { network?: unknown } | undefined)?.network ?? '');
  return { network: networkOfCharge(wire), wire };
}
