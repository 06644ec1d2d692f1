// Outbound HTTP to addresses users give us (upstream_url, webhook_url, later pull targets and domain checks).
// DECISIONS "Webhooks": https only and public addresses only, unless the development setting allows loopback and
// private targets. The adapter enforces this at connection time (the address actually dialled is checked, so a
// DNS answer that changes between check and connect cannot slip through).
//
// Failures never throw: { ok: false, reason, message } with reason
// - "url_refused": not https (when required), credentials in the URL, a private/loopback/link-local/reserved address;
// - "timeout": no complete answer within timeoutMs;
// - "too_large": the response body exceeded maxResponseBytes;
// - "network": DNS failure, connection refused/reset, TLS failure.
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
   * Would `url` be dialled now? The same refusals as `request` (scheme, credentials, addresses — resolving the host
   * name), without connecting; null when allowed. `request` checks again at connect time.
   */
  check(url: string): Promise<OutboundFailure | null>;
}
