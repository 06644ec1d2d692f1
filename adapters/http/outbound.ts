import { lookup as dnsLookup } from 'node:dns';
import type { LookupAddress } from 'node:dns';
import { request as httpRequest } from 'node:http';
import type { ClientRequest, IncomingMessage, RequestOptions } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { isIP } from 'node:net';
import type {
  OutboundFailure,
  OutboundHttp,
  OutboundRequest,
  OutboundResponse,
} from '../../domain/ports/outbound-http.ts';

// DECISIONS "Webhooks": outbound URLs must be https and resolve to public addresses unless the development setting
// allows private targets. The address check runs inside the socket's own `lookup`, on the very addresses the socket
// will dial, so a DNS answer that changes between a check and the connect (DNS rebinding) cannot slip through.
// IP-literal hosts never reach `lookup` (net skips it), so they are checked before the request is made.

export interface GuardedOutboundHttpOptions {
  /** development/test setting: http: and private/loopback targets allowed */
  allowPrivate: boolean;
  /** default "svc-gateway"; a request's own user-agent header wins */
  userAgent?: string;
}

const DEFAULT_TIMEOUT_MS = 15_000;
const DEFAULT_MAX_RESPONSE_BYTES = 1024 * 1024;
const DEFAULT_USER_AGENT = 'svc-gateway';
const REFUSED_ADDRESS = 'ERR_SVC_ADDRESS_REFUSED';

type Result = OutboundResponse | OutboundFailure;

export class GuardedOutboundHttp implements OutboundHttp {
  readonly #allowPrivate: boolean;
  readonly #userAgent: string;

  constructor(options: GuardedOutboundHttpOptions) {
    this.#allowPrivate = options.allowPrivate;
    this.#userAgent = options.userAgent ?? DEFAULT_USER_AGENT;
  }

  async request(req: OutboundRequest): Promise<Result> {
    try {
      return await this.#request(req);
    } catch (error) {
      // Not expected (every known failure is mapped below); the port promises never to throw.
      return fail('network', `request failed: ${describe(error)}`);
    }
  }

  async check(target: string): Promise<OutboundFailure | null> {
    const parsed = this.#parse(target);
    if (!parsed.ok) return parsed;
    if (this.#allowPrivate || isIP(parsed.host) !== 0) return null;
    return new Promise((resolve) => {
      publicOnlyLookup(parsed.host, { all: true }, (error) => {
        if (!error) resolve(null);
        else if (error.code === REFUSED_ADDRESS) resolve(fail('url_refused', error.message));
        else resolve(fail('network', `${parsed.host}: ${describe(error)}`));
      });
    });
  }

  /** The checks that need no network: a valid absolute URL, the scheme, no credentials, a public IP literal. */
  #parse(target: string): { ok: true; url: URL; host: string } | OutboundFailure {
    let url: URL;
    try {
      url = new URL(target);
    } catch {
      return fail('url_refused', 'not a valid absolute URL');
    }
    const allowed = this.#allowPrivate ? ['https:', 'http:'] : ['https:'];
    if (!allowed.includes(url.protocol)) return fail('url_refused', `scheme ${url.protocol} is not allowed (${allowed.join(' or ')} only)`);
    if (!this.#allowPrivate && (url.username !== '' || url.password !== '')) return fail('url_refused', 'URLs with credentials are not allowed');
    // URL keeps IPv6 literals in brackets ("[::1]"); node:http and isIP want them bare.
    const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
    if (!this.#allowPrivate && isIP(host) !== 0 && !isPublicAddress(host)) return fail('url_refused', `address ${host} is not public`);
    return { ok: true, url, host };
  }

  #request(req: OutboundRequest): Promise<Result> {
    const parsed = this.#parse(req.url);
    if (!parsed.ok) return Promise.resolve(parsed);
    const { url, host } = parsed;

    const timeoutMs = positive(req.timeoutMs, DEFAULT_TIMEOUT_MS);
    const maxBytes = positive(req.maxResponseBytes, DEFAULT_MAX_RESPONSE_BYTES);
    const body = req.body === undefined ? undefined : typeof req.body === 'string' ? Buffer.from(req.body, 'utf8') : req.body;

    const headers: Record<string, string> = { 'user-agent': this.#userAgent };
    for (const [name, value] of Object.entries(req.headers ?? {})) headers[name.toLowerCase()] = value;
    // We always know the length: never chunked, and a caller's stale content-length cannot lie about the body.
    delete headers['transfer-encoding'];
    delete headers['content-length'];
    const method = req.method.toUpperCase();
    if (body !== undefined) headers['content-length'] = String(body.byteLength);
    else if (method !== 'GET' && method !== 'HEAD') headers['content-length'] = '0';

    const options: RequestOptions = {
      protocol: url.protocol,
      hostname: host,
      port: url.port === '' ? undefined : Number(url.port),
      path: `${url.pathname}${url.search}`,
      method,
      headers,
      // A fresh connection per request: a pooled socket must never carry a request past the address check, and an
      // agent shared with an allowPrivate instance could hand one over.
      agent: false,
      ...(this.#allowPrivate ? {} : { lookup: publicOnlyLookup }),
      ...(url.username !== '' || url.password !== ''
        ? { auth: `${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}` }
        : {}),
    };

    return new Promise<Result>((resolve) => {
      let settled = false;
      let clientRequest: ClientRequest | undefined;
      let response: IncomingMessage | undefined;
      const finish = (result: Result) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        if (!result.ok) {
          // Abort the socket: nothing more is read or sent once the answer is decided.
          response?.destroy();
          clientRequest?.destroy();
        }
        resolve(result);
      };
      const timer = setTimeout(() => finish(fail('timeout', `no complete answer within ${timeoutMs} ms`)), timeoutMs);

      try {
        clientRequest = (url.protocol === 'https:' ? httpsRequest : httpRequest)(options);
      } catch (error) {
        // e.g. a method or header value node refuses (ERR_INVALID_HTTP_TOKEN, ERR_INVALID_CHAR): not worth a retry.
        finish(fail('url_refused', `request refused: ${describe(error)}`));
        return;
      }
      clientRequest.on('error', (error: NodeJS.ErrnoException) => {
        if (error.code === REFUSED_ADDRESS) finish(fail('url_refused', error.message));
        else finish(fail('network', `${url.host}: ${describe(error)}`));
      });
      clientRequest.on('response', (res) => {
        response = res;
        const declared = Number(res.headers['content-length']);
        if (Number.isFinite(declared) && declared > maxBytes) {
          finish(fail('too_large', `response of ${declared} bytes exceeds the ${maxBytes} byte limit`));
          return;
        }
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > maxBytes) finish(fail('too_large', `response exceeds the ${maxBytes} byte limit`));
          else chunks.push(chunk);
        });
        res.on('end', () => {
          finish({ ok: true, status: res.statusCode ?? 0, headers: joinHeaders(res.rawHeaders), body: new Uint8Array(Buffer.concat(chunks)) });
        });
        res.on('error', (error) => finish(fail('network', `${url.host}: ${describe(error)}`)));
        res.on('close', () => {
          if (!res.complete) finish(fail('network', `${url.host}: connection closed before the response ended`));
        });
      });
      clientRequest.end(body);
    });
  }
}

/**
 * The socket's resolver when private targets are refused. Resolves every address (all: true) and refuses the host if
 * ANY is not public, so happy-eyeballs cannot fall back to a private one. Answers in whichever form net asked for.
 */
function publicOnlyLookup(
  hostname: string,
  options: { family?: number | string; hints?: number; all?: boolean },
  callback: (error: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void,
): void {
  const family = options.family === 'IPv4' ? 4 : options.family === 'IPv6' ? 6 : Number(options.family ?? 0) || 0;
  dnsLookup(hostname, { all: true, family, ...(options.hints === undefined ? {} : { hints: options.hints }) }, (error, addresses) => {
    if (error) return callback(error, '', 0);
    const refused = addresses.find((a) => !isPublicAddress(a.address));
    if (refused !== undefined || addresses.length === 0) {
      const refusal: NodeJS.ErrnoException = new Error(
        refused === undefined ? `${hostname} resolved to no address` : `${hostname} resolves to ${refused.address}, which is not public`,
      );
      refusal.code = REFUSED_ADDRESS;
      return callback(refusal, '', 0);
    }
    if (options.all) return callback(null, addresses);
    const first = addresses[0]!;
    callback(null, first.address, first.family);
  });
}

// ---------------------------------------------------------------------------------------------------------------------
// Address classification (IANA IPv4/IPv6 special-purpose address registries).

type Cidr = readonly [prefix: bigint, bits: number];

/** IPv4 ranges that are not globally reachable unicast. */
const IPV4_BLOCKED: readonly Cidr[] = [
  v4('0.0.0.0', 8), // "this network"
  v4('10.0.0.0', 8), // private
  v4('100.64.0.0', 10), // CGNAT shared address space
  v4('127.0.0.0', 8), // loopback
  v4('169.254.0.0', 16), // link-local (cloud metadata lives here)
  v4('172.16.0.0', 12), // private
  v4('192.0.0.0', 24), // IETF protocol assignments
  v4('192.0.2.0', 24), // TEST-NET-1
  v4('192.88.99.0', 24), // deprecated 6to4 relay anycast
  v4('192.168.0.0', 16), // private
  v4('198.18.0.0', 15), // benchmarking
  v4('198.51.100.0', 24), // TEST-NET-2
  v4('203.0.113.0', 24), // TEST-NET-3
  v4('224.0.0.0', 4), // multicast
  v4('240.0.0.0', 4), // reserved, including 255.255.255.255 broadcast
];

/** Inside 2000::/3 (the only global unicast space assigned), ranges that are still not public. */
const IPV6_BLOCKED_IN_GLOBAL: readonly Cidr[] = [
  v6('2001::', 23), // IETF protocol assignments: Teredo, benchmarking, ORCHID…
  v6('2001:db8::', 32), // documentation
  v6('3fff::', 20), // documentation (RFC 9637)
];

const IPV6_GLOBAL = v6('2000::', 3);
const IPV4_MAPPED = v6('::ffff:0:0', 96);
const NAT64_WELL_KNOWN = v6('64:ff9b::', 96);
const SIX_TO_FOUR = v6('2002::', 16);

/**
 * True only for a globally reachable unicast address: "8.8.8.8", "2606:4700::1111" → true;
 * "127.0.0.1", "10.0.0.1", "::1", "fe80::1", "fd00::1", "::ffff:127.0.0.1", "64:ff9b::a00:1" → false.
 * Anything that is not an IP address → false. IPv6 that embeds an IPv4 address (mapped, NAT64, 6to4) is judged by
 * the embedded address.
 */
export function isPublicAddress(ip: string): boolean {
  const bare = ip.startsWith('[') && ip.endsWith(']') ? ip.slice(1, -1) : ip;
  // A zone id ("fe80::1%eth0") only exists on link-scoped addresses.
  if (bare.includes('%')) return false;
  const kind = isIP(bare);
  if (kind === 4) return isPublicV4(parseV4(bare));
  if (kind !== 6) return false;
  const value = parseV6(bare);
  if (value === undefined) return false;
  const low32 = value & 0xffff_ffffn;
  if (inCidr(value, IPV4_MAPPED, 128) || inCidr(value, NAT64_WELL_KNOWN, 128)) return isPublicV4(low32);
  if (inCidr(value, SIX_TO_FOUR, 128)) return isPublicV4((value >> 80n) & 0xffff_ffffn);
  if (!inCidr(value, IPV6_GLOBAL, 128)) return false; // ::, ::1, fc00::/7, fe80::/10, ff00::/8, 64:ff9b:1::/48…
  return !IPV6_BLOCKED_IN_GLOBAL.some((cidr) => inCidr(value, cidr, 128));
}

function isPublicV4(value: bigint): boolean {
  return !IPV4_BLOCKED.some((cidr) => inCidr(value, cidr, 32));
}

function inCidr(value: bigint, [prefix, bits]: Cidr, width: number): boolean {
  const shift = BigInt(width - bits);
  return value >> shift === prefix >> shift;
}

function v4(address: string, bits: number): Cidr {
  return [parseV4(address), bits];
}

function v6(address: string, bits: number): Cidr {
  return [parseV6(address)!, bits];
}

/** Caller has checked isIP() === 4 (dotted quad, no leading zeros). */
function parseV4(address: string): bigint {
  return address.split('.').reduce((acc, part) => (acc << 8n) | BigInt(Number(part)), 0n);
}

/** Caller has checked isIP() === 6; handles "::" and a trailing dotted quad ("::ffff:1.2.3.4"). */
function parseV6(address: string): bigint | undefined {
  let text = address.toLowerCase();
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted?.[1] !== undefined) {
    const quad = parseV4(dotted[1]);
    text = `${text.slice(0, dotted.index)}${(quad >> 16n).toString(16)}:${(quad & 0xffffn).toString(16)}`;
  }
  const halves = text.split('::');
  if (halves.length > 2) return undefined;
  const head = halves[0] === '' || halves[0] === undefined ? [] : halves[0].split(':');
  const tail = halves.length === 2 ? (halves[1] === '' ? [] : halves[1]!.split(':')) : [];
  const groups = halves.length === 2 ? [...head, ...Array<string>(8 - head.length - tail.length).fill('0'), ...tail] : head;
  if (groups.length !== 8) return undefined;
  let value = 0n;
  for (const group of groups) {
    if (!/^[0-9a-f]{1,4}$/.test(group)) return undefined;
    value = (value << 16n) | BigInt(Number.parseInt(group, 16));
  }
  return value;
}

function positive(value: number | undefined, fallback: number): number {
  return value !== undefined && Number.isFinite(value) && value > 0 ? value : fallback;
}

function fail(reason: OutboundFailure['reason'], message: string): OutboundFailure {
  return { ok: false, reason, message };
}

/** Lower-case names; repeated headers joined with ", " (rawHeaders keeps every repeat, res.headers drops some). */
function joinHeaders(raw: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    const value = raw[i + 1]!;
    out[name] = out[name] === undefined ? value : `${out[name]}, ${value}`;
  }
  return out;
}

/** A short, secret-free description: the error code when there is one, else its message. */
function describe(error: unknown): string {
  if (error instanceof Error) {
    const code = (error as NodeJS.ErrnoException).code;
    return code === undefined ? error.message : `${error.message.split('\n')[0]} (${code})`;
  }
  return String(error);
}
