import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { fastifyTRPCPlugin } from '@trpc/server/adapters/fastify';
import type { Logger } from 'pino';
import { newRequestId } from '../domain/shared/ids.ts';
import { DomainError } from '../domain/shared/errors.ts';
import { limitAnonymous } from './policies/rate-limit.ts';
import { clientSignal } from './policies/heavy.ts';
import { registerFacilitatorRoutes } from './facilitator/routes.ts';
import { registerPaywallRoutes } from './paywall/routes.ts';
import { registerDiscoveryRoutes } from './discovery/routes.ts';
import { unpaidFastPath, type UnpaidFastPath } from './paywall/fast-402.ts';
import type { Services } from './services.ts';
import type { RequestBounds } from '../domain/shared/request-bounds.ts';
import type { Context } from './trpc/context.ts';
import { appRouter } from './trpc/router.ts';
import { openApiDocument, registerRest } from './rest/handler.ts';
import { registerSigningKeyRoutes } from './rest/jwks.ts';
import { noteRequestId, restAnswer } from './errors.ts';
import { mountGraphql } from './graphql/yoga.ts';
import { registerExplorerRoutes } from './explorer/routes.ts';
import { registerPages } from './pages/routes.ts';
import type { Network } from '../domain/shared/network.ts';
import { clientErrorHandler, errorAnswer, stampRequestId } from './http/answers.ts';
import type { Listener } from './http/listener.ts';
import { AccessLogController, lazyChildLogger } from './http/logging.ts';

// The gateway's HTTP server over built services: /v1, /openapi.json, /trpc, /graphql, /facilitator, /x, and the pages
// (/, /docs, /explorer). No adapters. Its parts, one job each: the port bound before the app (http/listener.ts), what
// every answer carries (http/answers.ts), the request logging (http/logging.ts); here, the app assembled on them.

export const BODY_LIMIT = 1024 * 1024;

export interface HttpDeps {
  services: Services;
  log: Logger;
  accountsSecret?: string | undefined;
  listener: Listener;
  bounds: RequestBounds;
  /** the embedded ledgers' Solana JSON-RPC, shown on the landing page for wallets */
  ledgerRpcUrls?: Partial<Record<Network, string>>;
}

/** The app on the listener: fastify with the shared answers and logging, then every door mounted. */
export function buildHttp(deps: HttpDeps): FastifyInstance & { unpaidFastPath?: UnpaidFastPath } {
  const { services, log } = deps;
  // Unpaid 402s whose challenge is at hand are answered before fastify (paywall/fast-402.ts); closing, fastify answers.
  let closing = false;
  const fast = services.paywall ? unpaidFastPath({ services, paywall: services.paywall, log, closing: () => closing }) : undefined;
  const app = createFastify(deps, fast ? withFastPath(deps.listener.factory, fast, log) : deps.listener.factory);
  app.addHook('preClose', (done) => {
    closing = true;
    done();
  });
  mountDoors(app, deps);
  return Object.assign(app, { unpaidFastPath: fast });
}

/** The listener's server factory with the unpaid fast path in front of fastify's handler. */
function withFastPath(factory: Listener['factory'], fast: UnpaidFastPath, log: Logger): Listener['factory'] {
  return (handler, options) =>
    factory((req, res) => {
      let answered = false;
      try {
        answered = fast(req, res);
      } catch (err) {
        // never a crash from a request: fastify answers it (or, had a head gone out, the socket is cut)
        log.error({ err }, 'the unpaid fast path failed; fastify answers the request');
        if (res.headersSent) return void res.destroy();
      }
      if (!answered) handler(req, res);
    }, options);
}

/** /v1 answers given before any procedure runs (unknown route, undecodable URL) count against the client IP. */
async function anonymousLimit(services: Services, req: FastifyRequest): Promise<{ values: Record<string, string>; error?: unknown }> {
  const values: Record<string, string> = {};
  if (!req.url.startsWith('/v1/') && req.url !== '/v1') return { values };
  try {
    await limitAnonymous(services, req.ip, 'default', values);
    return { values };
  } catch (error) {
    return { values, error };
  }
}

/** fastify with the gateway's logging, bounds and answers for what no route answers. */
function createFastify(deps: HttpDeps, serverFactory: Listener['factory']): FastifyInstance {
  const { services } = deps;
  const app = Fastify({
    loggerInstance: deps.log as unknown as FastifyBaseLogger,
    bodyLimit: BODY_LIMIT,
    genReqId: () => newRequestId(),
    // A request's child logger is made when something logs through it at an enabled level, not for every request.
    childLoggerFactory: lazyChildLogger,
    requestIdHeader: false,
    // One access line per request, at its completion, with secrets taken out of the URL (a disclosure link's token is a
    // bearer secret).
    logController: new AccessLogController(deps.log),
    routerOptions: { maxParamLength: 5000 },
    // the listener's bound (fastify would otherwise set 0, no bound, on the server it is given)
    requestTimeout: deps.bounds.requestMs,
    clientErrorHandler,
    serverFactory,
    // Errors fastify answers before any hook (bad URL encoding, over-long params): same envelope and header.
    frameworkErrors: async (err, req, reply) => {
      const headers = await anonymousLimit(services, req);
      const { status, body } = errorAnswer(headers.error ?? err, req);
      // fastify types this reply against the unknown route's schema; it is a plain JSON reply.
      const plain = reply as unknown as { code(n: number): { headers(h: object): { send(b: unknown): void } } };
      plain
        .code(status)
        .headers({ ...headers.values, 'X-Svc-Request-Id': req.id })
        .send(body);
    },
  });

  // One hook (every request pays each): the request id header. (The client-left signal is made from the
  // response by the door that builds a context: policies/heavy.ts.)
  app.addHook('onRequest', stampRequestId);

  app.setErrorHandler((err, req, reply) => {
    const { status, body } = errorAnswer(err, req);
    void reply.code(status).send(body);
  });
  app.setNotFoundHandler(async (req, reply) => {
    const headers = await anonymousLimit(services, req);
    const error: unknown = headers.error ?? new DomainError('not_found', `No route ${req.method} ${req.url.split('?')[0]}.`);
    const { status, body } = restAnswer(error, req);
    void reply.code(status).headers(headers.values).send(body);
  });
  return app;
}

/** A procedure call's context from its request (REST and tRPC; GraphQL builds its own in graphql/yoga.ts). */
function contextOf(services: Services, request: { req: FastifyRequest; reply: FastifyReply; transport: string }): Context {
  const { req, reply, transport } = request;
  const idem = req.headers['idempotency-key'];
  return {
    services,
    log: req.log,
    requestId: req.id,
    authorization: req.headers.authorization,
    idempotencyKey: req.method === 'POST' && typeof idem === 'string' ? idem : undefined,
    clientIp: req.ip,
    transport,
    responseHeaders: {},
    replay: {},
    signal: clientSignal(reply.raw),
  };
}

/** /v1 and /openapi.json, /trpc, /graphql, the pages and explorer, /facilitator and /x. */
function mountDoors(app: FastifyInstance, deps: HttpDeps): void {
  const { services, log } = deps;
  const createContext = (req: FastifyRequest, reply: FastifyReply, transport: string): Context => contextOf(services, { req, reply, transport });
  registerRest(app, { createContext, baseUrl: () => services.settings.baseUrl, version: services.settings.version });

  let openapi: string | undefined;
  app.get('/openapi.json', async (_req, reply) => {
    openapi ??= JSON.stringify(openApiDocument(services.settings.baseUrl, services.settings.version));
    return reply.type('application/json').send(openapi);
  });

  void app.register(fastifyTRPCPlugin, {
    prefix: '/trpc',
    trpcOptions: {
      router: appRouter,
      createContext: ({ req, res }: { req: FastifyRequest; res: FastifyReply }) => createContext(req, res, 'trpc'),
      responseMeta: ({ ctx }: { ctx?: Context }) => ({ headers: ctx?.responseHeaders ?? {} }),
      onError: ({ error, req }: { error: object; req: FastifyRequest }) => noteRequestId(error, req.id),
      maxBodySize: BODY_LIMIT,
    },
  });

  mountGraphql(app, { services, log });
  registerExplorerRoutes(app);
  registerPages(app, { services, rpcUrls: deps.ledgerRpcUrls ?? {} });
  if (services.facilitator) registerFacilitatorRoutes(app, { facilitator: services.facilitator, prefix: '/facilitator', accountsToken: deps.accountsSecret });
  if (services.paywall) registerPaywallRoutes(app, { services, paywall: services.paywall });
  if (services.signer) registerSigningKeyRoutes(app, { signer: services.signer, now: () => services.clock.now() });
  registerDiscoveryRoutes(app, { services });
}
