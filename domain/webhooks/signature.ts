import { createHmac, randomInt, timingSafeEqual } from 'node:crypto';

// DECISIONS "Webhooks", STYLE habit 12: outbound webhooks are signed like Stripe
// (`X-Svc-Signature: t=<unix>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>`, 300 s tolerance, constant-time
// compare) and also carry the Standard Webhooks trio for receivers using those libraries.
//
// Keys:
// - X-Svc-Signature: the HMAC key is the UTF-8 bytes of the whole secret, prefix included ("whsec_…"), as Stripe does.
// - webhook-signature (Standard Webhooks): the spec's key is the base64 decoding of the part after "whsec_". Our
//   secrets are "whsec_" + 32 base62 characters; base62 is a subset of the base64 alphabet and 32 is a multiple of 4,
//   so that part is itself valid base64 and decodes to 24 bytes (the spec's minimum key size). We use exactly that
//   decoding, so `new Webhook("whsec_…").verify(...)` of the standardwebhooks libraries accepts our deliveries
//   unchanged; using the UTF-8 bytes instead would break every one of them.

/** Header names, lower-case like every header map of the outbound HTTP port. */
export const WEBHOOK_HEADERS = {
  signature: 'x-svc-signature',
  id: 'webhook-id',
  timestamp: 'webhook-timestamp',
  standardSignature: 'webhook-signature',
} as const;

export const DEFAULT_TOLERANCE_SECONDS = 300;

const SECRET_PREFIX = 'whsec_';
const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const SECRET_LENGTH = 32;

/** e.g. /^whsec_[0-9A-Za-z]{32}$/ matches "whsec_3fQ9xK2mLp7VbN8cR1tZ4wY6uH0jE5sD" */
export const WEBHOOK_SECRET_PATTERN = /^whsec_[0-9A-Za-z]{32}$/;

export interface SignWebhookInput {
  /** e.g. "whsec_3fQ9xK2mLp7VbN8cR1tZ4wY6uH0jE5sD" */
  secret: string;
  /** the exact bytes sent, e.g. '{"id":"01J…","type":"payment.settled",…}' */
  body: string | Uint8Array;
  /** unix seconds, e.g. 1767225600 */
  timestamp: number;
  /** the delivery id, e.g. "01JH3V6Q7W8X9Y0Z1A2B3C4D5E" */
  id: string;
}

/**
 * The four signature headers of one delivery, keyed by lower-case name:
 * `x-svc-signature`, `webhook-id`, `webhook-timestamp`, `webhook-signature`.
 * Throws a RangeError for a timestamp that is not a non-negative integer (a caller bug, not an input to tolerate).
 */
export function signWebhook(input: SignWebhookInput): Record<string, string> {
  const { secret, timestamp, id } = input;
  if (!Number.isSafeInteger(timestamp) || timestamp < 0) throw new RangeError('timestamp must be whole unix seconds');
  const body = toBytes(input.body);
  const t = String(timestamp);
  const standardKey = Buffer.from(secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret, 'base64');
  const standard = createHmac('sha256', standardKey).update(`${id}.${t}.`).update(body).digest('base64');
  return {
    [WEBHOOK_HEADERS.signature]: `t=${t},v1=${svcDigest(secret, t, body).toString('hex')}`,
    [WEBHOOK_HEADERS.id]: id,
    [WEBHOOK_HEADERS.timestamp]: t,
    [WEBHOOK_HEADERS.standardSignature]: `v1,${standard}`,
  };
}

export interface VerifyWebhookInput {
  secret: string;
  /** the raw body as received, before any JSON parsing */
  body: string | Uint8Array;
  /** the X-Svc-Signature value, e.g. "t=1767225600,v1=5257a869…"; absent → false */
  header: string | null | undefined;
  /** unix seconds */
  now: number;
  /** default 300 */
  toleranceSeconds?: number;
}

/**
 * True when `header` carries a timestamp within `toleranceSeconds` of `now` (either side: a timestamp from the
 * future is as suspect as a stale one) and at least one `v1=` entry matching the body. Several `v1=` entries are
 * allowed (secret rotation); other schemes (`v0=`…) are ignored. Never throws: anything malformed is false.
 */
export function verifyWebhookSignature(input: VerifyWebhookInput): boolean {
  try {
    const { secret, header, now } = input;
    const tolerance = input.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS;
    if (typeof header !== 'string' || typeof secret !== 'string' || !Number.isFinite(now) || !(tolerance >= 0)) return false;

    let t: string | undefined;
    const candidates: Buffer[] = [];
    for (const part of header.split(',')) {
      const eq = part.indexOf('=');
      if (eq < 0) return false;
      const key = part.slice(0, eq).trim();
      const value = part.slice(eq + 1).trim();
      if (key === 't') {
        if (t !== undefined || !/^\d{1,15}$/.test(value)) return false;
        t = value;
      } else if (key === 'v1') {
        if (/^[0-9a-fA-F]{64}$/.test(value)) candidates.push(Buffer.from(value, 'hex'));
      }
    }
    if (t === undefined || candidates.length === 0) return false;
    if (Math.abs(now - Number(t)) > tolerance) return false;

    const expected = svcDigest(secret, t, toBytes(input.body));
    let match = false;
    // Compare against every candidate (no early exit) so timing does not reveal which entry matched.
    for (const candidate of candidates) match = timingSafeEqual(candidate, expected) || match;
    return match;
  } catch {
    return false;
  }
}

/** "whsec_" + 32 base62 characters (~190 bits); randomInt draws without modulo bias. */
export function newWebhookSecret(): string {
  let out = SECRET_PREFIX;
  for (let i = 0; i < SECRET_LENGTH; i++) out += BASE62[randomInt(BASE62.length)];
  return out;
}

function svcDigest(secret: string, t: string, body: Uint8Array): Buffer {
  return createHmac('sha256', secret).update(`${t}.`).update(body).digest();
}

function toBytes(body: string | Uint8Array): Uint8Array {
  return typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
}
