import { statementsOf } from '../support/statements.ts';
import anyTest, { type TestFn } from 'ava';
import pg from 'pg';
import { getAssociatedTokenAddressSync } from '@solana/spl-token';
import { PublicKey } from '@solana/web3.js';
import { http, issueKey, linkBody, recordAgent, removeDataDir, startTestApp, startTwoInstances, type TestApp } from '../support/app.ts';
import { newRequestId, ULID_PATTERN } from '../../domain/shared/ids.ts';
import { associatedTokenAccount } from '../../domain/treasury/derive.ts';
import { KEY_CACHE_TTL_MS } from '../../domain/access/service.ts';
import type { EventRecord } from '../../domain/events/schema.ts';
import { HitLog } from '../../domain/policies/rate-limit.ts';
import { keyedProcedure } from '../../interfaces/trpc/init.ts';
import { clientSignal } from '../../interfaces/policies/heavy.ts';
import { createServer, request as httpRequest, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

// The /v1 read hot path. "One round trip" is proven by counting the statements the gateway's PostgreSQL
// connection runs for a request, never by timing.

const test = anyTest as TestFn<{ a: TestApp; b: TestApp }>;

test.before(async (t) => {
  t.context = await startTwoInstances();
});

/** The background statements of the process's timers (rate-limit exchange, usage flush, event catch-up, the indexer job): not a request's. */
const BACKGROUND = [/insert into rate_hits/i, /insert into request_records/i, /from events\b.*seq >/is, /insert into indexer_runs/i, /\bindexer_watch\b/i];

/** The statements handed to MikroORM's `execute` (the raw-SQL repositories' way) while `fn` runs. */
async function ormExecutesOf(app: TestApp, fn: () => Promise<unknown>): Promise<string[]> {
  const connection = app.database.orm.em.getConnection() as unknown as { execute: (...args: unknown[]) => Promise<unknown> };
  const original = connection.execute;
  const seen: string[] = [];
  connection.execute = function (this: unknown, ...args: unknown[]) {
    const sql = typeof args[0] === 'string' ? args[0] : String(args[0]);
    if (/payment_links/.test(sql)) seen.push(sql);
    return original.apply(this, args);
  };
  try {
    await fn();
  } finally {
    connection.execute = original;
  }
  return seen;
}

async function newLink(app: TestApp, key: string): Promise<string> {
  const { mint } = await recordAgent(app, key);
  const res = await http(app, 'POST', '/v1/payment-links', { key, body: linkBody(mint) });
  if (res.status !== 201) throw new Error(`create: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.id;
}

test.serial("a warm authenticated GET /v1/payment-links/{id} is one PostgreSQL statement: the read by primary key (with its agent's proof)", async (t) => {
  const { a } = t.context;
  const key = await issueKey(a);
  const id = await newLink(a, key);
  for (let i = 0; i < 5; i++) {
    // warm: the key is resolved and cached, last_used_at written (once a minute), the window exchanged with the store
    t.is((await http(a, 'GET', `/v1/payment-links/${id}`, { key })).status, 200);
    await a.services.rateLimiter.sync();
    let res: Awaited<ReturnType<typeof http<any>>> | undefined;
    let statements: string[] = [];
    const viaOrm = await ormExecutesOf(
      a,
      async () => (statements = await statementsOf(a, BACKGROUND, async () => (res = await http(a, 'GET', `/v1/payment-links/${id}`, { key })))),
    );
    t.deepEqual(viaOrm, [], 'the read goes straight to a pooled connection, not through MikroORM');
    t.is(res!.status, 200);
    t.is(res!.body.id, id);
    t.truthy(res!.headers.get('ratelimit-remaining'), 'the rate limit was decided');
    // the owner agent's proof (DECISIONS "Agents, submissions and events") rides in the same statement: a key probe
    t.deepEqual(
      statements,
      [
        'select l.*, exists (select 1 from agents a where a.network = l.network and a.mint = l.owner_agent and a.proven_at is not null) as owner_agent_proven from payment_links l where network = $1 and id = $2',
      ],
      `request ${i}`,
    );
  }
  // and the usage rows of those requests are written in a batch afterwards
  const flushed = await statementsOf(a, BACKGROUND, () => a.services.recorder.flush());
  t.true(flushed.length <= 1);
});

test.serial('the usage and rate-limit batches travel as bound parameters, never escaped into the statement text', async (t) => {
  const { a } = t.context;
  const key = await issueKey(a);
  const keyId = (await a.services.access.authenticate(`Bearer ${key}`)).keyId;
  type Conn = { query: (...args: unknown[]) => unknown };
  const client = a.database.orm.em.getConnection().getKnex().client as unknown as { acquireConnection: () => Promise<Conn> };
  const acquire = client.acquireConnection;
  const sent: { text: string; values: unknown[] }[] = [];
  client.acquireConnection = async function (this: unknown) {
    const connection = await acquire.call(this);
    const query = connection.query;
    // this acquisition's statements only (the connection goes back to the pool unwrapped)
    connection.query = function (this: unknown, ...args: unknown[]) {
      const first = args[0] as string | { text: string; values?: unknown[] };
      sent.push(typeof first === 'string' ? { text: first, values: (args[1] as unknown[]) ?? [] } : { text: first.text, values: first.values ?? [] });
      connection.query = query;
      return query.apply(this, args);
    };
    return connection;
  };
  try {
    for (let i = 0; i < 3; i++) t.is((await http(a, 'GET', '/v1/health', { key })).status, 200);
    await a.services.recorder.flush();
    await a.services.rateLimiter.sync();
  } finally {
    client.acquireConnection = acquire;
  }
  const usage = sent.find((s) => /insert into request_records/.test(s.text) && s.values.some((v) => typeof v === 'string' && v.includes(keyId)));
  t.truthy(usage, 'the usage batch was written');
  t.regex(usage!.text, /jsonb_to_recordset\(\$1::jsonb\)/);
  t.false(usage!.text.includes(keyId), 'no value in the text');
  t.is((JSON.parse(usage!.values[0] as string) as { key_id: string }[]).filter((r) => r.key_id === keyId).length, 3);
  const hits = sent.find((s) => /insert into rate_hits/.test(s.text) && s.values.some((v) => typeof v === 'string' && v.includes(keyId)));
  t.truthy(hits, "the rate-limit exchange carried the key's hits");
  t.regex(hits!.text, /jsonb_to_recordset\(\$1::jsonb\)/);
  t.false(hits!.text.includes(keyId), 'no value in the text');
});

test('usage rows and last_used_at are not lost on a graceful shutdown', async (t) => {
  const c = await startTestApp({ databaseUrl: t.context.a.database.url, env: { SVC_JOBS: 'off' } });
  const created = await c.services.access.issueKey({ network: 'chain-devnet', role: 'user' });
  const N = 7;
  try {
    for (let i = 0; i < N; i++) t.is((await http(c, 'GET', '/v1/health', { key: created.key })).status, 200);
  } finally {
    await c.close();
    await removeDataDir(c.dataDir);
  }
  const client = new pg.Client({ connectionString: t.context.a.database.url });
  await client.connect();
  try {
    const rows = await client.query('select count(*)::int as n from request_records where key_id = $1', [created.id]);
    t.is(rows.rows[0].n, N);
    const key = await client.query('select last_used_at from api_keys where id = $1', [created.id]);
    t.truthy(key.rows[0].last_used_at);
  } finally {
    await client.end();
  }
});

test('a key disabled on node A is refused by node B, which had it cached, as soon as the disable event reaches B', async (t) => {
  const { a, b } = t.context;
  const admin = await issueKey(a, 'chain-devnet', 'admin');
  const adminOnB = await b.services.access.authenticate(`Bearer ${admin}`);
  const created = await a.services.access.issueKey({ network: 'chain-devnet', role: 'user' });
  const other = await a.services.access.issueKey({ network: 'chain-devnet', role: 'user' });

  // Control: B caches a key row — a change made behind every cache's back (no event) is not seen by B within the TTL.
  const warmedAt = Date.now();
  t.is((await http(b, 'GET', '/v1/health', { key: other.key })).status, 200);
  const direct = new pg.Client({ connectionString: a.database.url });
  await direct.connect();
  await direct.query('update api_keys set disabled_at = now() where id = $1', [other.id]);
  await direct.end();
  const stale = await http(b, 'GET', '/v1/health', { key: other.key });
  if (Date.now() - warmedAt < KEY_CACHE_TTL_MS) t.is(stale.status, 200, 'B answered from its key cache');

  // The real path: B caches the key, A's admin route disables it, B's feed delivers api_key.disabled.
  t.is((await http(b, 'GET', '/v1/health', { key: created.key })).status, 200);
  let unwatch = () => {};
  const arrived = new Promise<EventRecord>((resolve) => {
    unwatch = b.services.events.watch(adminOnB, { kinds: ['api_key.disabled'] }, (e) => {
      if ((e.metadata as { api_key_id?: string }).api_key_id === created.id) resolve(e);
    });
  });
  const res = await http(a, 'POST', `/v1/admin/api-keys/${created.id}/disable`, { key: admin, body: {} });
  t.is(res.status, 200, JSON.stringify(res.body));
  const event = await arrived;
  unwatch();
  t.is(event?.kind, 'api_key.disabled');
  // B's key cache listens to the same feed and was told before this stream (listeners run in the order they joined).
  const refused = await http(b, 'GET', '/v1/health', { key: created.key });
  t.is(refused.status, 401);
  t.is(refused.body.error, 'invalid_api_key');
  // only admins see the event
  const user = await issueKey(a);
  const asUser = await http(a, 'GET', '/v1/events?kind=api_key.disabled', { key: user });
  t.is(asUser.status, 200);
  t.deepEqual(asUser.body.data, []);
  const asAdmin = await http(a, 'GET', '/v1/events?kind=api_key.disabled', { key: admin });
  t.true(asAdmin.body.data.some((e: { metadata: { api_key_id: string } }) => e.metadata.api_key_id === created.id));
});

test('request ids: unique, ordered ULIDs without per-id randomness', (t) => {
  const ids = Array.from({ length: 20_000 }, () => newRequestId());
  t.is(new Set(ids).size, ids.length);
  t.deepEqual([...ids].sort(), ids);
  for (const id of ids.slice(0, 50)) t.regex(id, ULID_PATTERN);
  // the time part is the ULID time
  const now = Date.now();
  const id = newRequestId(now);
  const decoded = [...id.slice(0, 10)].reduce((n, c) => n * 32 + '0123456789ABCDEFGHJKMNPQRSTVWXYZ'.indexOf(c), 0);
  t.is(decoded, now);
});

test('memoised ATA derivations answer what spl-token derives', (t) => {
  const owner = 'So11111111111111111111111111111111111111112';
  const mint = 'EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v';
  const program = 'TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA';
  const direct = getAssociatedTokenAddressSync(new PublicKey(mint), new PublicKey(owner), true, new PublicKey(program)).toBase58();
  t.is(associatedTokenAccount(owner, mint, program), direct);
  t.is(associatedTokenAccount(owner, mint, program), direct);
});

test('the sliding hit log ages hits out in order across compactions (O(1) per hit, no splice)', (t) => {
  const log = new HitLog();
  for (let i = 0; i < 5000; i++) log.push(i);
  log.dropUntil(2999);
  t.is(log.length, 2000);
  t.is(log.at(0), 3000);
  t.is(log.last(), 4999);
  for (let i = 5000; i < 6000; i++) log.push(i);
  log.dropUntil(3499);
  t.is(log.length, 2500);
  t.is(log.at(0), 3500);
  t.is(log.at(log.length - 1), 5999);
  log.dropUntil(10_000);
  t.is(log.length, 0);
  t.is(log.last(), undefined);
  log.push(7);
  t.is(log.at(0), 7);
});

test('a keyed procedure runs one tRPC middleware: auth, the keyed policies and the error mapping as one (each hop spreads its options and the context again)', (t) => {
  // the policies' behaviour and order are the rate-limit, idempotency, hostile-input and metrics tests'
  t.is(keyedProcedure._def.middlewares.length, 1);
});

test('the client-left signal: aborts when the connection closes before the answer, never after it; listens on the response only once asked', async (t) => {
  const seen: { res: ServerResponse; signal: ReturnType<typeof clientSignal>; listeners: number[]; fired: number }[] = [];
  const server = createServer((_req, res) => {
    const before = res.listenerCount('close');
    const signal = clientSignal(res);
    const entry = { res, signal, listeners: [before, res.listenerCount('close')], fired: 0 };
    seen.push(entry);
    signal.addEventListener('abort', () => entry.fired++, { once: true });
    entry.listeners.push(res.listenerCount('close'));
    if (seen.length === 1) res.end('ok'); // the first is answered; the second never is (its client leaves)
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  try {
    // answered: the signal never aborts, not even when the connection closes afterwards
    await new Promise<void>((resolve, reject) =>
      httpRequest(url, { agent: false }, (res) => res.resume().on('end', resolve))
        .on('error', reject)
        .end(),
    );
    // the client leaves before the answer
    await new Promise<void>((resolve) => {
      const req = httpRequest(url, { agent: false });
      req.on('error', () => resolve());
      req.end();
      const wait = setInterval(() => {
        if (seen.length === 2) {
          clearInterval(wait);
          req.destroy();
        }
      }, 5);
    });
    await new Promise<void>((resolve) => {
      const wait = setInterval(() => {
        if (seen[1]!.fired) {
          clearInterval(wait);
          resolve();
        }
      }, 5);
    });
    const [answered, left] = seen as [(typeof seen)[number], (typeof seen)[number]];
    const [before] = answered.listeners as [number];
    t.deepEqual(answered.listeners, [before, before, before + 1], 'made: no listener; asked: one on the response');
    t.false(answered.signal.aborted);
    t.is(answered.fired, 0);
    t.true(left.signal.aborted);
    t.is(left.fired, 1);
    // asked after the client left: already aborted (a scope checks `aborted` after subscribing)
    t.true(clientSignal(left.res).aborted);
    t.false(clientSignal(answered.res).aborted);
  } finally {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
});
