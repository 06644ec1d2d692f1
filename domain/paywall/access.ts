import { createHmac, timingSafeEqual } from 'node:crypto';
import { z } from 'zod';
import { decodeBase58 } from '../shared/base58.ts';
import { CAIP2, type Network } from '../shared/network.ts';
import { verifyEd25519 } from '../facilitator/ed25519.ts';

// Returning payers: the sign-in-with-x extension (x402 `sign-in-with-x`, @x402/extensions 2.27, CAIP-122 messages;
// Solana's "Sign in with Solana" text) on links with an access_window. The 402 of such a link carries the challenge
// (extensions["sign-in-with-x"]: info + supportedChains); a buyer whose wallet paid the link signs it and sends the
// signed payload, base64 JSON, in the `SIGN-IN-WITH-X` header; within the window it gets the resource without paying.
//
// The challenge is stateless and tamper-evident: its nonce is a random part and an HMAC (under the paywall's secret) of
// that part, the issue time and the URI, so the server knows it issued them. A nonce is spent once (the store's
// siwx_nonces, shared by every node); a challenge is answerable for CHALLENGE_SECONDS after it was issued.

export const SIGN_IN_WITH_X = 'sign-in-with-x';
/** how long a sign-in challenge may be answered (the reference's default maxAge, 5 minutes) */
export const CHALLENGE_SECONDS = 300;
const STATEMENT = 'Sign in with the wallet that paid for this resource, to use it again without paying.';

/** The signed payload (the extension's SIWxPayloadSchema), bounded. */
export const SignInPayload = z.object({
  domain: z.string().max(255),
  address: z.string().max(64),
  statement: z.string().max(1024).optional(),
  uri: z.string().max(4096),
  version: z.string().max(8),
  chainId: z.string().max(128),
  type: z.enum(['eip191', 'ed25519']),
  nonce: z.string().max(128),
  issuedAt: z.string().max(64),
  expirationTime: z.string().max(64).optional(),
  notBefore: z.string().max(64).optional(),
  requestId: z.string().max(256).optional(),
  resources: z.array(z.string().max(4096)).max(8).optional(),
  signatureScheme: z.string().max(16).optional(),
  signature: z.string().max(256),
});
export type SignInPayload = z.infer<typeof SignInPayload>;

const mac = (secret: Uint8Array, parts: string[]) => createHmac('sha256', secret).update(parts.join('\n')).digest('hex').slice(0, 32);

/** The 402's extensions["sign-in-with-x"] for a link's resource on its network (the shape the reference server emits). */
export function signInChallenge(input: { secret: Uint8Array; baseUrl: string; resourceUrl: string; network: Network; now: Date }) {
  const random = Buffer.from(globalThis.crypto.getRandomValues(new Uint8Array(16))).toString('hex');
  const issuedAt = input.now.toISOString();
  const uri = input.resourceUrl;
  return {
    info: {
      domain: new URL(input.baseUrl).host,
      uri,
      version: '1',
      statement: STATEMENT,
      nonce: `${random}${mac(input.secret, [random, issuedAt, uri])}`,
      issuedAt,
      expirationTime: new Date(input.now.getTime() + CHALLENGE_SECONDS * 1000).toISOString(),
      resources: [uri],
    },
    supportedChains: [{ chainId: CAIP2[input.network], type: 'ed25519' }],
  };
}

/** "Sign in with Solana" text (formatSIWSMessage of the reference): what the wallet signed. */
export function signInMessage(p: SignInPayload): string {
  const lines = [`${p.domain} wants you to sign in with your Solana account:`, p.address, ''];
  if (p.statement) lines.push(p.statement, '');
  lines.push(`URI: ${p.uri}`, `Version: ${p.version}`, `Chain ID: ${p.chainId.split(':')[1] ?? ''}`, `Nonce: ${p.nonce}`, `Issued At: ${p.issuedAt}`);
  if (p.expirationTime) lines.push(`Expiration Time: ${p.expirationTime}`);
  if (p.notBefore) lines.push(`Not Before: ${p.notBefore}`);
  if (p.requestId) lines.push(`Request ID: ${p.requestId}`);
  if (p.resources && p.resources.length > 0) lines.push('Resources:', ...p.resources.map((r) => `- ${r}`));
  return lines.join('\n');
}

export type SignInCheck =
  | { ok: true; address: string; nonce: string; expiresAt: Date }
  | { ok: false; reason: 'siwx_invalid' | 'siwx_expired'; message: string };

/**
 * A SIGN-IN-WITH-X header against the link it was sent to: the payload parses; its domain, URI and chain are this
 * link's; its nonce, issue time and URI are ours (the HMAC, compared in constant time); it is not older than
 * CHALLENGE_SECONDS nor expired nor not yet valid; the Ed25519 signature of its address verifies over the message. Pure
 * (the nonce's single use and the payment lookup are the caller's).
 */
export function checkSignIn(header: string, expected: { secret: Uint8Array; baseUrl: string; resourceUrl: string; network: Network; now: Date }): SignInCheck {
  const invalid = (message: string): SignInCheck => ({ ok: false, reason: 'siwx_invalid', message });
  let json: unknown;
  try {
    json = JSON.parse(Buffer.from(header, 'base64').toString('utf8'));
  } catch {
    return invalid('SIGN-IN-WITH-X must be base64 of the signed sign-in payload (JSON).');
  }
  const parsed = SignInPayload.safeParse(json);
  if (!parsed.success) return invalid(`The sign-in payload is malformed: ${parsed.error.issues[0]?.path.join('.')} ${parsed.error.issues[0]?.message}`);
  const p = parsed.data;
  const base = new URL(expected.baseUrl);
  if (p.domain !== base.host) return invalid(`The sign-in names domain ${p.domain}, not ${base.host}.`);
  if (p.uri !== expected.resourceUrl) return invalid(`The sign-in names ${p.uri}, not this resource (${expected.resourceUrl}).`);
  if (p.chainId !== CAIP2[expected.network] || p.type !== 'ed25519') return invalid(`The sign-in must be an ed25519 one on ${CAIP2[expected.network]}.`);
  const random = p.nonce.slice(0, 32);
  const tag = Buffer.from(p.nonce.slice(32), 'utf8');
  const want = Buffer.from(mac(expected.secret, [random, p.issuedAt, p.uri]), 'utf8');
  if (tag.length !== want.length || !timingSafeEqual(tag, want))
    return invalid('The sign-in answers no challenge this gateway issued (nonce, issue time or URI altered).');
  const now = expected.now.getTime();
  const issued = Date.parse(p.issuedAt);
  const expiresAt = issued + CHALLENGE_SECONDS * 1000;
  if (Number.isNaN(issued) || issued > now) return invalid('The sign-in was issued in the future.');
  if (now > expiresAt || (p.expirationTime !== undefined && !(Date.parse(p.expirationTime) > now))) {
    return {
      ok: false,
      reason: 'siwx_expired',
      message: `The sign-in challenge expired (answer it within ${CHALLENGE_SECONDS} s): sign the fresh one in this 402.`,
    };
  }
  if (p.notBefore !== undefined && !(Date.parse(p.notBefore) <= now)) return invalid('The sign-in is not valid yet (notBefore).');
  const key = decodeBase58(p.address);
  const signature = decodeBase58(p.signature);
  if (key?.length !== 32 || signature?.length !== 64) return invalid('The sign-in address or signature is not base58 of 32 / 64 bytes.');
  if (!verifyEd25519(key, new TextEncoder().encode(signInMessage(p)), signature)) return invalid(`The signature does not verify for ${p.address}.`);
  return { ok: true, address: p.address, nonce: p.nonce, expiresAt: new Date(expiresAt) };
}
