import { LogController, type FastifyBaseLogger, type FastifyReply, type FastifyRequest } from 'fastify';
import type { IncomingHttpHeaders } from 'node:http';
import type { Bindings, ChildLoggerOptions, Logger } from 'pino';

// The gateway's request logging: one access line per request, written through the app's logger (no per-request
// child), with bearer secrets kept out of its URL; a request's own logger costs nothing until something logs through it.

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

/** A client's X-Request-Id, as it joins the request's log lines (bounded: it is the client's text). */
export function clientRequestId(headers: IncomingHttpHeaders): string | undefined {
  const id = headers['x-request-id'];
  return typeof id === 'string' && id ? id.slice(0, 128) : undefined;
}

/** What the access line says of one answered request. */
export interface AccessLine {
  reqId: string;
  method: string;
  /** the request URL as received (made loggable here) */
  url: string;
  remoteAddress: string | undefined;
  statusCode: number;
  /** milliseconds from the request to its answer */
  responseTime: number;
  clientRequestId?: string | undefined;
  /** the error the response ended with (the line is then at error) */
  err?: unknown;
}

/**
 * The one line per request (at info; at error when the response failed), written by every door that answers one —
 * fastify's (AccessLogController) and the unpaid 402 before it (paywall/fast-402.ts) — in one shape. Written through
 * the app's logger with the request id as a field, so no request needs a child logger of its own.
 */
export function writeAccessLine(log: Logger, line: AccessLine): void {
  const level = line.err ? 'error' : 'info';
  if (!log.isLevelEnabled(level)) return;
  const fields: Record<string, unknown> = { reqId: line.reqId };
  if (line.clientRequestId !== undefined) fields.client_request_id = line.clientRequestId;
  fields.req = { method: line.method, url: loggableUrl(line.url), remoteAddress: line.remoteAddress };
  fields.res = { statusCode: line.statusCode };
  fields.responseTime = line.responseTime;
  if (line.err) fields.err = line.err;
  log[level](fields, line.err ? 'request errored' : 'request completed');
}

/**
 * fastify's request logging: one access line per request at completion (writeAccessLine), none at its start — an
 * operator gets method, URL (secrets taken out), status and time on one line, at half the cost of two.
 */
export class AccessLogController extends LogController {
  readonly #log: Logger;

  constructor(log: Logger) {
    super();
    this.#log = log;
  }

  override incomingRequest(): void {}

  override requestCompleted(err: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    if (this.isLogDisabled(request)) return;
    writeAccessLine(this.#log, {
      reqId: request.id,
      method: request.method,
      url: request.url,
      remoteAddress: request.ip,
      statusCode: reply.statusCode,
      responseTime: reply.elapsedTime,
      clientRequestId: clientRequestId(request.headers),
      err,
    });
  }
}

/** Path segments that are bearer secrets: kept out of the request logs. */
const SECRET_IN_PATH = /^(\/v1\/identity\/disclosures\/)[^/?#]+/;

/** The request URL as it may be logged: secrets in the path replaced, the query string dropped (it may carry one too). */
export function loggableUrl(url: string): string {
  const query = url.indexOf('?');
  const path = query === -1 ? url : url.slice(0, query);
  return path.startsWith('/v1/identity/disclosures/') ? path.replace(SECRET_IN_PATH, '$1[redacted]') : path;
}
