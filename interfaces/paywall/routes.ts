import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { DomainError } from '../../domain/shared/errors.ts';
import { Slug } from '../../domain/payment-links/schema.ts';
import type { PaywallService } from '../../domain/paywall/service.ts';
import { limitAnonymous } from '../policies/rate-limit.ts';
import { rateLimitedError, rateLimitHeaders, type RateDecision } from '../../domain/policies/rate-limit.ts';
import { carriesPayment, splitQuery } from '../../domain/paywall/http.ts';
import type { Services } from '../services.ts';
import { restAnswer } from '../errors.ts';
import { prefersHtml } from '../pages/html.ts';
import { registerSolanaPayRoutes, servePage } from './page-routes.ts';
import { EXPOSED, writeChallenge } from './challenge.ts';

// hosted-api §4.2: the public paywall {base_url}/x/{id}. Thin: parse the request, apply the per-IP window
// (DECISIONS "Wire conventions": 600 per 60 s per client IP, shared by every node), call PaywallService, write its
// answer or the error envelope.

const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS'] as const;

const header = (req: FastifyRequest, name: string): string | undefined => {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
};

export function registerPaywallRoutes(app: FastifyInstance, options: { services: Services; paywall: PaywallService }): void {
  const { services, paywall } = options;
  void app.register(async (scope) => {
    // Any body, as bytes: a forwarded POST carries whatever the upstream takes (the 1 MiB limit still applies).
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', { parseAs: 'buffer' }, (_req, body, done) => done(null, body));

    scope.route({
      method: [...METHODS],
      url: '/x/:id',
      handler: (req: FastifyRequest<{ Params: { id: string }; Querystring: Record<string, string | string[]> }>, reply: FastifyReply) => {
        const headers: Record<string, string> = { 'Access-Control-Allow-Origin': '*', 'Access-Control-Expose-Headers': EXPOSED };
        // A person's browser (text/html preferred over JSON) gets the paywall page; every other client the 402 below.
        if (req.method === 'GET' && !carriesPayment(req.headers) && prefersHtml(header(req, 'accept'))) {
          return servePage(req, reply, { services, paywall, headers });
        }
        // The unpaid 402 at hand (link cached, terms known, rendered; PaywallService.unpaidChallenge decides): the same
        // bytes and headers `answer` would write, the same limit: the shared per-IP window (DECISIONS "Wire
        // conventions"), synchronously when memory can decide, else by the store.
        const challenge = paywall.unpaidChallenge({ id: req.params.id, url: req.url, method: req.method, headers: req.headers });
        if (challenge) {
          const respond = (decision: RateDecision): void => {
            if (!decision.allowed) {
              Object.assign(headers, rateLimitHeaders(decision));
              const { status, body } = restAnswer(rateLimitedError(decision), req);
              reply.code(status).headers(headers).send(body);
              return;
            }
            // written to the response directly (fastify still writes the access line when the response finishes)
            reply.hijack();
            writeChallenge(reply.raw, challenge, String(req.id), decision);
          };
          const subject = `ip:${req.ip}`;
          const decided = services.rateLimiter.admitFromMemory(subject, 'paywall');
          if (decided) return respond(decided);
          return services.rateLimiter.hit(subject, 'paywall').then(respond, (err: unknown) => {
            const { status, body } = restAnswer(err, req);
            reply.code(status).headers(headers).send(body);
          });
        }
        return answer(req, reply, headers);
      },
    });
  });

  registerSolanaPayRoutes(app, { services, paywall });

  /** Every request the fast path does not answer: OPTIONS, payments, a link or terms not at hand, errors. */
  async function answer(req: FastifyRequest<{ Params: { id: string } }>, reply: FastifyReply, headers: Record<string, string>) {
    if (req.method === 'OPTIONS') {
      // CORS preflight of a browser buyer sending PAYMENT-SIGNATURE / X-PAYMENT: any method, the payment headers.
      return reply
        .code(204)
        .headers({
          ...headers,
          'Access-Control-Allow-Methods': 'GET, POST, PUT, PATCH, DELETE',
          'Access-Control-Allow-Headers': 'Content-Type, PAYMENT-SIGNATURE, X-PAYMENT, SIGN-IN-WITH-X, Authorization, Accept',
          'Access-Control-Max-Age': '600',
        })
        .send();
    }
    try {
      await limitAnonymous(services, req.ip, 'paywall', headers);
      // No link has an id outside the slug alphabet: answered before any lookup, so hostile bytes (NUL) never reach the store.
      if (!Slug.safeParse(req.params.id).success) throw new DomainError('payment_link_not_found', 'No payment link with that id.', { id: req.params.id });
      const { network, forwardQuery } = splitQuery(req.url);
      const result = await paywall.handle({
        id: req.params.id,
        network,
        method: req.method,
        forwardQuery,
        headers: {
          paymentSignature: header(req, 'payment-signature'),
          xPayment: header(req, 'x-payment'),
          contentType: header(req, 'content-type'),
          accept: header(req, 'accept'),
          authorization: header(req, 'authorization'),
          signInWithX: header(req, 'sign-in-with-x'),
        },
        requestId: String(req.id),
        body: Buffer.isBuffer(req.body) ? new Uint8Array(req.body) : undefined,
      });
      // The console's paid-call line (interfaces/log.ts): once per settled payment, never for a replay or a 402.
      if (result.paid) req.log.info({ evt: 'paid_call', ...result.paid, ms: Math.round(reply.elapsedTime) }, 'paid call');
      const body = Buffer.from(result.body.buffer, result.body.byteOffset, result.body.byteLength); // no copy
      return reply.code(result.status).headers(headers).headers(result.headers).send(body);
    } catch (err) {
      const { status, body, error } = restAnswer(err, req);
      if (error instanceof DomainError && error.code === 'method_not_allowed' && typeof error.details?.allow === 'string') {
        headers.Allow = error.details.allow;
      }
      return reply.code(status).headers(headers).send(body);
    }
  }
}
