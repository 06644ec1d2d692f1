import { LogController, type FastifyBaseLogger, type FastifyRequest } from 'fastify';
import type { Bindings, ChildLoggerOptions, Logger } from 'pino';

// The gateway's request logging: a request's logger costs nothing until something logs through it (the unpaid 402 fast
// path answers thousands a second), and the incoming-request line keeps bearer secrets out of the logs.

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
export class RedactingLogController extends LogController {
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
