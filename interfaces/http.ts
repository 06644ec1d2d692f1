import { createServer, STATUS_CODES, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { fastifyTRPCPlugin } from '@trpc/server/adapters/fastify';
import type { Bindings, ChildLoggerOptions, Logger } from 'pino';
import { newRequestId } from '../domain/shared/ids.ts';
import { DomainError } from '../domain/shared/errors.ts';
import { limitAnonymous } from './policies/rate-limit.ts';
import { clientSignal } from './policies/heavy.ts';
import { registerFacilitatorRoutes } from './facilitator/routes.ts';
import { registerPaywallRoutes } from './paywall/routes.ts';
import { unpaidFastPath, type UnpaidFastPath } from './paywall/fast-402.ts';
import type { Services } from './services.ts';
import { boundedServerOptions, type RequestBounds } from '../domain/shared/request-bounds.ts';
import type { Context } from './trpc/context.ts';
import { appRouter } from './trpc/router.ts';
import { openApiDocument, registerRest } from './rest/handler.ts';
import { noteRequestId, resolveError, restAnswer, restError, trpcError } from './errors.ts';
import { mountGraphql } from './graphql/yoga.ts';
import { registerExplorerRoutes } from './explorer/routes.ts';
import { registerPages } from './pages/routes.ts';
import type { Network } from '../domain/shared/network.ts';

// The gateway's HTTP server over built services: /v1, /openapi.json, /trpc, /graphql, /facilitator, /x, and the pages
// (/, /docs, /explorer). No adapters.

export const BODY_LIMIT = 1024 * 1024;

/**
 * Requests Node's HTTP parser refuses before fastify sees them (request line and headers over 16 KiB, malformed
 * request lines) and requests not complete within the listener's bounds (`RequestBounds`): the envelope and
 * X-Svc-Request-Id like every other answer, then the connection is closed. Shared by every fastify listener.
 */
export function clientErrorHandler(this: FastifyInstance, err: Error & { code?: string }, socket: Duplex): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const requestId = newRequestId();
  const error =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? new DomainError('headers_too_large', 'The request line and headers exceed 16 KiB.')
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? new DomainError('request_timeout', 'The request did not arrive in time: send its headers and body without pausing.')
        : DomainError.invalid([{ path: '', message: 'Malformed HTTP request', code: 'malformed' }], 'Malformed HTTP request.');
  const { status, body } = restError(error, requestId);
  const json = JSON.stringify(body);
  this.log.debug({ err, request_id: requestId }, 'client error');
  if (socket.writable && !answered(socket)) {
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(json)}\r\n` +
        `X-Svc-Request-Id: ${requestId}\r\nConnection: close\r\n\r\n${json}`,
    );
  }
  socket.destroy();
}

/**
 * Whether the request in progress on the socket already has its answer (started, or sent before its body finished —
 * Node then discards the rest of the body): a second answer would be read as the next request's.
 */
function answered(socket: Duplex): boolean {
  const s = socket as Duplex & {
    _httpMessage?: { headersSent?: boolean; req?: unknown } | null;
    parser?: { incoming?: { _dumped?: boolean; complete?: boolean } | null } | null;
  };
  // `parser.incoming` and `_httpMessage` stay the previous request's until the next one's head is parsed: an error in
  // that next head (a keep-alive connection's next request) has no answer yet, so only an incomplete request counts.
  const incoming = s.parser?.incoming;
  if (!incoming || incoming.complete === true) return false;
  return incoming._dumped === true || (s._httpMessage?.headersSent === true && s._httpMessage.req === incoming);
}

/** What fastify refuses itself is answered in the shape of the door asked: tRPC's under /trpc, the REST envelope elsewhere. */
function errorAnswer(err: unknown, req: FastifyRequest): { status: number; body: unknown } {
  return req.url.startsWith('/trpc/') || req.url === '/trpc' ? trpcError(resolveError(err, req.id, req.log), req.id) : restAnswer(err, req);
}

/**
 * X-Svc-Request-Id on every response, written to the raw response so Yoga and tRPC replies carry it too; a client's
 * X-Request-Id joins the request's log lines. One callback hook, no promise (every request pays it).
 */
export function stampRequestId(req: FastifyRequest, reply: FastifyReply, done: () => void): void {
  reply.raw.setHeader('X-Svc-Request-Id', req.id);
  const clientId = req.headers['x-request-id'];
  if (typeof clientId === 'string' && clientId) req.log = req.log.child({ client_request_id: clientId.slice(0, 128) });
  done();
}

type RequestHandler = (req: IncomingMessage, res: ServerResponse) => void;

export interface Listener {
  server: Server;
  /** the bound port (PORT=0: the one the system assigned) */
  port: number;
  /** fastify's `serverFactory`: the app answers on this server */
  factory(handler: RequestHandler, options: { keepAliveTimeout?: number; requestTimeout?: number; connectionTimeout?: number }): Server;
  /** once the app is ready: it answers from now on, the requests that waited first */
  serve(app: FastifyInstance): Promise<void>;
  /** stops accepting and waits for open requests (the caller cuts lingering sockets) */
  close(): Promise<void>;
}

/**
 * The gateway's port, bound before the services are built so their settings (the base URL with PORT=0) are final
 * when made, never patched after listen. Requests arriving while the app starts wait for it.
 */
export async function bindListener(port: number, host: string, bounds: RequestBounds): Promise<Listener> {
  const server = createServer(boundedServerOptions(bounds));
  const waiting: [IncomingMessage, ServerResponse][] = [];
  const hold: RequestHandler = (req, res) => void waiting.push([req, res]);
  let handler: RequestHandler | undefined;
  server.on('request', hold);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ port, host }, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address();
  return {
    server,
    port: typeof address === 'object' && address ? address.port : port,
    factory(appHandler, options) {
      // What fastify sets on a server it makes itself (fastify/lib/server.js).
      if (options.keepAliveTimeout !== undefined) server.keepAliveTimeout = options.keepAliveTimeout;
      if (options.requestTimeout !== undefined) server.requestTimeout = options.requestTimeout;
      if (options.connectionTimeout !== undefined) server.setTimeout(options.connectionTimeout);
      handler = appHandler;
      return server;
    },
    async serve(app) {
      await app.ready();
      if (!handler) throw new Error('the app was not built on this listener (factory unused)');
      server.off('request', hold);
      server.on('request', handler);
      for (const [req, res] of waiting.splice(0)) handler(req, res);
    },
    close() {
      return new Promise((resolve) => {
        server.close(() => resolve());
        if (!handler) server.closeAllConnections(); // requests held for an app that never came
      });
    },
  };
}

export function buildHttp(deps: {
  services: Services;
  log: Logger;
  accountsSecret?: string | undefined;
  listener: Listener;
  bounds: RequestBounds;
  /** the embedded ledgers' Solana JSON-RPC, shown on the landing page for wallets */
  ledgerRpcUrls?: Partial<Record<Network, string>>;
}): FastifyInstance & { unpaidFastPath?: UnpaidFastPath } {
  const { services, log } = deps;
  // Unpaid 402s whose challenge is at hand are answered before fastify (paywall/fast-402.ts); closing, fastify answers.
  let closing = false;
  const fast = services.paywall ? unpaidFastPath({ services, paywall: services.paywall, log, closing: () => closing }) : undefined;
  const serverFactory: Listener['factory'] = fast
    ? (handler, options) =>
        deps.listener.factory((req, res) => {
          let answered = false;
          try {
            answered = fast(req, res);
          } catch (err) {
            // never a crash from a request: fastify answers it (or, had a head gone out, the socket is cut)
            log.error({ err }, 'the unpaid fast path failed; fastify answers the request');
            if (res.headersSent) return void res.destroy();
          }
          if (!answered) handler(req, res);
        }, options)
    : deps.listener.factory;
  /** /v1 answers given before any procedure runs (unknown route, undecodable URL) count against the client IP. */
  const anonymousLimit = async (url: string, ip: string): Promise<{ values: Record<string, string>; error?: unknown }> => {
    const values: Record<string, string> = {};
    if (!url.startsWith('/v1/') && url !== '/v1') return { values };
    try {
      await limitAnonymous(services, ip, 'default', values);
      return { values };
    } catch (error) {
      return { values, error };
    }
  };
  const app = Fastify({
    loggerInstance: log as unknown as FastifyBaseLogger,
    bodyLimit: BODY_LIMIT,
    genReqId: () => newRequestId(),
    // A request's child logger is made when something logs through it at an enabled level, not for every request.
    childLoggerFactory: lazyChildLogger,
    requestIdHeader: false,
    // Incoming requests are logged with secrets taken out of the URL (a disclosure link's token is a bearer secret).
    logController: new RedactingLogController(),
    routerOptions: { maxParamLength: 5000 },
    // the listener's bound (fastify would otherwise set 0, no bound, on the server it is given)
    requestTimeout: deps.bounds.requestMs,
    clientErrorHandler,
    serverFactory,
    // Errors fastify answers before any hook (bad URL encoding, over-long params): same envelope and header.
    frameworkErrors: async (err, req, reply) => {
      const headers = await anonymousLimit(req.url, req.ip);
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

  app.addHook('preClose', (done) => {
    closing = true;
    done();
  });

  app.setErrorHandler((err, req, reply) => {
    const { status, body } = errorAnswer(err, req);
    void reply.code(status).send(body);
  });
  app.setNotFoundHandler(async (req, reply) => {
    const headers = await anonymousLimit(req.url, req.ip);
    const error: unknown = headers.error ?? new DomainError('not_found', `No route ${req.method} ${req.url.split('?')[0]}.`);
    const { status, body } = restAnswer(error, req);
    void reply.code(status).headers(headers.values).send(body);
  });

  const createContext = (req: FastifyRequest, reply: FastifyReply, transport: string): Context => {
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
  };

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
  return Object.assign(app, { unpaidFastPath: fast });
}

const REAL = Symbol('real child');
const BINDINGS = Symbol('bindings');
type Lazy = Logger & { [REAL]?: Logger; [BINDINGS]: Bindings };
const LEVEL_METHODS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace'] as const;
/** per parent logger, the prototype of its lazy children (they inherit its level, levels, flush…) */
const lazyPrototypes = new WeakMap<Logger, object>();

function materialize(lazy: Lazy, parent: Logger): Logger {
  lazy[REAL] ??= parent.child(lazy[BINDINGS]);
  return lazy[REAL];
}

function lazyPrototype(parent: Logger): object {
  const proto = lazyPrototypes.get(parent);
  if (proto) return proto;
  const made: Record<string | symbol, unknown> = Object.create(parent);
  for (const name of LEVEL_METHODS) {
    made[name] = function (this: Lazy, ...args: unknown[]) {
      const real = this[REAL] ?? (parent.isLevelEnabled(name) ? materialize(this, parent) : undefined);
      if (real) (real[name] as (...a: unknown[]) => void)(...args);
    };
  }
  made.child = function (this: Lazy, bindings: Bindings, options?: ChildLoggerOptions) {
    return materialize(this, parent).child(bindings, options);
  };
  made.bindings = function (this: Lazy) {
    return this[REAL] ? this[REAL].bindings() : { ...parent.bindings(), ...this[BINDINGS] };
  };
  made.setBindings = function (this: Lazy, bindings: Bindings) {
    materialize(this, parent).setBindings(bindings);
  };
  made.isLevelEnabled = function (this: Lazy, level: string) {
    return (this[REAL] ?? parent).isLevelEnabled(level);
  };
  Object.defineProperty(made, 'level', {
    get(this: Lazy) {
      return (this[REAL] ?? parent).level;
    },
    set(this: Lazy, level: string) {
      materialize(this, parent).level = level;
    },
  });
  lazyPrototypes.set(parent, made);
  return made;
}

/**
 * fastify's `childLoggerFactory`: the request's logger, a pino child with the request id made on first use at an enabled
 * level. A request nothing logs for (the 402 fast path, every request when the level is above info) makes none.
 */
export function lazyChildLogger(this: unknown, parent: FastifyBaseLogger, bindings: Bindings, options: ChildLoggerOptions): Logger {
  const pinoParent = parent as unknown as Logger; // fastify's logger here is the app's pino logger (or its child)
  if (options.level !== undefined || options.serializers !== undefined) return pinoParent.child(bindings, options);
  const lazy = Object.create(lazyPrototype(pinoParent)) as Lazy;
  lazy[BINDINGS] = bindings;
  return lazy;
}

/** the levels at which the incoming-request line is written: below, its fields are not even built */
const LOGS_INFO = new Set(['trace', 'debug', 'info']);

/** fastify's request logging, with the URL of the incoming-request line made loggable. */
class RedactingLogController extends LogController {
  override incomingRequest(request: FastifyRequest): void {
    if (this.isLogDisabled(request) || !LOGS_INFO.has(request.log.level)) return;
    request.log.info({ req: { method: request.method, url: loggableUrl(request.url), remoteAddress: request.ip } }, 'incoming request');
  }
}

/** Path segments that are bearer secrets: kept out of the request logs. */
const SECRET_IN_PATH = /^(\/v1\/identity\/disclosures\/)[^/?#]+/;

/** The request URL as it may be logged: secrets in the path replaced, the query string dropped (it may carry one too). */
export function loggableUrl(url: string): string {
  const path = url.split('?')[0] ?? url;
  return path.replace(SECRET_IN_PATH, '$1[redacted]');
}
