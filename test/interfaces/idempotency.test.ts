import anyTest, { type TestFn } from 'ava';
import { randomUUID } from 'node:crypto';
import { http, linkBody, recordAgent, startTestApp, startTwoInstances, type TestApp, writeAgentAsset } from '../support/app.ts';
import { TestClock } from '../support/clock.ts';
import { IDEMPOTENCY_TTL_MS, IdempotencyService, requestHash, WAIT_MS, type Outcome } from '../../domain/policies/idempotency.ts';
import { DomainError } from '../../domain/shared/errors.ts';
import { MikroOrmPolicyStore } from '../../adapters/store/policy-store.ts';
import { systemClock } from '../../adapters/clock/system.ts';

// hosted-api §5.7 and DECISIONS "Wire conventions": Idempotency-Key on any POST, one stored effect per
// (api key, route, key) under concurrency and across processes, 5xx not stored, waiting for a running twin.

interface Ctx {
  a: TestApp;
  b: TestApp;
  key: string;
  keyId: string;
  mint: string;
}

const test = anyTest as TestFn<Ctx>;

test.before(async (t) => {
  const { a, b } = await startTwoInstances();
  const created = await a.services.access.issueKey({ network: 'chain-devnet', role: 'user' });
  const { mint } = await recordAgent(a, created.key);
  t.context = { a, b, key: created.key, keyId: created.id, mint };
});

interface Raw {
  status: number;
  headers: Headers;
  text: string;
}

async function raw(app: TestApp, method: string, path: string, o: { key?: string; body?: unknown; idem?: string } = {}): Promise<Raw> {
  const headers: Record<string, string> = {};
  if (o.key) headers.authorization = `Bearer ${o.key}`;
  if (o.idem !== undefined) headers['idempotency-key'] = o.idem;
  if (o.body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(`${app.url}${path}`, { method, headers, body: o.body === undefined ? undefined : JSON.stringify(o.body) });
  return { status: res.status, headers: res.headers, text: await res.text() };
}

const sql = async <T = Record<string, unknown>>(app: TestApp, query: string, params: unknown[] = []): Promise<T[]> =>
  (await app.database.orm.em.fork().execute(query, params)) as T[];

const uniq = (prefix: string) => `${prefix}-${randomUUID().slice(0, 8)}`;

test('50 identical concurrent POSTs split across two instances: one link, one event, 50 identical responses', async (t) => {
  const { a, b, key, keyId, mint } = t.context;
  const label = uniq('idem-50');
  const body = linkBody(mint, { label });
  const idem = uniq('k50');

  const results = await Promise.all(Array.from({ length: 50 }, (_, i) => raw(i % 2 === 0 ? a : b, 'POST', '/v1/payment-links', { key, body, idem })));

  t.deepEqual(
    results.map((r) => r.status),
    Array(50).fill(201),
    results.map((r) => r.text).find((x) => !x.includes(label)),
  );
  const first = results[0]!.text;
  t.true(
    results.every((r) => r.text === first),
    'all 50 bodies are byte-for-byte the same',
  );
  const fresh = results.filter((r) => r.headers.get('idempotent-replayed') === null);
  t.is(fresh.length, 1, 'exactly one response is the original');
  t.is(results.filter((r) => r.headers.get('idempotent-replayed') === 'true').length, 49, 'the other 49 are replays');
  const link = JSON.parse(first) as { id: string; label: string };
  t.is(link.label, label);

  // ...and a later retry on either instance still answers the same bytes
  for (const app of [a, b]) {
    const again = await raw(app, 'POST', '/v1/payment-links', { key, body, idem });
    t.is(again.status, 201);
    t.is(again.text, first);
    t.is(again.headers.get('idempotent-replayed'), 'true');
  }

  // REST: one link with that label, one payment_link.created event for it
  const list = await http(a, 'GET', `/v1/payment-links?owner_agent=${mint}&limit=200`, { key });
  t.is(list.status, 200);
  t.deepEqual(
    list.body.data.filter((l: { label: string }) => l.label === label).map((l: { id: string }) => l.id),
    [link.id],
  );
  const events = await http(b, 'GET', `/v1/events?agent=${mint}&kind=payment_link.created&limit=200`, { key });
  t.is(events.status, 200);
  t.is(events.body.data.filter((e: { metadata: { payment_link?: { id: string } } }) => e.metadata.payment_link?.id === link.id).length, 1);

  // SQL: the stored effect is exactly one row and one event
  const rows = await sql<{ n: number }>(a, 'select count(*)::int as n from payment_links where label = ?', [label]);
  t.is(rows[0]!.n, 1);
  const ev = await sql<{ n: number }>(
    a,
    `select count(*)::int as n from events where kind = 'payment_link.created' and metadata->'payment_link'->>'label' = ?`,
    [label],
  );
  t.is(ev[0]!.n, 1);

  // stored for 24 hours, keyed on (api key id, route, key)
  const rec = await sql<{ state: string; created_at: Date; expires_at: Date }>(
    a,
    'select state, created_at, expires_at from idempotency_records where key_id = ? and route = ? and idem_key = ?',
    [keyId, 'paymentLinks.create', idem],
  );
  t.is(rec.length, 1);
  t.is(rec[0]!.state, 'done');
  t.is(new Date(rec[0]!.expires_at).getTime() - new Date(rec[0]!.created_at).getTime(), IDEMPOTENCY_TTL_MS);
});

test('a retry replays status and body byte-for-byte; a different body is 409 idempotency_body_mismatch', async (t) => {
  const { a, key, mint } = t.context;
  const idem = uniq('k');
  const body = linkBody(mint, { label: uniq('replay') });

  const first = await raw(a, 'POST', '/v1/payment-links', { key, body, idem });
  t.is(first.status, 201, first.text);
  t.is(first.headers.get('idempotent-replayed'), null);

  const second = await raw(a, 'POST', '/v1/payment-links', { key, body, idem });
  t.is(second.status, 201);
  t.is(second.text, first.text);
  t.is(second.headers.get('idempotent-replayed'), 'true');
  t.not(second.headers.get('x-svc-request-id'), first.headers.get('x-svc-request-id'), 'a replay is still its own request');
  for (const h of ['ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset', 'ratelimit-policy']) t.truthy(second.headers.get(h), h);

  // the same JSON with its keys in another order is the same body
  const reordered = Object.fromEntries(Object.entries(body).reverse());
  const third = await raw(a, 'POST', '/v1/payment-links', { key, body: reordered, idem });
  t.is(third.status, 201);
  t.is(third.text, first.text);

  const other = await raw(a, 'POST', '/v1/payment-links', { key, body: { ...body, price: '$0.02' }, idem });
  t.is(other.status, 409, other.text);
  const err = JSON.parse(other.text);
  t.is(err.error, 'idempotency_body_mismatch');
  t.is(err.request_id, other.headers.get('x-svc-request-id'));
  t.is(typeof err.message, 'string');

  // without a key the same request creates another link
  const plain = await raw(a, 'POST', '/v1/payment-links', { key, body });
  t.is(plain.status, 201);
  t.not(JSON.parse(plain.text).id, JSON.parse(first.text).id);
});

test('Idempotency-Key longer than 64 characters is 400 invalid_request; 64 is accepted', async (t) => {
  const { a, key, mint } = t.context;
  const body = linkBody(mint, { label: uniq('len') });
  const tooLong = await raw(a, 'POST', '/v1/payment-links', { key, body, idem: 'x'.repeat(65) });
  t.is(tooLong.status, 400, tooLong.text);
  t.is(JSON.parse(tooLong.text).error, 'invalid_request');
  const rows = await sql<{ n: number }>(a, 'select count(*)::int as n from payment_links where label = ?', [body.label]);
  t.is(rows[0]!.n, 0, 'nothing was created');

  const max = `${randomUUID()}${'y'.repeat(64)}`.slice(0, 64);
  const ok = await raw(a, 'POST', '/v1/payment-links', { key, body, idem: max });
  t.is(ok.status, 201, ok.text);
  const replay = await raw(a, 'POST', '/v1/payment-links', { key, body, idem: max });
  t.is(replay.text, ok.text);
  t.is(replay.headers.get('idempotent-replayed'), 'true');
});

test('the key is scoped to (api key, route): another key or another route is not a replay nor a mismatch', async (t) => {
  const { a } = t.context;
  // Two keys of one owner_wallet: one principal (both may use its agent), two idempotency scopes.
  const { randomAddress } = await import('../support/app.ts');
  const wallet = await randomAddress();
  const key = (await a.services.access.issueKey({ network: 'chain-devnet', role: 'user', owner_wallet: wallet })).key;
  const otherKey = (await a.services.access.issueKey({ network: 'chain-devnet', role: 'user', owner_wallet: wallet })).key;
  const { mint } = await writeAgentAsset(a, 'chain-devnet', { owner: wallet });
  const recorded = await raw(a, 'POST', '/v1/agents/record', { key, body: { mint, owner: wallet } });
  t.is(recorded.status, 200, recorded.text);
  const idem = uniq('scope');
  const body = linkBody(mint, { label: uniq('scope') });
  const first = await raw(a, 'POST', '/v1/payment-links', { key, body, idem });
  t.is(first.status, 201);

  const byOther = await raw(a, 'POST', '/v1/payment-links', { key: otherKey, body, idem });
  t.is(byOther.status, 201, byOther.text);
  t.is(byOther.headers.get('idempotent-replayed'), null);
  t.not(JSON.parse(byOther.text).id, JSON.parse(first.text).id, 'another api key gets its own effect');

  const otherRoute = await raw(a, 'POST', '/v1/seller/parse-price', { key, body: { price: '$0.01' }, idem });
  t.is(otherRoute.status, 200, otherRoute.text);
  t.is(otherRoute.headers.get('idempotent-replayed'), null);

  const rows = await sql<{ n: number }>(a, 'select count(*)::int as n from payment_links where label = ?', [body.label]);
  t.is(rows[0]!.n, 2);
});

test('a 4xx outcome is stored and replayed byte-for-byte, with the request id of the first call', async (t) => {
  const { a, b, key } = t.context;
  const { randomAddress } = await import('../support/app.ts');
  const stranger = await randomAddress();
  const body = linkBody(stranger, { label: uniq('err') });
  const idem = uniq('err');
  const first = await raw(a, 'POST', '/v1/payment-links', { key, body, idem });
  t.is(first.status, 404, first.text);
  t.is(JSON.parse(first.text).error, 'agent_not_found');
  t.is(JSON.parse(first.text).request_id, first.headers.get('x-svc-request-id'));

  // the agent exists now, but the key's first answer stands
  const { owner } = await writeAgentAsset(a, 'chain-devnet', { mint: stranger });
  const res = await http(a, 'POST', '/v1/agents/record', { key, body: { mint: stranger, owner } });
  t.is(res.status, 200);
  const replay = await raw(b, 'POST', '/v1/payment-links', { key, body, idem });
  t.is(replay.status, 404);
  t.is(replay.text, first.text);
  t.is(replay.headers.get('idempotent-replayed'), 'true');

  const fresh = await raw(b, 'POST', '/v1/payment-links', { key, body, idem: uniq('err2') });
  t.is(fresh.status, 201, 'a new key runs again');
});

test('tRPC mutations obey the same Idempotency-Key as REST (shared route, replay, mismatch, length)', async (t) => {
  const { a, b, key, mint } = t.context;
  const idem = uniq('trpc');
  const body = linkBody(mint, { label: uniq('trpc') });
  const trpc = (app: TestApp, input: unknown, idemKey: string) =>
    fetch(`${app.url}/trpc/paymentLinks.create`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'idempotency-key': idemKey },
      body: JSON.stringify(input),
    }).then(async (r) => ({ status: r.status, headers: r.headers, text: await r.text() }));

  const first = await trpc(a, body, idem);
  t.is(first.status, 200, first.text);
  t.is(first.headers.get('idempotent-replayed'), null);
  const data = JSON.parse(first.text).result.data;
  t.is(data.label, body.label);

  const second = await trpc(b, body, idem);
  t.is(second.status, 200);
  t.is(second.text, first.text, 'byte-for-byte across instances');
  t.is(second.headers.get('idempotent-replayed'), 'true');
  for (const h of ['ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset', 'ratelimit-policy']) t.truthy(second.headers.get(h), h);

  // the route is the operation: REST with the same key and body replays the tRPC call's effect
  const rest = await raw(a, 'POST', '/v1/payment-links', { key, body, idem });
  t.is(rest.status, 201);
  t.is(rest.headers.get('idempotent-replayed'), 'true');
  t.deepEqual(JSON.parse(rest.text), data);

  const mismatch = await trpc(a, { ...body, price: '$0.05' }, idem);
  t.is(mismatch.status, 409, mismatch.text);
  t.is(JSON.parse(mismatch.text).error.data.code, 'idempotency_body_mismatch');

  const tooLong = await trpc(a, body, 'z'.repeat(65));
  t.is(tooLong.status, 400, tooLong.text);
  t.is(JSON.parse(tooLong.text).error.data.code, 'invalid_request');

  const rows = await sql<{ n: number }>(a, 'select count(*)::int as n from payment_links where label = ?', [body.label]);
  t.is(rows[0]!.n, 1);
});

test('tRPC: 20 concurrent identical mutations across two instances give one effect and identical bodies', async (t) => {
  const { a, b, key, mint } = t.context;
  const idem = uniq('trpc20');
  const body = linkBody(mint, { label: uniq('trpc20') });
  const results = await Promise.all(
    Array.from({ length: 20 }, (_, i) =>
      fetch(`${(i % 2 ? b : a).url}/trpc/paymentLinks.create`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'idempotency-key': idem },
        body: JSON.stringify(body),
      }).then(async (r) => ({ status: r.status, replayed: r.headers.get('idempotent-replayed'), text: await r.text() })),
    ),
  );
  t.true(results.every((r) => r.status === 200 && r.text === results[0]!.text));
  t.is(results.filter((r) => r.replayed === null).length, 1);
  const rows = await sql<{ n: number }>(a, 'select count(*)::int as n from payment_links where label = ?', [body.label]);
  t.is(rows[0]!.n, 1);
});

/** One instance on a test clock for the waits (its time is the clock's, moved by the tests, never waited for); the tests using it are serial. */
let clockApp: Promise<{ app: TestApp; clock: TestClock }> | undefined;
const onTestClock = () =>
  (clockApp ??= (async () => {
    const clock = new TestClock();
    return { app: await startTestApp({ appOptions: { clock } }), clock };
  })());

test.serial('a request whose twin is still running waits, then gets 409 idempotency_in_progress after 10 s', async (t) => {
  const { app, clock } = await onTestClock();
  const created = await app.services.access.issueKey({ network: 'chain-devnet', role: 'user' });
  const { mint } = await recordAgent(app, created.key);
  const idem = uniq('running');
  const body = linkBody(mint, { label: uniq('running') });
  const now = clock.now().getTime();
  await sql(
    app,
    `insert into idempotency_records (key_id, route, idem_key, request_hash, state, response, locked_until, created_at, expires_at)
     values (?, 'paymentLinks.create', ?, ?, 'running', null, ?, ?, ?)`,
    [created.id, idem, requestHash(body), new Date(now + 60_000), new Date(now), new Date(now + IDEMPOTENCY_TTL_MS)],
  );
  let answered = false;
  const pending = raw(app, 'POST', '/v1/payment-links', { key: created.key, body, idem }).finally(() => (answered = true));
  // Move the clock in small steps, each once the request sleeps again, until it answers.
  let advanced = 0;
  while (!answered) {
    await Promise.race([clock.untilSleeping(), pending]);
    if (answered) break;
    t.true(advanced < WAIT_MS, `still waiting after ${advanced} ms of clock time`);
    clock.advance(100);
    advanced += 100;
  }
  const res = await pending;
  t.is(res.status, 409, res.text);
  t.is(JSON.parse(res.text).error, 'idempotency_in_progress');
  t.true(advanced >= WAIT_MS && advanced <= WAIT_MS + 100, `answered after ${advanced} ms of clock time`);
  const rows = await sql<{ n: number }>(app, 'select count(*)::int as n from payment_links where label = ?', [body.label]);
  t.is(rows[0]!.n, 0, 'the waiting request did not run the operation');
});

test.serial('a waiting request gets the stored response once its running twin completes', async (t) => {
  const { app, clock } = await onTestClock();
  const created = await app.services.access.issueKey({ network: 'chain-devnet', role: 'user' });
  const { mint } = await recordAgent(app, created.key);
  const idem = uniq('completes');
  const body = linkBody(mint, { label: uniq('completes') });
  const now = clock.now().getTime();
  await sql(
    app,
    `insert into idempotency_records (key_id, route, idem_key, request_hash, state, response, locked_until, created_at, expires_at)
     values (?, 'paymentLinks.create', ?, ?, 'running', null, ?, ?, ?)`,
    [created.id, idem, requestHash(body), new Date(now + 60_000), new Date(now), new Date(now + IDEMPOTENCY_TTL_MS)],
  );
  let answered = false;
  const sleepingBefore = clock.waiting;
  const pending = raw(app, 'POST', '/v1/payment-links', { key: created.key, body, idem }).finally(() => (answered = true));
  // the request is waiting on its twin (one more sleep on the clock) when the twin completes
  await Promise.race([clock.untilSleeping(sleepingBefore + 1), pending]);
  t.false(answered, 'the request waits while its twin runs');
  const stored: Outcome = { ok: true, data: { id: 'from-the-twin', label: body.label }, requestId: 'twin-request' };
  await sql(app, `update idempotency_records set state = 'done', response = ? where key_id = ? and idem_key = ?`, [JSON.stringify(stored), created.id, idem]);
  let advanced = 0;
  while (!answered) {
    await Promise.race([clock.untilSleeping(), pending]);
    if (answered) break;
    clock.advance(100);
    advanced += 100;
  }
  const res = await pending;
  t.is(res.status, 201, res.text);
  t.is(res.text, JSON.stringify(stored.data));
  t.is(res.headers.get('idempotent-replayed'), 'true');
  // answered at its next look after the twin completed, not at the 10 s in-progress deadline
  t.true(advanced < WAIT_MS / 2, `answered after ${advanced} ms of clock time`);
  const rows = await sql<{ n: number }>(app, 'select count(*)::int as n from payment_links where label = ?', [body.label]);
  t.is(rows[0]!.n, 0);
});

test('a running claim whose lease lapsed (crashed owner) and an expired record are taken over', async (t) => {
  const { a, key, keyId, mint } = t.context;
  const body = linkBody(mint, { label: uniq('lapsed') });
  const idem = uniq('lapsed');
  const past = Date.now() - 120_000;
  await sql(
    a,
    `insert into idempotency_records (key_id, route, idem_key, request_hash, state, response, locked_until, created_at, expires_at)
     values (?, 'paymentLinks.create', ?, ?, 'running', null, ?, ?, ?)`,
    [keyId, idem, requestHash(body), new Date(past + 60_000), new Date(past), new Date(past + IDEMPOTENCY_TTL_MS)],
  );
  const res = await raw(a, 'POST', '/v1/payment-links', { key, body, idem });
  t.is(res.status, 201, res.text);
  t.is(res.headers.get('idempotent-replayed'), null);

  // past its 24 hours the key is free again, even for another body
  await sql(a, `update idempotency_records set expires_at = now() - interval '1 second' where key_id = ? and idem_key = ?`, [keyId, idem]);
  const other = linkBody(mint, { label: uniq('after-expiry') });
  const again = await raw(a, 'POST', '/v1/payment-links', { key, body: other, idem });
  t.is(again.status, 201, again.text);
  t.is(again.headers.get('idempotent-replayed'), null);
  t.is(JSON.parse(again.text).label, other.label);
});

test('GET ignores Idempotency-Key', async (t) => {
  const { a, key } = t.context;
  const res = await raw(a, 'GET', '/v1/payment-links', { key, idem: 'x'.repeat(80) });
  t.is(res.status, 200, res.text);
  t.is(res.headers.get('idempotent-replayed'), null);
});

test('domain: 5xx and unexpected faults are not stored (the key is released), 4xx outcomes are', async (t) => {
  const { a } = t.context;
  const store = new MikroOrmPolicyStore(a.database.orm);
  const service = new IdempotencyService({ store: store.idempotency, clock: systemClock });
  const keyId = uniq('domain-key');
  const call = (idemKey: string, input: unknown = { n: 1 }) => ({ keyId, route: 'test.op', idemKey, input, requestId: uniq('req') });
  const stored = async (idemKey: string) => store.idempotency.get(keyId, 'test.op', idemKey);

  // a non-domain Error: thrown through, key released, a retry runs again
  let runs = 0;
  await t.throwsAsync(
    service.run(call('fault'), async () => {
      runs++;
      throw new Error('boom');
    }),
    { message: 'boom' },
  );
  t.is(await stored('fault'), null);
  const retried = await service.run(call('fault'), async () => {
    runs++;
    return { ok: 'second' };
  });
  t.is(runs, 2);
  t.false(retried.replayed);
  t.deepEqual(retried.outcome, { ok: true, data: { ok: 'second' }, requestId: retried.outcome.requestId });

  // a 5xx DomainError (502 rpc_unavailable): not stored either
  runs = 0;
  const upstream = await t.throwsAsync(
    service.run(call('upstream'), async () => {
      runs++;
      throw new DomainError('rpc_unavailable', 'node down');
    }),
  );
  t.true(upstream instanceof DomainError && upstream.code === 'rpc_unavailable');
  t.is(await stored('upstream'), null);
  const upstreamRetry = await service.run(call('upstream'), async () => {
    runs++;
    return 'landed';
  });
  t.is(runs, 2);
  t.false(upstreamRetry.replayed);

  // a 4xx DomainError is an outcome: stored, replayed without running again
  runs = 0;
  const first = await service.run(call('client'), async () => {
    runs++;
    throw new DomainError('agent_not_found', 'no such agent', { mint: 'x' });
  });
  t.false(first.replayed);
  t.like(first.outcome, { ok: false, error: { code: 'agent_not_found', message: 'no such agent', details: { mint: 'x' } } });
  const record = await stored('client');
  t.is(record?.state, 'done');
  t.deepEqual(JSON.parse(record!.response!), first.outcome);
  const second = await service.run(call('client'), async () => {
    runs++;
    return 'should not run';
  });
  t.is(runs, 1);
  t.true(second.replayed);
  t.deepEqual(second.outcome, first.outcome);

  // and a different input under the same key is a mismatch
  const mismatch = await t.throwsAsync(service.run(call('client', { n: 2 }), async () => 'x'));
  t.true(mismatch instanceof DomainError && mismatch.code === 'idempotency_body_mismatch');

  await store.idempotency.release(keyId, 'test.op', 'client'); // only running claims are released
  t.truthy(await stored('client'));
  await a.database.orm.em.fork().execute('delete from idempotency_records where key_id = ?', [keyId]);
});
