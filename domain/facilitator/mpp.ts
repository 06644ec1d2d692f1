import { z } from 'zod';
import { Address } from '../shared/address.ts';
import { canonicalJson } from '../shared/canonical-json.ts';
import { decodeTransaction } from './decode.ts';
import { isMemo } from './instructions.ts';
import { FEE_EXTENSION_KEY, FeeExtension } from './schema.ts';
import { networkFromX402, type X402RequirementsV2 } from './wire.ts';
import type { Network } from '../shared/network.ts';

// The MPP rail's Solana "charge" method (fee-facilitator-mpp-tools §2.6, §4.2; DECISIONS "MPP rail"), shared by the
// paywall (challenges), the facilitator (POST /mpp/settle) and the buyer kit (svc-gateway/mpp). Pure, and free of
// node:* imports so the client entry can carry it.
//
// A challenge's `request` is the §2.3 offer in MPP's charge vocabulary (amount, currency, recipient as mppx's charge
// methods name them; the Solana specifics under methodDetails):
//   { amount: "10000", currency: "<mint>", recipient: "<treasury>", description?,
//     methodDetails: { network: "solana:EtWT…", feePayer, decimals, tokenProgram, symbol, resource, "svc.fee"? } }
// The buyer's transaction is the same §2.3 settlement transaction as on x402, its memo being the challenge id: that
// memo binds the transaction to its challenge (a transaction bound to another challenge unlocks nothing).

export const MPP_METHOD = 'solana';
export const MPP_INTENT = 'charge';
/** The problem type of an unpaid MPP answer (DECISIONS "MPP rail"). */
export const MPP_PROBLEM_TYPE = 'https://paymentauth.org/problems/payment-required';

const Atomic = z.string().regex(/^[1-9]\d{0,19}$/, 'an atomic amount: a positive integer as a decimal string');

export const SolanaChargeDetails = z.looseObject({
  /** CAIP-2 id of the paying network */
  network: z.string().min(1).max(128),
  /** the facilitator's fee payer: the transaction's fee payer */
  feePayer: Address,
  decimals: z.number().int().min(0).max(255),
  tokenProgram: Address,
  symbol: z.string().max(32).optional(),
  /** the paid resource (binds a challenge to one link; covered by the challenge id) */
  resource: z.string().max(4096).optional(),
  [FEE_EXTENSION_KEY]: FeeExtension.optional(),
});

export const SolanaChargeRequest = z.looseObject({
  amount: Atomic,
  /** the mint */
  currency: Address,
  /** the owner credited: ATA(recipient, currency, tokenProgram) — the seller agent's treasury */
  recipient: Address,
  description: z.string().max(1024).optional(),
  externalId: z.string().max(256).optional(),
  methodDetails: SolanaChargeDetails,
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

/** The MPP request of one x402 accept (the paywall offers the same terms on both rails). */
export function chargeRequestFor(
  accept: X402RequirementsV2,
  details: { decimals: number; tokenProgram: string; symbol: string; resource: string; description?: string | undefined },
): SolanaChargeRequest {
  const fee = accept.extra[FEE_EXTENSION_KEY] as FeeExtension | undefined;
  return {
    amount: accept.amount,
    currency: accept.asset,
    recipient: accept.payTo,
    ...(details.description ? { description: details.description } : {}),
    methodDetails: {
      network: accept.network,
      feePayer: accept.extra.feePayer as string,
      decimals: details.decimals,
      tokenProgram: details.tokenProgram,
      symbol: details.symbol,
      resource: details.resource,
      ...(fee ? { [FEE_EXTENSION_KEY]: fee } : {}),
    },
  };
}

/** The x402 v2 accept a charge request stands for: what the facilitator verifies the transaction against. */
export function acceptOfCharge(request: SolanaChargeRequest, maxTimeoutSeconds = 60): X402RequirementsV2 {
  const d = request.methodDetails;
  const extra: Record<string, unknown> = { feePayer: d.feePayer };
  if (d[FEE_EXTENSION_KEY]) extra[FEE_EXTENSION_KEY] = d[FEE_EXTENSION_KEY];
  return { scheme: 'exact', network: d.network, asset: request.currency, amount: request.amount, payTo: request.recipient, maxTimeoutSeconds, extra };
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

/** Whether the transaction is bound to this challenge: one of its memos is the challenge id. */
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
  return { network: networkFromX402(wire), wire };
}
