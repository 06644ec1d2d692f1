// bench:growth's data (test/bench/growth.ts): each growing table filled with `rows` generated rows in SQL (one
// generate_series statement per chunk), once per database, with the same shape at every size: 80 % on chain-devnet,
// about half the measured principal's, spread over the last 30 days, 10 agents. The keys and agents the routes are
// read with are real (issued and recorded through the gateway) and kept in the bench-only table bench_growth, so a
// cached database is read with the same ones on the next run.

import pg from 'pg';
import { findStable } from '../../../domain/shared/network.ts';
import { http, linkBody, writeAgentAsset, type TestApp } from '../../support/app.ts';

/** the measured principal: keys of this owner_wallet share its rows */
export const WALLET = 'So11111111111111111111111111111111111111112';
/** another principal, owner of the other half */
const OTHER_WALLET = 'Vote111111111111111111111111111111111111111';
export const AGENTS = 10;
/** agents 0..4 are the measured principal's (devnet), 5..9 the other's; receipts and deliveries of 8, 9 are on mainnet */
export const MEASURED_AGENTS = 5;

export interface GrowthWorld {
  keys: { user: string; userId: string; other: string; otherId: string; admin: string };
  /** agent mints, index 0..9 */
  mints: string[];
  /** webhook ids, index 0..9 (0..4 the measured principal's, devnet) */
  webhooks: string[];
}

const CHUNK = 100_000;

async function chunks(rows: number, run: (lo: number, hi: number) => Promise<unknown>): Promise<void> {
  for (let lo = 1; lo <= rows; lo += CHUNK) await run(lo, Math.min(rows, lo + CHUNK - 1));
}

const seconds = (since: number) => ((performance.now() - since) / 1000).toFixed(0);

/** The keys and agents of the database, issued and recorded on first use. */
async function world(app: TestApp, client: pg.Client): Promise<GrowthWorld> {
  await client.query(`create table if not exists bench_growth (name text primary key, value text not null)`);
  const get = async (name: string) =>
    ((await client.query(`select value from bench_growth where name = $1`, [name])).rows[0]?.value as string | undefined) ?? null;
  const put = (name: string, value: string) =>
    client.query(`insert into bench_growth (name, value) values ($1, $2) on conflict (name) do update set value = excluded.value`, [name, value]);
  let keys = await get('keys');
  if (!keys) {
    const issue = (role: 'user' | 'admin', owner_wallet?: string) =>
      app.services.access.issueKey({ network: 'chain-devnet', role, ...(owner_wallet ? { owner_wallet } : {}) });
    const user = await issue('user', WALLET);
    const other = await issue('user', OTHER_WALLET);
    const admin = await issue('admin');
    keys = JSON.stringify({ user: user.key, userId: user.id, other: other.key, otherId: other.id, admin: admin.key });
    await put('keys', keys);
  }
  const k = JSON.parse(keys) as GrowthWorld['keys'];
  let mints = await get('agents');
  if (!mints) {
    const list: string[] = [];
    for (let i = 0; i < AGENTS; i++) {
      // a wallet key records agents its wallet owns
      const [key, owner] = i < MEASURED_AGENTS ? [k.user, WALLET] : [k.other, OTHER_WALLET];
      // an agent exists only on the ledger: its Core asset first (DECISIONS "Agents, submissions and events")
      const { mint } = await writeAgentAsset(app, 'chain-devnet', { owner, name: `growth agent ${i}` });
      const res = await http(app, 'POST', '/v1/agents/record', { key, body: { mint, owner, name: `growth agent ${i}` } });
      if (res.status !== 200) throw new Error(`record agent: ${res.status} ${JSON.stringify(res.body)}`);
      list.push(mint);
    }
    mints = JSON.stringify(list);
    await put('agents', mints);
  }
  return { keys: k, mints: JSON.parse(mints) as string[], webhooks: Array.from({ length: AGENTS }, (_, i) => `GRWH${String(i).padStart(22, '0')}`) };
}

/** the version of each table's generated shape: bump one when its generation changes, so cached databases regenerate it */
const SHAPE = { events: 2, links: 2, receipts: 1, deliveries: 1, records: 1 } as const;

/** whether `table` lacks its `rows` rows of the current shape (then they are generated and `done` stamps them) */
async function stale(client: pg.Client, table: keyof typeof SHAPE, rows: number, countSql: string): Promise<{ done: () => Promise<unknown> } | null> {
  const stamp = `${rows} rows, shape ${SHAPE[table]}`;
  const kept = (await client.query(`select value from bench_growth where name = $1`, [`table:${table}`])).rows[0]?.value as string | undefined;
  if (kept === stamp && (await client.query(countSql)).rows[0].n === rows) return null;
  return {
    done: () =>
      client.query(`insert into bench_growth (name, value) values ($1, $2) on conflict (name) do update set value = excluded.value`, [`table:${table}`, stamp]),
  };
}

/** Fills the database behind `app` with `rows` rows of every growing table (those it does not hold yet). */
export async function generate(app: TestApp, rows: number): Promise<GrowthWorld> {
  const client = new pg.Client({ connectionString: app.database.url });
  await client.connect();
  try {
    const w = await world(app, client);
    const { mints } = w;
    const wallet = `wallet:${WALLET}`;
    const other = `wallet:${OTHER_WALLET}`;
    // spread over the last 30 days in g order: g = rows is now
    const at = `now() - ($2::int - g) * (interval '30 days' / $2::int)`;
    let changed = false;

    const eventsGen = await stale(client, 'events', rows, `select count(*)::int as n from events where id like 'gr%'`);
    if (eventsGen) {
      // kinds by a hash of g: settled 40 %, served 40 %, receipt.published 15 %, five rare kinds 1 % each; and every 40th
      // row an identity event of agent 1 (g % 40 = 1 is agent 1), so its history has a page at 1,000 rows too
      const started = performance.now();
      // truncate: the counters' truncate trigger resets them (a delete of 1M rows writes 1M deltas)
      await client.query(`truncate events`);
      await chunks(rows, (lo, hi) =>
        client.query(
          `insert into events (id, network, kind, phase, agent_asset, owner_principal, metadata, created_at, updated_at)
           select 'gr' || lpad(g::text, 9, '0'),
                  case when g % 5 = 0 then 'chain-mainnet' else 'chain-devnet' end,
                  case when g % 40 = 1 then 'identity.profile.updated' when k < 40 then 'payment_link.settled' when k < 80 then 'payment_link.served' when k < 95 then 'receipt.published'
                       when k = 95 then 'payment_link.created' when k = 96 then 'payment_link.updated' when k = 97 then 'agent.recorded'
                       when k = 98 then 'identity.profile.updated' else 'agent.treasury.withdraw' end,
                  'confirmed', ($5::text[])[g % 10 + 1],
                  case when o < 5 then $3 when o = 9 then null else 'wallet:w' || (g % 300) end,
                  jsonb_build_object('amount_atomic', (g % 1000)::text, 'currency', 'USDC'),
                  ${at}, now()
             from generate_series($1::int, $4::int) g, lateral (select abs(hashint4(g)) % 100 as k, abs(hashint4(g + 1)) % 10 as o) x`,
          [lo, rows, wallet, hi, mints],
        ),
      );
      console.log(`  generated ${rows} events in ${seconds(started)} s`);
      await eventsGen.done();
      changed = true;
    }

    const linksGen = await stale(client, 'links', rows, `select count(*)::int as n from payment_links where pk like 'GRPK%'`);
    if (linksGen) {
      const started = performance.now();
      await client.query(`delete from payment_links where pk like 'GRPK%'`);
      // every column as the gateway writes it: a link created through POST /v1/payment-links, copied; every 50th
      // discoverable (g % 50 = 1: on devnet)
      const created = await http(app, 'POST', '/v1/payment-links', { key: w.keys.user, body: linkBody(mints[0]!, { label: 'Growth report' }) });
      if (created.status !== 201) throw new Error(`template link: ${created.status} ${JSON.stringify(created.body)}`);
      const template = (await client.query(`select pk from payment_links where id = $1`, [created.body.id])).rows[0].pk as string;
      await chunks(rows, (lo, hi) =>
        client.query(
          `insert into payment_links (pk, id, network, label, owner_agent, method, price, currency, amount_atomic, accepts_currencies, protocol,
              response, webhook_url, webhook_secret, wrap_receipt, settle_policy, metadata, disabled, call_count, settled_count, last_called_at,
              last_settled_at, last_tx_sig, created_by, owner_principal, created_at, updated_at)
           select 'GRPK' || lpad(g::text, 22, '0'), 'GRPK' || lpad(g::text, 22, '0'),
                  case when g % 5 = 0 then 'chain-mainnet' else 'chain-devnet' end, t.label || ' ' || g,
                  case when o < 5 then ($5::text[])[g % 5 + 1] else ($5::text[])[g % 5 + 6] end,
                  t.method, t.price, t.currency, t.amount_atomic, t.accepts_currencies, t.protocol, t.response, null, null, t.wrap_receipt,
                  t.settle_policy, case when g % 50 = 1 then '{"discoverable": true}'::jsonb else t.metadata end, g % 97 = 0, g % 40, g % 30,
                  ts, ts, null, t.created_by,
                  case when o < 5 then $3 when o = 9 then 'wallet:w' || (g % 300) else $7 end, ts, ts
             from payment_links t, generate_series($1::int, $4::int) g,
                  lateral (select abs(hashint4(g + 1)) % 10 as o, ${at} as ts) x
            where t.pk = $6`,
          [lo, rows, wallet, hi, mints, template, other],
        ),
      );
      await client.query(`delete from payment_links where pk = $1`, [template]);
      console.log(`  generated ${rows} payment links in ${seconds(started)} s`);
      await linksGen.done();
      changed = true;
    }

    const receiptsGen = await stale(client, 'receipts', rows, `select count(*)::int as n from receipts`);
    if (receiptsGen) {
      const started = performance.now();
      await client.query(`truncate receipts`);
      const usdc = findStable('chain-devnet', 'USDC')!;
      // g = 0..rows-1: agent g % 10 (8, 9 on mainnet), nonce g / 10 — each chain gapless from 0, prev_receipt_hash the
      // previous link's hash (hashes are well-formed; the chain is not meant to verify)
      const hash = (n: string) => `encode(sha256(('growth:' || (g % 10) || ':' || (${n}))::bytea), 'hex')`;
      await chunks(rows, (lo, hi) =>
        client.query(
          `insert into receipts (network, agent, nonce, kind, decision, ts, ts_max, receipt_hash, prev_receipt_hash, tx_sig, source, body,
              created_at, verification, verification_reason, verification_checked_at, verification_attempts, verify_after)
           select network, agent, nonce, kind, decision, ts, ts, h, prev, sig, 'paywall',
                  jsonb_strip_nulls(jsonb_build_object('v', '0.1', 'kind', kind, 'agent', agent, 'nonce', nonce,
                    'ts', to_char(ts at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
                    'request', jsonb_build_object('method', 'GET', 'url', 'https://gateway.example/x/GRPK' || lpad((g % 1000)::text, 22, '0')),
                    'decision', decision,
                    'price', jsonb_build_object('amount', '0.01', 'currency', 'USDC', 'asset', $5::text, 'network', $6::text, 'amount_atomic', '9900',
                                                'fee', '100', 'gross', '10000', 'feeBps', 100, 'feeAuthority', $7::text),
                    'response', case when decision = 'allow' then jsonb_build_object('status', case when g % 17 = 0 then 500 else 200 end) end,
                    'tx_sig', sig, 'receipt_hash', h)) || jsonb_build_object('prev_receipt_hash', prev),
                  ts, case when sig is null then 'not_applicable' else 'verified' end, null, case when sig is null then null else ts end, 0, null
             from generate_series($1::int - 1, $4::int - 1) g,
                  lateral (select case when g % 10 >= 8 then 'chain-mainnet' else 'chain-devnet' end as network, ($3::text[])[g % 10 + 1] as agent,
                                  g / 10 as nonce, case when g % 3 = 0 then 'spend' else 'earn' end as kind,
                                  case when g % 11 = 0 then 'deny' when g % 13 = 0 then 'rejected' else 'allow' end as decision,
                                  ${at} as ts) x,
                  lateral (select ${hash('g / 10')} as h, case when g >= 10 then ${hash('g / 10 - 1')} end as prev,
                                  case when decision = 'allow' then left(translate(${hash("'s' || g")} || ${hash("'t' || g")}, '0', 'z'), 88) end as sig) y`,
          [lo, rows, mints, hi, usdc.mint, 'solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1', WALLET],
        ),
      );
      await client.query('select svc_compact_receipt_rollups()');
      console.log(`  generated ${rows} receipts in ${seconds(started)} s`);
      await receiptsGen.done();
      changed = true;
    }

    const deliveriesGen = await stale(client, 'deliveries', rows, `select count(*)::int as n from webhook_deliveries where id like 'GRDV%'`);
    if (deliveriesGen) {
      const started = performance.now();
      await client.query(`delete from webhooks where id like 'GRWH%'`);
      await client.query(
        `insert into webhooks (id, network, owner_principal, scope, url, events, description, secret, created_by, created_at, updated_at)
         select ($4::text[])[i + 1], case when i >= 8 then 'chain-mainnet' else 'chain-devnet' end, case when i < 5 then $1 else $2 end, 'principal',
                'https://hooks.example.com/svc/' || i, array['payment_link.*', 'receipt.published'], 'growth ' || i,
                'whsec_' || encode(sha256(('growth' || i)::bytea), 'hex'), $3, now() - interval '31 days', now() - interval '31 days'
           from generate_series(0, 9) i`,
        [wallet, other, w.keys.userId, w.webhooks],
      );
      await chunks(rows, (lo, hi) =>
        client.query(
          `insert into webhook_deliveries (id, network, webhook_id, event_id, kind, phase, status, attempts, next_attempt_at, last_status, last_error,
              delivered_at, created_at, updated_at)
           select 'GRDV' || lpad(g::text, 22, '0'), case when g % 10 >= 8 then 'chain-mainnet' else 'chain-devnet' end, ($3::text[])[g % 10 + 1],
                  'gr' || lpad(g::text, 9, '0'), case when g % 3 = 0 then 'receipt.published' else 'payment_link.settled' end, 'confirmed',
                  st, case when st = 'delivered' then 1 else 3 end, case when st = 'pending' then ts + interval '5 minutes' end,
                  case st when 'delivered' then 200 when 'failed' then 503 else 502 end,
                  case when st = 'delivered' then null else 'the endpoint answered 5xx' end, case when st = 'delivered' then ts end, ts, ts
             from generate_series($1::int, $4::int) g,
                  lateral (select case when g % 20 = 0 then 'failed' when g % 20 = 1 then 'pending' else 'delivered' end as st, ${at} as ts) x`,
          [lo, rows, w.webhooks, hi],
        ),
      );
      console.log(`  generated ${rows} webhook deliveries in ${seconds(started)} s`);
      await deliveriesGen.done();
      changed = true;
    }

    // the gateways record their own requests (the bench's): those of an earlier run are dropped, so each run reads `rows`
    await client.query(`delete from request_records where id not like 'gr%'`);
    const recordsGen = await stale(client, 'records', rows, `select count(*)::int as n from request_records where id like 'gr%'`);
    if (recordsGen) {
      const started = performance.now();
      await client.query(`delete from request_records where id like 'gr%'`);
      // half the measured key's, the rest another user key's and three more; buckets of the read routes
      await chunks(rows, (lo, hi) =>
        client.query(
          `insert into request_records (id, key_id, network, bucket, method, route, status, duration_ms, at)
           select 'gr' || lpad(g::text, 12, '0'),
                  case when g % 5 = 0 then 'GRKEYMAINNET' || (g % 3) when o < 5 then $3 when o < 8 then $5 else 'GRKEY' || (g % 3) end,
                  case when g % 5 = 0 then 'chain-mainnet' else 'chain-devnet' end,
                  (array['default', 'events.read', 'receipts.read'])[g % 3 + 1], 'GET',
                  (array['paymentLinks.list', 'events.list', 'receipts.list'])[g % 3 + 1],
                  case when g % 23 = 0 then 429 when g % 17 = 0 then 500 when g % 11 = 0 then 404 else 200 end, 1 + g % 40, ${at}
             from generate_series($1::int, $4::int) g, lateral (select abs(hashint4(g + 2)) % 10 as o) x`,
          [lo, rows, w.keys.userId, hi, w.keys.otherId],
        ),
      );
      console.log(`  generated ${rows} request records in ${seconds(started)} s`);
      await recordsGen.done();
      changed = true;
    }

    if (changed) {
      await client.query('select svc_compact_event_counts()');
      await client.query('vacuum analyze');
    }
    return w;
  } finally {
    await client.end();
  }
}
