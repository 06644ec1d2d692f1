import { createHmac, timingSafeEqual } from 'node:crypto';
import {
  chargeRequestFor,
  decodeBase64UrlJson,
  encodeRequest,
  MPP_INTENT,
  MPP_METHOD,
  MPP_PROBLEM_TYPE,
  MppChallenge,
  networkOfCharge,
  SolanaChargePayload,
  SolanaChargeRequest,
} from '../facilitator/mpp.ts';
import type { ResourceInfo, X402RequirementsV2 } from '../facilitator/wire.ts';
import { STABLES, type Network } from '../shared/network.ts';
import { bindingMemo } from '../shared/request-binding.ts';

// The paywall's MPP side (DECISIONS "MPP rail"): stateless challenges — the id is an HMAC-SHA256 of the challenge's
// fields under the server's key, so a tampered field or a forged id is caught without storing anything — their
// WWW-Authenticate and problem+json renderings, and the reading of an `Authorization: Payment` credential. Pure
// apart from the HMAC.
//
// The HMAC input is mppx's canonical one (Challenge.computeId): realm|method|intent|request|expires|digest|opaque,
// request being its base64url JSON, the id base64url without padding — so an mppx server holding the same key
// verifies our ids and we verify its.

/** How long a challenge may be answered (DECISIONS: 5 minutes). */
export const CHALLENGE_TTL_MS = 5 * 60 * 1000;

export interface IssuedChallenge {
  id: string;
  realm: string;
  method: string;
  intent: string;
  request: SolanaChargeRequest;
  expires: string;
  description?: string;
}

function bindingInput(c: {
  realm: string;
  method: string;
  intent: string;
  request: Record<string, unknown>;
  expires?: string | undefined;
  digest?: string | undefined;
  opaque?: string | undefined;
}): string {
  return [c.realm, c.method, c.intent, encodeRequest(c.request), c.expires ?? '', c.digest ?? '', c.opaque ?? ''].join('|');
}

export function challengeId(secret: Uint8Array, fields: Parameters<typeof bindingInput>[0]): string {
  return createHmac('sha256', secret).update(bindingInput(fields)).digest('base64url');
}

/** Constant-time: a forged or altered id is refused without telling how close it was. */
export function isAuthentic(secret: Uint8Array, challenge: MppChallenge): boolean {
  const expected = Buffer.from(challengeId(secret, challenge));
  const given = Buffer.from(challenge.id);
  return expected.length === given.length && timingSafeEqual(expected, given);
}

/** The realm of this gateway's challenges: its public host. */
export function realmOf(baseUrl: string): string {
  return new URL(baseUrl).host;
}

/**
 * A challenge's externalId (draft-solana-charge-00): the reference a stock client writes as its memo, binding the
 * transaction to that challenge — and, being the request-binding memo `svc-req:v1:<digest>:<nonce>` of the request the
 * challenge answers (request-binding.ts), to that request: a stock @solana/mpp client that echoes it pays a link with
 * request_binding "required". It sits inside the request the id is computed over, so it cannot hold the id; its nonce
 * is derived from the challenge's own fields under the key instead (stateless, 128 bits, distinct per currency, issue
 * and request).
 */
function referenceOf(secret: Uint8Array, fields: { realm: string; resource: string; asset: string; expires: string; digest: string }): string {
  const nonce = createHmac('sha256', secret)
    .update(['externalId', fields.realm, fields.resource, fields.asset, fields.expires, fields.digest].join('|'))
    .digest('hex')
    .slice(0, 32);
  return bindingMemo(fields.digest, nonce);
}

/** One challenge per accept (currency) of the link, valid CHALLENGE_TTL_MS from now, bound to the request of `digest`. */
export function issueChallenges(input: {
  secret: Uint8Array;
  realm: string;
  network: Network;
  accepts: X402RequirementsV2[];
  resource: ResourceInfo;
  /** requestDigest of the request these challenges answer (request-binding.ts) */
  digest: string;
  now: Date;
}): IssuedChallenge[] {
  const expires = new Date(input.now.getTime() + CHALLENGE_TTL_MS).toISOString();
  return input.accepts.map((accept) => {
    const stable = STABLES[input.network].find((s) => s.mint === accept.asset)!;
    const request = chargeRequestFor(accept, {
      decimals: stable.decimals,
      tokenProgram: stable.tokenProgramId,
      symbol: stable.symbol,
      resource: input.resource.url,
      description: input.resource.description,
      reference: referenceOf(input.secret, { realm: input.realm, resource: input.resource.url, asset: accept.asset, expires, digest: input.digest }),
    });
    const fields = { realm: input.realm, method: MPP_METHOD, intent: MPP_INTENT, request, expires };
    return { id: challengeId(input.secret, fields), ...fields };
  });
}

function authParam(name: string, value: string): string {
  const escaped = value
    .replace(/[\r\n]/g, ' ')
    .replace(/\\/g, '\\\\')
    .replace(/"/g, '\\"')
    .replace(/[\u0100-\uffff]/g, (ch) => `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}`);
  return `${name}="${escaped}"`;
}

/** WWW-Authenticate: one `Payment …` challenge per currency, comma-separated (RFC 9110 §11.6.1). */
export function wwwAuthenticate(challenges: IssuedChallenge[]): string {
  return challenges
    .map((c) => {
      const parts = [
        authParam('id', c.id),
        authParam('realm', c.realm),
        authParam('method', c.method),
        authParam('intent', c.intent),
        authParam('request', encodeRequest(c.request)),
        authParam('expires', c.expires),
      ];
      return `Payment ${parts.join(', ')}`;
    })
    .join(', ');
}

/**
 * The problem+json body of an MPP 402 (DECISIONS: type, title, status, challengeId, request), with every challenge
 * and, on a refusal, the standard error envelope's fields beside them.
 */
export function problemBody(
  challenges: IssuedChallenge[],
  refusal: { error: string; message: string; details?: Record<string, unknown> } | null,
  requestId: string | undefined,
) {
  const first = challenges[0]!;
  return {
    type: MPP_PROBLEM_TYPE,
    title: 'Payment Required',
    status: 402,
    detail: refusal?.message ?? 'Payment required: answer one of the challenges with Authorization: Payment <credential>.',
    challengeId: first.id,
    request: first.request,
    challenges: challenges.map((c) => ({ id: c.id, realm: c.realm, method: c.method, intent: c.intent, request: c.request, expires: c.expires })),
    error: refusal?.error ?? 'payment_required',
    message: refusal?.message ?? 'Payment required.',
    ...(refusal?.details ? { details: refusal.details } : {}),
    ...(requestId ? { request_id: requestId } : {}),
  };
}

export type ReadCredential =
  | { ok: true; challenge: MppChallenge; request: SolanaChargeRequest; network: Network; transaction: string; transactionBytes: Uint8Array; expired: boolean }
  | { ok: false; reason: 'mpp_credential_invalid' | 'mpp_challenge_invalid'; message: string };

/** The `Payment` credential of an Authorization header; null when the header carries none. */
export function paymentCredentialOf(authorization: string | undefined): string | null {
  if (!authorization) return null;
  for (const part of authorization.split(',')) {
    const m = /^\s*Payment\s+(\S+)\s*$/i.exec(part);
    if (m) return m[1]!;
  }
  return null;
}

/**
 * Reads and authenticates a credential: its encoding, the challenge's HMAC (constant time), this gateway's realm and
 * method, the request's shape, the transaction's encoding. Expiry is reported, not refused: a replay of a payment
 * already served is answered from its record whatever the challenge's age.
 */
export function readCredential(encoded: string, input: { secret: Uint8Array; realm: string; now: Date }): ReadCredential {
  const bad = (reason: 'mpp_credential_invalid' | 'mpp_challenge_invalid', message: string) => ({ ok: false as const, reason, message });
  const json = decodeBase64UrlJson(encoded.replace(/=+$/, '').replace(/\+/g, '-').replace(/\//g, '_'));
  if (!json || typeof json !== 'object') return bad('mpp_credential_invalid', 'The Payment credential is not base64url JSON.');
  const raw = json as { challenge?: unknown; payload?: unknown };
  const challenge = MppChallenge.safeParse(raw.challenge);
  if (!challenge.success)
    return bad(
      'mpp_credential_invalid',
      `The credential's challenge is malformed: ${challenge.error.issues[0]?.path.join('.')} ${challenge.error.issues[0]?.message}`,
    );
  const payload = SolanaChargePayload.safeParse(raw.payload);
  if (!payload.success) return bad('mpp_credential_invalid', 'The credential payload must be { transaction: <base64 signed transaction> }.');
  const c = challenge.data;
  if (!isAuthentic(input.secret, c))
    return bad('mpp_challenge_invalid', 'The challenge id does not match its fields: it was altered or not issued by this gateway.');
  if (c.realm !== input.realm || c.method !== MPP_METHOD || c.intent !== MPP_INTENT)
    return bad('mpp_challenge_invalid', 'The challenge was not issued by this gateway for a Solana charge.');
  const request = SolanaChargeRequest.safeParse(c.request);
  if (!request.success) return bad('mpp_challenge_invalid', 'The challenge request is not a Solana charge request.');
  const network = networkOfCharge(request.data.methodDetails.network);
  if (!network) return bad('mpp_challenge_invalid', `The challenge names an unknown network ${request.data.methodDetails.network}.`);
  const text = payload.data.transaction.trim();
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(text) || text.length % 4 !== 0) return bad('mpp_credential_invalid', 'The credential transaction is not base64.');
  const expiresAt = c.expires ? Date.parse(c.expires) : NaN;
  const expired = !Number.isFinite(expiresAt) || expiresAt <= input.now.getTime();
  return { ok: true, challenge: c, request: request.data, network, transaction: text, transactionBytes: Uint8Array.from(Buffer.from(text, 'base64')), expired };
}
