import { LogController, type FastifyBaseLogger, type FastifyReply, type FastifyRequest } from 'fastify';
import type { IncomingHttpHeaders } from 'node:http';
import pino, { type Bindings, type ChildLoggerOptions, type Logger } from 'pino';

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
 * the app's logger with the request id as a field, so no request needs a child logger of its own. Every request pays
 * for the info line: it is formatted here (plainWriter) when the logger writes pino's plain JSON.
 */
export function writeAccessLine(log: Logger, line: AccessLine): void {
  const level = line.err ? 'error' : 'info';
  if (!log.isLevelEnabled(level)) return;
  if (!line.err) {
    let plain = plainWriters.get(log);
    if (plain === undefined) {
      plain = plainWriter(log);
      plainWriters.set(log, plain);
    }
    if (plain) {
      plain(line);
      return;
    }
  }
  log[level](accessFields(line), line.err ? 'request errored' : 'request completed');
}

function accessFields(line: AccessLine): Record<string, unknown> {
  const fields: Record<string, unknown> = { reqId: line.reqId };
  if (line.clientRequestId !== undefined) fields.client_request_id = line.clientRequestId;
  fields.req = { method: line.method, url: loggableUrl(line.url), remoteAddress: line.remoteAddress };
  fields.res = { statusCode: line.statusCode };
  fields.responseTime = line.responseTime;
  if (line.err) fields.err = line.err;
  return fields;
}

/**
 * The info access line as pino writes it — its level's opening, time and bindings (pino 9's own parts, lib/symbols.js),
 * the fields of accessFields in order, msg — without pino's generic walk over the fields and its redaction pass: the
 * line's fields are fixed and hold nothing to redact (no headers; the URL made loggable, its query dropped). Strings a
 * client chose (URL, method, X-Request-Id) are JSON-escaped.
 */
function formatPlain(parts: { open: string; time: string; bindings: string; end: string }, line: AccessLine): string {
  let s = `${parts.open}${parts.time}${parts.bindings},"reqId":${JSON.stringify(line.reqId)}`;
  if (line.clientRequestId !== undefined) s += `,"client_request_id":${JSON.stringify(line.clientRequestId)}`;
  s += `,"req":{"method":${JSON.stringify(line.method)},"url":${JSON.stringify(loggableUrl(line.url))}`;
  if (line.remoteAddress !== undefined) s += `,"remoteAddress":${JSON.stringify(line.remoteAddress)}`;
  const took = Number.isFinite(line.responseTime) ? line.responseTime : null;
  return `${s}},"res":{"statusCode":${line.statusCode}},"responseTime":${took},"msg":"request completed"${parts.end}`;
}

/** per logger: its plain writer, or null when pino must write the line itself */
const plainWriters = new WeakMap<Logger, ((line: AccessLine) => void) | null>();
const sym = pino.symbols as unknown as Record<string, symbol>;
const INFO = pino.levels.values.info!;

/**
 * A writer of formatPlain's line straight to the logger's stream, when that is exactly what pino would write: no
 * mixin, hook, message prefix or metadata-reading stream, and pino's own formatting of a sample (with characters to
 * escape) equal to formatPlain's. Decided once per logger; the bindings are read at each line (setBindings).
 */
function plainWriter(log: Logger): ((line: AccessLine) => void) | null {
  const p = log as unknown as Record<symbol, unknown>;
  const asJson = p[sym.asJsonSym!] as ((obj: object, msg: string, level: number, time: string) => string) | undefined;
  const time = p[sym.timeSym!] as (() => string) | undefined;
  const stream = p[sym.streamSym!] as ({ write?: unknown } & Record<symbol, unknown>) | undefined;
  const hooks = p[sym.hooksSym!] as { logMethod?: unknown; streamWrite?: unknown } | undefined;
  const open = (p[sym.lsCacheSym!] as Record<number, string> | undefined)?.[INFO];
  const end = p[sym.endSym!] as string | undefined;
  if (!asJson || !time || typeof stream?.write !== 'function' || open === undefined || end === undefined) return null;
  if (stream[sym.needsMetadataGsym!] === true || p[sym.mixinSym!] || hooks?.logMethod || hooks?.streamWrite || p[sym.msgPrefixSym!]) return null;
  const sample: AccessLine = {
    reqId: '01J0000000000000000000000"\\',
    method: 'GET',
    url: '/x/a"b\\c\u0001é\u2028?q=1',
    remoteAddress: '::1',
    statusCode: 402,
    responseTime: 0.25,
    clientRequestId: 'c"1',
  };
  const at = ',"time":0';
  const bindings = () => p[sym.chindingsSym!] as string;
  if (asJson.call(log, accessFields(sample), 'request completed', INFO, at) !== formatPlain({ open, time: at, bindings: bindings(), end }, sample)) return null;
  const write = (stream.write as (line: string) => unknown).bind(stream);
  return (line) => void write(formatPlain({ open, time: time.call(log), bindings: bindings(), end }, line));
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
