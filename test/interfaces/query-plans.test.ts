import anyTest, { type ExecutionContext, type TestFn } from 'ava';
import type { EntityManager } from '@mikro-orm/postgresql';
import {
  eventCountsSql,
  eventKindsSql,
  eventPageSql,
  eventsSinceSql,
  expandKinds,
  type EventPageQuery,
  type Sql,
} from '../../adapters/store/repositories/events.ts';
import { paymentLinkListSql } from '../../adapters/store/repositories/payment-links.ts';
import { receiptDailySql, receiptPageSql, receiptSinceProbeSql, receiptsAfterSql } from '../../adapters/store/repositories/receipts.ts';
import { reputationSql } from '../../adapters/store/repositories/identity.ts';
import { windowStart } from '../../domain/receipts/daily.ts';
import { deliveryListSql, webhookListSql } from '../../adapters/store/repositories/webhooks.ts';
import { usageSql } from '../../adapters/store/repositories/request-records.ts';
import { discoverableLinksSql } from '../../adapters/store/repositories/discovery.ts';
import { discoverChunks } from '../../domain/discovery/service.ts';
import { startTestApp, type TestApp } from '../support/app.ts';

// Every list and aggregate is served by an index in its own order, whatever the table holds. The
// database gets 400,000 generated rows (events 200,000, 80 % on one network, skewed kinds and owners; links,
// receipts, deliveries and request records 50,000 each), then EXPLAIN (ANALYZE, FORMAT JSON) of the SQL the repositories run (their
// exported builders) must show: no Seq Scan on a big table, no Sort over more than a page, and scans that read and
// discard at most a small multiple of the page.

type Ctx = { app: TestApp; em: EntityManager };
const test = anyTest as TestFn<Ctx>;
const PAGE = 50;
/**
 * The generated request records end here: now, or two hours into today (UTC) when the suite runs earlier than that, so
 * the one-day window of each key (a key's records are minutes apart) holds records at any hour, midnight included.
 */
const RECORDS_END = (() => {
  const now = Date.now();
  return new Date(Math.max(now, now - (now % 86_400_000) + 2 * 3_600_000));
})();

const BIG = new Set(['events', 'payment_links', 'receipts', 'webhook_deliveries', 'event_counts', 'request_records', 'request_usage_daily']);

test.before(async (t) => {
  const app = await startTestApp({ env: { SVC_JOBS: 'off' } });
  const em = app.database.orm.em.fork();
  t.context = { app, em };
  // kinds by a hash of g: settled 40 %, served 40 %, receipt.published 15 %, five rare kinds 1 % each
  await em.execute(`insert into events (id, network, kind, phase, agent_asset, owner_principal, metadata, created_at, updated_at)
    select 'ev' || lpad(g::text, 8, '0'),
           case when g % 5 = 0 then 'chain-mainnet' else 'chain-devnet' end,
           case when k < 40 then 'payment_link.settled' when k < 80 then 'payment_link.served' when k < 95 then 'receipt.published'
                when k = 95 then 'payment_link.created' when k = 96 then 'payment_link.updated' when k = 97 then 'agent.recorded'
                when k = 98 then 'identity.profile.updated' else 'agent.treasury.withdraw' end,
           case when g % 7 = 0 then 'submitted' else 'confirmed' end,
           'agent' || (g % 2000),
           case when o < 6 then 'key:big' when o = 9 then null else 'wallet:w' || (g % 300) end,
           '{}'::jsonb, now() - (200000 - g) * interval '10 seconds', now()
      from generate_series(1, 200000) g, lateral (select abs(hashint4(g)) % 100 as k, abs(hashint4(g + 1)) % 10 as o) x`);
  await em.execute(`insert into payment_links (pk, id, network, label, owner_agent, method, price, currency, amount_atomic, accepts_currencies,
                      protocol, response, wrap_receipt, settle_policy, metadata, created_by, created_at, updated_at, owner_principal)
    select 'pk' || lpad(g::text, 8, '0'), 'link' || g, case when g % 5 = 0 then 'chain-mainnet' else 'chain-devnet' end, 'l',
           'agent' || (g % 2000), 'GET', '1', 'USDC', 1, '[]'::jsonb, 'x402', '{}'::jsonb, false, 'settle',
           case when g % 20 = 1 then '{"discoverable": true}'::jsonb else '{}'::jsonb end, 'k', now(), now(),
           case when (g * 31) % 10 < 6 then (case when g <= 25000 then 'key:old' else 'key:big' end) else 'wallet:w' || (g % 300) end
      from generate_series(1, 50000) g`);
  // the links' owner agents, proven (discover lists only links whose owner agent the ledger proved), one in a hundred not
  await em.execute(`insert into agents (network, mint, owner, treasury, source, registered_at, updated_at, proven_at)
    select n, 'agent' || g, 'o', 't' || g, 'recorded', now(), now(), case when g % 100 = 21 then null else now() end
      from generate_series(0, 1999) g, unnest(array['chain-devnet', 'chain-mainnet']) n`);
  await em.execute(`insert into receipts (network, agent, nonce, kind, receipt_hash, source, body, created_at, decision, ts, ts_max, verification)
    select 'chain-devnet', 'agentR' || (g % 10), g / 10, case when g % 3 = 0 then 'spend' else 'earn' end, 'h' || g, 'paywall',
           jsonb_build_object('price', jsonb_build_object('asset', 'USDC', 'currency', 'USDC', 'amount_atomic', '990', 'gross', '1000'),
                              'response', jsonb_build_object('status', case when g % 17 = 0 then 500 else 200 end)), now(),
           case when g % 11 = 0 then 'deny' when g % 13 = 0 then 'rejected' else 'allow' end,
           now() - (50000 - g) * interval '1 second', now() - (50000 - g) * interval '1 second', 'verified'
      from generate_series(0, 49999) g`);
  await em.execute(`insert into webhooks (id, network, owner_principal, scope, url, events, secret, created_by, created_at, updated_at)
    select 'wh' || g, 'chain-devnet', 'key:big', 'principal', 'https://example.com/h', array['*'], 's', 'k', now(), now() from generate_series(0, 4) g`);
  await em.execute(`insert into webhook_deliveries (id, network, webhook_id, event_id, kind, phase, status, created_at, updated_at)
    select 'd' || lpad(g::text, 8, '0'), 'chain-devnet', 'wh' || (g % 5), 'ev' || g, 'payment_link.settled', 'confirmed', 'delivered', now(), now()
      from generate_series(1, 50000) g`);
  // request records of 30 days: 8 devnet keys (key0 half of them), 3 buckets, some errors and throttled
  await em.execute(
    `insert into request_records (id, key_id, network, bucket, method, route, status, duration_ms, at)
    select 'rr' || lpad(g::text, 8, '0'), case when g % 5 = 0 then 'keyM' when g % 2 = 0 then 'key0' else 'key' || (g % 8) end,
           case when g % 5 = 0 then 'chain-mainnet' else 'chain-devnet' end, (array['default', 'events.read', 'receipts.read'])[g % 3 + 1], 'GET',
           'events.list', case when g % 23 = 0 then 429 when g % 17 = 0 then 500 else 200 end, 3, ?::timestamptz - (50000 - g) * interval '50 seconds'
      from generate_series(1, 50000) g`,
    [RECORDS_END],
  );
  // the generated events' counters are deltas until folded, as the compaction job and a metrics read do first
  await em.execute('select svc_compact_event_counts()');
  await em.execute('select svc_compact_receipt_rollups()');
  await em.execute('analyze');
});

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Actual Rows': number;
  'Actual Loops': number;
  'Rows Removed by Filter'?: number;
  'Rows Removed by Index Recheck'?: number;
  Plans?: PlanNode[];
}

const SCANS = new Set(['Seq Scan', 'Index Scan', 'Index Only Scan', 'Bitmap Heap Scan']);

/** EXPLAINs one statement as the repository runs it and checks the plan's shape. */
async function checkPlan(t: ExecutionContext<Ctx>, label: string, q: Sql, bounds: { sorted: number; read: number }): Promise<void> {
  const rows = (await t.context.em.execute(`explain (analyze, format json) ${q.sql}`, q.params)) as { 'QUERY PLAN': { Plan: PlanNode }[] }[];
  const plan = rows[0]!['QUERY PLAN'][0]!.Plan;
  let read = 0;
  let removed = 0;
  const walk = (n: PlanNode) => {
    const loops = n['Actual Loops'] || 1;
    if (n['Node Type'] === 'Seq Scan' && n['Relation Name'] && BIG.has(n['Relation Name'])) t.fail(`${label}: Seq Scan on ${n['Relation Name']}`);
    if (n['Node Type'] === 'Sort' || n['Node Type'] === 'Incremental Sort') {
      const input = (n.Plans ?? []).reduce((s, c) => s + c['Actual Rows'] * (c['Actual Loops'] || 1), 0);
      t.true(input <= bounds.sorted, `${label}: Sort over ${input} rows (bound ${bounds.sorted})`);
    }
    if (SCANS.has(n['Node Type']) && n['Relation Name'] && BIG.has(n['Relation Name'])) {
      read += n['Actual Rows'] * loops;
      removed += ((n['Rows Removed by Filter'] ?? 0) + (n['Rows Removed by Index Recheck'] ?? 0)) * loops;
    }
    for (const c of n.Plans ?? []) walk(c);
  };
  walk(plan);
  t.true(plan['Actual Rows'] > 0, `${label}: the query found nothing, so its plan proves nothing`);
  if (removed > 3 * PAGE || read > bounds.read)
    t.log(
      JSON.stringify(
        plan,
        ['Node Type', 'Relation Name', 'Index Name', 'Actual Rows', 'Actual Loops', 'Rows Removed by Filter', 'Filter', 'Index Cond', 'Plans'],
        1,
      ),
    );
  t.true(removed <= 3 * PAGE, `${label}: ${removed} rows removed by filter`);
  t.true(read <= bounds.read, `${label}: ${read} rows read from big tables (bound ${bounds.read})`);
  t.log(`${label}: read ${read}, removed ${removed}`);
}

const list = { sorted: PAGE, read: 3 * PAGE };

/** The event page exactly as events.list/after build it: kind patterns expanded, then the page's SQL. */
async function eventPage(t: ExecutionContext<Ctx>, network: string, q: Omit<EventPageQuery, 'kinds'> & { patterns?: string[] }): Promise<Sql> {
  const { em } = t.context;
  const kinds = await expandKinds(em, network, q.patterns);
  return eventPageSql(network, { ...q, kinds });
}

async function midSeq(t: ExecutionContext<Ctx>): Promise<bigint> {
  const [row] = (await t.context.em.execute(`select seq::text as seq from events where id = 'ev00100000'`)) as { seq: string }[];
  return BigInt(row!.seq);
}

test('events: every list filter reads a page from an index in seq order', async (t) => {
  const devnet = 'chain-devnet';
  const mid = await midSeq(t);
  const cases: [string, Omit<EventPageQuery, 'kinds'> & { patterns?: string[] }][] = [
    ['latest (admin)', { owner: undefined, limit: PAGE }],
    ['cursor page (admin)', { owner: undefined, before: mid, limit: PAGE }],
    ['latest of one principal', { owner: 'key:big', limit: PAGE }],
    ['a small principal', { owner: 'wallet:w7', limit: PAGE }],
    ['cursor page of a principal', { owner: 'key:big', before: mid, limit: PAGE }],
    ['one exact rare kind', { owner: 'key:big', patterns: ['agent.recorded'], limit: PAGE }],
    ['one exact rare kind (admin, cursor)', { owner: undefined, patterns: ['identity.profile.updated'], before: mid, limit: PAGE }],
    ['two exact kinds, common + rare', { owner: 'key:big', patterns: ['payment_link.settled', 'identity.profile.updated'], limit: PAGE }],
    ['two exact kinds (admin, cursor)', { owner: undefined, patterns: ['agent.treasury.withdraw', 'payment_link.updated'], before: mid, limit: PAGE }],
    ['a wildcard', { owner: 'key:big', patterns: ['payment_link.*'], limit: PAGE }],
    ['a rare wildcard + a kind', { owner: undefined, patterns: ['identity.*', 'agent.recorded'], limit: PAGE }],
    ['the agent filter', { owner: undefined, agent: 'agent7', limit: PAGE }],
    ['the agent filter of a principal', { owner: 'key:big', agent: 'agent1', limit: PAGE }],
    ['agent + kind', { owner: undefined, agent: 'agent7', patterns: ['receipt.published'], limit: PAGE }],
    ['agent + kinds of a principal', { owner: 'key:big', agent: 'agent2', patterns: ['payment_link.*', 'agent.recorded'], limit: PAGE }],
    ['replay after (subscriber), kinds', { owner: 'key:big', patterns: ['payment_link.settled', 'agent.recorded'], after: mid, limit: PAGE }],
    ['replay after (subscriber), agent', { owner: undefined, agent: 'agent9', after: mid, limit: PAGE }],
  ];
  for (const [label, q] of cases) {
    const sql = await eventPage(t, devnet, q);
    const branches = sql.sql.split('union all').length;
    await checkPlan(t, label, sql, { sorted: PAGE, read: 3 * PAGE * branches });
  }
  // what a list answers is what the events table holds under the same filter, newest first
  const page = await t.context.app.database.store.events.list(devnet, {
    owner: 'key:big',
    kinds: ['payment_link.settled', 'identity.profile.updated'],
    limit: PAGE,
  });
  const expected = (await t.context.em.execute(
    `select id from events where network = ? and owner_principal = 'key:big' and kind in ('payment_link.settled', 'identity.profile.updated') order by seq desc limit ?`,
    [devnet, PAGE],
  )) as { id: string }[];
  t.deepEqual(
    page.map((e) => e.id),
    expected.map((r) => r.id),
  );
  const wild = await t.context.app.database.store.events.list(devnet, { owner: undefined, kinds: ['identity.*', 'agent.recorded'], limit: PAGE });
  const expectedWild = (await t.context.em.execute(
    `select id from events where network = ? and (kind like 'identity.%' or kind = 'agent.recorded') order by seq desc limit ?`,
    [devnet, PAGE],
  )) as { id: string }[];
  t.deepEqual(
    wild.map((e) => e.id),
    expectedWild.map((r) => r.id),
  );
  // the live feed's catch-up across networks
  await checkPlan(t, 'feed catch-up', eventsSinceSql(mid, 256), { sorted: 0, read: 256 });
  // the kind lookup of a wildcard reads the small event_kinds table
  await checkPlan(t, 'wildcard kinds', eventKindsSql(devnet, ['payment_link.*']), list);
});

test('metrics: counters read O(buckets) rows of the rollup, never the events', async (t) => {
  const day = 86_400_000;
  const cases: [string, Sql, number][] = [
    ['all time (admin)', eventCountsSql('chain-devnet', { owner: undefined }), 50],
    ['all time of a principal', eventCountsSql('chain-devnet', { owner: 'key:big' }), 50],
    ['days=1 (admin)', eventCountsSql('chain-devnet', { owner: undefined, since: new Date(Date.now() - day) }), 48 * 16],
    ['days=7 of a principal', eventCountsSql('chain-devnet', { owner: 'key:big', since: new Date(Date.now() - 7 * day) }), 48 * 16],
    ['days=30 (admin)', eventCountsSql('chain-devnet', { owner: undefined, since: new Date(Date.now() - 30 * day) }), 60 * 16],
  ];
  for (const [label, sql, bound] of cases) await checkPlan(t, label, sql, { sorted: bound, read: bound });
});

test('payment links, receipts, webhooks and deliveries: each list reads a page from an index in its order', async (t) => {
  const devnet = 'chain-devnet';
  await checkPlan(t, 'links (admin)', paymentLinkListSql(devnet, { owner: undefined, limit: PAGE }), list);
  await checkPlan(t, 'links of a principal', paymentLinkListSql(devnet, { owner: 'key:big', limit: PAGE }), list);
  await checkPlan(t, 'links of a principal, cursor', paymentLinkListSql(devnet, { owner: 'key:big', beforePk: 'pk00040000', limit: PAGE }), list);
  // a principal with as many links as the biggest, all older than everyone else's: its page starts 25,000 pks down
  await checkPlan(t, 'links of a principal whose links are all old', paymentLinkListSql(devnet, { owner: 'key:old', limit: PAGE }), list);
  await checkPlan(t, 'links of a small principal by agent', paymentLinkListSql(devnet, { owner: 'wallet:w7', ownerAgent: 'agent7', limit: PAGE }), list);
  await checkPlan(t, 'links by agent (admin)', paymentLinkListSql(devnet, { owner: undefined, ownerAgent: 'agent7', limit: PAGE }), list);

  const agent = 'agentR3';
  await checkPlan(t, 'receipts', receiptPageSql(devnet, agent, { limit: PAGE }, 0), list);
  await checkPlan(t, 'receipts, cursor', receiptPageSql(devnet, agent, { beforeNonce: 2500, limit: PAGE }, 0), list);
  await checkPlan(t, 'receipts by kind', receiptPageSql(devnet, agent, { kind: 'spend', limit: PAGE }, 0), list);
  await checkPlan(t, 'receipts by decision', receiptPageSql(devnet, agent, { decision: 'rejected', limit: PAGE }, 0), list);
  await checkPlan(t, 'receipts by kind and decision', receiptPageSql(devnet, agent, { kind: 'earn', decision: 'deny', limit: PAGE }, 0), list);
  const since = new Date(Date.now() - 20_000 * 1000);
  await checkPlan(t, 'receipts since: probe', receiptSinceProbeSql(devnet, agent, since), list);
  const [probe] = (await t.context.em.execute(receiptSinceProbeSql(devnet, agent, since).sql, receiptSinceProbeSql(devnet, agent, since).params)) as {
    nonce: number;
  }[];
  t.truthy(probe);
  await checkPlan(t, 'receipts since: page', receiptPageSql(devnet, agent, { since, limit: PAGE }, probe!.nonce), list);
  await checkPlan(t, 'receipts after a nonce (pull)', receiptsAfterSql(devnet, agent, { afterNonce: 1000, limit: PAGE }), list);

  await checkPlan(t, 'webhooks of a principal', webhookListSql(devnet, { owner: 'key:big', limit: PAGE }), list);
  await checkPlan(t, 'deliveries of a webhook', deliveryListSql(devnet, 'wh3', { limit: PAGE }), list);
  await checkPlan(t, 'deliveries of a webhook, cursor', deliveryListSql(devnet, 'wh3', { beforeId: 'd00025000', limit: PAGE }), list);
});

test('receipt aggregates: the reputation and the daily buckets read their rollups, not the receipts', async (t) => {
  const { em } = t.context;
  const devnet = 'chain-devnet';
  const agent = 'agentR3';
  // a few deltas not folded yet, as between two compactions
  await em.execute(
    `insert into receipts (network, agent, nonce, kind, receipt_hash, source, body, created_at, decision, ts, ts_max, verification)
    select 'chain-devnet', ?, 100000 + g, 'earn', 'hx' || g, 'push',
           jsonb_build_object('price', jsonb_build_object('asset', 'USDC', 'currency', 'USDC', 'amount_atomic', '7', 'gross', '7'), 'response', jsonb_build_object('status', 201)),
           now(), 'allow', now(), now(), 'pending'
      from generate_series(1, 3) g`,
    [agent],
  );
  const reputation = reputationSql(devnet, agent);
  await checkPlan(t, 'reputation', reputation, { sorted: 10, read: 10 });
  const daily = receiptDailySql(devnet, agent, windowStart(new Date(), 30));
  await checkPlan(t, 'daily buckets, 30 days', daily, { sorted: 4 * 31, read: 4 * 31 });
  // and they answer what the receipts hold
  const got = (await em.execute(reputation.sql, reputation.params)) as { calls: number; ok_calls: number; amount_atomic: string; last_at: Date }[];
  const [want] = (await em.execute(
    `select count(*)::int as calls, (count(*) filter (where (body->'response'->>'status')::int between 200 and 299))::int as ok_calls,
            sum((body->'price'->>'amount_atomic')::numeric)::text as amount_atomic, max(ts) as last_at
       from receipts where network = ? and agent = ? and kind = 'earn' and decision = 'allow' and verification = 'verified'`,
    [devnet, agent],
  )) as { calls: number; ok_calls: number; amount_atomic: string; last_at: Date }[];
  t.is(got.length, 1);
  const { calls, ok_calls, amount_atomic, last_at } = got[0]!;
  t.deepEqual({ calls, ok_calls, amount_atomic, last_at }, { ...want! });
  const days = (await em.execute(daily.sql, daily.params)) as { day: string; kind: string; count: number; amount_atomic: string }[];
  const wantDays = (await em.execute(
    `select to_char(ts at time zone 'UTC', 'YYYY-MM-DD') as day, kind, body->'price'->>'asset' as asset,
            sum((case when kind = 'spend' then body->'price'->>'gross' else body->'price'->>'amount_atomic' end)::numeric)::text as amount_atomic, count(*)::int as count
       from receipts where network = ? and agent = ? and decision = 'allow' and ts >= ? group by 1, 2, 3 order by 1, 2, 3`,
    [devnet, agent, windowStart(new Date(), 30)],
  )) as unknown[];
  t.deepEqual(
    days.map((d) => ({ ...d })),
    wantDays.map((d) => ({ ...(d as object) })),
  );
});

test('usage: per key and per network from the request_usage_daily rollup, never the request records', async (t) => {
  const { em } = t.context;
  const devnet = 'chain-devnet';
  const dayStart = (days: number) => new Date(Date.UTC(RECORDS_END.getUTCFullYear(), RECORDS_END.getUTCMonth(), RECORDS_END.getUTCDate() - (days - 1)));
  // what the rollup must answer: the records themselves, grouped as the read groups them
  const direct = async (since: Date, keyId?: string) =>
    (await em.execute(
      `select key_id, bucket, to_char(date_trunc('day', at at time zone 'UTC'), 'YYYY-MM-DD') as day, count(*)::int as requests,
              count(*) filter (where status >= 400)::int as errors, count(*) filter (where status = 429)::int as throttled
         from request_records where network = ? and at >= ? ${keyId ? 'and key_id = ?' : ''} group by 1, 2, 3 order by 3 desc, 1, 2`,
      keyId ? [devnet, since, keyId] : [devnet, since],
    )) as unknown[];
  const read = async (since: Date, keyId?: string) => {
    const q = usageSql(devnet, { keyId, since });
    return (await em.execute(q.sql, q.params)) as unknown[];
  };
  // every writer keeps it exact: inserts (the generated rows), an update, a prune-like delete of the oldest days
  await em.execute(`update request_records set status = 429 where id in ('rr00049990', 'rr00049991')`);
  await em.execute(`delete from request_records where at < now() - interval '20 days'`);
  for (const [days, keyId] of [
    [7, 'key0'],
    [30, 'key0'],
    [1, 'key3'],
    [7, undefined],
    [30, undefined],
  ] as const) {
    const since = dayStart(days);
    const got = await read(since, keyId);
    t.true(got.length > 0, `${days} days ${keyId ?? 'admin'}: rows`);
    t.deepEqual(
      got.map((r) => ({ ...(r as object) })),
      (await direct(since, keyId)).map((r) => ({ ...(r as object) })),
      `${days} days ${keyId ?? 'admin'}`,
    );
  }
  // a day pruned entirely leaves no counter behind
  const [left] = (await em.execute(`select count(*)::int as n from request_usage_daily where day < (now() - interval '21 days')::date`)) as { n: number }[];
  t.is(left!.n, 0);
  // O(days × buckets) of the rollup for a key, O(keys × days × buckets) for an admin — never the records
  await checkPlan(t, 'usage of a key, 7 days', usageSql(devnet, { keyId: 'key0', since: dayStart(7) }), { sorted: 7 * 3, read: 7 * 3 });
  await checkPlan(t, 'usage of a key, 30 days', usageSql(devnet, { keyId: 'key0', since: dayStart(30) }), { sorted: 30 * 3, read: 30 * 3 });
  await checkPlan(t, 'usage of the network (admin), 7 days', usageSql(devnet, { since: dayStart(7) }), { sorted: 7 * 3 * 8, read: 7 * 3 * 8 });
});

test('discover: a page reads its chunks of the catalogue (the first of `limit`, each next twice the last, 500 at most), each by the index', async (t) => {
  const devnet = 'chain-devnet';
  t.deepEqual(discoverChunks(20), [
    { offset: 0, limit: 20 },
    { offset: 20, limit: 40 },
    { offset: 60, limit: 80 },
    { offset: 140, limit: 160 },
    { offset: 300, limit: 200 },
  ]);
  t.deepEqual(
    discoverChunks(100).map((c) => c.limit),
    [100, 200, 200],
  );
  // 2,500 discoverable devnet links: an answer of 20 without a search (or a search its first chunk fills) reads 20 of
  // them; a later chunk reads its offset and its rows through the index. (The deepest chunks, a fifth of this small
  // catalogue, may rightly be read by a scan here; at 1M rows bench:growth prints their plan.)
  await checkPlan(t, 'discover, first chunk', discoverableLinksSql(devnet, 20, 0), { sorted: 20, read: 20 });
  await checkPlan(t, 'discover, limit 100', discoverableLinksSql(devnet, 100, 0), { sorted: 100, read: 100 });
  await checkPlan(t, 'discover, third chunk', discoverableLinksSql(devnet, 80, 60), { sorted: 140, read: 140 });
});
