import pino, { type Logger } from 'pino';
import { isColorSupported, prettyFactory } from 'pino-pretty';
import type { LogFormat } from './config.ts';

// The gateway's logger. Production (standard output not a terminal, or SVC_LOG_FORMAT=json) writes pino's JSON lines,
// unchanged. A person running `npm start` in a terminal (or SVC_LOG_FORMAT=pretty) reads one line per thing that
// happened — a paid call, a submit, a confirmation, a webhook delivery, an error — and not one per HTTP request: the
// access lines are folded away, except those answered with a 4xx or 5xx. The readable lines are made from the same
// structured fields the JSON carries (`evt` names the kind of line), so both formats say the same.

export { LOG_FORMATS, type LogFormat } from './config.ts';

/** Fields that could hold a credential are never written, in either format. */
const REDACT = ['req.headers.authorization', 'headers.authorization', '*.authorization', '*.key'];

/** Where log text goes: process.stdout, or a test's capture. */
export interface LogSink {
  write(text: string): unknown;
}

export interface LoggerOptions {
  level: string;
  format: LogFormat;
  /** default process.stdout (JSON: the buffered destination, `destination`) */
  sink?: LogSink | undefined;
  /** JSON without a sink: the file descriptor or path written (default 1, standard output) */
  destination?: number | string | undefined;
  /** whether the sink is a terminal (auto picks pretty then); default process.stdout.isTTY */
  isTTY?: boolean | undefined;
  /** colours in the pretty format; default: the terminal supports them */
  colorize?: boolean | undefined;
}

export function resolveLogFormat(format: LogFormat, isTTY: boolean): 'pretty' | 'json' {
  return format === 'auto' ? (isTTY ? 'pretty' : 'json') : format;
}

export function createLogger(options: LoggerOptions): Logger {
  const isTTY = options.isTTY ?? process.stdout.isTTY === true;
  const base = { level: options.level, redact: REDACT };
  if (resolveLogFormat(options.format, isTTY) === 'json')
    return options.sink ? pino(base, options.sink) : pino(base, jsonDestination(options.destination ?? 1));
  const sink = options.sink ?? process.stdout;
  const format = readableFormatter({ colorize: options.colorize ?? (isTTY && isColorSupported) });
  return pino(base, {
    write(line: string) {
      const text = format(line);
      if (text) sink.write(text);
    },
  });
}

/** Characters held before a write: at thousands of requests a second, one write per few dozen lines instead of one per line. */
const BUFFERED = 4096;
/** The longest a line waits in the buffer when traffic is light (an operator tailing the log sees it by then). */
const FLUSH_MS = 100;

/**
 * The JSON lines' destination: a line is appended to the lines held (HeldLines), never written on its own; they go out
 * in one write when they reach BUFFERED characters or FLUSH_MS passed. The writes themselves are pino's SonicBoom's,
 * synchronous: with `sync: false` a write still in flight when the process ends is raced by pino's exit flush — a
 * crash then lost or reordered lines (test/interfaces/console-log.test.ts) — while synchronous writes of what is held
 * go out whole, in order, on the process's exit (an uncaught exception's and a shutdown signal's alike, below) and by
 * `App.close`.
 */
function jsonDestination(dest: number | string) {
  const lines = new HeldLines(pino.destination({ dest, sync: true }));
  // what is held is written here on exit (held weakly: a closed logger is not kept alive by the process)
  const held = new WeakRef(lines);
  process.once('exit', () => {
    try {
      held.deref()?.flushSync();
    } catch {
      // already closed: nothing held
    }
  });
  return lines;
}

/**
 * Lines held as one string until written: a line costs an append. (SonicBoom's own buffer, `minLength`, measured the
 * UTF-8 length of everything it held at every line — the most of an access line's cost.)
 */
class HeldLines {
  #text = '';
  readonly #out: ReturnType<typeof pino.destination>;

  constructor(out: ReturnType<typeof pino.destination>) {
    this.#out = out;
    setInterval(() => this.#writeHeld(), FLUSH_MS).unref();
  }

  write(line: string): boolean {
    this.#text += line;
    if (this.#text.length >= BUFFERED) this.#writeHeld();
    return true;
  }

  /** pino's `logger.flush(cb)` */
  flush(cb?: (err?: Error) => void): void {
    this.#writeHeld();
    this.#out.flush(cb);
  }

  flushSync(): void {
    this.#writeHeld();
    this.#out.flushSync();
  }

  #writeHeld(): void {
    if (!this.#text) return;
    const text = this.#text;
    this.#text = '';
    this.#out.write(text);
  }
}

/** Writes out what the logger holds (the JSON destination's buffer); resolves once written. */
export function flushLogger(log: Logger): Promise<void> {
  return new Promise((resolve) => {
    try {
      log.flush(() => resolve());
    } catch {
      resolve(); // a destination already closed (its process exiting) has nothing left to write
    }
  });
}

type Line = Record<string, unknown> & { level?: number; time?: number; msg?: string; evt?: string; reqId?: string };

const str = (v: unknown): string => (v === null || v === undefined ? '–' : String(v));
/** a wallet address, shortened the way explorers show them (transaction signatures are written whole, to paste) */
const short = (v: unknown): string => {
  const s = str(v);
  return s.length > 16 ? `${s.slice(0, 6)}…${s.slice(-4)}` : s;
};
const ms = (v: unknown): string => (typeof v === 'number' ? `${v} ms` : '');

/** The one readable message of a structured line, or undefined for a line shown as pino-pretty shows it. */
function readable(o: Line): string | undefined {
  // a failed webhook attempt is the webhook service's warning (its context has the same fields)
  switch (o.msg === 'webhook not delivered' ? 'webhook' : o.evt) {
    case 'paid_call':
      return `paid   ${str(o.label)} (${str(o.link_id)}) · ${str(o.amount)} ${str(o.currency)} from ${short(o.buyer)} · ${str(o.protocol)} → ${str(o.status)} · tx ${str(o.signature)} · ${ms(o.ms)}`;
    case 'submit':
      return o.outcome === 'submitted'
        ? `submit ${str(o.kind)} event ${str(o.event_id)} · tx ${str(o.signature)} · ${ms(o.ms)}`
        : `submit ${str(o.kind)} event ${str(o.event_id)} refused by the ledger (${str(o.error_code)}): event failed, nothing charged · ${ms(o.ms)}`;
    case 'confirmation':
      return o.phase === 'confirmed'
        ? `confirmed ${str(o.kind)} event ${str(o.event_id)} · tx ${str(o.signature)} · slot ${str(o.slot)}${typeof o.ms === 'number' ? ` · ${o.ms} ms after submit` : ''}`
        : `failed ${str(o.kind)} event ${str(o.event_id)} (${str(o.error_code)}) · tx ${str(o.signature)}`;
    case 'webhook': {
      const what = `${str(o.kind)}/${str(o.phase)} → ${str(o.host)}`;
      const which = `delivery ${str(o.delivery_id)}, attempt ${str(o.attempt)}`;
      if (o.outcome === 'delivered') return `webhook ${what} · ${str(o.status)} · ${ms(o.ms)} (${which})`;
      const next = o.next_attempt_at ? `retry at ${str(o.next_attempt_at)}` : 'given up';
      return `webhook ${what} not delivered: ${str(o.error)} · ${next} (${which})`;
    }
    default:
      return undefined;
  }
}

/** JSON line → the text a person reads (with its newline), or '' for a folded line. */
export function readableFormatter(options: { colorize: boolean }): (line: string) => string {
  const pretty = prettyFactory({ colorize: options.colorize, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname', singleLine: true });
  return (line) => {
    let o: Line;
    try {
      o = JSON.parse(line) as Line;
    } catch {
      return line.endsWith('\n') ? line : `${line}\n`;
    }
    // the access line (interfaces/http/logging.ts): shown only for a refused or failed request
    if (o.msg === 'request completed' || o.msg === 'request errored') {
      const status = (o.res as { statusCode?: number } | undefined)?.statusCode ?? 0;
      // 402 is the paywall's offer, the first half of every paid call: not a refusal worth a line.
      if (o.msg === 'request completed' && (status < 400 || status === 402)) return '';
      const req = (o.req ?? {}) as { method?: string; url?: string };
      const took = typeof o.responseTime === 'number' ? ` · ${Math.round(o.responseTime)} ms` : '';
      const what = `${status} ${str(req.method)} ${str(req.url)}${took} (request ${str(o.reqId)})`;
      return pretty({ level: status >= 500 || o.msg === 'request errored' ? 50 : 40, time: o.time, msg: what, ...(o.err ? { err: o.err } : {}) });
    }
    const text = readable(o);
    return text === undefined ? pretty(o) : pretty({ level: o.level, time: o.time, msg: text });
  };
}
