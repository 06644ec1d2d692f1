import anyTest, { type ExecutionContext, type TestFn } from 'ava';
import { createHash, randomUUID } from 'node:crypto';
import { createClient, errorCode } from '../../interfaces/client/index.ts';
import { http, issueKey, randomAddress, startTwoInstances, type HttpResult, type TestApp } from '../support/app.ts';
import { until } from '../support/until.ts';

// hosted-api §4.8/§5.5 and DECISIONS "API keys": admin routes to issue, list and disable keys; admin role only;
// a disabled key is refused at once by the instance that disabled it and by every other once its api_key.disabled
// event arrives (docs/policies.md: about a second; the time is logged, not asserted, so load cannot fail the test).

interface Ctx {
  a: TestApp;
  b: TestApp;
  admin: string;
  user: string;
  liveAdmin: string;
}

const test = anyTest as TestFn<Ctx>;

test.before(async (t) => {
  const { a, b } = await startTwoInstances();
  t.context = {
    a,
    b,
    admin: await issueKey(a, 'chain-devnet', 'admin'),
    user: await issueKey(a, 'chain-devnet', 'user'),
    liveAdmin: await issueKey(a, 'chain-mainnet', 'admin'),
  };
});

function expectError(t: ExecutionContext, res: HttpResult, status: number, code: string): any {
  t.is(res.status, status, JSON.stringify(res.body));
  t.is(res.body?.error, code);
  t.is(res.body?.request_id, res.headers.get('x-svc-request-id'));
  return res.body;
}

const KEY_FIELDS = ['created_at', 'disabled', 'disabled_at', 'id', 'label', 'last_used_at', 'network', 'owner_wallet', 'prefix', 'role'];
const sha256 = (s: string) => createHash('sha256').update(s, 'utf8').digest('hex');

async function createKey(t: ExecutionContext<Ctx>, body: Record<string, unknown>, key = t.context.admin): Promise<any> {
  const res = await http(t.context.a, 'POST', '/v1/admin/api-keys', { key, body });
  t.is(res.status, 201, JSON.stringify(res.body));
  return res.body;
}

test('non-admin keys get 403 forbidden on every admin route; no key is 401', async (t) => {
  const { a, b, user } = t.context;
  const wallet = await randomAddress();
  for (const app of [a, b]) {
    expectError(t, await http(app, 'POST', '/v1/admin/api-keys', { key: user, body: { network: 'chain-devnet', owner_wallet: wallet } }), 403, 'forbidden');
    expectError(t, await http(app, 'GET', '/v1/admin/api-keys', { key: user }), 403, 'forbidden');
    expectError(t, await http(app, 'POST', `/v1/admin/api-keys/${randomUUID()}/disable`, { key: user }), 403, 'forbidden');
    expectError(t, await http(app, 'GET', '/v1/admin/api-keys'), 401, 'missing_api_key');
  }
  const rows = (await a.database.orm.em.fork().execute('select count(*)::int as n from api_keys where owner_wallet = ?', [wallet])) as { n: number }[];
  t.is(rows[0]!.n, 0, 'nothing was issued');
});

test('create returns the key once (201); the list shows the row, never the key or its hash', async (t) => {
  const { a, admin } = t.context;
  const wallet = await randomAddress();
  const created = await createKey(t, { network: 'chain-devnet', owner_wallet: wallet, label: 'ci bot' });
  t.regex(created.key, /^svc_test_[0-9A-Za-z]{32}$/);
  t.like(created, { network: 'chain-devnet', owner_wallet: wallet, label: 'ci bot', role: 'user', disabled: false, disabled_at: null, last_used_at: null });
  t.is(created.prefix, created.key.slice(0, 12));
  t.deepEqual(Object.keys(created).sort(), [...KEY_FIELDS, 'key'].sort());

  // the key works on both instances and is a user key of the admin's network
  const health = await http(t.context.b, 'GET', '/v1/health', { key: created.key });
  t.is(health.status, 200);
  expectError(t, await http(a, 'GET', '/v1/admin/api-keys', { key: created.key }), 403, 'forbidden');

  const list = await http(a, 'GET', `/v1/admin/api-keys?owner_wallet=${wallet}`, { key: admin });
  t.is(list.status, 200, JSON.stringify(list.body));
  t.is(list.body.data.length, 1);
  const row = list.body.data[0];
  t.deepEqual(Object.keys(row).sort(), KEY_FIELDS);
  const { key: _key, ...withoutKey } = created;
  t.like(row, { ...withoutKey, last_used_at: row.last_used_at });
  const text = JSON.stringify(list.body);
  t.false(text.includes(created.key), 'the key is never listed');
  t.false(text.includes(created.key.slice(12)), 'nor its secret part');
  t.false(text.includes(sha256(created.key)), 'nor its hash');

  // stored only as SHA-256
  const stored = (await a.database.orm.em.fork().execute('select * from api_keys where id = ?', [created.id])) as Record<string, unknown>[];
  t.is(stored[0]!.key_hash, sha256(created.key));
  t.false(JSON.stringify(stored).includes(created.key.slice(12)));
});

test('create validates its body: owner_wallet required and a valid address, role user|admin, no unknown fields', async (t) => {
  const { a, admin } = t.context;
  const wallet = await randomAddress();
  for (const body of [
    { network: 'chain-devnet' },
    { network: 'chain-devnet', owner_wallet: 'not-a-wallet' },
    { network: 'chain-devnet', owner_wallet: wallet, role: 'root' },
    { network: 'chain-devnet', owner_wallet: wallet, colour: 'blue' },
    { network: 'solana', owner_wallet: wallet },
  ]) {
    expectError(t, await http(a, 'POST', '/v1/admin/api-keys', { key: admin, body }), 400, 'invalid_request');
  }
  // an admin may issue admin keys, which can use the admin routes
  const second = await createKey(t, { network: 'chain-devnet', owner_wallet: wallet, role: 'admin' });
  t.is(second.role, 'admin');
  t.is((await http(a, 'GET', '/v1/admin/api-keys', { key: second.key })).status, 200);
});

test('hosted-api §5.2: a body naming no network issues a key of the admin key’s network (REST and tRPC)', async (t) => {
  const { a, liveAdmin } = t.context;
  const wallet = await randomAddress();
  const dev = await createKey(t, { owner_wallet: wallet });
  t.is(dev.network, 'chain-devnet');
  t.regex(dev.key, /^svc_test_/);
  const live = await createKey(t, { owner_wallet: wallet }, liveAdmin);
  t.is(live.network, 'chain-mainnet');
  t.regex(live.key, /^svc_live_/);
  const trpc = createClient({ url: a.url, apiKey: liveAdmin });
  const viaTrpc = await trpc.admin.createApiKey.mutate({ owner_wallet: wallet });
  t.is(viaTrpc.network, 'chain-mainnet');
  t.regex(viaTrpc.key, /^svc_live_/);
  // a network named in the body must still be the admin's own
  const other = await trpc.admin.createApiKey.mutate({ owner_wallet: wallet, network: 'chain-devnet' }).catch((e: unknown) => e);
  t.is(errorCode(other), 'wrong_network');
  t.is((await http(a, 'GET', '/v1/health', { key: dev.key })).status, 200);
});

test('an admin manages its own network only: another network is 403 wrong_network, its keys are invisible', async (t) => {
  const { a, admin, liveAdmin } = t.context;
  const wallet = await randomAddress();
  expectError(t, await http(a, 'POST', '/v1/admin/api-keys', { key: admin, body: { network: 'chain-mainnet', owner_wallet: wallet } }), 403, 'wrong_network');

  const live = await createKey(t, { network: 'chain-mainnet', owner_wallet: wallet }, liveAdmin);
  t.regex(live.key, /^svc_live_[0-9A-Za-z]{32}$/);
  const devList = await http(a, 'GET', `/v1/admin/api-keys?owner_wallet=${wallet}`, { key: admin });
  t.deepEqual(devList.body.data, [], 'a devnet admin does not see mainnet keys');
  const liveList = await http(a, 'GET', `/v1/admin/api-keys?owner_wallet=${wallet}`, { key: liveAdmin });
  t.deepEqual(
    liveList.body.data.map((k: { id: string }) => k.id),
    [live.id],
  );

  // nor can it disable them
  expectError(t, await http(a, 'POST', `/v1/admin/api-keys/${live.id}/disable`, { key: admin }), 404, 'not_found');
  t.is((await http(a, 'GET', '/v1/health', { key: live.key })).status, 200, 'the mainnet key still works');
});

test('list: owner_wallet filter, old rows with a null owner_wallet, pagination', async (t) => {
  const { a, admin } = t.context;
  const w1 = await randomAddress();
  const w2 = await randomAddress();
  const k1 = await createKey(t, { network: 'chain-devnet', owner_wallet: w1, label: 'one' });
  const k2 = await createKey(t, { network: 'chain-devnet', owner_wallet: w1, label: 'two' });
  const k3 = await createKey(t, { network: 'chain-devnet', owner_wallet: w2 });
  // an old row, issued before owner_wallet existed
  const old = await a.services.access.issueKey({ network: 'chain-devnet', label: uniqLabel() });

  const byW1 = await http(a, 'GET', `/v1/admin/api-keys?owner_wallet=${w1}`, { key: admin });
  t.is(byW1.status, 200);
  t.deepEqual(byW1.body.data.map((k: { id: string }) => k.id).sort(), [k1.id, k2.id].sort());
  t.true(byW1.body.data.every((k: { owner_wallet: string }) => k.owner_wallet === w1));
  t.is(byW1.body.has_more, false);
  t.is(byW1.body.next_cursor, null);
  const byW2 = await http(a, 'GET', `/v1/admin/api-keys?owner_wallet=${w2}`, { key: admin });
  t.deepEqual(
    byW2.body.data.map((k: { id: string }) => k.id),
    [k3.id],
  );
  expectError(t, await http(a, 'GET', '/v1/admin/api-keys?owner_wallet=nope', { key: admin }), 400, 'invalid_request');

  // walk the unfiltered list: every devnet key once, the old row with owner_wallet null, no mainnet key
  const seen: any[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const res: HttpResult = await http(a, 'GET', `/v1/admin/api-keys?limit=2${cursor ? `&cursor=${cursor}` : ''}`, { key: admin });
    t.is(res.status, 200, JSON.stringify(res.body));
    t.true(res.body.data.length <= 2);
    seen.push(...res.body.data);
    cursor = res.body.next_cursor;
    t.is(res.body.has_more, cursor !== null);
  } while (cursor && ++pages < 100);
  const ids = seen.map((k) => k.id);
  t.is(new Set(ids).size, ids.length, 'no duplicates across pages');
  for (const id of [k1.id, k2.id, k3.id, old.id]) t.true(ids.includes(id));
  t.is(seen.find((k) => k.id === old.id).owner_wallet, null);
  t.true(seen.every((k) => k.network === 'chain-devnet'));
});

function uniqLabel(): string {
  return `old-${randomUUID().slice(0, 8)}`;
}

test('disable: the key is refused with 401 invalid_api_key on BOTH instances: at once where it was disabled, on the other when the event arrives', async (t) => {
  const { a, b, admin } = t.context;
  const created = await createKey(t, { network: 'chain-devnet', owner_wallet: await randomAddress() });
  // warm both instances' key caches
  for (const app of [a, b]) for (let i = 0; i < 3; i++) t.is((await http(app, 'GET', '/v1/payment-links', { key: created.key })).status, 200);

  const disabled = await http(a, 'POST', `/v1/admin/api-keys/${created.id}/disable`, { key: admin });
  const disabledAt = performance.now();
  t.is(disabled.status, 200, JSON.stringify(disabled.body));
  t.like(disabled.body, { id: created.id, disabled: true });
  t.truthy(disabled.body.disabled_at);
  t.is(disabled.body.key, undefined);

  // The disabling request dropped the key from its own instance's cache: the very next request there is refused.
  expectError(t, await http(a, 'GET', '/v1/payment-links', { key: created.key }), 401, 'invalid_api_key');
  // The other instance drops it when its feed delivers api_key.disabled (typically milliseconds; the cache's TTL is the
  // backstop): served from its cache until then, refused from then on.
  await until(
    'the other instance refuses the key',
    async () => {
      const res = await http(b, 'GET', '/v1/payment-links', { key: created.key });
      if (res.status === 401) return res;
      t.is(res.status, 200);
      return undefined;
    },
    { everyMs: 25 },
  ).then((res) => expectError(t, res, 401, 'invalid_api_key'));
  t.log(`refused on the other instance ${Math.round(performance.now() - disabledAt)} ms after the disable`);
  // and it stays refused, on every door
  for (const app of [a, b]) {
    expectError(t, await http(app, 'GET', '/v1/health', { key: created.key }), 401, 'invalid_api_key');
    const trpc = await fetch(`${app.url}/trpc/health`, { headers: { authorization: `Bearer ${created.key}` } });
    t.is(trpc.status, 401);
  }

  // disabling again keeps the first disabled_at; the list shows it disabled; unknown ids are 404
  const again = await http(b, 'POST', `/v1/admin/api-keys/${created.id}/disable`, { key: admin });
  t.is(again.status, 200);
  t.is(again.body.disabled_at, disabled.body.disabled_at);
  const list = await http(b, 'GET', `/v1/admin/api-keys?owner_wallet=${created.owner_wallet}`, { key: admin });
  t.like(list.body.data[0], { id: created.id, disabled: true, disabled_at: disabled.body.disabled_at });
  expectError(t, await http(a, 'POST', '/v1/admin/api-keys/no-such-key/disable', { key: admin }), 404, 'not_found');
});

test('an admin may disable its own key; it is refused right after', async (t) => {
  const { a } = t.context;
  const created = await createKey(t, { network: 'chain-devnet', owner_wallet: await randomAddress(), role: 'admin' });
  const res = await http(a, 'POST', `/v1/admin/api-keys/${created.id}/disable`, { key: created.key });
  t.is(res.status, 200);
  expectError(t, await http(a, 'GET', '/v1/admin/api-keys', { key: created.key }), 401, 'invalid_api_key');
});

test('Idempotency-Key on create: a retry replays the first answer (without the key) instead of issuing a second key', async (t) => {
  const { a, b, admin } = t.context;
  const wallet = await randomAddress();
  const body = { network: 'chain-devnet', owner_wallet: wallet };
  const idem = `admin-${randomUUID()}`;
  const first = await http(a, 'POST', '/v1/admin/api-keys', { key: admin, body, headers: { 'idempotency-key': idem } });
  t.is(first.status, 201);
  const second = await http(b, 'POST', '/v1/admin/api-keys', { key: admin, body, headers: { 'idempotency-key': idem } });
  t.is(second.status, 201);
  t.is(second.headers.get('idempotent-replayed'), 'true');
  // the key itself was shown once: the replay is the same record without it (it is never stored, not even here)
  const { key: shownOnce, ...record } = first.body;
  t.truthy(shownOnce);
  t.deepEqual(second.body, record);
  const list = await http(a, 'GET', `/v1/admin/api-keys?owner_wallet=${wallet}`, { key: admin });
  t.is(list.body.data.length, 1, 'one key issued');
});

// DECISIONS "API keys": keys are "stored only as SHA-256" — the idempotency record of a key creation keeps the record
// without the key (the procedure's meta.secretFields).
test('a key issued with an Idempotency-Key is not kept in plaintext in idempotency_records', async (t) => {
  const { a, admin } = t.context;
  const res = await http(a, 'POST', '/v1/admin/api-keys', {
    key: admin,
    body: { network: 'chain-devnet', owner_wallet: await randomAddress() },
    headers: { 'idempotency-key': `plain-${randomUUID()}` },
  });
  t.is(res.status, 201);
  const secret = (res.body.key as string).slice(12);
  const rows = (await a.database.orm.em.fork().execute('select count(*)::int as n from idempotency_records where response like ?', [`%${secret}%`])) as {
    n: number;
  }[];
  t.is(rows[0]!.n, 0, 'the secret part of the key is stored in idempotency_records.response');
});
