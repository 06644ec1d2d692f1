import type { ServerResponse } from 'node:http';
import type { PaywallResponse } from '../../domain/paywall/http.ts';
import { type RateDecision, WINDOW_MS } from '../../domain/policies/rate-limit.ts';

// The unpaid 402 on the wire, written alike by its two doors (fast-402.ts before fastify, routes.ts in it): the
// challenge PaywallService.unpaidChallenge decided, its fixed headers, this request's id and its per-IP window.

/** Response headers a buyer's browser-based client must be able to read. */
export const EXPOSED =
  'PAYMENT-REQUIRED, PAYMENT-RESPONSE, X-PAYMENT-RESPONSE, WWW-Authenticate, Payment-Receipt, X-Svc-Request-Id, X-Svc-Replayed, Server-Timing';

type Head = { headers: Record<string, string | number>; body: Buffer };

/**
 * Per rendered challenge (one per link and terms, replaced when either changes), the headers that do not
 * change between requests, lower-cased as fastify writes them, and its body as a Buffer view. The request id comes
 * first, where the onRequest hook's header goes on the wire (fast-402.ts writes the object alone).
 */
const fixedByChallenge = new WeakMap<PaywallResponse, Head>();
function fixedOf(challenge: PaywallResponse): Head {
  let fixed = fixedByChallenge.get(challenge);
  if (!fixed) {
    const body = Buffer.from(challenge.body.buffer, challenge.body.byteOffset, challenge.body.byteLength);
    const headers: Record<string, string | number> = { 'X-Svc-Request-Id': '', 'access-control-allow-origin': '*', 'access-control-expose-headers': EXPOSED };
    for (const [name, value] of Object.entries(challenge.headers)) headers[name.toLowerCase()] = value;
    headers['content-type'] ??= 'application/octet-stream';
    headers['content-length'] = body.byteLength;
    fixed = { headers, body };
    fixedByChallenge.set(challenge, fixed);
  }
  return fixed;
}
const WINDOW_S = WINDOW_MS / 1000;

/**
 * The challenge's head and body for one request: its fixed header object with the request's id and window written in
 * (as rateLimitHeaders writes them: an allowed hit has no Retry-After). Every write of the object copies it
 * synchronously, so no request sees another's values; no allocation per request.
 */
function challengeHead(challenge: PaywallResponse, requestId: string, decision: RateDecision): Head {
  const fixed = fixedOf(challenge);
  const out = fixed.headers;
  out['X-Svc-Request-Id'] = requestId;
  out['ratelimit-limit'] = decision.limit;
  out['ratelimit-remaining'] = decision.remaining;
  out['ratelimit-reset'] = decision.resetSeconds;
  out['ratelimit-policy'] = `${decision.limit};w=${WINDOW_S}`;
  return fixed;
}

/** The challenge written to a response no header was set on: Node takes the object as it is (copied into the head). */
export function writeChallenge(res: ServerResponse, challenge: PaywallResponse, requestId: string, decision: RateDecision): void {
  const head = challengeHead(challenge, requestId, decision);
  res.writeHead(challenge.status, head.headers).end(head.body);
}
