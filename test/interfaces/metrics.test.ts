import anyTest, { type ExecutionContext, type TestFn } from 'ava';
import { http, linkBody, recordAgent, startTestApp, type TestApp } from '../support/app.ts';

// hosted-api §4.8: GET /v1/metrics/usage (per key, bucket and day, from stored request records) and
// GET /v1/metrics/events (per-network event counters by kind).

interface Key {
  key: string;
  id: string;
}

interface Ctx {
  a: TestApp;
  b: TestApp;
  user1: Key;
  user2: Key;
  admin: Key;
  live: Key;
  liveAdmin: Key;
}

const test = anyTest as TestFn<Ctx>;
/** meta limited to 3 so throttled requests show up in usage */
const env = { SVC_RATE_LIMITS: '{"meta":3}' };

test.before(async (t) => {
  const a = await startTestApp({ env });
  let b: TestApp;
  try {
    b = await startTestApp({ databaseUrl: a.database.url, env: { ...env, SVC_JOBS: 'off' } });
  } catch (e) {
    await a.close();
    throw e;
  }
  const issue = async (network: 'chain-devnet' | 'chain-mainnet', role: 'user' | 'admin'): Promise<Key> => {
    const created = await a.services.access.issueKey({ network, role });
    return { key: created.key, id: created.id };
  };
  t.context = {
    a,
    b,
    user1: await issue('chain-devnet', 'user'),
    user2: await issue('chain-devnet', 'user'),
    admin: await issue('chain-devnet', 'admin'),
    live: await issue('chain-mainnet', 'user'),
    liveAdmin: await issue('chain-mainnet', 'admin'),
  };
});

const today = () => new Date().toISOString().slice(0, 10);

async function flush(t: ExecutionContext<Ctx>): Promise<void> {
  await t.context.a.services.recorder.flush();
  await t.context.b.services.recorder.flush();
}

interface UsageRow {
  key_id: string;
  bucket: string;
  day: string;
  requests: number;
  errors: number;
  throttled: number;
}

async function usage(
  app: TestApp,
  key: string,
  query = '',
): Promise<{ network: string; since: string; data: UsageRow[]; next_cursor: string | null; has_more: boolean }> {
  const res = await http(app, 'GET', `/v1/metrics/usage${query}`, { key });
  if (res.status !== 200) throw new Error(`usage: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

const rowOf = (rows: UsageRow[], keyId: string, bucket: string, day = today()) => rows.find((r) => r.key_id === keyId && r.bucket === bucket && r.day === day);

test.serial('usage: per key, bucket and day, across both instances, with errors and throttled requests', async (t) => {
  const { a, b, user1, user2, live } = t.context;
  // user1: 5 × meta over two instances (limit 3: 2 throttled), 3 × default (one 404), 1 × events.read
  const meta = [];
  for (let i = 0; i < 5; i++) meta.push((await http(i % 2 ? b : a, 'GET', '/v1/health', { key: user1.key })).status);
  t.deepEqual(meta, [200, 200, 200, 429, 429]);
  t.is((await http(a, 'GET', '/v1/payment-links', { key: user1.key })).status, 200);
  t.is((await http(b, 'GET', '/v1/payment-links', { key: user1.key })).status, 200);
  t.is((await http(b, 'GET', '/v1/payment-links/no-such-link', { key: user1.key })).status, 404);
  t.is((await http(a, 'GET', '/v1/events', { key: user1.key })).status, 200);
  // user2 and a mainnet key
  t.is((await http(b, 'GET', '/v1/version', { key: user2.key })).status, 200);
  t.is((await http(a, 'GET', '/v1/health', { key: live.key })).status, 200);
  // requests without a valid key are not anyone's usage
  t.is((await http(a, 'GET', '/v1/health')).status, 401);
  await flush(t);

  const mine = await usage(a, user1.key);
  t.is(mine.network, 'chain-devnet');
  t.true(
    mine.data.every((r) => r.key_id === user1.id),
    'a user key sees only its own key',
  );
  t.deepEqual(rowOf(mine.data, user1.id, 'meta'), { key_id: user1.id, bucket: 'meta', day: today(), requests: 5, errors: 2, throttled: 2 });
  t.deepEqual(rowOf(mine.data, user1.id, 'default'), { key_id: user1.id, bucket: 'default', day: today(), requests: 3, errors: 1, throttled: 0 });
  t.deepEqual(rowOf(mine.data, user1.id, 'events.read'), { key_id: user1.id, bucket: 'events.read', day: today(), requests: 1, errors: 0, throttled: 0 });
  t.is(mine.data.length, 3);

  // a user cannot look at another key through key_id
  const peek = await usage(b, user1.key, `?key_id=${user2.id}`);
  t.true(peek.data.every((r) => r.key_id === user1.id));

  // the usage call itself is a recorded request of the default bucket
  await flush(t);
  const again = await usage(b, user1.key);
  t.is(rowOf(again.data, user1.id, 'default')!.requests, 3 + 2);
});

test.serial('usage: an admin sees every key of its network (or one with key_id), never the other network', async (t) => {
  const { a, user1, user2, admin, live, liveAdmin } = t.context;
  await flush(t);
  const all = await usage(a, admin.key);
  const keys = new Set(all.data.map((r) => r.key_id));
  t.true(keys.has(user1.id) && keys.has(user2.id), 'both devnet user keys');
  t.false(keys.has(live.id), 'not the mainnet key');
  t.deepEqual(rowOf(all.data, user2.id, 'meta'), { key_id: user2.id, bucket: 'meta', day: today(), requests: 1, errors: 0, throttled: 0 });
  t.like(rowOf(all.data, user1.id, 'meta'), { requests: 5, throttled: 2 });

  const one = await usage(a, admin.key, `?key_id=${user2.id}`);
  t.deepEqual(one.data, [{ key_id: user2.id, bucket: 'meta', day: today(), requests: 1, errors: 0, throttled: 0 }]);

  const liveView = await usage(a, liveAdmin.key);
  t.is(liveView.network, 'chain-mainnet');
  t.true(liveView.data.every((r) => r.key_id !== user1.id && r.key_id !== user2.id));
  t.like(rowOf(liveView.data, live.id, 'meta'), { requests: 1 });
  t.deepEqual((await usage(a, liveAdmin.key, `?key_id=${user1.id}`)).data, [], 'a devnet key id through a mainnet admin: nothing');

  // DECISIONS "Wire conventions": the list envelope, paged by cursor in its order (day desc, key, bucket): every row
  // once (the pages' own requests may add a row of the admin's while paging, never repeat one)
  t.like(all, { has_more: false, next_cursor: null });
  const seen: string[] = [];
  let cursor: string | null = null;
  do {
    const page: { data: UsageRow[]; next_cursor: string | null; has_more: boolean } = await usage(a, admin.key, `?limit=2${cursor ? `&cursor=${cursor}` : ''}`);
    t.true(page.data.length <= 2);
    t.is(page.has_more, page.next_cursor !== null);
    seen.push(...page.data.map((r) => `${r.day}/${r.key_id}/${r.bucket}`));
    cursor = page.next_cursor;
  } while (cursor);
  t.is(new Set(seen).size, seen.length, 'no row twice');
  for (const r of all.data) t.true(seen.includes(`${r.day}/${r.key_id}/${r.bucket}`), `${r.key_id} ${r.bucket}`);
});

test.serial('usage: days window (default 7, 1..30) and one row per day from stored records', async (t) => {
  const { a, user2 } = t.context;
  const now = Date.now();
  const day = (d: number) => new Date(now - d * 86_400_000);
  const insert = (id: string, at: Date, status: number) =>
    a.database.orm.em.fork().execute(
      `insert into request_records (id, key_id, network, bucket, method, route, status, duration_ms, at)
         values (?, ?, 'chain-devnet', 'default', 'GET /v1/payment-links', 'paymentLinks.list', ?, 3, ?)`,
      [id, user2.id, status, at],
    );
  await insert(`rr-test-${now}-3a`, day(3), 200);
  await insert(`rr-test-${now}-3b`, day(3), 429);
  await insert(`rr-test-${now}-10`, day(10), 500);
  await flush(t);

  const day3 = day(3).toISOString().slice(0, 10);
  const day10 = day(10).toISOString().slice(0, 10);
  const week = await usage(a, user2.key);
  t.deepEqual(rowOf(week.data, user2.id, 'default', day3), { key_id: user2.id, bucket: 'default', day: day3, requests: 2, errors: 1, throttled: 1 });
  t.is(rowOf(week.data, user2.id, 'default', day10), undefined, 'outside the default 7 days');
  t.is(week.since.slice(0, 10), day(6).toISOString().slice(0, 10));

  const month = await usage(a, user2.key, '?days=30');
  t.deepEqual(rowOf(month.data, user2.id, 'default', day10), { key_id: user2.id, bucket: 'default', day: day10, requests: 1, errors: 1, throttled: 0 });
  const days = month.data.map((r) => r.day);
  t.deepEqual(days, [...days].sort().reverse(), 'newest day first');

  const todayOnly = await usage(a, user2.key, '?days=1');
  t.true(todayOnly.data.every((r) => r.day === today()));

  for (const q of ['?days=0', '?days=31', '?days=abc']) {
    const res = await http(a, 'GET', `/v1/metrics/usage${q}`, { key: user2.key });
    t.is(res.status, 400, q);
    t.is(res.body.error, 'invalid_request');
  }
});

/** A user key counts its principal's events only (README "Ownership"); an admin key, its network's. */
async function countsBySql(app: TestApp, network: string, owner?: string): Promise<Map<string, number>> {
  const rows = (await app.database.orm.em
    .fork()
    .execute(
      `select kind, count(*)::int as n from events where network = ? ${owner ? 'and owner_principal = ?' : ''} group by kind`,
      owner ? [network, owner] : [network],
    )) as {
    kind: string;
    n: number;
  }[];
  return new Map(rows.map((r) => [r.kind, r.n]));
}

test.serial("events: counters by kind of the caller's own events on its network (admin: the network), matching the stored events", async (t) => {
  const { a, b, user1, user2, admin, live } = t.context;
  const { mint } = await recordAgent(a, user1.key);
  const created = [];
  for (let i = 0; i < 3; i++) created.push((await http(a, 'POST', '/v1/payment-links', { key: user1.key, body: linkBody(mint, { label: `m${i}` }) })).body);
  t.is((await http(b, 'PATCH', `/v1/payment-links/${created[0].id}`, { key: user1.key, body: { label: 'changed' } })).status, 200);
  t.is((await http(b, 'DELETE', `/v1/payment-links/${created[1].id}`, { key: user1.key })).status, 204);

  const before = await http(b, 'GET', '/v1/metrics/events', { key: user1.key });
  t.is(before.status, 200, JSON.stringify(before.body));
  t.is(before.body.network, 'chain-devnet');
  t.is(before.body.since, null);
  const expected = await countsBySql(a, 'chain-devnet', `key:${user1.id}`);
  t.deepEqual(new Map(before.body.kinds.map((k: { kind: string; count: number }) => [k.kind, k.count])), expected);
  t.true(before.body.kinds.find((k: { kind: string }) => k.kind === 'payment_link.created').count >= 3);
  t.is(before.body.kinds.find((k: { kind: string }) => k.kind === 'payment_link.updated').count, 1);
  t.is(before.body.kinds.find((k: { kind: string }) => k.kind === 'payment_link.deleted').count, 1);
  t.is(
    before.body.total,
    [...expected.values()].reduce((x, y) => x + y, 0),
  );
  for (const k of before.body.kinds)
    t.is(
      Object.values(k.phases as Record<string, number>).reduce((x, y) => x + y, 0),
      k.count,
      k.kind,
    );

  // activity on mainnet does not move devnet's counters, and shows on mainnet's
  const liveAgent = await recordAgent(a, live.key);
  t.is((await http(a, 'POST', '/v1/payment-links', { key: live.key, body: linkBody(liveAgent.mint) })).status, 201);
  const after = await http(a, 'GET', '/v1/metrics/events', { key: user1.key });
  t.deepEqual(after.body.kinds, before.body.kinds);
  const liveCounters = await http(a, 'GET', '/v1/metrics/events', { key: live.key });
  t.is(liveCounters.body.network, 'chain-mainnet');
  t.deepEqual(
    new Map(liveCounters.body.kinds.map((k: { kind: string; count: number }) => [k.kind, k.count])),
    await countsBySql(a, 'chain-mainnet', `key:${live.id}`),
  );
  t.is(liveCounters.body.kinds.find((k: { kind: string }) => k.kind === 'payment_link.created').count, 1);

  // another principal's activity does not move user1's counters; the admin's counters are the network's
  const other = await recordAgent(a, user2.key);
  t.is((await http(a, 'POST', '/v1/payment-links', { key: user2.key, body: linkBody(other.mint) })).status, 201);
  t.deepEqual((await http(a, 'GET', '/v1/metrics/events', { key: user1.key })).body.kinds, before.body.kinds);
  const ofNetwork = await http(a, 'GET', '/v1/metrics/events', { key: admin.key });
  t.deepEqual(new Map(ofNetwork.body.kinds.map((k: { kind: string; count: number }) => [k.kind, k.count])), await countsBySql(a, 'chain-devnet'));
  t.true(ofNetwork.body.total > before.body.total);

  // ?days limits to recent events
  await a.database.orm.em
    .fork()
    .execute(`update events set created_at = now() - interval '10 days' where kind = 'payment_link.deleted' and network = 'chain-devnet'`);
  const recent = await http(a, 'GET', '/v1/metrics/events?days=1', { key: user1.key });
  t.is(recent.status, 200);
  t.truthy(recent.body.since);
  t.is(
    recent.body.kinds.find((k: { kind: string }) => k.kind === 'payment_link.deleted'),
    undefined,
  );
  t.is(recent.body.total, before.body.total - 1);
});
