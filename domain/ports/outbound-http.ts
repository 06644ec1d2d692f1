// Outbound HTTP to addresses users give us (upstream_url, webhook_url, later pull targets and domain checks).
// DECISIONS "Webhooks": https to public addresses only. The one opening is an explicit allow-list of
// development targets (SVC_OUTBOUND_ALLOW=host:port,…): a listed host and port may be plain http and resolve to a
// loopback/private address. The gateway's own listeners (its HTTP port, the embedded ledgers' JSON-RPC/WebSocket
// ports, the facilitator) are refused even when listed. The adapter enforces this at connection time (the address
// actually dialled is checked, so a DNS answer that changes between check and connect cannot slip through).
//
// Failures never throw: { ok: false, reason, message } with reason
// - "url_refused": not http(s), plain http or a non-public address for a target not on the allow-list, credentials
//   in the URL, one of the gateway's own listeners;
// - "timeout": no complete answer within timeoutMs (check: the name did not resolve in time);
// - "too_large": the response body exceeded maxResponseBytes;
// - "network": the name does not resolve (DNS failure), connection refused/reset, TLS failure.
// Redirects are not followed (the 3xx is the answer).

export interface OutboundRequest {
  /** e.g. "https://api.example.com/v1/weather?city=Paris" */
  url: string;
  /** e.g. "POST" */
  method: string;
  /** lower-case names, e.g. { "content-type": "application/json" } */
  headers?: Record<string, string>;
  body?: Uint8Array | string;
  /** default 15 000 */
  timeoutMs?: number;
  /** default 1 MiB */
  maxResponseBytes?: number;
}

export interface OutboundResponse {
  ok: true;
  /** e.g. 200 */
  status: number;
  /** lower-case names; repeated headers joined with ", " */
  headers: Record<string, string>;
  body: Uint8Array;
}

export interface OutboundFailure {
  ok: false;
  reason: 'url_refused' | 'timeout' | 'too_large' | 'network';
  message: string;
}

export interface OutboundHttp {
  request(request: OutboundRequest): Promise<OutboundResponse | OutboundFailure>;
  /**
   * Would `url` be dialled now? The same refusals as `request` (scheme, credentials, allow-list, addresses), after
   * resolving the host name like the connection would: a name that does not resolve is a failure ("network"), so a
   * caller can refuse before money moves. Null when allowed. `request` checks again at connect time.
   */
  check(url: string): Promise<OutboundFailure | null>;
}

/** One `host:port` of the allow-list or of the gateway's own listeners, in URL-normalised form. */
export interface OutboundTarget {
  /** WHATWG URL hostname: lower case, IDN in punycode, IPv4 in dotted quad, IPv6 compressed in brackets ("[::1]") */
  host: string;
  /** 1–65535 */
  port: number;
}

/**
 * Parses one allow-list entry: "localhost:3000", "127.0.0.1:8080", "[::1]:4000", "api.dev.internal:8443" →
 * { host, port } normalised as a URL would normalise it ("127.1:80" → { host: "127.0.0.1", port: 80 }), so an entry
 * matches every spelling of its URL and nothing else. Anything else (no port, port 0, a path, credentials, a
 * wildcard, a scheme) → a message saying what is wrong.
 */
export function parseOutboundTarget(entry: string): OutboundTarget | string {
  const match = /^(\[[0-9A-Fa-f:.]+\]|[^\s:/?#@[\]\\*]+):(\d{1,5})$/.exec(entry);
  if (!match) return `"${entry}" is not host:port (e.g. localhost:3000, 127.0.0.1:8080 or [::1]:4000)`;
  const port = Number(match[2]);
  if (port < 1 || port > 65_535) return `"${entry}": the port must be 1–65535`;
  let host: string;
  try {
    host = new URL(`http://${match[1]}/`).hostname;
  } catch {
    return `"${entry}": "${match[1]}" is not a valid host name or address`;
  }
  if (host === '') return `"${entry}": the host is empty`;
  return { host, port };
}

/** The port a URL dials: its own, else the scheme's default ("https://x/" → 443). */
export function effectivePort(url: URL): number {
  if (url.port !== '') return Number(url.port);
  return url.protocol === 'https:' ? 443 : 80;
}
