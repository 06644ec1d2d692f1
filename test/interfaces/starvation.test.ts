import anyTest, { type TestFn } from 'ava';
import { createClient } from 'graphql-ws';
import pg from 'pg';
import WebSocket from 'ws';
import { http, linkBody, recordAgent, startTestApp, type TestApp } from '../support/app.ts';
import { until } from '../support/until.ts';

// No key can starve the others. Principal A floods a heavy read (its receipts list) that cannot
// finish (the test holds an exclusive lock on receipts, so every such query waits in PostgreSQL for as long as the
// test wants, whatever the machine's speed); principal B's point reads keep answering. Without the per-principal cap
// and the heavy pool share, A's requests take every connection of the pool and B waits with them.

interface Ctx {
  app: TestApp;
  short: TestApp;
  a: string;
  b: string;
  agentA: string;
  linkB: string;
}
const test = anyTest as TestFn<Ctx>;

const env = {
  SVC_JOBS: 'off',
  SVC_DB_POOL_MAX: '4',
  SVC_DB_HEAVY_POOL: '3',
  SVC_DB_HEAVY_PER_PRINCIPAL: '2',
  // long: what ends A's stuck requests here is their clients leaving, not a timer
  SVC_DB_HEAVY_TIMEOUT_MS: '120000',
  SVC_RATE_LIMITS: '{"receipts.read":100000,"default":100000}',
};

const SHORT_HEAVY_MS = 1500;

test.before(async (t) => {
  const app = await startTestApp({ env });
  let short: TestApp;
  try {
    // the same database behind a gateway whose heavy budget is short: short enough to wait out in a test, long enough
    // for its heavy reads that must answer (B's list, A's read once the lock is gone) on a loaded machine
    short = await startTestApp({ databaseUrl: app.database.url, env: { ...env, SVC_DB_HEAVY_TIMEOUT_MS: String(SHORT_HEAVY_MS) } });
  } catch (e) {
    await app.close();
    throw e;
  }
  const a = (await app.services.access.issueKey({ network: 'chain-devnet', role: 'user' })).key;
  const b = (await app.services.access.issueKey({ network: 'chain-devnet', role: 'user' })).key;
  const agentA = (await recordAgent(app, a)).mint;
  const agentB = (await recordAgent(app, b)).mint;
  const link = await http(app, 'POST', '/v1/payment-links', { key: b, body: linkBody(agentB) });
  if (link.status !== 201) throw new Error(`link: ${link.status} ${JSON.stringify(link.body)}`);
  t.context = { app, short, a, b, agentA, linkB: link.body.id };
});

/** Holds an exclusive lock on receipts until released: every query reading receipts waits meanwhile. */
async function lockReceipts(url: string, table = 'receipts'): Promise<() => Promise<void>> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  await client.query('begin');
  await client.query(`lock table ${table} in access exclusive mode`);
  return async () => {
    await client.query('rollback');
    await client.end();
  };
}

/** The gateway's statements on receipts running now (tagged with their request id by the request scope). */
async function runningOnReceipts(app: TestApp, table = 'receipts'): Promise<number> {
  const rows = (await app.database.orm.em
    .fork()
    .execute(`select count(*)::int as n from pg_stat_activity where state = 'active' and query like '/* svc:%' and query like ?`, [`%from ${table} %`])) as {
    n: number;
  }[];
  return rows[0]!.n;
}

test.serial("A's flood of heavy reads gets 429s and never a connection B needs; A's clients leaving cancels its queries", async (t) => {
  const { app, a, b, agentA, linkB } = t.context;
  const release = await lockReceipts(app.database.url);
  try {
    const flood = Array.from({ length: 16 }, () => {
      const controller = new AbortController();
      const answer = fetch(`${app.url}/v1/receipts/${agentA}`, { headers: { authorization: `Bearer ${a}` }, signal: controller.signal }).then(
        async (res) => ({ status: res.status, body: (await res.json()) as { error?: string; retry_after_ms?: number } }),
        () => ({ status: 0, body: {} as { error?: string; retry_after_ms?: number } }),
      );
      return { controller, answer, done: false };
    });
    for (const f of flood) void f.answer.then(() => (f.done = true));
    // A's admitted requests are in PostgreSQL, waiting on the lock
    await until("A's admitted queries", async () => (await runningOnReceipts(app)) === 2);

    // B's reads answer, every one, while A's queries hold their connections
    const times: number[] = [];
    for (let i = 0; i < 40; i++) {
      const started = performance.now();
      const res = await http(app, 'GET', `/v1/payment-links/${linkB}`, { key: b });
      times.push(performance.now() - started);
      t.is(res.status, 200, JSON.stringify(res.body));
    }
    // and so do B's own heavy reads: the cap is per principal
    t.is((await http(app, 'GET', '/v1/payment-links', { key: b })).status, 200);
    times.sort((x, y) => x - y);
    t.log(
      `B: ${times.length} reads during A's flood, p50 ${times[Math.floor(times.length * 0.5)]!.toFixed(1)} ms, p99 ${times[Math.ceil(times.length * 0.99) - 1]!.toFixed(1)} ms`,
    );

    // every A request beyond the cap was refused at once, in the envelope, with a retry hint (the refusals are answered
    // without waiting on anything, but on a loaded machine the last of them may still be on its way: waited, not timed)
    await until("A's requests beyond the cap answered", () => flood.filter((f) => f.done).length >= 14);
    const refused = flood.filter((f) => f.done);
    t.is(refused.length, 14);
    for (const f of refused) {
      const { status, body } = await f.answer;
      t.is(status, 429);
      t.is(body.error, 'rate_limited');
      t.is(typeof body.retry_after_ms, 'number');
    }
    // A's clients give up: their statements are cancelled although the lock still holds them
    for (const f of flood.filter((x) => !x.done)) f.controller.abort();
    await until("A's cancelled queries to leave PostgreSQL", async () => (await runningOnReceipts(app)) === 0);
    t.is(await runningOnReceipts(app), 0);
    // and A's slots are free again for its next request
    await release();
    t.is((await http(app, 'GET', `/v1/receipts/${agentA}`, { key: a })).status, 200);
  } finally {
    await release().catch(() => {});
  }
});

test.serial("the cap holds across processes: a second gateway on the same database refuses A while A's slots are taken on the first", async (t) => {
  const { app, short, a, b, agentA } = t.context;
  const release = await lockReceipts(app.database.url);
  try {
    const stuck = [1, 2].map(() => {
      const controller = new AbortController();
      const answer = fetch(`${app.url}/v1/receipts/${agentA}`, { headers: { authorization: `Bearer ${a}` }, signal: controller.signal }).catch(() => 'gone');
      return { controller, answer };
    });
    await until("A's admitted queries on the first gateway", async () => (await runningOnReceipts(app)) === 2);
    // the other process counts them: A's third heavy request there is refused at once (before: admitted, stuck too)
    const refused = await http(short, 'GET', `/v1/receipts/${agentA}`, { key: a });
    t.is(refused.status, 429, JSON.stringify(refused.body));
    t.is(refused.body.error, 'rate_limited');
    t.is(refused.body.details.limit, 2);
    // per principal there too: B's list answers
    t.is((await http(short, 'GET', '/v1/payment-links', { key: b })).status, 200);
    for (const s of stuck) s.controller.abort();
    t.deepEqual(await Promise.all(stuck.map((s) => s.answer)), ['gone', 'gone']);
    await until("A's cancelled queries to leave PostgreSQL", async () => (await runningOnReceipts(app)) === 0);
    await release();
    // A's slots are free again, in the other process too
    let status = 0;
    await until("A's slots to be given back", async () => {
      status = (await http(short, 'GET', `/v1/receipts/${agentA}`, { key: a })).status;
      return status === 200;
    });
    t.is(status, 200);
  } finally {
    await release().catch(() => {});
  }
});

test.serial('a GraphQL client that leaves has its running statement cancelled too', async (t) => {
  const { app, a, agentA } = t.context;
  const release = await lockReceipts(app.database.url);
  try {
    const controller = new AbortController();
    const answer = fetch(`${app.url}/graphql`, {
      method: 'POST',
      headers: { authorization: `Bearer ${a}`, 'content-type': 'application/json' },
      body: JSON.stringify({ query: `{ receipts(agent: "${agentA}") { data { receiptHash } } }` }),
      signal: controller.signal,
    }).catch(() => 'gone');
    await until("the GraphQL request's query", async () => (await runningOnReceipts(app)) === 1);
    controller.abort();
    t.is(await answer, 'gone');
    await until('the cancelled query to leave PostgreSQL', async () => (await runningOnReceipts(app)) === 0);
    t.is(await runningOnReceipts(app), 0, 'cancelled while the lock still holds it');
  } finally {
    await release();
  }
});

test.serial('a heavy read past its budget answers timeout in the envelope, and its statement is cancelled', async (t) => {
  const { short, a, agentA } = t.context;
  const release = await lockReceipts(short.database.url);
  try {
    const res = await http(short, 'GET', `/v1/receipts/${agentA}`, { key: a });
    t.is(res.status, 504, JSON.stringify(res.body));
    t.is(res.body.error, 'timeout');
    t.is(res.body.details.timeout_ms, SHORT_HEAVY_MS);
    t.truthy(res.body.request_id);
    await until('the timed-out query to leave PostgreSQL', async () => (await runningOnReceipts(short)) === 0);
    // the same over tRPC and GraphQL is the same procedure; the point reads of the class "default" are untouched
    t.is((await http(short, 'GET', '/v1/health', { key: a })).status, 200);
  } finally {
    await release();
  }
});

test.serial('the cap counts requests: one GraphQL operation reading several lists at once takes one slot', async (t) => {
  const { app, b } = t.context;
  const query = `{ a: paymentLinks(first: 5) { data { id } } b: events(first: 5) { data { id } } c: webhooks(first: 5) { data { id } }
    d: paymentLinks(first: 1) { data { id } } e: events(first: 1, kinds: ["payment_link.*"]) { data { id } } }`;
  const answers = await Promise.all(
    [1, 2].map(() =>
      fetch(`${app.url}/graphql`, {
        method: 'POST',
        headers: { authorization: `Bearer ${b}`, 'content-type': 'application/json' },
        body: JSON.stringify({ query }),
      }).then(async (res) => ({ status: res.status, body: (await res.json()) as { errors?: unknown[]; data?: Record<string, { data: unknown[] }> } })),
    ),
  );
  for (const { status, body } of answers) {
    t.is(status, 200);
    t.is(body.errors, undefined, JSON.stringify(body.errors));
    t.is(body.data?.a?.data.length, 1);
  }
});

const wsClient = (app: TestApp, key: string) =>
  createClient({
    url: `${app.url.replace(/^http/, 'ws')}/graphql`,
    webSocketImpl: WebSocket,
    connectionParams: { authorization: key },
    retryAttempts: 0,
    lazy: false,
  });

test.serial('a graphql-ws query whose socket closes has its running statement cancelled', async (t) => {
  const { app, a, agentA } = t.context;
  const client = wsClient(app, a);
  const release = await lockReceipts(app.database.url);
  try {
    const outcome = new Promise((resolve) =>
      client.subscribe(
        { query: `{ receipts(agent: "${agentA}") { data { receiptHash } } }` },
        { next: resolve, error: resolve, complete: () => resolve('complete') },
      ),
    );
    await until('the graphql-ws query', async () => (await runningOnReceipts(app)) === 1);
    await client.dispose(); // the socket closes while the statement waits on the lock
    await until('the cancelled query to leave PostgreSQL', async () => (await runningOnReceipts(app)) === 0);
    t.is(await runningOnReceipts(app), 0, 'cancelled while the lock still holds it');
    void outcome;
  } finally {
    await release();
    await client.dispose();
  }
});

test.serial("a graphql-ws subscription replaying after a cursor has its replay's statement cancelled when its socket closes", async (t) => {
  const { app, a, agentA } = t.context;
  t.is((await http(app, 'POST', '/v1/payment-links', { key: a, body: linkBody(agentA) })).status, 201);
  const newest = await http(app, 'GET', '/v1/events?limit=1', { key: a });
  t.is(newest.status, 200, JSON.stringify(newest.body));
  const after = (newest.body.data as { id: string }[])[0]?.id;
  if (!after) return t.fail(`A has no event: ${JSON.stringify(newest.body)}`);
  const client = wsClient(app, a);
  const release = await lockReceipts(app.database.url, 'events');
  try {
    client.subscribe({ query: `subscription { events(after: "${after}") { id } }` }, { next: () => {}, error: () => {}, complete: () => {} });
    await until("the subscription's replay", async () => (await runningOnReceipts(app, 'events')) === 1);
    await client.dispose();
    await until('the cancelled replay to leave PostgreSQL', async () => (await runningOnReceipts(app, 'events')) === 0);
    t.is(await runningOnReceipts(app, 'events'), 0, 'cancelled while the lock still holds it');
  } finally {
    await release();
    await client.dispose();
  }
});
