// npm run bench:growth — every list and aggregate route on 1,000 and on 1,000,000 rows.
//
//   BENCH_SECONDS=3 BENCH_GROWTH_ROWS=1000000 npm run bench:growth     (BENCH_GROWTH_ONLY=<substring> for some routes)
//
// Two gateways of the same code, each on its own database of one embedded PostgreSQL cluster: "1k" holds 1,000 rows of
// each growing table (events, payment links, receipts, webhook deliveries, request records), "1M" BENCH_GROWTH_ROWS
// (default 1,000,000) of each, with the same shape (80 % on chain-devnet, about half the measured principal's, spread
// over 30 days, 10 agents; test/bench/support/growth-data.ts). The rows are generated once with SQL and kept in
// BENCH_GROWTH_DIR (default: <tmp>/svc-bench-growth-<hash of the migrations>) for the next runs. Each route is measured on
// both at the same page size, alternated (1k, 1M, 1k, 1M), and the row reports the 1M p99 over the 1k p99 (goal ≤ 1.5×),
// with the plan PostgreSQL chose for each query behind it on the 1M database and the size of both answers.
//
// Not measured (their tables do not grow with traffic, or the route is a walk by definition): GET /v1/webhooks (a
// principal's subscriptions), /v1/admin/api-keys, /v1/agents/{mint}/pull-targets, /v1/identity/{mint}/claims and
// /capability-cards (an agent's own, few), /v1/indexer/status (per watched address = per agent), and
// /v1/receipts/{agent}/verify-chain, which walks the whole chain by design (O(chain length), paged by 500). Paid calls
// have no list route; a buyer's spend today (POST /v1/buyer/policy/evaluate) is one row of the buyer_spend_daily rollup.
// A filter the 1k side cannot fill a page of is measured at the page it fills, on both sides (the row says "page N").

import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import pg from 'pg';
import { eventCountsSql, eventPageSql, expandKinds, type Sql } from '../../adapters/store/repositories/events.ts';
import { paymentLinkListSql } from '../../adapters/store/repositories/payment-links.ts';
import { receiptDailySql, receiptPageSql, receiptSinceProbeSql } from '../../adapters/store/repositories/receipts.ts';
import { reputationSql } from '../../adapters/store/repositories/identity.ts';
import { deliveryListSql } from '../../adapters/store/repositories/webhooks.ts';
import { usageSql } from '../../adapters/store/repositories/request-records.ts';
import { discoverableLinksSql } from '../../adapters/store/repositories/discovery.ts';
import { windowStart } from '../../domain/receipts/daily.ts';
import { makeDataDir, removeDataDir, startTestApp, type TestApp } from '../support/app.ts';
import { generate, WALLET, type GrowthWorld } from './support/growth-data.ts';
import { header, machineLine, row, runLoad, type LoadResult } from './support/load.ts';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 3);
const BIG = Number(process.env.BENCH_GROWTH_ROWS ?? 1_000_000);
const ONLY = process.env.BENCH_GROWTH_ONLY;
const MIGRATIONS = fileURLToPath(new URL('../../migrations/', import.meta.url));
const SMALL = 1_000;
const ROUNDS = 2;
const EXTRA = 2;
/** EXPLAIN ANALYZE runs per statement and side for the database-side figures (median) */
const DB_RUNS = 15;
const CONNECTIONS = 4;
// the cache is keyed by the migrations' source: a cluster generated under other migrations is never reused
const MIGRATIONS_HASH = createHash('sha256')
  .update(
    readdirSync(MIGRATIONS)
      .sort()
      .map((f) => readFileSync(join(MIGRATIONS, f), 'utf8'))
      .join('\0'),
  )
  .digest('hex')
  .slice(0, 12);
const DIR = process.env.BENCH_GROWTH_DIR ?? join(os.tmpdir(), `svc-bench-growth-${MIGRATIONS_HASH}`);
const PAGE = 50;
/** the page size of the route whose plan is printed (the limit a list asks for is its page + 1) */
let planLimit = PAGE;
const DAY = 86_400_000;

const limits = { default: 10_000_000, meta: 10_000_000, 'events.read': 10_000_000, 'receipts.read': 10_000_000, 'agents.read': 10_000_000 };
const env = {
  SVC_JOBS: 'off',
  SVC_RATE_LIMITS: JSON.stringify(limits),
  // the load is one principal with CONNECTIONS requests in flight: the per-principal cap is not what is measured here
  SVC_DB_HEAVY_PER_PRINCIPAL: '64',
};

type Em = TestApp['database']['orm']['em'];
type Side = { app: TestApp; w: GrowthWorld; em: Em };

interface Route {
  name: string;
  /** the path on one side (its own agents and webhooks); CURSOR is replaced by that side's page-2 cursor */
  path: (w: GrowthWorld) => string;
  admin?: boolean;
  /** the first page whose next_cursor is CURSOR */
  page1?: (w: GrowthWorld) => string;
  /** the statements behind it on the 1M side, for the plan; `cursor` is that side's decoded page-2 cursor */
  sql: (s: Side, owner: string | undefined, cursor: Record<string, unknown> | undefined) => Promise<Sql[]>;
}

const events = (q: { kinds?: string[]; agent?: (w: GrowthWorld) => string; cursor?: boolean }) => async (s: Side, owner: string | undefined) => {
  const kinds = await expandKinds(s.em.fork(), 'chain-devnet', q.kinds);
  let before: bigint | undefined;
  if (q.cursor) {
    // page 2 of the latest: below the seq of page 1's last row
    const res = await fetch(`${s.app.url}/v1/events?limit=${PAGE}`, { headers: { authorization: `Bearer ${s.w.keys.user}` } });
    const last = ((await res.json()) as { data: { id: string }[] }).data.at(-1)!.id;
    before = BigInt(((await s.em.fork().execute(`select seq::text as seq from events where id = ?`, [last])) as { seq: string }[])[0]!.seq);
  }
  return [eventPageSql('chain-devnet', { owner, agent: q.agent?.(s.w), kinds, before, limit: planLimit + 1 })];
};

const receipts =
  (q: { kind?: 'earn' | 'spend'; decision?: 'allow' | 'deny' | 'rejected'; sinceDays?: number }) =>
  async (s: Side, _owner: string | undefined, cursor: Record<string, unknown> | undefined) => {
    const agent = s.w.mints[0]!;
    const since = q.sinceDays ? sinceOf(q.sinceDays) : undefined;
    const out: Sql[] = [];
    let from = 0;
    if (since) {
      const probe = receiptSinceProbeSql('chain-devnet', agent, since);
      out.push(probe);
      from = ((await s.em.fork().execute(probe.sql, probe.params)) as { nonce: number }[])[0]?.nonce ?? 0;
    }
    out.push(
      receiptPageSql(
        'chain-devnet',
        agent,
        { kind: q.kind, decision: q.decision, since, beforeNonce: cursor?.n as number | undefined, limit: planLimit + 1 },
        from,
      ),
    );
    return out;
  };

/** a `since` fixed for the run (whole seconds), so both sides and the plan read the same window */
const RUN_START = Math.floor(Date.now() / 1000) * 1000;
const sinceOf = (days: number) => new Date(RUN_START - days * DAY);

const two = 'payment_link.settled,identity.profile.updated';
const allRoutes: Route[] = [
  { name: 'GET /v1/events (latest)', path: () => `/v1/events?limit=${PAGE}`, sql: events({}) },
  {
    name: 'GET /v1/events (page 2, cursor)',
    path: () => `/v1/events?limit=${PAGE}&cursor=CURSOR`,
    page1: () => `/v1/events?limit=${PAGE}`,
    sql: events({ cursor: true }),
  },
  { name: 'GET /v1/events?kind=payment_link.*', path: () => `/v1/events?limit=${PAGE}&kind=payment_link.*`, sql: events({ kinds: ['payment_link.*'] }) },
  {
    name: 'GET /v1/events?kind=<one kind>',
    path: () => `/v1/events?limit=${PAGE}&kind=payment_link.settled`,
    sql: events({ kinds: ['payment_link.settled'] }),
  },
  { name: 'GET /v1/events?kind=<two kinds>', path: () => `/v1/events?limit=${PAGE}&kind=${two}`, sql: events({ kinds: two.split(',') }) },
  { name: 'GET /v1/events?agent=', path: (w) => `/v1/events?limit=${PAGE}&agent=${w.mints[1]}`, sql: events({ agent: (w) => w.mints[1]! }) },
  {
    name: 'GET /v1/events?agent=&kind=',
    path: (w) => `/v1/events?limit=${PAGE}&agent=${w.mints[1]}&kind=payment_link.settled`,
    sql: events({ agent: (w) => w.mints[1]!, kinds: ['payment_link.settled'] }),
  },
  { name: 'GET /v1/events?kind=<two kinds> (admin)', path: () => `/v1/events?limit=${PAGE}&kind=${two}`, admin: true, sql: events({ kinds: two.split(',') }) },
  {
    name: 'GET /v1/identity/{mint}/history',
    path: (w) => `/v1/identity/${w.mints[1]}/history?limit=${PAGE}`,
    sql: events({ agent: (w) => w.mints[1]!, kinds: ['identity.*'] }),
  },
  { name: 'GET /v1/metrics/events', path: () => '/v1/metrics/events', sql: async (_s, owner) => [eventCountsSql('chain-devnet', { owner })] },
  {
    name: 'GET /v1/metrics/events?days=1',
    path: () => '/v1/metrics/events?days=1',
    sql: async (_s, owner) => [eventCountsSql('chain-devnet', { owner, since: new Date(Date.now() - DAY) })],
  },
  {
    name: 'GET /v1/metrics/events (admin)',
    path: () => '/v1/metrics/events',
    admin: true,
    sql: async () => [eventCountsSql('chain-devnet', { owner: undefined })],
  },

  {
    name: 'GET /v1/payment-links (latest)',
    path: () => `/v1/payment-links?limit=${PAGE}`,
    sql: async (_s, owner) => [paymentLinkListSql('chain-devnet', { owner, limit: planLimit + 1 })],
  },
  {
    name: 'GET /v1/payment-links (page 2, cursor)',
    path: () => `/v1/payment-links?limit=${PAGE}&cursor=CURSOR`,
    page1: () => `/v1/payment-links?limit=${PAGE}`,
    sql: async (_s, owner, c) => [paymentLinkListSql('chain-devnet', { owner, beforePk: c!.pk as string, limit: planLimit + 1 })],
  },
  {
    name: 'GET /v1/payment-links?owner_agent=',
    path: (w) => `/v1/payment-links?limit=${PAGE}&owner_agent=${w.mints[2]}`,
    sql: async (s, owner) => [paymentLinkListSql('chain-devnet', { owner, ownerAgent: s.w.mints[2], limit: planLimit + 1 })],
  },
  {
    name: 'GET /v1/payment-links?owner_agent= (cursor)',
    path: (w) => `/v1/payment-links?limit=${PAGE}&owner_agent=${w.mints[2]}&cursor=CURSOR`,
    page1: (w) => `/v1/payment-links?limit=${PAGE}&owner_agent=${w.mints[2]}`,
    sql: async (s, owner, c) => [paymentLinkListSql('chain-devnet', { owner, ownerAgent: s.w.mints[2], beforePk: c!.pk as string, limit: planLimit + 1 })],
  },
  {
    name: 'GET /v1/payment-links (admin)',
    path: () => `/v1/payment-links?limit=${PAGE}`,
    admin: true,
    sql: async () => [paymentLinkListSql('chain-devnet', { owner: undefined, limit: planLimit + 1 })],
  },
  { name: 'GET /v1/discover?source=svc', path: () => '/v1/discover?source=svc&limit=20', sql: async () => [discoverableLinksSql('chain-devnet', 20)] },
  // a search filters the newest 500 of the catalogue chunk by chunk until its page is full (domain/discovery/service.ts):
  // O(page) when the words are common, O(window) at worst, never O(table)
  {
    name: 'GET /v1/discover?source=svc&q= (a search)',
    path: () => '/v1/discover?source=svc&q=report&limit=20',
    sql: async () => [discoverableLinksSql('chain-devnet', 20)],
  },

  { name: 'GET /v1/receipts/{agent} (latest)', path: (w) => `/v1/receipts/${w.mints[0]}?limit=${PAGE}`, sql: receipts({}) },
  {
    name: 'GET /v1/receipts/{agent} (page 2, cursor)',
    path: (w) => `/v1/receipts/${w.mints[0]}?limit=${PAGE}&cursor=CURSOR`,
    page1: (w) => `/v1/receipts/${w.mints[0]}?limit=${PAGE}`,
    sql: receipts({}),
  },
  { name: 'GET /v1/receipts/{agent}?kind=spend', path: (w) => `/v1/receipts/${w.mints[0]}?limit=${PAGE}&kind=spend`, sql: receipts({ kind: 'spend' }) },
  {
    name: 'GET /v1/receipts/{agent}?decision=rejected',
    path: (w) => `/v1/receipts/${w.mints[0]}?limit=${PAGE}&decision=rejected`,
    sql: receipts({ decision: 'rejected' }),
  },
  {
    name: 'GET /v1/receipts/{agent}?kind=&decision=',
    path: (w) => `/v1/receipts/${w.mints[0]}?limit=${PAGE}&kind=earn&decision=deny`,
    sql: receipts({ kind: 'earn', decision: 'deny' }),
  },
  {
    name: 'GET /v1/receipts/{agent}?since=<7 days>',
    path: (w) => `/v1/receipts/${w.mints[0]}?limit=${PAGE}&since=${encodeURIComponent(sinceOf(7).toISOString())}`,
    sql: receipts({ sinceDays: 7 }),
  },
  {
    name: 'GET /v1/receipts/{agent}/daily',
    path: (w) => `/v1/receipts/${w.mints[0]}/daily`,
    sql: async (s) => [receiptDailySql('chain-devnet', s.w.mints[0]!, windowStart(new Date(), 7))],
  },
  {
    name: 'GET /v1/receipts/{agent}/daily?days=30',
    path: (w) => `/v1/receipts/${w.mints[0]}/daily?days=30`,
    sql: async (s) => [receiptDailySql('chain-devnet', s.w.mints[0]!, windowStart(new Date(), 30))],
  },
  { name: 'GET /v1/identity/{mint} (reputation)', path: (w) => `/v1/identity/${w.mints[0]}`, sql: async (s) => [reputationSql('chain-devnet', s.w.mints[0]!)] },

  {
    name: 'GET /v1/webhooks/{id}/deliveries (latest)',
    path: (w) => `/v1/webhooks/${w.webhooks[0]}/deliveries?limit=${PAGE}`,
    sql: async (s) => [deliveryListSql('chain-devnet', s.w.webhooks[0]!, { limit: planLimit + 1 })],
  },
  {
    name: 'GET /v1/webhooks/{id}/deliveries (cursor)',
    path: (w) => `/v1/webhooks/${w.webhooks[0]}/deliveries?limit=${PAGE}&cursor=CURSOR`,
    page1: (w) => `/v1/webhooks/${w.webhooks[0]}/deliveries?limit=${PAGE}`,
    sql: async (s, _o, c) => [deliveryListSql('chain-devnet', s.w.webhooks[0]!, { beforeId: c!.id as string, limit: planLimit + 1 })],
  },

  {
    name: 'GET /v1/metrics/usage',
    path: () => '/v1/metrics/usage',
    sql: async (s) => [usageSql('chain-devnet', { keyId: s.w.keys.userId, since: usageSince(7) })],
  },
  {
    name: 'GET /v1/metrics/usage?days=30',
    path: () => '/v1/metrics/usage?days=30',
    sql: async (s) => [usageSql('chain-devnet', { keyId: s.w.keys.userId, since: usageSince(30) })],
  },
  {
    name: 'GET /v1/metrics/usage (admin)',
    path: () => '/v1/metrics/usage',
    admin: true,
    sql: async () => [usageSql('chain-devnet', { since: usageSince(7) })],
  },
];
const routes = allRoutes.filter((r) => !ONLY || r.name.includes(ONLY));

function usageSince(days: number): Date {
  const now = new Date();
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() - (days - 1)));
}

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
  const started = performance.now();
  const smallSide: Side = { app: small, w: await generate(small, SMALL), em: small.database.orm.em };
  const bigSide: Side = { app: big, w: await generate(big, BIG), em: big.database.orm.em };
  console.log(`data ready in ${((performance.now() - started) / 1000).toFixed(0)} s`);

  const keyOf = (s: Side, r: Route) => (r.admin ? s.w.keys.admin : s.w.keys.user);
  const get = async (s: Side, r: Route, path: string) => {
    const res = await fetch(s.app.url + path, { headers: { authorization: `Bearer ${keyOf(s, r)}` } });
    const text = await res.text();
    if (res.status !== 200) throw new Error(`${r.name}: ${path} answered ${res.status} ${text.slice(0, 300)}`);
    return { text, body: JSON.parse(text) as { data?: unknown[]; next_cursor?: string | null } };
  };
  // each side's page-2 cursor, and the answer's size on both (the same page size is what makes the ratio fair)
  const cursors = new Map<string, { small: string; big: string }>();
  const sizes = new Map<string, string>();
  // A filter the 1,000-row side cannot fill a page of (a rare kind of one agent) is measured on both sides at the page
  // that side fills, so both answers hold as many items and the ratio shows what the table's size costs.
  const pages = new Map<string, number>();
  const measuredPath = (s: Side, r: Route, which: 'small' | 'big') => {
    const path = r.path(s.w).replace('CURSOR', cursors.get(r.name)?.[which] ?? '');
    const page = pages.get(r.name);
    return page === undefined ? path : path.replace(`limit=${PAGE}`, `limit=${page}`);
  };
  for (const r of routes) {
    if (r.page1) {
      const cursorOf = async (s: Side) => {
        const { body } = await get(s, r, r.page1!(s.w));
        if (!body.next_cursor) throw new Error(`${r.name}: page 1 has no next page`);
        return body.next_cursor;
      };
      cursors.set(r.name, { small: await cursorOf(smallSide), big: await cursorOf(bigSide) });
    }
    if (r.path(smallSide.w).includes(`limit=${PAGE}`)) {
      const { body } = await get(smallSide, r, measuredPath(smallSide, r, 'small'));
      const items = body.data?.length ?? 0;
      if (items === 0) throw new Error(`${r.name}: the 1k side has no item to list`);
      if (items < PAGE) pages.set(r.name, items);
    }
    const size = async (s: Side, which: 'small' | 'big') => {
      const { text, body } = await get(s, r, measuredPath(s, r, which));
      return `${Array.isArray(body.data) ? `${body.data.length} items, ` : ''}${(text.length / 1024).toFixed(1)} kB`;
    };
    sizes.set(
      r.name,
      `${pages.has(r.name) ? `page ${pages.get(r.name)} (what 1k fills); ` : ''}1k: ${await size(smallSide, 'small')}; 1M: ${await size(bigSide, 'big')}`,
    );
  }
  const urlOf = (s: Side, r: Route, which: 'small' | 'big') => s.app.url + measuredPath(s, r, which);

  const measure = async (s: Side, r: Route, which: 'small' | 'big', load: { seconds: number; connections: number }): Promise<LoadResult> => {
    const { seconds, connections } = load;
    const result = await runLoad({
      generator: 'cannon',
      url: urlOf(s, r, which),
      headers: { authorization: `Bearer ${keyOf(s, r)}` },
      connections,
      duration: seconds,
    });
    const wrong = Object.entries(result.statuses).filter(([status]) => status !== '200');
    if (wrong.length) throw new Error(`${r.name}: answers other than 200: ${JSON.stringify(result.statuses)}`);
    return result;
  };

  console.log(`growth bench — ${machineLine()}; ${SECONDS} s per measurement, ${CONNECTIONS} connections, ${ROUNDS} alternated rounds, page ${PAGE}`);
  console.log('  (the machine is shared with other work: read the ratios, not the absolute figures)');
  const mean = (xs: LoadResult[]): LoadResult => ({
    ...xs[0]!,
    rps: xs.reduce((s, x) => s + x.rps, 0) / xs.length,
    p50: xs.reduce((s, x) => s + x.p50, 0) / xs.length,
    p99: xs.reduce((s, x) => s + x.p99, 0) / xs.length,
    max: Math.max(...xs.map((x) => x.max)),
  });
  const results: { route: Route; small: LoadResult[]; big: LoadResult[] }[] = routes.map((route) => ({ route, small: [], big: [] }));
  // warm both (caches, JIT) outside the measurement
  for (const r of routes) {
    await measure(smallSide, r, 'small', { seconds: 1, connections: 2 });
    await measure(bigSide, r, 'big', { seconds: 1, connections: 2 });
  }
  for (let round = 0; round < ROUNDS; round++) {
    for (const res of results) {
      res.small.push(await measure(smallSide, res.route, 'small', { seconds: SECONDS, connections: CONNECTIONS }));
      res.big.push(await measure(bigSide, res.route, 'big', { seconds: SECONDS, connections: CONNECTIONS }));
    }
  }
  // A row over the goal on a shared machine is measured again (EXTRA more alternated rounds, all rounds averaged), so
  // one burst of someone else's load does not decide it; its table line says how many rounds it took.
  const p99Ratio = (res: (typeof results)[number]) => mean(res.big).p99 / Math.max(mean(res.small).p99, 0.001);
  const again = results.filter((res) => p99Ratio(res) > 1.5);
  for (let round = 0; round < EXTRA; round++) {
    for (const res of again) {
      res.small.push(await measure(smallSide, res.route, 'small', { seconds: SECONDS, connections: CONNECTIONS }));
      res.big.push(await measure(bigSide, res.route, 'big', { seconds: SECONDS, connections: CONNECTIONS }));
    }
  }

  console.log(`${header('route (1k rows / 1M rows)', 48)}   p99 ratio`);
  const ratioLines: string[] = [];
  for (const { route, small: s, big: b } of results) {
    const ms = mean(s);
    const mb = mean(b);
    const ratio = mb.p99 / Math.max(ms.p99, 0.001);
    console.log(row(`${route.name} — 1k`, ms, 48));
    const rounds = b.length > ROUNDS ? ` (${b.length} rounds)` : '';
    console.log(
      `${row(`${route.name} — ${(BIG / 1e6).toFixed(BIG >= 1e6 ? 0 : 1)}M`, mb, 48)}   ${ratio.toFixed(2)}×${rounds}${ratio <= 1.5 ? '' : '  (over the goal)'}`,
    );
    const fig = (m: LoadResult) => `${Math.round(m.rps).toLocaleString('en-US')} req/s p99 ${m.p99.toFixed(1)} ms`;
    const page = pages.get(route.name);
    ratioLines.push(`RATIO|${route.name}${page === undefined ? '' : ` (page ${page})`}|${fig(mb)}|${fig(ms)}|${ratio.toFixed(2)}×|≤ 1.5×`);
  }

  // The steadier figure on a shared machine: each route's statements alone, executed by PostgreSQL on both databases
  // (median execution time of DB_RUNS EXPLAIN ANALYZE runs, and the buffers one run touches).
  const decode = (c: string | undefined) => (c ? (JSON.parse(Buffer.from(c, 'base64url').toString('utf8')) as Record<string, unknown>) : undefined);
  const dbFigures = async (s: Side, r: Route, which: 'small' | 'big') => {
    planLimit = pages.get(r.name) ?? PAGE;
    const statements = await r.sql(s, r.admin ? undefined : `wallet:${WALLET}`, decode(cursors.get(r.name)?.[which]));
    const times: number[] = [];
    let buffers = 0;
    for (let i = 0; i < DB_RUNS; i++) {
      let ms = 0;
      buffers = 0;
      for (const q of statements) {
        const [out] = (await s.em.fork().execute(`explain (analyze, buffers, format json) ${q.sql}`, q.params)) as {
          'QUERY PLAN': { Plan: Record<string, number>; 'Execution Time': number }[];
        }[];
        const plan = out!['QUERY PLAN'][0]!;
        ms += plan['Execution Time'];
        buffers += (plan.Plan['Shared Hit Blocks'] ?? 0) + (plan.Plan['Shared Read Blocks'] ?? 0);
      }
      times.push(ms);
    }
    times.sort((a, b) => a - b);
    return { ms: times[Math.floor(times.length / 2)]!, buffers };
  };
  console.log(`\nthe routes' statements in PostgreSQL alone (median of ${DB_RUNS} EXPLAIN ANALYZE runs; buffers of one run):`);
  console.log(`  ${'route'.padEnd(52)} ms 1k   ms 1M   ratio   buffers 1k / 1M`);
  for (const r of routes) {
    const a = await dbFigures(smallSide, r, 'small');
    const b = await dbFigures(bigSide, r, 'big');
    console.log(
      `  ${r.name.padEnd(52)} ${a.ms.toFixed(3).padStart(6)}  ${b.ms.toFixed(3).padStart(6)}  ${(b.ms / Math.max(a.ms, 0.001)).toFixed(2).padStart(5)}×   ${a.buffers} / ${b.buffers}`,
    );
  }

  console.log(`\nplans on the ${BIG.toLocaleString('en-US')}-row database (EXPLAIN ANALYZE of the repositories' own SQL), and the answers' sizes:`);
  for (const r of routes) {
    const owner = r.admin ? undefined : `wallet:${WALLET}`;
    const cursor = cursors.get(r.name)?.big;
    console.log(`  ${r.name} (${sizes.get(r.name)}):`);
    planLimit = pages.get(r.name) ?? PAGE;
    for (const q of await r.sql(
      bigSide,
      owner,
      cursor ? (JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as Record<string, unknown>) : undefined,
    )) {
      const plan = (await bigSide.em.fork().execute(`explain (analyze, costs off, timing off, summary off) ${q.sql}`, q.params)) as { 'QUERY PLAN': string }[];
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
