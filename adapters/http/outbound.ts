import { lookup as dnsLookup } from 'node:dns';
import type { LookupAddress } from 'node:dns';
import { request as httpRequest } from 'node:http';
import type { ClientRequest, IncomingMessage, RequestOptions } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { isIP } from 'node:net';
import { rootCertificates } from 'node:tls';
import { networkInterfaces } from 'node:os';
import { effectivePort, parseOutboundTarget } from '../../domain/ports/outbound-http.ts';
import type { OutboundFailure, OutboundHttp, OutboundRequest, OutboundResponse } from '../../domain/ports/outbound-http.ts';

// DECISIONS "Webhooks": https to public addresses only; the allow-list (SVC_OUTBOUND_ALLOW) names the
// development targets that may be plain http and private; the gateway's own listeners are refused even when listed.
// The address check runs inside the socket's own `lookup`, on the very addresses the socket will dial, so a DNS
// answer that changes between a check and the connect (DNS rebinding) cannot slip through. IP-literal hosts never
// reach `lookup` (net skips it), so they are checked before the request is made.

export interface GuardedOutboundHttpOptions {
  /**
   * development targets, "host:port" (SVC_OUTBOUND_ALLOW): a URL naming exactly that host and port may be plain http
   * and reach a loopback/private address. Every other target is https to public addresses only.
   */
  allow?: readonly string[];
  /** default "svc-gateway"; a request's own user-agent header wins */
  userAgent?: string;
  /** the resolver (default node:dns lookup, as net uses); tests inject one whose answers change (DNS rebinding) */
  resolve?: Resolver;
  /**
   * extra certificate authorities (PEM, SVC_OUTBOUND_CA) trusted beside the system's roots, e.g. a development CA or a
   * test's self-signed certificate; certificate checks stay on for every target
   */
  ca?: string;
}

/** dns.lookup with all: true. */
export type Resolver = (
  hostname: string,
  options: { all: true; family: number; hints?: number },
  callback: (error: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => void,
) => void;

const systemResolver: Resolver = (hostname, options, callback) => dnsLookup(hostname, options, callback);

const DEFAULT_TIMEOUT_MS = 15_000;
const CHECK_RESOLVE_TIMEOUT_MS = 10_000;
const DEFAULT_MAX_RESPONSE_BYTES = 1024 * 1024;
const DEFAULT_USER_AGENT = 'svc-gateway';
const REFUSED_ADDRESS = 'ERR_SVC_ADDRESS_REFUSED';
const ALLOW_HINT = 'only https to public addresses is called (SVC_OUTBOUND_ALLOW=host:port names development targets)';

type Result = OutboundResponse | OutboundFailure;

/** What the URL alone decides; the addresses of a host name are judged when it resolves. */
interface Target {
  ok: true;
  url: URL;
  /** the host as dialled: IPv6 without brackets */
  host: string;
  port: number;
  /** the URL's host:port is on the allow-list */
  listed: boolean;
}

export class GuardedOutboundHttp implements OutboundHttp {
  readonly #allow: ReadonlySet<string>;
  readonly #userAgent: string;
  readonly #resolve: Resolver;
  readonly #ca: string[] | undefined;
  /** the gateway's own listeners: port → the hosts they were registered with (normalised) */
  readonly #own = new Map<number, Set<string>>();

  constructor(options: GuardedOutboundHttpOptions = {}) {
    const allow = new Set<string>();
    for (const entry of options.allow ?? []) {
      const target = parseOutboundTarget(entry);
      if (typeof target === 'string') throw new Error(`outbound allow-list: ${target}`);
      allow.add(`${target.host}:${target.port}`);
    }
    this.#allow = allow;
    this.#userAgent = options.userAgent ?? DEFAULT_USER_AGENT;
    this.#resolve = options.resolve ?? systemResolver;
    this.#ca = options.ca ? [...rootCertificates, options.ca] : undefined;
  }

  /**
   * Registers one of the gateway's own listeners ("0.0.0.0:8080", "127.0.0.1:8899", "[::]:8080"), learned after
   * `listen` (port 0 becomes the assigned port). From then on that port is refused on every local address (loopback,
   * unspecified, this machine's interfaces) and on the registered host, allow-listed or not.
   */
  refuse(hostPort: string): void {
    const target = parseOutboundTarget(hostPort);
    if (typeof target === 'string') throw new Error(`own listener: ${target}`);
    const hosts = this.#own.get(target.port) ?? new Set<string>();
    hosts.add(target.host);
    this.#own.set(target.port, hosts);
  }

  async request(req: OutboundRequest): Promise<Result> {
    try {
      return await this.#request(req);
    } catch (error) {
      // Not expected (every known failure is mapped below); the port promises never to throw.
      return fail('network', `request failed: ${describe(error)}`);
    }
  }

  async check(url: string): Promise<OutboundFailure | null> {
    const target = this.#judge(url);
    if (!target.ok) return target;
    if (isIP(target.host) !== 0) return null;
    // The name is resolved like the connection would resolve it, so a name that does not resolve (a typo,
    // "localhost.", an unknown TLD) is found before the caller commits to anything.
    return new Promise((resolve) => {
      let done = false;
      const finish = (result: OutboundFailure | null) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        resolve(result);
      };
      const timer = setTimeout(() => finish(fail('timeout', `${target.host} did not resolve within ${CHECK_RESOLVE_TIMEOUT_MS} ms`)), CHECK_RESOLVE_TIMEOUT_MS);
      this.#lookupFor(target)(target.host, { all: true }, (error) => {
        if (!error) finish(null);
        else if (error.code === REFUSED_ADDRESS) finish(fail('url_refused', error.message));
        else finish(fail('network', `${target.host} does not resolve: ${describe(error)}`));
      });
    });
  }

  /**
   * The checks that need no DNS: a valid absolute http(s) URL without credentials; not one of our own listeners; and
   * unless its host:port is allow-listed, https and (for an IP literal) a public address.
   */
  #judge(raw: string): Target | OutboundFailure {
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      return fail('url_refused', 'not a valid absolute URL');
    }
    if (url.protocol !== 'https:' && url.protocol !== 'http:') return fail('url_refused', `scheme ${url.protocol} is not allowed (https only)`);
    if (url.username !== '' || url.password !== '') return fail('url_refused', 'URLs with credentials are not allowed');
    const port = effectivePort(url);
    // URL keeps IPv6 literals in brackets ("[::1]"); node:http and isIP want them bare.
    const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
    if (this.#own.get(port)?.has(url.hostname) || (isIP(host) !== 0 && this.#isOwn(host, port))) {
      return fail('url_refused', `${url.hostname}:${port} is one of the gateway's own listeners, which are never called`);
    }
    const listed = this.#allow.has(`${url.hostname}:${port}`);
    if (!listed && isIP(host) !== 0) {
      const kind = addressClass(host);
      if (kind !== null) return fail('url_refused', `${host} is not a public address (${kind}); ${ALLOW_HINT}`);
    }
    if (!listed && url.protocol === 'http:') return fail('url_refused', `plain http is not allowed for ${url.hostname}:${port}; ${ALLOW_HINT}`);
    return { ok: true, url, host, port, listed };
  }

  /** Is (address, port) one of our own listeners? The port on any local address, or on the host it was registered with. */
  #isOwn(address: string, port: number): boolean {
    const hosts = this.#own.get(port);
    if (hosts === undefined) return false;
    const key = addressKey(address);
    if (key === undefined) return false;
    if (isLocalAddress(key)) return true;
    for (const host of hosts) {
      const bare = host.startsWith('[') ? host.slice(1, -1) : host;
      if (addressKey(bare) === key) return true;
    }
    return false;
  }

  /** A refusal message for the addresses `hostname` resolved to, or null when every one may be dialled. */
  #vet(target: Target, hostname: string, addresses: readonly LookupAddress[]): string | null {
    if (addresses.length === 0) return `${hostname} resolved to no address`;
    for (const { address } of addresses) {
      if (this.#isOwn(address, target.port))
        return `${hostname} resolves to ${address}, and ${address}:${target.port} is one of the gateway's own listeners, which are never called`;
      if (target.listed) continue;
      const kind = addressClass(address);
      if (kind !== null) return `${hostname} resolves to ${address}, not a public address (${kind}); ${ALLOW_HINT}`;
    }
    return null;
  }

  /**
   * The socket's resolver for `target`. Resolves every address (all: true) and refuses the host if ANY may not be
   * dialled, so happy-eyeballs cannot fall back to a refused one. Answers in whichever form net asked for.
   */
  #lookupFor(target: Target) {
    return (
      hostname: string,
      options: { family?: number | string; hints?: number; all?: boolean },
      callback: (error: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void,
    ): void => {
      const family = options.family === 'IPv4' ? 4 : options.family === 'IPv6' ? 6 : Number(options.family ?? 0) || 0;
      this.#resolve(hostname, { all: true, family, ...(options.hints === undefined ? {} : { hints: options.hints }) }, (error, addresses) => {
        if (error) return callback(error, '', 0);
        const refused = this.#vet(target, hostname, addresses);
        if (refused !== null) {
          const refusal: NodeJS.ErrnoException = new Error(refused);
          refusal.code = REFUSED_ADDRESS;
          return callback(refusal, '', 0);
        }
        if (options.all) return callback(null, addresses);
        const first = addresses[0]!;
        callback(null, first.address, first.family);
      });
    };
  }

  #request(req: OutboundRequest): Promise<Result> {
    const target = this.#judge(req.url);
    if (!target.ok) return Promise.resolve(target);
    const { url, host } = target;

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

    const options: RequestOptions & { ca?: string[] } = {
      ...(this.#ca && url.protocol === 'https:' ? { ca: this.#ca } : {}),
      protocol: url.protocol,
      hostname: host,
      port: target.port,
      path: `${url.pathname}${url.search}`,
      method,
      headers,
      // A fresh connection per request: a pooled socket must never carry a request past the address check.
      agent: false,
      lookup: this.#lookupFor(target),
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

// ---------------------------------------------------------------------------------------------------------------------
// Address classification (IANA IPv4/IPv6 special-purpose address registries).

type Cidr = readonly [prefix: bigint, bits: number];
type Range = readonly [cidr: Cidr, kind: string];

/** IPv4 ranges that are not globally reachable unicast, most specific first, with what they are. */
const IPV4_BLOCKED: readonly Range[] = [
  [v4('0.0.0.0', 32), 'unspecified'],
  [v4('0.0.0.0', 8), '"this network"'],
  [v4('10.0.0.0', 8), 'private'],
  [v4('100.64.0.0', 10), 'CGNAT shared'],
  [v4('127.0.0.0', 8), 'loopback'],
  [v4('169.254.0.0', 16), 'link-local'], // cloud metadata lives here
  [v4('172.16.0.0', 12), 'private'],
  [v4('192.0.0.0', 24), 'IETF protocol'],
  [v4('192.0.2.0', 24), 'documentation'],
  [v4('192.88.99.0', 24), '6to4 relay anycast'],
  [v4('192.168.0.0', 16), 'private'],
  [v4('198.18.0.0', 15), 'benchmarking'],
  [v4('198.51.100.0', 24), 'documentation'],
  [v4('203.0.113.0', 24), 'documentation'],
  [v4('224.0.0.0', 4), 'multicast'],
  [v4('255.255.255.255', 32), 'broadcast'],
  [v4('240.0.0.0', 4), 'reserved'],
];

/** IPv6 ranges outside 2000::/3 worth naming; the rest of that space is "non-global". */
const IPV6_NAMED: readonly Range[] = [
  [v6('::', 128), 'unspecified'],
  [v6('::1', 128), 'loopback'],
  [v6('100::', 64), 'discard-only'],
  [v6('64:ff9b:1::', 48), 'local-use NAT64'],
  [v6('fc00::', 7), 'unique-local (private)'],
  [v6('fe80::', 10), 'link-local'],
  [v6('fec0::', 10), 'site-local'],
  [v6('ff00::', 8), 'multicast'],
];

/** Inside 2000::/3 (the only global unicast space assigned), ranges that are still not public. */
const IPV6_BLOCKED_IN_GLOBAL: readonly Range[] = [
  [v6('2001:db8::', 32), 'documentation'],
  [v6('2001::', 23), 'IETF protocol'], // Teredo, benchmarking, ORCHID…
  [v6('3fff::', 20), 'documentation'], // RFC 9637
];

const IPV6_GLOBAL = v6('2000::', 3);
const IPV4_MAPPED = v6('::ffff:0:0', 96);
const IPV4_COMPATIBLE = v6('::', 96);
const NAT64_WELL_KNOWN = v6('64:ff9b::', 96);
const SIX_TO_FOUR = v6('2002::', 16);

/**
 * Null for a globally reachable unicast address, else what it is: "8.8.8.8", "2606:4700::1111" → null;
 * "127.0.0.1" → "loopback", "10.0.0.1" → "private", "169.254.169.254" → "link-local", "::ffff:127.0.0.1" →
 * "IPv4-mapped loopback", "64:ff9b::a00:1" → "NAT64-embedded private", "localhost" → "not an IP". IPv6 that embeds
 * an IPv4 address (mapped, NAT64, 6to4) is judged by the embedded address.
 */
export function addressClass(ip: string): string | null {
  const bare = ip.startsWith('[') && ip.endsWith(']') ? ip.slice(1, -1) : ip;
  // A zone id ("fe80::1%eth0") only exists on link-scoped addresses.
  if (bare.includes('%')) return 'scoped (zone id)';
  const kind = isIP(bare);
  if (kind === 4) return classV4(parseV4(bare));
  if (kind !== 6) return 'not an IP';
  const value = parseV6(bare);
  if (value === undefined) return 'not an IP';
  const low32 = value & 0xffff_ffffn;
  const embedded = (label: string, inner: string | null) => (inner === null ? null : `${label} ${inner}`);
  if (inCidr(value, IPV4_MAPPED, 128)) return embedded('IPv4-mapped', classV4(low32));
  if (inCidr(value, NAT64_WELL_KNOWN, 128)) return embedded('NAT64-embedded', classV4(low32));
  if (inCidr(value, SIX_TO_FOUR, 128)) return embedded('6to4-embedded', classV4((value >> 80n) & 0xffff_ffffn));
  const named = IPV6_NAMED.find(([cidr]) => inCidr(value, cidr, 128));
  if (named) return named[1];
  if (inCidr(value, IPV4_COMPATIBLE, 128)) return 'IPv4-compatible (deprecated)';
  if (!inCidr(value, IPV6_GLOBAL, 128)) return 'non-global';
  return IPV6_BLOCKED_IN_GLOBAL.find(([cidr]) => inCidr(value, cidr, 128))?.[1] ?? null;
}

/** True only for a globally reachable unicast address (addressClass is null); anything not an IP → false. */
export function isPublicAddress(ip: string): boolean {
  return addressClass(ip) === null;
}

function classV4(value: bigint): string | null {
  return IPV4_BLOCKED.find(([cidr]) => inCidr(value, cidr, 32))?.[1] ?? null;
}

/**
 * One spelling per address, IPv4-mapped IPv6 folded onto its IPv4 ("::ffff:7f00:1" and "127.0.0.1" → "4:2130706433");
 * undefined for a non-address.
 */
function addressKey(ip: string): string | undefined {
  const kind = isIP(ip);
  if (kind === 4) return `4:${parseV4(ip)}`;
  if (kind !== 6) return undefined;
  const value = parseV6(ip.split('%')[0]!);
  if (value === undefined) return undefined;
  return inCidr(value, IPV4_MAPPED, 128) ? `4:${value & 0xffff_ffffn}` : `6:${value}`;
}

/** An address that lands on this machine: loopback, unspecified, "this network", or one of its interfaces. */
function isLocalAddress(key: string): boolean {
  const [family, text] = key.split(':') as [string, string];
  const value = BigInt(text);
  if (family === '4' && (inCidr(value, v4('127.0.0.0', 8), 32) || inCidr(value, v4('0.0.0.0', 8), 32))) return true;
  if (family === '6' && (value === 0n || value === 1n)) return true;
  let interfaces: ReturnType<typeof networkInterfaces>;
  try {
    interfaces = networkInterfaces();
  } catch {
    return false; // some sandboxes refuse to list interfaces: loopback and unspecified were judged above
  }
  for (const entries of Object.values(interfaces)) {
    for (const entry of entries ?? []) if (addressKey(entry.address) === key) return true;
  }
  return false;
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
