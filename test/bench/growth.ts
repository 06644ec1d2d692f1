// npm run bench:growth — issue 21 item 5: the same list and aggregate reads on 1,000 and on 1,000,000 event rows.
//
//   BENCH_SECONDS=3 BENCH_GROWTH_ROWS=1000000 npm run bench:growth
//
// Two gateways of the same code, each on its own database of one embedded PostgreSQL cluster: "1k" holds 1,000
// generated events, "1M" BENCH_GROWTH_ROWS (default 1,000,000), both with the same shape (80 % on chain-devnet, kinds
// skewed 40/40/15 % and five rare ones, half of them the measured principal's, spread over 30 days, 10 agents). The rows
// are generated once with SQL and kept in BENCH_GROWTH_DIR (default: <tmp>/svc-bench-growth-<hash of the migrations>) for the next runs. Each
// route is measured on both at the same page size, alternated (1k, 1M, 1k, 1M), and the row reports the 1M p99 over
// the 1k p99 (goal ≤ 1.5×), with the plan PostgreSQL chose for the query behind it on the 1M database.

import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import pg from 'pg';
import { eventCountsSql, eventPageSql, expandKinds, type Sql } from '../../adapters/store/repositories/events.ts';
import { makeDataDir, removeDataDir, startTestApp, type TestApp } from '../support/app.ts';
import { header, machineLine, row, runLoad, type LoadResult } from './support/load.ts';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 3);
const BIG = Number(process.env.BENCH_GROWTH_ROWS ?? 1_000_000);
const MIGRATIONS = fileURLToPath(new URL('../../migrations/', import.meta.url));
const SMALL = 1_000;
const ROUNDS = 2;
const CONNECTIONS = 4;
// the cache is keyed by the migrations' source: a cluster generated under other migrations is never reused
const MIGRATIONS_HASH = createHash('sha256')
  .update(readdirSync(MIGRATIONS).sort().map((f) => readFileSync(join(MIGRATIONS, f), 'utf8')).join('\0'))
  .digest('hex')
  .slice(0, 12);
const DIR = process.env.BENCH_GROWTH_DIR ?? join(os.tmpdir(), `svc-bench-growth-${MIGRATIONS_HASH}`);
/** the measured principal: keys of this owner_wallet share its events */
const WALLET = 'So11111111111111111111111111111111111111112';
const PAGE = 50;

const env = {
  SVC_JOBS: 'off',
  SVC_RATE_LIMITS: JSON.stringify({ default: 10_000_000, meta: 10_000_000, 'events.read': 10_000_000 }),
  // the load is one principal with CONNECTIONS requests in flight: the per-principal cap is not what is measured here
  SVC_DB_HEAVY_PER_PRINCIPAL: '64',
};

/** Generates `rows` events (ids gr000000001…) unless the database already holds them; chunks keep each statement small. */
async function generate(url: string, rows: number): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const have = (await client.query(`select count(*)::int as n from events where id like 'gr%'`)).rows[0].n as number;
    if (have === rows) return;
    await client.query(`delete from events where id like 'gr%'`);
    const started = performance.now();
    const chunk = 100_000;
    for (let lo = 1; lo <= rows; lo += chunk) {
      const hi = Math.min(rows, lo + chunk - 1);
      await client.query(
        `insert into events (id, network, kind, phase, agent_asset, owner_principal, metadata, created_at, updated_at)
         select 'gr' || lpad(g::text, 9, '0'),
                case when g % 5 = 0 then 'chain-mainnet' else 'chain-devnet' end,
                case when k < 40 then 'payment_link.settled' when k < 80 then 'payment_link.served' when k < 95 then 'receipt.published'
                     when k = 95 then 'payment_link.created' when k = 96 then 'payment_link.updated' when k = 97 then 'agent.recorded'
                     when k = 98 then 'identity.profile.updated' else 'agent.treasury.withdraw' end,
                'confirmed', 'agent' || (g % 10),
                case when o < 5 then $3 when o = 9 then null else 'wallet:w' || (g % 300) end,
                jsonb_build_object('amount_atomic', (g % 1000)::text, 'currency', 'USDC'),
                now() - ($2::int - g) * (interval '30 days' / $2::int), now()
           from generate_series($1::int, $4::int) g, lateral (select abs(hashint4(g)) % 100 as k, abs(hashint4(g + 1)) % 10 as o) x`,
        [lo, rows, `wallet:${WALLET}`, hi],
      );
    }
    await client.query('analyze');
    console.log(`generated ${rows} events in ${((performance.now() - started) / 1000).toFixed(0)} s`);
  } finally {
    await client.end();
  }
}

interface Route {
  name: string;
  path: string;
  admin?: boolean;
  /** the statements behind it, for the plan */
  sql: (em: TestApp['database']['orm']['em'], owner: string | undefined) => Promise<Sql[]>;
}

const page = (q: { kinds?: string[]; agent?: string; before?: bigint }) => async (em: TestApp['database']['orm']['em'], owner: string | undefined) => {
  const kinds = await expandKinds(em.fork(), 'chain-devnet', q.kinds);
  return [eventPageSql('chain-devnet', { owner, agent: q.agent, kinds, before: q.before, limit: PAGE })];
};

const dataDir = DIR;
const small = await startTestApp({ dataDir, env });
let big: TestApp | undefined;
const bigDir = await makeDataDir();
try {
  // the 1M database on the same cluster
  const admin = new pg.Client({ connectionString: small.database.url });
  await admin.connect();
  const exists = (await admin.query(`select 1 from pg_database where datname = 'growth_big'`)).rowCount;
  if (!exists) await admin.query('create database growth_big');
  await admin.end();
  const bigUrl = small.database.url.replace(/\/[^/?]+(\?|$)/, '/growth_big$1');
  big = await startTestApp({ dataDir: bigDir, databaseUrl: bigUrl, env });
  await generate(small.database.url, SMALL);
  await generate(big.database.url, BIG);

  const keys = async (app: TestApp) => ({
    user: (await app.services.access.issueKey({ network: 'chain-devnet', role: 'user', owner_wallet: WALLET })).key,
    admin: (await app.services.access.issueKey({ network: 'chain-devnet', role: 'admin' })).key,
  });
  const smallKeys = await keys(small);
  const bigKeys = await keys(big);

  // page 2 of the latest, through each gateway's own cursor
  const cursorOf = async (app: TestApp, key: string) => {
    const res = await fetch(`${app.url}/v1/events?limit=${PAGE}`, { headers: { authorization: `Bearer ${key}` } });
    const body = (await res.json()) as { next_cursor: string; data: { id: string }[] };
    return { cursor: body.next_cursor, lastId: body.data.at(-1)!.id };
  };
  const smallPage2 = await cursorOf(small, smallKeys.user);
  const bigPage2 = await cursorOf(big, bigKeys.user);
  const bigEm = big.database.orm.em;
  const seqOf = async (id: string) => BigInt(((await bigEm.fork().execute(`select seq::text as seq from events where id = ?`, [id])) as { seq: string }[])[0]!.seq);
  const bigBefore = await seqOf(bigPage2.lastId);

  const two = 'payment_link.settled,identity.profile.updated';
  const routes: (Route & { cursor?: boolean })[] = [
    { name: 'GET /v1/events (latest)', path: `/v1/events?limit=${PAGE}`, sql: page({}) },
    { name: 'GET /v1/events (page 2, cursor)', path: `/v1/events?limit=${PAGE}&cursor=CURSOR`, cursor: true, sql: page({ before: bigBefore }) },
    { name: 'GET /v1/events?kind=payment_link.*', path: `/v1/events?limit=${PAGE}&kind=payment_link.*`, sql: page({ kinds: ['payment_link.*'] }) },
    { name: 'GET /v1/events?kind=<one kind>', path: `/v1/events?limit=${PAGE}&kind=payment_link.settled`, sql: page({ kinds: ['payment_link.settled'] }) },
    { name: 'GET /v1/events?kind=<two kinds>', path: `/v1/events?limit=${PAGE}&kind=${two}`, sql: page({ kinds: two.split(',') }) },
    { name: 'GET /v1/events?agent=', path: `/v1/events?limit=${PAGE}&agent=agent1`, sql: page({ agent: 'agent1' }) },
    { name: 'GET /v1/events?agent=&kind=', path: `/v1/events?limit=${PAGE}&agent=agent1&kind=payment_link.settled`, sql: page({ agent: 'agent1', kinds: ['payment_link.settled'] }) },
    { name: 'GET /v1/events?kind=<two kinds> (admin)', path: `/v1/events?limit=${PAGE}&kind=${two}`, admin: true, sql: page({ kinds: two.split(',') }) },
    { name: 'GET /v1/metrics/events', path: '/v1/metrics/events', sql: async (_em, owner) => [eventCountsSql('chain-devnet', { owner })] },
    {
      name: 'GET /v1/metrics/events?days=1',
      path: '/v1/metrics/events?days=1',
      sql: async (_em, owner) => [eventCountsSql('chain-devnet', { owner, since: new Date(Date.now() - 86_400_000) })],
    },
    { name: 'GET /v1/metrics/events (admin)', path: '/v1/metrics/events', admin: true, sql: async () => [eventCountsSql('chain-devnet', { owner: undefined })] },
  ];

  const measure = async (app: TestApp, k: { user: string; admin: string }, r: (typeof routes)[number], cursor: string): Promise<LoadResult> => {
    const result = await runLoad({
      generator: 'cannon',
      url: app.url + r.path.replace('CURSOR', cursor),
      headers: { authorization: `Bearer ${r.admin ? k.admin : k.user}` },
      connections: CONNECTIONS,
      duration: SECONDS,
    });
    const wrong = Object.entries(result.statuses).filter(([s]) => s !== '200');
    if (wrong.length) throw new Error(`${r.name}: answers other than 200: ${JSON.stringify(result.statuses)}`);
    return result;
  };

  console.log(`growth bench — ${machineLine()}; ${SECONDS} s per measurement, ${CONNECTIONS} connections, ${ROUNDS} alternated rounds, page ${PAGE}`);
  console.log('  (the machine is shared with other work: read the ratios, not the absolute figures)');
  const results: { route: (typeof routes)[number]; small: LoadResult[]; big: LoadResult[] }[] = routes.map((route) => ({ route, small: [], big: [] }));
  // warm both (caches, JIT) outside the measurement
  for (const r of routes) {
    await runLoad({ generator: 'cannon', url: small.url + r.path.replace('CURSOR', smallPage2.cursor), headers: { authorization: `Bearer ${r.admin ? smallKeys.admin : smallKeys.user}` }, connections: 2, duration: 1 });
    await runLoad({ generator: 'cannon', url: big.url + r.path.replace('CURSOR', bigPage2.cursor), headers: { authorization: `Bearer ${r.admin ? bigKeys.admin : bigKeys.user}` }, connections: 2, duration: 1 });
  }
  for (let round = 0; round < ROUNDS; round++) {
    for (const res of results) {
      res.small.push(await measure(small, smallKeys, res.route, smallPage2.cursor));
      res.big.push(await measure(big, bigKeys, res.route, bigPage2.cursor));
    }
  }

  const mean = (xs: LoadResult[]): LoadResult => ({
    ...xs[0]!,
    rps: xs.reduce((s, x) => s + x.rps, 0) / xs.length,
    p50: xs.reduce((s, x) => s + x.p50, 0) / xs.length,
    p99: xs.reduce((s, x) => s + x.p99, 0) / xs.length,
    max: Math.max(...xs.map((x) => x.max)),
  });
  console.log(header('route (1k rows / 1M rows)', 48) + '   p99 ratio');
  const ratioLines: string[] = [];
  for (const { route, small: s, big: b } of results) {
    const ms = mean(s);
    const mb = mean(b);
    const ratio = mb.p99 / Math.max(ms.p99, 0.001);
    console.log(row(`${route.name} — 1k`, ms, 48));
    console.log(row(`${route.name} — ${(BIG / 1e6).toFixed(BIG >= 1e6 ? 0 : 1)}M`, mb, 48) + `   ${ratio.toFixed(2)}×${ratio <= 1.5 ? '' : '  (over the goal)'}`);
    const fig = (m: LoadResult) => `${Math.round(m.rps).toLocaleString('en-US')} req/s p99 ${m.p99.toFixed(1)} ms`;
    ratioLines.push(`RATIO|${route.name}|${fig(mb)}|${fig(ms)}|${ratio.toFixed(2)}×|≤ 1.5×`);
  }

  console.log(`\nplans on the ${BIG.toLocaleString('en-US')}-row database (EXPLAIN ANALYZE of the repositories' own SQL):`);
  for (const r of routes) {
    const owner = r.admin ? undefined : `wallet:${WALLET}`;
    for (const q of await r.sql(bigEm, owner)) {
      const plan = (await bigEm.fork().execute(`explain (analyze, costs off, timing off, summary off) ${q.sql}`, q.params)) as { 'QUERY PLAN': string }[];
      console.log(`  ${r.name}:`);
      for (const line of plan) console.log(`      ${line['QUERY PLAN']}`);
    }
  }
  console.log('');
  for (const line of ratioLines) console.log(line);
} finally {
  await big?.close();
  await small.close();
  await removeDataDir(bigDir);
}
