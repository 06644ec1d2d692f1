/**
 * How long a client may take to send a request to any of the installation's listeners (the gateway, the embedded
 * ledgers' JSON-RPC, the facilitator): its line and headers (`headersMs`), and all of it with the body (`requestMs`).
 * Past either the listener closes the connection — answering 408 `request_timeout` once the head has arrived — so a
 * client that never finishes holds no socket or handler (SVC_HTTP_HEADERS_TIMEOUT_MS, SVC_HTTP_REQUEST_TIMEOUT_MS).
 */
export interface RequestBounds {
  headersMs: number;
  requestMs: number;
}

export const DEFAULT_REQUEST_BOUNDS: RequestBounds = { headersMs: 10_000, requestMs: 30_000 };

/**
 * The options of Node's HTTP server (`http.createServer`) enforcing the bounds. Node checks them every 30 s by
 * default, so a 10 s bound took up to 40 s: here they are checked often enough to hold within a fraction of themselves.
 */
export function boundedServerOptions(bounds: RequestBounds): { headersTimeout: number; requestTimeout: number; connectionsCheckingInterval: number } {
  return {
    headersTimeout: bounds.headersMs,
    requestTimeout: bounds.requestMs,
    connectionsCheckingInterval: Math.max(25, Math.min(1000, Math.floor(bounds.headersMs / 4))),
  };
}
