import { DEFAULT_TOLERANCE_SECONDS, verifyWebhookSignature, WEBHOOK_HEADERS } from '../../domain/webhooks/signature.ts';
import type { WebhookPayload } from '../../domain/webhooks/schema.ts';

// For receivers of the gateway's webhooks (DECISIONS "Webhooks"): check X-Svc-Signature over the raw body before
// trusting anything in it. Receivers using a Standard Webhooks library can verify webhook-signature with it instead.

export type { WebhookPayload };

/** A fetch `Headers`, Node's `req.headers`, or a plain object (any case of names). */
export type HeadersLike = Headers | Record<string, string | string[] | undefined>;

export class WebhookVerificationError extends Error {
  override readonly name = 'WebhookVerificationError';
}

function header(headers: HeadersLike, name: string): string | undefined {
  if (typeof (headers as Headers).get === 'function') return (headers as Headers).get(name) ?? undefined;
  for (const [key, value] of Object.entries(headers as Record<string, string | string[] | undefined>)) {
    if (key.toLowerCase() === name) return Array.isArray(value) ? value.join(', ') : value;
  }
  return undefined;
}

/**
 * Verifies one delivery as received — `rawBody` exactly as it arrived, before any JSON parsing — and returns its
 * payload `{ id, type, phase, created_at, data }`. Throws WebhookVerificationError when X-Svc-Signature is missing,
 * older or newer than `toleranceSeconds` (default 300), or not made with `secret` over these bytes.
 * Deliveries are at least once: deduplicate on `payload.id` (also X-Svc-Delivery and webhook-id).
 *
 * ```ts
 * app.post('/hooks', express.raw({ type: 'application/json' }), (req, res) => {
 *   const event = verifyWebhook(process.env.SVC_WEBHOOK_SECRET!, req.headers, req.body);
 *   res.sendStatus(204);
 * });
 * ```
 */
export function verifyWebhook(
  secret: string,
  headers: HeadersLike,
  rawBody: string | Uint8Array,
  options: { toleranceSeconds?: number; now?: Date } = {},
): WebhookPayload {
  const signature = header(headers, WEBHOOK_HEADERS.signature);
  if (!signature) throw new WebhookVerificationError('The X-Svc-Signature header is missing.');
  const now = Math.floor((options.now ?? new Date()).getTime() / 1000);
  const ok = verifyWebhookSignature({ secret, body: rawBody, header: signature, now, toleranceSeconds: options.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS });
  if (!ok) throw new WebhookVerificationError('The X-Svc-Signature does not match this secret and body, or its timestamp is outside the tolerance.');
  const text = typeof rawBody === 'string' ? rawBody : new TextDecoder().decode(rawBody);
  try {
    return JSON.parse(text) as WebhookPayload;
  } catch {
    throw new WebhookVerificationError('The signed body is not JSON.');
  }
}
