import anyTest, { type TestFn } from 'ava';
import { http, issueKey, linkBody, recordAgent, startTestApp, type TestApp } from '../support/app.ts';
import { TestClock } from '../support/clock.ts';
import { decodeBase64Json } from '../support/paywall.ts';
import { Writable } from 'node:stream';
import pino from 'pino';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLogger } from '../../interfaces/log.ts';
import type { PaywallService } from '../../domain/paywall/service.ts';
import { lazyChildLogger } from '../../interfaces/http/logging.ts';
import type { UnpaidFastPath } from '../../interfaces/paywall/fast-402.ts';
import { request as httpRequest } from 'node:http';

// The 402 fast path: an unpaid request whose challenge is at hand (the link cached, the terms known, the
// challenge rendered) is answered by the route without calling the paywall service — the same status, bytes and
// headers, the same per-IP limit. Proven by counting the service's calls, never by timing; everything else (a payment,
// another method, a changed or disabled link) still goes through the service.

/**
 * The per-IP window is the shared log (DECISIONS "Wire conventions"): memory admits only below a quarter of the limit
 * (domain/policies/rate-limit.ts LOCAL_SHARE), above it each admission is the store's. High enough that the tests
 * before the last one stay in memory; the last one fills the window.
 */
const LIMIT = 400;
const test = anyTest as TestFn<{ app: TestApp; key: string; handled: () => number }>;

test.before(async (t) => {
  // On a clock nobody moves: the cached link's TTL (a backstop, domain/paywall/link-cache.ts) and the per-IP window
  // read this clock, so a loaded machine that takes long over the LIMIT requests sees neither the cache expire (a
  // re-render the counts below would take for a fast-path miss) nor its first hits age out. Invalidation by the
  // link's events, which the tests prove, does not depend on time.
  const clock = new TestClock('2035-01-01T00:00:00.000Z');
  const app = await startTestApp({ env: { SVC_RATE_LIMITS: JSON.stringify({ paywall: LIMIT }) }, appOptions: { clock } });
  const paywall = app.services.paywall as PaywallService;
  let calls = 0;
  const original = paywall.handle.bind(paywall);
  paywall.handle = (request) => {
    calls++;
    return original(request);
  };
  t.context = { app, key: await issueKey(app), handled: () => calls };
});

/** Unpaid 402s answered before fastify (interfaces/paywall/fast-402.ts). */
const beforeFastify = (app: TestApp): number => (app.fastify as unknown as { unpaidFastPath: UnpaidFastPath }).unpaidFastPath.answered;

/** The raw head and body of one request over a fresh connection (what fetch would normalise: header names, order). */
function rawAnswer(
  url: string,
  options: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<{ status: number; head: string[]; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method: options.method ?? 'GET', headers: options.headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, head: res.rawHeaders, body: Buffer.concat(chunks).toString('utf8') }));
    });
    req.on('error', reject);
    req.end(options.body);
  });
}

/** The answer as a client sees it, without the headers that differ per request. */
async function answerOf(url: string, init: RequestInit = {}) {
  const res = await fetch(url, init);
  const headers = Object.fromEntries(
    [...res.headers].filter(([name]) => !['date', 'x-svc-request-id', 'ratelimit-remaining', 'ratelimit', 'ratelimit-reset'].includes(name)),
  );
  return {
    status: res.status,
    headers,
    requestId: res.headers.get('x-svc-request-id'),
    limit: res.headers.get('ratelimit-limit') ?? res.headers.get('ratelimit-policy'),
    body: Buffer.from(await res.arrayBuffer()).toString('utf8'),
  };
}

test.serial('a second unpaid request is answered without the service, byte for byte as the first; payments and other methods still reach it', async (t) => {
  const { app, key, handled } = t.context;
  const { mint } = await recordAgent(app, key);
  const made = await http(app, 'POST', '/v1/payment-links', { key, body: linkBody(mint) });
  t.is(made.status, 201);
  const url = `${app.url}/x/${made.body.id}?network=chain-devnet`;

  const before = handled();
  const first = await answerOf(url);
  t.is(first.status, 402);
  t.is(handled(), before + 1, 'the first challenge is rendered by the service');
  const early = beforeFastify(app);
  const next = [];
  for (let i = 0; i < 5; i++) next.push(await answerOf(url));
  // the ones the fast path answered, it answered before fastify (the test app logs nothing for a request) — but for
  // one whose per-IP window memory could not decide (the shared log's view was not fresh: a loaded machine's timers),
  // which the route answers from the same challenge after asking the store
  t.true(beforeFastify(app) - early >= 1, 'fast-path answers are written before fastify');
  t.true(beforeFastify(app) - early <= 5 - (handled() - (before + 1)));
  // The link's creation event, when the feed delivers it, invalidates the cached link once: at most one of the next
  // requests reads it again; the others are answered by the fast path.
  t.true(handled() - (before + 1) <= 1, `the next ones are answered by the fast path (${handled() - before - 1} of 5 reached the service)`);
  for (const answer of next) t.deepEqual(answer, { ...first, requestId: answer.requestId });
  const [second] = next as [Awaited<ReturnType<typeof answerOf>>];
  t.truthy(second.requestId);
  t.not(second.requestId, first.requestId);
  t.truthy(second.headers['payment-required']);
  t.is(second.headers['access-control-allow-origin'], '*');
  t.is(second.headers['cache-control'], 'no-store');
  t.truthy(second.limit, 'the per-IP window is applied and announced');

  // a payment (even a malformed one), another method, a preflight: the service (or the route's own answer) decides
  let calls = handled();
  const paid = await answerOf(url, { headers: { 'PAYMENT-SIGNATURE': 'not-a-payment' } });
  t.is(paid.status, 402);
  t.regex(paid.body, /invalid_payload|payment payload/);
  t.is(handled(), ++calls);
  // the x402 v1 header and an MPP credential (Authorization: Payment …) are payments too
  for (const headers of [{ 'X-PAYMENT': 'not-a-payment' }, { Authorization: 'Payment not-a-credential' }] as Record<string, string>[]) {
    const other = await answerOf(url, { headers });
    t.is(other.status, 402, JSON.stringify(headers));
    t.is(handled(), ++calls, `${Object.keys(headers)[0]} reaches the service`);
  }
  const post = await answerOf(url, { method: 'POST', body: '{}', headers: { 'content-type': 'application/json' } });
  t.is(post.status, 405);
  t.is(post.headers.allow, 'GET');
  t.is(handled(), ++calls);
  t.is((await fetch(url, { method: 'OPTIONS' })).status, 204);
  // another network than the link's: not at hand, the service answers 403 wrong_network
  t.is((await answerOf(`${app.url}/x/${made.body.id}?network=chain-mainnet`)).status, 403);
  t.is(handled(), ++calls);
});

test.serial('before fastify: the same head, byte for byte, as the route writes; HEAD, an encoded id, a longer path go to fastify', async (t) => {
  const { app, key } = t.context;
  const { mint } = await recordAgent(app, key);
  const made = await http(app, 'POST', '/v1/payment-links', { key, body: linkBody(mint) });
  const id = made.body.id as string;
  const url = `${app.url}/x/${id}?network=chain-devnet`;
  t.is((await answerOf(url)).status, 402); // rendered by the service: at hand from now on
  // values that differ per request or per second
  const PER_REQUEST = new Set(['date', 'x-svc-request-id', 'ratelimit-remaining', 'ratelimit-reset']);
  const shape = (a: { status: number; head: string[]; body: string }) => ({
    status: a.status,
    head: a.head.map((v, i) => (i % 2 === 1 && PER_REQUEST.has(a.head[i - 1]!.toLowerCase()) ? '…' : v)),
    body: a.body,
  });
  // The link's creation event, when the feed delivers it, invalidates the cached link once (see the first test), and a
  // loaded machine may outlast the cache's TTL between two requests: an answer may then be rendered by the service
  // again (the same bytes), and the next one is at hand. Three tries are plenty; the counter says which one was early.
  const beforeFastifyAnswer = async (options?: Parameters<typeof rawAnswer>[1]) => {
    for (let tries = 0; ; tries++) {
      const counted = beforeFastify(app);
      const answer = await rawAnswer(url, options);
      if (beforeFastify(app) === counted + 1 || tries === 2) return { answer, early: beforeFastify(app) === counted + 1 };
    }
  };
  const first = await beforeFastifyAnswer();
  t.true(first.early, 'answered before fastify');
  const fast = first.answer;
  const early = beforeFastify(app);
  // a percent-encoded id is fastify's (its router decodes it): the route's own fast path answers the same link
  const routed = await rawAnswer(`${app.url}/x/%${id.charCodeAt(0).toString(16)}${id.slice(1)}?network=chain-devnet`);
  t.is(beforeFastify(app), early, 'an encoded id is left to fastify');
  t.deepEqual(shape(fast), shape(routed), 'the same status, header names in the same order, values and body');
  t.is(fast.head[0], 'X-Svc-Request-Id');
  t.regex(fast.head[1]!, /^[0-9A-HJKMNP-TV-Z]{26}$/);
  t.not(fast.head[1], routed.head[1]);

  // HEAD (the link's method is GET: 405), a trailing slash (no route): fastify's answers
  t.is((await rawAnswer(url, { method: 'HEAD' })).status, 405);
  t.is((await rawAnswer(`${app.url}/x/${id}/?network=chain-devnet`)).status, 404);
  t.is(beforeFastify(app), early);
  // a client's X-Request-Id only joins log lines (none at this level), a GET's body is read by no one (fastify reads none
  // for a GET): both still answered before fastify, the same answer
  const withBody = await beforeFastifyAnswer({ headers: { 'X-Request-Id': 'client-1', 'Content-Type': 'text/plain', 'Content-Length': '2' }, body: 'hi' });
  t.deepEqual(shape(withBody.answer), shape(fast));
  t.true(withBody.early, 'answered before fastify');
});

test.serial('a fault in the fast path before fastify never crashes the process: fastify answers the request the same', async (t) => {
  const { app, key } = t.context;
  const { mint } = await recordAgent(app, key);
  const made = await http(app, 'POST', '/v1/payment-links', { key, body: linkBody(mint) });
  const url = `${app.url}/x/${made.body.id}?network=chain-devnet`;
  const first = await answerOf(url);
  t.is(first.status, 402);
  // fault injection: the first challenge lookup (the one before fastify) throws, as a bug would
  const paywall = app.services.paywall as PaywallService;
  const original = paywall.unpaidChallenge;
  let faults = 1;
  paywall.unpaidChallenge = function (this: PaywallService, request) {
    if (faults-- > 0) throw new Error('injected fast-path fault');
    return original.call(this, request);
  };
  try {
    const early = beforeFastify(app);
    const answered = await answerOf(url);
    t.is(beforeFastify(app), early, 'not answered before fastify');
    t.is(answered.status, 402);
    t.is(answered.body, first.body);
  } finally {
    paywall.unpaidChallenge = original;
  }
  t.is((await answerOf(url)).status, 402, 'the process still serves');
});

test.serial('a changed or disabled link is never answered from the fast path', async (t) => {
  const { app, key, handled } = t.context;
  const { mint } = await recordAgent(app, key);
  const made = await http(app, 'POST', '/v1/payment-links', { key, body: linkBody(mint) });
  const url = `${app.url}/x/${made.body.id}?network=chain-devnet`;
  const first = await answerOf(url);
  t.is(first.status, 402);
  await answerOf(url);

  const changed = await http(app, 'PATCH', `/v1/payment-links/${made.body.id}`, { key, body: { price: '$0.02' } });
  t.is(changed.status, 200, JSON.stringify(changed.body));
  const before = handled();
  const repriced = await answerOf(url);
  t.is(repriced.status, 402);
  t.is(handled(), before + 1, 'the changed link is read and rendered again');
  const amount = (a: { headers: Record<string, string> }) =>
    JSON.parse(Buffer.from(a.headers['payment-required']!, 'base64').toString('utf8')).accepts[0].amount as string;
  t.is(amount(first), '10000');
  t.is(amount(repriced), '20000', 'the new price is offered');
  // (the change's event, when the feed delivers it, invalidates the link once more: whether the next answer comes from
  // the fast path depends on when it arrives; what it answers does not)
  t.is(amount(await answerOf(url)), '20000');

  const off = await http(app, 'PATCH', `/v1/payment-links/${made.body.id}`, { key, body: { disabled: true } });
  t.is(off.status, 200);
  const gone = await answerOf(url);
  t.is(gone.status, 410);
  t.regex(gone.body, /payment_link_disabled/);
  t.is((await answerOf(url)).status, 410, 'still 410: a disabled link has no challenge at hand');
});

test.serial('a fast-path 402 makes no request logger: the child logger is made only when something logs at an enabled level', async (t) => {
  const { app, key } = t.context;
  const { mint } = await recordAgent(app, key);
  const made = await http(app, 'POST', '/v1/payment-links', { key, body: linkBody(mint) });
  const url = `${app.url}/x/${made.body.id}?network=chain-devnet`;
  t.is((await answerOf(url)).status, 402);
  const log = app.fastify.log as unknown as { child: (...args: unknown[]) => unknown };
  const original = log.child;
  let children = 0;
  log.child = function (this: unknown, ...args: unknown[]) {
    children++;
    return original.apply(this, args);
  };
  try {
    for (let i = 0; i < 3; i++) {
      const res = await answerOf(url);
      t.is(res.status, 402);
      t.truthy(res.requestId);
      t.truthy(res.headers['payment-required']);
      t.is(res.headers['content-length'], String(Buffer.byteLength(res.body)));
    }
    t.is(children, 0, 'no child logger per request');
  } finally {
    log.child = original;
  }
});

test.serial('the per-IP limit holds on the fast path: over it, 429 in the envelope with the CORS headers', async (t) => {
  const { app, key, handled } = t.context;
  const { mint } = await recordAgent(app, key);
  const made = await http(app, 'POST', '/v1/payment-links', { key, body: linkBody(mint) });
  const url = `${app.url}/x/${made.body.id}?network=chain-devnet`;
  t.is((await answerOf(url)).status, 402); // at hand from now on
  const calls = handled();
  let last: { status: number; body: string; headers: Record<string, string> } | undefined;
  let remaining: string | null = null;
  const early = beforeFastify(app);
  let fast = 0;
  // the offers' blockhashes: one read from the ledger per REFRESH_MS of real time (domain/paywall/blockhash.ts), and
  // each new one is rendered once by the service — a loaded machine that takes longer over the window sees more
  const blockhashes = new Set<string>();
  for (let i = 0; i <= LIMIT; i++) {
    const res = await fetch(url);
    if (res.status === 429) {
      last = { status: res.status, body: await res.text(), headers: Object.fromEntries(res.headers) };
      break;
    }
    t.is(res.status, 402);
    blockhashes.add(String(decodeBase64Json(res.headers.get('payment-required'))?.accepts?.[0]?.extra?.recentBlockhash));
    remaining = res.headers.get('ratelimit-remaining');
    await res.arrayBuffer();
    fast++;
  }
  t.is(remaining, '0', 'refused exactly when the window is full: the last 402 announced 0 remaining');
  // below a quarter of the limit memory admits and the 402 is written before fastify; above it the route answers the
  // same challenge once the store admitted it; never the paywall service
  t.true(beforeFastify(app) - early >= 1 && beforeFastify(app) - early < fast, `${beforeFastify(app) - early} of ${fast} before fastify`);
  // (the link's creation event, when the feed delivers it, invalidates the cached link once: one re-render at most;
  // and one per blockhash the window's offers moved on to)
  const renders = 1 + (blockhashes.size - 1); // the invalidation, then each blockhash after the first
  t.true(handled() - calls <= renders, `${handled() - calls} of the window's 402s reached the paywall service (${blockhashes.size} blockhashes)`);
  t.is(last!.status, 429);
  t.regex(last!.body, /"error":"rate_limited"/);
  t.is(last!.headers['access-control-allow-origin'], '*');
});

test('the lazy request logger: nothing made below its level; at an enabled level one child, its lines carry the request id', (t) => {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk, _enc, done) {
      lines.push(JSON.parse(String(chunk)));
      done();
    },
  });
  const parent = pino({ level: 'warn' }, sink);
  let children = 0;
  const original = parent.child;
  parent.child = function (this: typeof parent, ...args: Parameters<typeof original>) {
    children++;
    return original.apply(this, args);
  } as typeof original;
  const log = lazyChildLogger.call(undefined, parent, { reqId: 'R1' }, {});
  log.info('not written');
  log.debug({ x: 1 }, 'not written');
  t.is(log.level, 'warn');
  t.deepEqual(log.bindings(), { reqId: 'R1' });
  t.is(children, 0);
  log.warn({ a: 1 }, 'written');
  log.error('again');
  t.is(children, 1, 'one child, made on the first enabled line');
  t.is(lines.length, 2);
  t.like(lines[0], { reqId: 'R1', a: 1, msg: 'written', level: 40 });
  t.like(lines[1], { reqId: 'R1', msg: 'again' });
  const nested = log.child({ client_request_id: 'c' });
  nested.warn('nested');
  t.like(lines[2], { reqId: 'R1', client_request_id: 'c', msg: 'nested' });
  // a level raised on the request's logger applies to it alone
  const other = lazyChildLogger.call(undefined, parent, { reqId: 'R2' }, {});
  other.level = 'info';
  other.info('now written');
  t.like(lines[3], { reqId: 'R2', msg: 'now written' });
  t.is(parent.level, 'warn');
});

test('at the default level the fast path answers too, with the access line fastify writes: one line per request, all written by close', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'svc-access-'));
  const file = join(dir, 'gateway.log');
  // the logger npm start makes (JSON at info, its asynchronous destination), writing a file instead of standard output
  const logger = createLogger({ level: 'info', format: 'json', isTTY: false, destination: file });
  const app = await startTestApp({ appOptions: { logger } });
  let open = true;
  try {
    const key = await issueKey(app);
    const { mint } = await recordAgent(app, key);
    const made = await http(app, 'POST', '/v1/payment-links', { key, body: linkBody(mint) });
    const id = made.body.id as string;
    const url = `${app.url}/x/${id}?network=chain-devnet`;
    const first = await answerOf(url); // rendered by the service, through fastify
    t.is(first.status, 402);
    const early = beforeFastify(app);
    const next = [];
    for (let i = 0; i < 3; i++) next.push(await answerOf(url, { headers: { 'X-Request-Id': `client-${i}` } }));
    for (const answer of next) t.deepEqual(answer, { ...first, requestId: answer.requestId });
    t.true(beforeFastify(app) > early, 'answered before fastify at the default level');
    open = false;
    await app.close();

    const lines = (await readFile(file, 'utf8'))
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Record<string, any>);
    t.false(
      lines.some((l) => l.msg === 'incoming request'),
      'no line at the start of a request',
    );
    const ofX = lines.filter((l) => l.req?.url === `/x/${id}`);
    t.is(ofX.length, 4, 'one access line per request, the query left out');
    const answers = [first, ...next];
    for (const [i, answer] of answers.entries()) {
      const mine = ofX.filter((l) => l.reqId === answer.requestId);
      t.is(mine.length, 1);
      t.like(mine[0], { level: 30, msg: 'request completed', req: { method: 'GET', remoteAddress: '127.0.0.1' }, res: { statusCode: 402 } });
      t.is(typeof mine[0]!.responseTime, 'number');
      if (i > 0) t.is(mine[0]!.client_request_id, `client-${i - 1}`);
    }
    // both doors (fastify's controller, the fast path) write the line in one shape
    const shape = (l: Record<string, any>) => [Object.keys(l).filter((k) => k !== 'client_request_id'), Object.keys(l.req), Object.keys(l.res)];
    for (const l of ofX) t.deepEqual(shape(l), shape(ofX[0]!));
    t.false(
      lines.some((l) => JSON.stringify(l).includes(key)),
      'the API key is in no line',
    );
  } finally {
    if (open) await app.close();
    await rm(dir, { recursive: true, force: true });
  }
});
