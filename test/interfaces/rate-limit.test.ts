import anyTest, { type ExecutionContext, type TestFn } from 'ava';
import { issueKey, linkBody, recordAgent, startTestApp, type TestApp } from '../support/app.ts';
import { TestClock } from '../support/clock.ts';
import { DEFAULT_LIMITS, LOCAL_SHARE, RateLimiter, resolveLimits } from '../../domain/policies/rate-limit.ts';
import type { RateLimitStore, RateWindowKey } from '../../domain/ports/policy-store.ts';
import { MikroOrmPolicyStore } from '../../adapters/store/policy-store.ts';
import { ConfigError, loadConfig } from '../../interfaces/config.ts';
import { appRouter } from '../../interfaces/trpc/router.ts';
import type { Meta } from '../../interfaces/trpc/init.ts';

// hosted-api §8 and DECISIONS "Wire conventions": sliding-window log per (api key, bucket) over 60 s, shared by every
// process on the database; RateLimit-* headers on every /v1 response; 429 rate_limited with retry_after_ms/Retry-After.

interface Ctx {
  /**
   * meta overridden to 10, on a clock nobody moves (shared with b): the two-instance tests count every hit as in the
   * window however long a loaded machine takes to send them
   */
  a: TestApp;
  /** second instance on a's database, same override, same clock */
  b: TestApp;
  /** third instance on the same database with the spec defaults and a movable clock */
  c: TestApp;
  clock: TestClock;
  /** fourth instance with the spec defaults on a clock nobody moves: exact counts hold however slow the machine */
  d: TestApp;
}

const test = anyTest as TestFn<Ctx>;
/** meta 10 for the two-instance tests; agents.read 100 for one where in-memory admission (25% of the limit) matters */
const META_10 = '{"meta":10,"agents.read":100}';
// these tests count rate-limit windows with 20 requests of one key at once: the per-principal cap on concurrent list
// requests (so no key starves the others; default SVC_DB_HEAVY_PER_PRINCIPAL) is another policy, raised out of the way
// here
const MANY_LISTS = { SVC_DB_HEAVY_PER_PRINCIPAL: '100', SVC_DB_HEAVY_POOL: '8' };

test.before(async (t) => {
  // one clock for both instances: their shared window is computed from the times each of them reads
  const still = new TestClock('2034-01-01T00:00:00.000Z');
  const a = await startTestApp({ env: { SVC_RATE_LIMITS: META_10, SVC_JOBS: 'off', ...MANY_LISTS }, appOptions: { clock: still } });
  const started: TestApp[] = [];
  try {
    started.push(
      await startTestApp({ databaseUrl: a.database.url, env: { SVC_RATE_LIMITS: META_10, SVC_JOBS: 'off', ...MANY_LISTS }, appOptions: { clock: still } }),
    );
    const clock = new TestClock('2030-01-01T00:00:00.000Z');
    started.push(await startTestApp({ databaseUrl: a.database.url, env: { SVC_JOBS: 'off', ...MANY_LISTS }, appOptions: { clock } }));
    started.push(
      await startTestApp({
        databaseUrl: a.database.url,
        env: { SVC_JOBS: 'off', ...MANY_LISTS },
        appOptions: { clock: new TestClock('2032-01-01T00:00:00.000Z') },
      }),
    );
    t.context = { a, b: started[0]!, c: started[1]!, clock, d: started[2]! };
  } catch (e) {
    for (const s of started.reverse()) await s.close();
    await a.close();
    throw e;
  }
});

interface Res {
  status: number;
  headers: Headers;
  body: any;
}

async function get(app: TestApp, path: string, key?: string): Promise<Res> {
  const res = await fetch(`${app.url}${path}`, { headers: key ? { authorization: `Bearer ${key}` } : {} });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : null };
}

const RL = ['ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset', 'ratelimit-policy'] as const;

function hasRateLimitHeaders(t: ExecutionContext, res: { status: number; headers: Headers }, what: string): void {
  for (const h of RL) t.truthy(res.headers.get(h), `${what} (${res.status}) carries ${h}`);
  const limit = Number(res.headers.get('ratelimit-limit'));
  t.true(Number.isInteger(limit) && limit > 0, what);
  t.is(res.headers.get('ratelimit-policy'), `${limit};w=60`, what);
  const remaining = Number(res.headers.get('ratelimit-remaining'));
  t.true(Number.isInteger(remaining) && remaining >= 0 && remaining <= limit, what);
  const reset = Number(res.headers.get('ratelimit-reset'));
  t.true(Number.isInteger(reset) && reset >= 0 && reset <= 60, what);
}

function expect429(t: ExecutionContext, res: Res, bucket: string, limit: number): number {
  t.is(res.status, 429, JSON.stringify(res.body));
  t.is(res.body.error, 'rate_limited');
  t.is(res.body.request_id, res.headers.get('x-svc-request-id'));
  const ms = res.body.details?.retry_after_ms;
  t.true(Number.isInteger(ms) && ms > 0 && ms <= 60_000, `retry_after_ms ${ms}`);
  t.is(res.body.retry_after_ms, ms, 'hosted-api §7: retry_after_ms in the body too, beside details');
  t.like(res.body.details, { bucket, limit });
  t.is(res.headers.get('retry-after'), String(Math.ceil(ms / 1000)), 'Retry-After is retry_after_ms in whole seconds, rounded up');
  t.is(res.headers.get('ratelimit-remaining'), '0');
  t.is(res.headers.get('ratelimit-limit'), String(limit));
  t.is(res.headers.get('ratelimit-reset'), String(Math.ceil(ms / 1000)));
  return ms;
}

test('the defaults are the table of hosted-api §8 plus default 600', (t) => {
  t.like(DEFAULT_LIMITS, {
    prepare: 600,
    submit: 600,
    'receipts.write': 1200,
    'receipts.read': 600,
    'events.read': 600,
    'agents.read': 300,
    'indexer.read': 60,
    meta: 60,
    default: 600,
  });
  t.deepEqual(loadConfig({ SVC_RATE_LIMITS: '{"meta":5}' }).rateLimits, { meta: 5 });
  t.deepEqual(loadConfig({}).rateLimits, {});
  t.throws(() => loadConfig({ SVC_RATE_LIMITS: '{"nope":5}' }), { instanceOf: ConfigError });
  t.throws(() => loadConfig({ SVC_RATE_LIMITS: '{"meta":0}' }), { instanceOf: ConfigError });
  t.throws(() => loadConfig({ SVC_RATE_LIMITS: 'meta=5' }), { instanceOf: ConfigError });
});

test('routes are limited by their §8 bucket; overrides change only the named bucket', async (t) => {
  const { a, c } = t.context;
  const key = await issueKey(c);
  const { mint } = await recordAgent(c, key);
  const expect: [string, number][] = [
    ['/v1/health', 60],
    ['/v1/version', 60],
    ['/v1/events', 600],
    [`/v1/agents/${mint}`, 300],
    ['/v1/payment-links', 600],
    ['/v1/metrics/usage', 600],
    // §8's meta bucket is health and version only: these reads are in default
    ['/v1/seller/facilitator', 600],
    ['/v1/buyer/networks', 600],
    ['/v1/buyer/currency', 600],
  ];
  for (const [path, limit] of expect) {
    const res = await get(c, path, key);
    t.is(res.status, 200, `${path}: ${JSON.stringify(res.body)}`);
    t.is(res.headers.get('ratelimit-limit'), String(limit), path);
    t.is(res.headers.get('ratelimit-policy'), `${limit};w=60`, path);
  }
  // SVC_RATE_LIMITS='{"meta":10}' on a: meta is 10, the others keep the spec's numbers
  const aKey = await issueKey(a);
  t.is((await get(a, '/v1/health', aKey)).headers.get('ratelimit-limit'), '10');
  t.is((await get(a, '/v1/events', aKey)).headers.get('ratelimit-limit'), '600');
  t.is((await get(a, '/v1/payment-links', aKey)).headers.get('ratelimit-limit'), '600');
  t.is((await get(a, '/v1/agents/nope', aKey)).headers.get('ratelimit-limit'), '100');
  // the tRPC door of a formerly-meta read draws on default too
  const viaTrpc = await fetch(`${a.url}/trpc/buyer.networks`, { headers: { authorization: `Bearer ${aKey}` } });
  t.is(viaTrpc.status, 200);
  t.is(viaTrpc.headers.get('ratelimit-limit'), '600');
});

test('hosted-api §8: the meta bucket holds GET /v1/health and GET /v1/version and nothing else', (t) => {
  const procedures = appRouter._def.procedures as unknown as Record<string, { _def: { meta?: Meta } }>;
  const meta = Object.entries(procedures)
    .filter(([, p]) => p._def.meta?.bucket === 'meta')
    .map(([path, p]) => `${path} ${p._def.meta?.openapi?.path}`)
    .sort();
  t.deepEqual(meta, ['health /v1/health', 'version /v1/version']);
});

test('default bucket: 600 sequential requests are admitted with remaining 599…0, the 601st is 429 rate_limited', async (t) => {
  const { d } = t.context;
  const key = await issueKey(d);
  const remaining: number[] = [];
  for (let i = 0; i < 600; i++) {
    const r = await get(d, '/v1/payment-links', key);
    if (r.status !== 200) {
      t.fail(`request ${i + 1}: ${r.status} ${JSON.stringify(r.body)}`);
      return;
    }
    t.is(r.headers.get('ratelimit-limit'), '600');
    t.is(r.headers.get('ratelimit-policy'), '600;w=60');
    t.is(r.headers.get('retry-after'), null);
    remaining.push(Number(r.headers.get('ratelimit-remaining')));
  }
  t.deepEqual(
    remaining,
    Array.from({ length: 600 }, (_, i) => 599 - i),
    'RateLimit-Remaining counts down by one',
  );
  const refused = await get(d, '/v1/payment-links', key);
  const ms = expect429(t, refused, 'default', 600);
  // the oldest hit is the first request: it frees its slot 60 s after it was made, and d's clock has not moved since
  t.is(ms, 60_000);

  // other buckets and other keys are not affected
  t.is((await get(d, '/v1/events', key)).status, 200);
  t.is((await get(d, '/v1/payment-links', await issueKey(d))).status, 200);
  // refused requests do not take a slot: it is still refused, not pushed further out
  const again = await get(d, '/v1/payment-links', key);
  t.is(again.status, 429);
  t.true(again.body.details.retry_after_ms <= ms);
});

test('default bucket under concurrency: batches of 20 admit exactly 600, RateLimit-Remaining never over-promises', async (t) => {
  const { d } = t.context;
  const key = await issueKey(d);
  const remaining: number[] = [];
  const batches: string[] = [];
  for (let batch = 0; batch < 30; batch++) {
    const results = await Promise.all(Array.from({ length: 20 }, () => get(d, '/v1/payment-links', key)));
    for (const r of results) {
      t.is(r.status, 200);
      t.is(r.headers.get('ratelimit-limit'), '600');
      remaining.push(Number(r.headers.get('ratelimit-remaining')));
    }
    batches.push(results.map((r) => r.headers.get('ratelimit-remaining')).join(','));
  }
  t.is(remaining.length, 600);
  // Far from the limit a process admits from memory and may report fewer slots than are left (never more); from a
  // quarter of the limit on, every decision is the store's exact one, each remaining value exactly once.
  const sorted = [...remaining].sort((x, y) => y - x);
  t.deepEqual(
    sorted.filter((v, i) => v > 599 - i),
    [],
    `no response promised more slots than were left; batches:\n${batches.join('\n')}`,
  );
  t.deepEqual(
    sorted.filter((v) => v < 450).reverse(),
    Array.from({ length: 450 }, (_, i) => i),
    'exact decisions: 449…0 once each',
  );
  // once the window is full every answer is the store's exact one: remaining 0, then refused
  const more = await Promise.all(Array.from({ length: 10 }, () => get(d, '/v1/payment-links', key)));
  for (const r of more) expect429(t, r, 'default', 600);
});

test('sliding window on a movable clock: the next request is admitted exactly when the oldest hit ages out', async (t) => {
  const { c, clock } = t.context;
  const key = await issueKey(c);
  const t0 = clock.now().getTime();
  // 30 batches of 20 concurrent requests, 100 ms apart: hits at t0, t0+100, …, t0+2900
  for (let batch = 0; batch < 30; batch++) {
    clock.set(t0 + batch * 100);
    const results = await Promise.all(Array.from({ length: 20 }, () => get(c, '/v1/payment-links', key)));
    t.true(results.every((r) => r.status === 200));
    if (batch === 0) t.true(results.every((r) => r.headers.get('ratelimit-reset') === '60'));
  }
  clock.set(t0 + 2950);
  t.is(expect429(t, await get(c, '/v1/payment-links', key), 'default', 600), 60_000 - 2950, 'retry_after_ms is exact');

  clock.set(t0 + 59_999);
  t.is(expect429(t, await get(c, '/v1/payment-links', key), 'default', 600), 1, 'one millisecond before the oldest hit ages out');

  // the first batch (20 hits at t0) ages out at t0 + 60 s: exactly 20 slots free up
  clock.set(t0 + 60_000);
  const admitted = await get(c, '/v1/payment-links', key);
  t.is(admitted.status, 200, JSON.stringify(admitted.body));
  t.is(admitted.headers.get('ratelimit-remaining'), '19');
  for (let i = 18; i >= 0; i--) {
    const r = await get(c, '/v1/payment-links', key);
    t.is(r.status, 200);
    t.is(r.headers.get('ratelimit-remaining'), String(i));
  }
  t.is(expect429(t, await get(c, '/v1/payment-links', key), 'default', 600), 100, 'the next slot frees when the t0+100 batch ages out');
  clock.set(t0 + 60_100);
  t.is((await get(c, '/v1/payment-links', key)).status, 200);
});

async function admittedAcross(apps: TestApp[], key: string, n: number, concurrent: boolean): Promise<number> {
  const call = (i: number) => get(apps[i % apps.length]!, '/v1/health', key);
  let results: Res[];
  if (concurrent) results = await Promise.all(Array.from({ length: n }, (_, i) => call(i)));
  else {
    results = [];
    for (let i = 0; i < n; i++) results.push(await call(i));
  }
  for (const r of results) if (r.status !== 200 && r.status !== 429) throw new Error(`unexpected ${r.status} ${JSON.stringify(r.body)}`);
  return results.filter((r) => r.status === 200).length;
}

/**
 * The periodic exchange (every 250 ms), run now instead of waited for: a sends its hits, b sends its own and reads a's,
 * a reads b's.
 */
async function exchange(a: TestApp, b: TestApp): Promise<void> {
  await a.services.rateLimiter.sync();
  await b.services.rateLimiter.sync();
  await a.services.rateLimiter.sync();
}

test('two instances share the window: a key is not given twice the limit (alternating)', async (t) => {
  const { a, b } = t.context;
  const key = await issueKey(a);
  const admitted = await admittedAcross([a, b], key, 40, false);
  t.log(`alternating: ${admitted} of 40 admitted with meta=10 on 2 instances`);
  // documented bound: limit + (N − 1) × LOCAL_SHARE × limit
  t.true(admitted >= 10 && admitted <= 10 + Math.floor(LOCAL_SHARE * 10), `admitted ${admitted}`);
  t.true(admitted < 20);
  // both instances now refuse the key, once they have exchanged their counts
  await exchange(a, b);
  t.is((await get(a, '/v1/health', key)).status, 429);
  t.is((await get(b, '/v1/health', key)).status, 429);
});

test('two instances share the window: a concurrent burst of 40 (20 per instance)', async (t) => {
  const { a, b } = t.context;
  const key = await issueKey(a);
  const admitted = await admittedAcross([a, b], key, 40, true);
  t.log(`burst: ${admitted} of 40 admitted with meta=10 on 2 instances`);
  t.true(admitted >= 10 && admitted <= 10 + Math.floor(LOCAL_SHARE * 10), `admitted ${admitted}`);
  t.true(admitted < 20);
  // once the exchange has run, a second burst on both is refused entirely
  await exchange(a, b);
  t.is(await admittedAcross([a, b], key, 10, true), 0);
});

test('two instances, waves of concurrent requests across several exchanges: within limit + 25% of the limit', async (t) => {
  const { a, b } = t.context;
  const key = await issueKey(a);
  const { mint } = await recordAgent(a, key);
  let admitted = 0;
  for (let wave = 0; wave < 6; wave++) {
    const results = await Promise.all(Array.from({ length: 40 }, (_, i) => get(i % 2 ? b : a, `/v1/agents/${mint}`, key)));
    for (const r of results) t.true(r.status === 200 || r.status === 429, String(r.status));
    admitted += results.filter((r) => r.status === 200).length;
    await exchange(a, b);
  }
  t.log(`waves: ${admitted} of 240 admitted with agents.read=100 on 2 instances`);
  t.true(admitted >= 100, `admitted ${admitted}`);
  t.true(admitted <= 100 + LOCAL_SHARE * 100, `admitted ${admitted}: over the documented bound`);
});

test('a warm key on one instance does not let the other overshoot (shared log after an exchange)', async (t) => {
  const { a, b } = t.context;
  const key = await issueKey(a);
  t.is(await admittedAcross([a], key, 6, false), 6);
  await exchange(a, b);
  t.is(await admittedAcross([b], key, 10, false), 4, 'b sees the 6 hits of a');
  t.is(await admittedAcross([a], key, 5, false), 0);
});

test('every /v1 response carries the RateLimit-* headers, errors included', async (t) => {
  const { a } = t.context;
  const key = await issueKey(a);
  const { mint } = await recordAgent(a, key);
  const send = async (method: string, path: string, o: { key?: string; body?: unknown } = {}) => {
    const headers: Record<string, string> = {};
    if (o.key) headers.authorization = `Bearer ${o.key}`;
    if (o.body !== undefined) headers['content-type'] = 'application/json';
    const res = await fetch(`${a.url}${path}`, { method, headers, body: o.body === undefined ? undefined : JSON.stringify(o.body) });
    await res.arrayBuffer();
    return { status: res.status, headers: res.headers };
  };
  const cases: [string, number, Promise<{ status: number; headers: Headers }>][] = [
    ['GET health', 200, send('GET', '/v1/health', { key })],
    ['POST create', 201, send('POST', '/v1/payment-links', { key, body: linkBody(mint, { id: 'rl-headers' }) })],
    ['missing key', 401, send('GET', '/v1/payment-links')],
    ['invalid key', 401, send('GET', '/v1/payment-links', { key: `svc_test_${'A'.repeat(32)}` })],
    ['malformed key', 401, send('GET', '/v1/events', { key: 'nope' })],
    ['unknown link', 404, send('GET', '/v1/payment-links/does-not-exist', { key })],
    ['unknown event', 404, send('GET', '/v1/events/evt_nope', { key })],
    ['bad body', 400, send('POST', '/v1/payment-links', { key, body: { label: 1 } })],
    ['admin only', 403, send('GET', '/v1/admin/api-keys', { key })],
  ];
  for (const [what, status, p] of cases) {
    const res = await p;
    t.is(res.status, status, what);
    hasRateLimitHeaders(t, res, what);
  }
  const del = await send('DELETE', '/v1/payment-links/rl-headers', { key });
  t.is(del.status, 204);
  hasRateLimitHeaders(t, del, 'DELETE 204');
});

test('every /v1 response carries the RateLimit-* headers: bodies the framework refuses, unknown routes', async (t) => {
  const { a } = t.context;
  const key = await issueKey(a);
  const auth = { authorization: `Bearer ${key}` };
  const json = { 'content-type': 'application/json' };
  const huge = JSON.stringify({ x: 'a'.repeat(1024 * 1024 + 10) });
  const send = async (method: string, path: string, init: RequestInit) => {
    const res = await fetch(`${a.url}${path}`, { ...init, method });
    return { status: res.status, headers: res.headers, body: (await res.json()) as any };
  };
  const expectEnvelope = (res: Res, status: number, code: string, what: string) => {
    t.is(res.status, status, `${what}: ${JSON.stringify(res.body)}`);
    t.is(res.body.error, code, what);
    t.is(res.body.request_id, res.headers.get('x-svc-request-id'), what);
    hasRateLimitHeaders(t, res, what);
  };

  // a known route whose body fastify refuses before the procedure: counted in the key's window of that route
  const keyed: [string, RequestInit, number, string][] = [
    ['malformed JSON', { headers: { ...auth, ...json }, body: '{"label":' }, 400, 'invalid_request'],
    ['body over 1 MiB', { headers: { ...auth, ...json }, body: huge }, 413, 'payload_too_large'],
    ['malformed JSON again', { headers: { ...auth, ...json }, body: '[' }, 400, 'invalid_request'],
  ];
  let remaining = 600;
  for (const [what, init, status, code] of keyed) {
    const res = await send('POST', '/v1/payment-links', init);
    expectEnvelope(res, status, code, what);
    t.is(res.headers.get('ratelimit-limit'), '600', what);
    const now = Number(res.headers.get('ratelimit-remaining'));
    t.is(now, remaining - 1, `${what}: one more hit in the key's window`);
    remaining = now;
  }
  const usage = await get(a, '/v1/payment-links', key);
  t.is(usage.headers.get('ratelimit-remaining'), String(remaining - 1), 'the same window the procedure uses');

  // without a valid key: the client IP's window, the answer unchanged
  expectEnvelope(await send('POST', '/v1/payment-links', { headers: json, body: '{"label":' }), 400, 'invalid_request', 'malformed JSON, no key');

  // unknown /v1 routes (answered by the not-found handler)
  for (const [what, method, path, init] of [
    ['unknown route', 'GET', '/v1/no-such-route', { headers: auth }],
    ['unknown route, no key', 'GET', '/v1/no-such-route', {}],
    ['wrong method', 'POST', '/v1/health', { headers: auth }],
    ['deep unknown path', 'POST', '/v1/payment-links/a/b/c', { headers: { ...auth, ...json }, body: '{}' }],
  ] as [string, string, string, RequestInit][]) {
    expectEnvelope(await send(method, path, init), 404, 'not_found', what);
  }
});

// A path fastify's router cannot decode is answered by `frameworkErrors` in interfaces/app.ts before routing; it still
// counts against the client IP's window and carries the headers.
test('every /v1 response carries the RateLimit-* headers: a malformed percent-encoded path (frameworkErrors)', async (t) => {
  const { a } = t.context;
  const key = await issueKey(a);
  const res = await fetch(`${a.url}/v1/payment-links/%E0%A4%A`, { headers: { authorization: `Bearer ${key}` } });
  t.is(res.status, 400);
  t.is((await res.json()).error, 'invalid_request');
  hasRateLimitHeaders(t, res, 'bad percent-encoding');
});

test('tRPC queries are limited in the same window and answer with the same headers', async (t) => {
  const { a } = t.context;
  const key = await issueKey(a);
  const trpc = async (path: string, k?: string) => {
    const res = await fetch(`${a.url}/trpc/${path}`, { headers: k ? { authorization: `Bearer ${k}` } : {} });
    return { status: res.status, headers: res.headers, body: (await res.json()) as any };
  };
  const first = await trpc('health', key);
  t.is(first.status, 200, JSON.stringify(first.body));
  hasRateLimitHeaders(t, first, 'tRPC health');
  t.is(first.headers.get('ratelimit-limit'), '10');
  t.is(first.headers.get('ratelimit-remaining'), '9');

  // REST and tRPC draw on one window per (key, bucket)
  for (let i = 0; i < 4; i++) t.is((await get(a, '/v1/version', key)).status, 200);
  const next = await trpc('version', key);
  t.is(next.status, 200);
  t.is(next.headers.get('ratelimit-remaining'), '4');
  for (let i = 0; i < 4; i++) t.is((await trpc('health', key)).status, 200);

  const refused = await trpc('health', key);
  t.is(refused.status, 429, JSON.stringify(refused.body));
  t.is(refused.body.error.data.code, 'rate_limited');
  const ms = refused.body.error.data.details.retry_after_ms;
  t.true(ms > 0 && ms <= 60_000);
  t.is(refused.headers.get('retry-after'), String(Math.ceil(ms / 1000)));
  hasRateLimitHeaders(t, refused, 'tRPC 429');
  t.is((await get(a, '/v1/health', key)).status, 429, 'and REST is refused as well');

  const anonymous = await trpc('health');
  t.is(anonymous.status, 401);
  hasRateLimitHeaders(t, anonymous, 'tRPC 401');
});

/**
 * An in-memory stand-in for the shared log with the semantics of svc_rate_hit / sync: each statement takes effect
 * when it runs. `sync`, and `hit` when it carries pending hits, run only when the test releases them; other hits run
 * at once — so the test orders the statements deterministically.
 */
class GatedStore implements RateLimitStore {
  readonly log: number[] = [];
  private gates: (() => void)[] = [];

  constructor(others: number, at: number) {
    for (let i = 0; i < others; i++) this.log.push(at);
  }

  private held(): Promise<void> {
    return new Promise<void>((resolve) => this.gates.push(resolve));
  }

  private count(cutoff: number): number {
    return this.log.filter((x) => x > cutoff).length;
  }

  async hit({ limit, windowMs }: RateWindowKey, { now, pending }: { now: Date; pending: Date[] }) {
    if (pending.length) await this.held();
    for (const p of pending) this.log.push(p.getTime());
    const used = this.count(now.getTime() - windowMs);
    if (used < limit) this.log.push(now.getTime());
    return { allowed: used < limit, used: Math.min(used + 1, limit), oldest: new Date(Math.min(...this.log)) };
  }

  async sync(entries: { subject: string; bucket: string; pending: Date[] }[], windowMs: number, now: Date) {
    await this.held();
    for (const e of entries) for (const p of e.pending) this.log.push(p.getTime());
    const used = this.count(now.getTime() - windowMs);
    return entries.map((e) => ({ subject: e.subject, bucket: e.bucket, used, oldest: new Date(Math.min(...this.log)) }));
  }

  release(): void {
    for (const open of this.gates.splice(0)) open();
  }

  /** statements held at the gate */
  get waiting(): number {
    return this.gates.length;
  }
}

/**
 * Everything already started on this in-memory store has run as far as it can: no I/O is involved, so once the
 * microtask queue is empty (a macrotask later) every pending decision is parked at its wait.
 */
const settled = () => new Promise<void>((resolve) => setImmediate(resolve));

test("domain: an exact decision taken while an exchange carries this process's hits does not under-count the others", async (t) => {
  // limit 100, LOCAL_SHARE 25 %: another process already has 21 hits in the window
  const clock = new TestClock('2030-06-01T00:00:00.000Z');
  const store = new GatedStore(21, clock.now().getTime());
  const limiter = new RateLimiter({ store, clock, limits: resolveLimits({ default: 100 }) });
  const hit = () => limiter.hit('key:k', 'default');

  t.is((await hit()).remaining, 100 - 22, 'cold: the exact decision (21 others + 1)');
  // 3 more from memory: the view reaches 25, a quarter of the limit
  for (const used of [23, 24, 25]) t.is((await hit()).remaining, 100 - used);

  // the periodic exchange takes those 3 pending hits; its statement has not run yet
  const syncing = limiter.sync();
  // the next request needs an exact decision (view 25 = the local share)
  const fifth = hit();
  await settled(); // the fifth is parked behind the exchange's held statement
  store.release();
  await syncing;
  const decided = await fifth;
  t.is(decided.remaining, 100 - 26, 'the exact decision counts the 3 hits the exchange was carrying');
  t.is(store.log.length, 26);

  // and the process's view of the others stays 21: the next request is decided exactly too (view 26 > 25)
  const sixth = await hit();
  t.is(sixth.remaining, 100 - 27);
  t.is(store.log.length, 27, 'every hit is in the shared log: nothing was admitted from memory past the local share');
});

test("domain: concurrent exact decisions wait for the one carrying this process's pending hits", async (t) => {
  const clock = new TestClock('2030-06-01T00:00:00.000Z');
  const store = new GatedStore(21, clock.now().getTime());
  const limiter = new RateLimiter({ store, clock, limits: resolveLimits({ default: 100 }) });
  const hit = () => limiter.hit('key:k', 'default');
  t.is((await hit()).remaining, 100 - 22);
  for (const used of [23, 24, 25]) t.is((await hit()).remaining, 100 - used);

  // two exact decisions at once: the first carries the 3 pending hits (its statement is held), the second carries none
  const fifth = hit();
  const sixth = hit();
  await settled();
  t.is(store.waiting, 1, 'one statement is held: the second decision waits for the first, not the store');
  store.release();
  const [a, b] = await Promise.all([fifth, sixth]);
  t.deepEqual(
    [a.remaining, b.remaining].sort((x, y) => y - x),
    [100 - 26, 100 - 27],
    'neither decision ran without the 3 hits the other was carrying',
  );
  t.is(store.log.length, 27);
});

/** The real PostgreSQL adapter of the shared log, counting its round trips. */
function countingStore(app: TestApp): RateLimitStore & { calls: number } {
  const real = new MikroOrmPolicyStore(app.database.orm).rateLimits;
  const store = {
    calls: 0,
    hit: (...args: Parameters<RateLimitStore['hit']>) => {
      store.calls++;
      return real.hit(...args);
    },
    sync: (...args: Parameters<RateLimitStore['sync']>) => {
      store.calls++;
      return real.sync(...args);
    },
  };
  return store;
}

test('one process near the limit: exactly the limit admitted, then refusals decided without a database round trip', async (t) => {
  const clock = new TestClock('2031-01-01T00:00:00.000Z');
  const store = countingStore(t.context.a);
  const limiter = new RateLimiter({ store, clock, limits: resolveLimits({ default: 40 }) });
  const subject = `key:near-${Date.now()}`;
  // 60 concurrent requests against a limit of 40, all at one instant
  const first = await Promise.all(Array.from({ length: 60 }, () => limiter.hit(subject, 'default')));
  t.is(first.filter((d) => d.allowed).length, 40, 'exactly the limit');
  const tripsToFill = store.calls;
  t.log(`${tripsToFill} round trips for 60 decisions up to the limit`);

  // near the limit, refusals are proven by this process's own 40 hits: no round trip, the store's exact answer
  clock.advance(30_000);
  for (let i = 0; i < 100; i++) {
    const d = await limiter.hit(subject, 'default');
    t.false(d.allowed);
    t.is(d.remaining, 0);
    t.is(d.retryAfterMs, 30_000, 'the first hits age out 60 s after they were made');
  }
  t.is(store.calls, tripsToFill, 'no database round trip for 100 refusals');
  t.true(limiter.localDenials >= 100);

  // once the oldest hits age out the store decides again, and admits
  clock.advance(30_000);
  const later = await limiter.hit(subject, 'default');
  t.true(later.allowed);
  t.is(store.calls, tripsToFill + 1);
});

test('two processes: after the store refuses once, the refusals that follow are decided from memory until a slot may free up', async (t) => {
  const clock = new TestClock('2031-02-01T00:00:00.000Z');
  const store1 = countingStore(t.context.a);
  const store2 = countingStore(t.context.a);
  const limits = resolveLimits({ default: 20 });
  const p1 = new RateLimiter({ store: store1, clock, limits });
  const p2 = new RateLimiter({ store: store2, clock, limits });
  const subject = `key:two-${Date.now()}`;
  let admitted = 0;
  for (let i = 0; i < 20; i++) if ((await p1.hit(subject, 'default')).allowed) admitted++;
  t.is(admitted, 20);
  await p1.sync(); // its hits admitted from memory reach the shared log

  clock.advance(10_000);
  const refused = await p2.hit(subject, 'default');
  t.false(refused.allowed, 'the store sees the 20 hits of the other process');
  t.is(refused.retryAfterMs, 50_000);
  t.is(store2.calls, 1);
  for (let i = 0; i < 50; i++) {
    const d = await p2.hit(subject, 'default');
    t.false(d.allowed);
    t.is(d.retryAfterMs, 50_000);
  }
  t.is(store2.calls, 1, 'the store proved a full window until its oldest hit ages out: no further round trip');

  clock.advance(50_000);
  t.true((await p2.hit(subject, 'default')).allowed, 'then the store decides again');
  t.is(store2.calls, 2);
});

test('when a full window frees up, one exact decision answers for the waiting requests: no stampede on PostgreSQL', async (t) => {
  const clock = new TestClock('2031-04-01T00:00:00.000Z');
  const store1 = countingStore(t.context.a);
  const store2 = countingStore(t.context.a);
  const limits = resolveLimits({ default: 20 });
  const p1 = new RateLimiter({ store: store1, clock, limits });
  const p2 = new RateLimiter({ store: store2, clock, limits });
  const subject = `key:herd-${Date.now()}`;
  for (let i = 0; i < 20; i++) t.true((await p1.hit(subject, 'default')).allowed);
  await p1.sync();
  clock.advance(10_000);
  t.false((await p2.hit(subject, 'default')).allowed);
  t.is(store2.calls, 1);

  // the 20 hits age out together: 50 requests arrive at once
  clock.advance(50_000);
  const results = await Promise.all(Array.from({ length: 50 }, () => p2.hit(subject, 'default')));
  t.is(results.filter((d) => d.allowed).length, 20, 'exactly the 20 free slots');
  const trips = store2.calls - 1;
  t.log(`${trips} round trips for 50 concurrent requests and 20 free slots`);
  // one decision finds the window open, then no more than the 19 free slots it leaves are asked for at once; the
  // other 30 are refused once the answers prove the window full again
  t.true(trips <= 21, `${trips} round trips`);
  for (const d of results.filter((x) => !x.allowed)) t.is(d.retryAfterMs, 60_000);
});

test("a request taking several slots (a GraphQL operation's cost) is admitted only when all of them fit", async (t) => {
  const clock = new TestClock('2031-03-01T00:00:00.000Z');
  const store = countingStore(t.context.a);
  const limiter = new RateLimiter({ store, clock, limits: resolveLimits({ graphql: 40 }) });
  const subject = `key:weighted-${Date.now()}`;
  t.like(await limiter.hit(subject, 'graphql', 15), { allowed: true, remaining: 25 });
  t.like(await limiter.hit(subject, 'graphql', 15), { allowed: true, remaining: 10 });
  t.like(await limiter.hit(subject, 'graphql', 15), { allowed: false, remaining: 10 });
  t.like(await limiter.hit(subject, 'graphql', 10), { allowed: true, remaining: 0 });
  t.like(await limiter.hit(subject, 'graphql', 1), { allowed: false, remaining: 0 });
  // more slots than the limit: it takes the whole window (and is refused while any slot is taken)
  t.like(await limiter.hit(`${subject}-2`, 'graphql', 100), { allowed: true, remaining: 0 });
  const rows = await t.context.a.database.orm.em.fork().execute('select count(*)::int as n from rate_hits where subject = ?', [subject]);
  t.is(rows[0]!.n, 40, 'one row per slot in the shared log');
});

test.serial('over HTTP: the requests refused after the limit are decided in memory', async (t) => {
  const { a } = t.context;
  const key = await issueKey(a);
  t.is(await admittedAcross([a], key, 10, false), 10);
  const before = a.services.rateLimiter.localDenials;
  const results = await Promise.all(Array.from({ length: 30 }, () => get(a, '/v1/health', key)));
  for (const r of results) expect429(t, r, 'meta', 10);
  t.is(a.services.rateLimiter.localDenials - before, 30, 'none of the 30 refusals needed PostgreSQL');
});
