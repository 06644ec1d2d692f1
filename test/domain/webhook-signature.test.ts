import test from 'ava';
import { createHmac } from 'node:crypto';
import { newWebhookSecret, signWebhook, verifyWebhookSignature, WEBHOOK_SECRET_PATTERN } from '../../domain/webhooks/signature.ts';

const secret = 'whsec_3fQ9xK2mLp7VbN8cR1tZ4wY6uH0jE5sD';
const body = '{"id":"01JH3V6Q7W8X9Y0Z1A2B3C4D5E","type":"payment.settled","data":{"amount":"1.50"}}';
const timestamp = 1_767_225_600;
const id = '01JH3V6Q7W8X9Y0Z1A2B3C4D5E';

const sign = (overrides: Partial<Parameters<typeof signWebhook>[0]> = {}) => signWebhook({ secret, body, timestamp, id, ...overrides });
const header = (overrides: Partial<Parameters<typeof signWebhook>[0]> = {}) => sign(overrides)['x-svc-signature']!;

test('signWebhook returns the four headers, lower-case', (t) => {
  const headers = sign();
  t.deepEqual(Object.keys(headers).sort(), ['webhook-id', 'webhook-signature', 'webhook-timestamp', 'x-svc-signature']);
  t.is(headers['webhook-id'], id);
  t.is(headers['webhook-timestamp'], String(timestamp));
  t.regex(headers['x-svc-signature']!, /^t=1767225600,v1=[0-9a-f]{64}$/);
  t.regex(headers['webhook-signature']!, /^v1,[A-Za-z0-9+/]{43}=$/);
});

test('X-Svc-Signature is HMAC-SHA256(secret, "<t>.<body>") in hex, Stripe style', (t) => {
  const expected = createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex');
  t.is(header(), `t=${timestamp},v1=${expected}`);
});

test('webhook-signature follows Standard Webhooks: key = base64 decoding of the part after whsec_', (t) => {
  const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
  t.is(key.length, 24);
  const expected = createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64');
  t.is(sign()['webhook-signature'], `v1,${expected}`);
});

test('string and byte bodies sign the same', (t) => {
  t.deepEqual(sign({ body: new TextEncoder().encode(body) }), sign());
});

test('round trip verifies, at the edges of the tolerance too', (t) => {
  t.true(verifyWebhookSignature({ secret, body, header: header(), now: timestamp }));
  t.true(verifyWebhookSignature({ secret, body, header: header(), now: timestamp + 300 }));
  t.true(verifyWebhookSignature({ secret, body, header: header(), now: timestamp - 300 }));
  t.true(verifyWebhookSignature({ secret, body: Buffer.from(body), header: header(), now: timestamp + 5 }));
});

test('tampered body or wrong secret → false', (t) => {
  t.false(verifyWebhookSignature({ secret, body: body.replace('1.50', '9.50'), header: header(), now: timestamp }));
  t.false(verifyWebhookSignature({ secret, body: `${body} `, header: header(), now: timestamp }));
  t.false(verifyWebhookSignature({ secret: newWebhookSecret(), body, header: header(), now: timestamp }));
});

test('tampered timestamp → false (it is part of the signed content)', (t) => {
  const h = header().replace(`t=${timestamp}`, `t=${timestamp + 1}`);
  t.false(verifyWebhookSignature({ secret, body, header: h, now: timestamp }));
});

test('outside the tolerance → false, both directions', (t) => {
  t.false(verifyWebhookSignature({ secret, body, header: header(), now: timestamp + 301 }));
  t.false(verifyWebhookSignature({ secret, body, header: header(), now: timestamp - 301 }));
  t.false(verifyWebhookSignature({ secret, body, header: header(), now: timestamp + 86_400 }));
  t.true(verifyWebhookSignature({ secret, body, header: header(), now: timestamp + 3000, toleranceSeconds: 3600 }));
  t.false(verifyWebhookSignature({ secret, body, header: header(), now: timestamp + 61, toleranceSeconds: 60 }));
});

test('several v1 entries: any match is enough (secret rotation); unknown schemes ignored', (t) => {
  const good = header().split('v1=')[1]!;
  const other = header({ secret: newWebhookSecret() }).split('v1=')[1]!;
  t.true(verifyWebhookSignature({ secret, body, header: `t=${timestamp},v1=${other},v1=${good}`, now: timestamp }));
  t.true(verifyWebhookSignature({ secret, body, header: `t=${timestamp},v1=${good},v1=${other}`, now: timestamp }));
  t.true(verifyWebhookSignature({ secret, body, header: `t=${timestamp}, v0=abc, v1=${good}`, now: timestamp }));
  t.true(verifyWebhookSignature({ secret, body, header: `v1=${good.toUpperCase()},t=${timestamp}`, now: timestamp }));
  t.false(verifyWebhookSignature({ secret, body, header: `t=${timestamp},v1=${other},v1=${other}`, now: timestamp }));
});

test('malformed headers → false, never a throw', (t) => {
  const good = header().split('v1=')[1]!;
  const cases: unknown[] = [
    undefined,
    null,
    '',
    ',',
    'garbage',
    `v1=${good}`, // no timestamp
    `t=${timestamp}`, // no signature
    `t=${timestamp},v1=`,
    `t=${timestamp},v1=${good.slice(0, 63)}`, // odd length
    `t=${timestamp},v1=${good.slice(0, 62)}`, // too short
    `t=${timestamp},v1=${good}00`, // too long
    `t=${timestamp},v1=${'z'.repeat(64)}`, // not hex
    `t=${timestamp},v0=${good}`, // wrong scheme
    `t=abc,v1=${good}`,
    `t=-${timestamp},v1=${good}`,
    `t=${timestamp}.5,v1=${good}`,
    `t=1e9,v1=${good}`,
    `t=${timestamp},t=${timestamp},v1=${good}`, // two timestamps
    `t=${timestamp};v1=${good}`,
    `t=${timestamp},v1=${good},junk`,
    42,
    { t: timestamp },
  ];
  for (const h of cases) {
    t.false(verifyWebhookSignature({ secret, body, header: h as string, now: timestamp }), `header ${JSON.stringify(h)}`);
  }
  t.false(verifyWebhookSignature({ secret, body, header: header(), now: Number.NaN }));
  t.false(verifyWebhookSignature({ secret, body: 17 as unknown as string, header: header(), now: timestamp }));
  t.false(verifyWebhookSignature({ secret: undefined as unknown as string, body, header: header(), now: timestamp }));
});

test('signWebhook refuses a timestamp that is not whole unix seconds', (t) => {
  t.throws(() => sign({ timestamp: 1.5 }), { instanceOf: RangeError });
  t.throws(() => sign({ timestamp: -1 }), { instanceOf: RangeError });
  t.throws(() => sign({ timestamp: Date.now() * 1e6 }), { instanceOf: RangeError });
});

test('newWebhookSecret: whsec_ + 32 base62 characters, all different', (t) => {
  const secrets = Array.from({ length: 200 }, newWebhookSecret);
  for (const s of secrets) t.regex(s, /^whsec_[0-9A-Za-z]{32}$/);
  for (const s of secrets) t.regex(s, WEBHOOK_SECRET_PATTERN);
  t.is(new Set(secrets).size, secrets.length);
  // Every base62 character shows up across 6 400 draws (a biased or truncated alphabet would not).
  const seen = new Set(secrets.join('').replaceAll('whsec_', ''));
  t.is(seen.size, 62);
  t.false(WEBHOOK_SECRET_PATTERN.test('whsec_short'));
  t.false(WEBHOOK_SECRET_PATTERN.test(`whsec_${'+'.repeat(32)}`));
});

test('a fresh secret round-trips through both schemes', (t) => {
  const fresh = newWebhookSecret();
  const headers = signWebhook({ secret: fresh, body, timestamp, id });
  t.true(verifyWebhookSignature({ secret: fresh, body, header: headers['x-svc-signature'], now: timestamp }));
  const key = Buffer.from(fresh.slice(6), 'base64');
  t.is(key.length, 24);
  t.is(headers['webhook-signature'], `v1,${createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64')}`);
});
