import type { IncomingMessage, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import type { Logger } from 'pino';
import { newRequestId } from '../../domain/shared/ids.ts';
import type { PaywallService } from '../../domain/paywall/service.ts';
import type { Services } from '../services.ts';
import { writeChallenge } from './challenge.ts';
import { clientRequestId, writeAccessLine } from '../http/logging.ts';
import { prefersHtml } from '../pages/html.ts';

// The unpaid 402 before the framework: an unpaid GET /x/{id} whose challenge is at hand is answered from the
// server's request event, before fastify builds its request and reply, routes, runs hooks or makes a request logger —
// when none of those would change the answer:
// - the app is not closing (fastify answers 503 then),
// - a GET (fastify reads no body for one) not preferring text/html (a browser's navigation gets the paywall page from
//   the route),
// - an id in the slug alphabet only (no percent-decoding can differ from the router's), nothing after it but a query,
// - PaywallService.unpaidChallenge, the one decision of the unpaid 402 the route asks too, has its challenge at hand,
// - the client IP within its paywall window (over it, fastify's route answers the 429 envelope).
// The answer is the one the route writes (challenge.ts): the challenge's status, body and fixed headers, the window's
// RateLimit-* headers and X-Svc-Request-Id — and the access line fastify would write for it (http/logging.ts), at any
// level that writes one. Everything else goes to fastify, unchanged.

/** `/x/` then a slug (routes take ids of at most 64 characters), then the end or a query */
const FAST_URL = /^\/x\/([A-Za-z0-9][A-Za-z0-9_-]{0,63})(?:\?|$)/;

export interface UnpaidFastPath {
  /** answers the request and returns true, or returns false and writes nothing (fastify takes it) */
  (req: IncomingMessage, res: ServerResponse): boolean;
  /** requests answered here (tests count them) */
  readonly answered: number;
}

export function unpaidFastPath(deps: { services: Services; paywall: PaywallService; log: Logger; closing: () => boolean }): UnpaidFastPath {
  const { services, paywall, log, closing } = deps;
  let answered = 0;
  const fast = (req: IncomingMessage, res: ServerResponse): boolean => {
    if (req.method !== 'GET') return false;
    const started = performance.now();
    const url = req.url;
    if (url === undefined || url.charCodeAt(1) !== 120 /* x */ || url.charCodeAt(2) !== 47 /* / */ || url.charCodeAt(0) !== 47) return false;
    const headers = req.headers;
    // a browser's navigation gets the paywall page (routes.ts); the check reads no further than "text/" for API clients
    if (prefersHtml(headers.accept)) return false;
    if (closing()) return false;
    const match = FAST_URL.exec(url);
    if (!match) return false;
    const challenge = paywall.unpaidChallenge({ id: match[1]!, url, method: 'GET', headers });
    if (!challenge) return false;
    // fastify's request.ip (no trustProxy): the socket's peer address
    // the shared per-IP window, when memory alone can decide (no store round trip here); a refusal is not counted:
    // the route decides again and answers the 429 envelope, as it asks the store when memory cannot decide
    const decision = services.rateLimiter.admitFromMemory(`ip:${req.socket.remoteAddress}`, 'paywall');
    if (!decision?.allowed) return false;
    const reqId = newRequestId();
    writeChallenge(res, challenge, reqId, decision);
    answered++;
    writeAccessLine(log, {
      reqId,
      method: 'GET',
      url,
      remoteAddress: req.socket.remoteAddress,
      statusCode: challenge.status,
      responseTime: performance.now() - started,
      clientRequestId: clientRequestId(headers),
    });
    return true;
  };
  return Object.defineProperty(fast, 'answered', { get: () => answered }) as UnpaidFastPath;
}
