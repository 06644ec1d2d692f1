// Request-bound payments: a payment names, in its memo, the one request it pays for — method, path, the query the
// seller sees (every parameter but the paywall's own `network`, sorted) and the SHA-256 of the body — so a payment made
// for one resource cannot be spent on another (the "cross-resource substitution" of paid HTTP). The buyer kit
// (svc-gateway/client/pay) computes it from the request it sends; the x402 scheme client (svc-gateway/x402) reads it
// from the 402's `svc.request-binding` extension; on the MPP rail the challenge's externalId is the binding memo itself
// (domain/paywall/mpp.ts), which stock clients write as their memo; the paywall page's wallet transaction carries the
// binding of the page's GET. The paywall recomputes the digest from the request it got and compares
// (domain/facilitator/verify.ts requestBindingOf). WebCrypto only: the client entry carries this file.

/** The memo text's prefix; what follows is the digest (64 hex) and a nonce keeping two payments of one request apart. */
export const REQUEST_BINDING_PREFIX = 'svc-req:v1:';
/** The PaymentRequired extension that states the digest of the request a 402 answered. */
export const REQUEST_BINDING_EXTENSION = 'svc.request-binding';

const hex = (bytes: ArrayBuffer) => Array.from(new Uint8Array(bytes), (b) => b.toString(16).padStart(2, '0')).join('');
const sha256 = async (bytes: Uint8Array) => hex(await globalThis.crypto.subtle.digest('SHA-256', bytes as Uint8Array<ArrayBuffer>));

export interface BoundRequest {
  method: string;
  /** the URL's path as sent, e.g. "/x/weather" */
  path: string;
  /** the query string without "?" (may hold `network`, which is left out) */
  query: string;
  body: Uint8Array | undefined;
}

/** lowercase hex SHA-256 of the canonical request: "svc-req:v1\nMETHOD\npath\nsorted query\nsha256(body)". */
export async function requestDigest(request: BoundRequest): Promise<string> {
  const params = new URLSearchParams(request.query);
  params.delete('network');
  params.sort();
  const body = await sha256(request.body ?? new Uint8Array());
  return sha256(new TextEncoder().encode(['svc-req:v1', request.method.toUpperCase(), request.path, params.toString(), body].join('\n')));
}

/**
 * The memo binding a payment to a request of this digest, with a nonce (two payments of one request differ): random,
 * or given (hex, 1–64 digits) — an MPP challenge's externalId is this memo with a nonce derived from the challenge.
 */
export function bindingMemo(digest: string, nonce?: string): string {
  return `${REQUEST_BINDING_PREFIX}${digest}:${nonce ?? hex(globalThis.crypto.getRandomValues(new Uint8Array(8)).buffer as ArrayBuffer)}`;
}

/** The digest a memo binds to; undefined when the memo is no binding (a stock client's nonce, a reference, …). */
export function boundDigestOf(memo: string): string | undefined {
  if (!memo.startsWith(REQUEST_BINDING_PREFIX)) return undefined;
  const m = /^([0-9a-f]{64})(?::[0-9a-f]{1,64})?$/.exec(memo.slice(REQUEST_BINDING_PREFIX.length));
  // a malformed binding binds to nothing we could match: treated as bound elsewhere
  return m ? m[1]! : '';
}
