import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { encodeBase58 } from '../shared/base58.ts';
import type { Network } from '../shared/network.ts';

// Paying a link from a wallet (docs/paywall.md "In a browser"): a Solana Pay transaction request
// (https://docs.solanapay.com/spec — `solana:` + the URL-encoded https link; GET → { label, icon }, POST { account } →
// { transaction, message }). One page = one payment session, stateless so any instance answers any of its requests:
// - `secret`: 32 random bytes only the page holds; it alone may collect the paid response.
// - `reference`: SHA-256 of the secret, as a Solana address: the read-only non-signer key (Solana Pay "reference")
//   the built transaction carries, so the ledger finds it by address; public, it reveals nothing of the secret.
// - `expires` and `sig`: the session's end, HMAC-signed with the paywall's shared key (the MPP rail's, DECISIONS
//   "MPP rail": every instance holds it), so a wallet cannot stretch a page past its end.

/** How long a page's wallet payment may be started (a person scans, reviews and approves). */
export const PAGE_SESSION_MS = 10 * 60 * 1000;

export interface PageSession {
  /** base64url, 32 bytes: never leaves the page except to the status route */
  secret: string;
  /** base58 address */
  reference: string;
  /** unix seconds */
  expires: number;
  /** base64url HMAC over network, link id, reference and expiry */
  sig: string;
}

const REFERENCE_TAG = 'svc-paywall-page-reference\u0000';

export function referenceOf(secret: string): string {
  return encodeBase58(createHash('sha256').update(REFERENCE_TAG).update(secret).digest());
}

function tokenSig(key: Uint8Array, fields: { network: Network; id: string; reference: string; expires: number }): string {
  return createHmac('sha256', key).update(`solana-pay|${fields.network}|${fields.id}|${fields.reference}|${fields.expires}`).digest('base64url');
}

export function newPageSession(options: { key: Uint8Array; network: Network; id: string; now: Date }): PageSession {
  const secret = randomBytes(32).toString('base64url');
  const reference = referenceOf(secret);
  const expires = Math.floor((options.now.getTime() + PAGE_SESSION_MS) / 1000);
  return { secret, reference, expires, sig: tokenSig(options.key, { network: options.network, id: options.id, reference, expires }) };
}

/** The query of the transaction request link: what binds a wallet's POST to its page. */
export function sessionQuery(network: Network, session: Pick<PageSession, 'reference' | 'expires' | 'sig'>): string {
  return new URLSearchParams({ network, reference: session.reference, expires: String(session.expires), sig: session.sig }).toString();
}

export type SessionCheck = { ok: true; reference: string; expires: number } | { ok: false; reason: 'invalid_request' | 'transaction_expired'; message: string };

/** A transaction request's session fields: signed by us for this link, and not past their end. */
export function checkSession(options: {
  key: Uint8Array;
  network: Network;
  id: string;
  reference: unknown;
  expires: unknown;
  sig: unknown;
  now: Date;
}): SessionCheck {
  const { reference, expires, sig } = options;
  if (typeof reference !== 'string' || typeof expires !== 'string' || typeof sig !== 'string' || !/^\d{1,12}$/.test(expires)) {
    return { ok: false, reason: 'invalid_request', message: 'The payment request link lacks its reference, expires or sig: open the page again.' };
  }
  const expected = Buffer.from(tokenSig(options.key, { network: options.network, id: options.id, reference, expires: Number(expires) }));
  const given = Buffer.from(sig);
  if (expected.length !== given.length || !timingSafeEqual(expected, given)) {
    return { ok: false, reason: 'invalid_request', message: 'The payment request link was not issued by this gateway for this payment link.' };
  }
  if (Number(expires) * 1000 <= options.now.getTime()) {
    return { ok: false, reason: 'transaction_expired', message: 'This payment page expired: reload it to pay.' };
  }
  return { ok: true, reference, expires: Number(expires) };
}
