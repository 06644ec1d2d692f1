import anyTest, { type ExecutionContext, type TestFn } from 'ava';
import pg from 'pg';
import { reputationSql } from '../../adapters/store/repositories/identity.ts';
import { receiptDailySql } from '../../adapters/store/repositories/receipts.ts';
import { startTestApp, type TestApp } from '../support/app.ts';

// The identity reputation and the daily buckets read rollups of the receipts (migration 0021), kept by
// triggers that only insert deltas. Each read must equal the aggregate of the receipts themselves at any moment —
// deltas unfolded, folded, a verification turning verified or mismatch — and two writers of one agent never wait for
// each other. The reputation counts only earn receipts whose settlement the ledger verified (migration 0026).

const test = anyTest as TestFn<{ app: TestApp }>;
const NET = 'chain-devnet';
const DAY0 = new Date('2026-03-01T00:00:00Z');

test.before(async (t) => {
  t.context = { app: await startTestApp({ env: { SVC_JOBS: 'off' } }) };
});

const em = (t: { context: { app: TestApp } }) => t.context.app.database.orm.em.fork();

let nextHash = 0;
/** Inserts receipts of `agent` as the repositories do (one statement per receipt), with varied kinds, verdicts, days. */
async function insertReceipts(t: { context: { app: TestApp } }, agent: string, n: number, seed: number): Promise<void> {
  const m = em(t);
  const [head] = (await m.execute(`select coalesce(max(nonce) + 1, 0)::int as n from receipts where network = ? and agent = ?`, [NET, agent])) as {
    n: number;
  }[];
  for (let i = 0; i < n; i++) {
    const k = (seed * 7919 + i * 104729) % 1000;
    const kind = k % 3 === 0 ? 'spend' : 'earn';
    const decision = k % 11 === 0 ? 'deny' : k % 13 === 0 ? 'rejected' : 'allow';
    const asset = k % 4 === 0 ? 'EURC' : 'USDC';
    const status = k % 5 === 0 ? 502 : k % 7 === 0 ? null : 200;
    const ts = new Date(DAY0.getTime() + (k % 5) * 86_400_000 + (k % 97) * 60_000);
    const price = { asset, currency: asset === 'EURC' ? 'EUR' : 'USD', amount_atomic: String(100 + k), gross: String(101 + k) };
    const body = { price, ...(status === null ? {} : { response: { status } }) };
    // pushed receipts: some checked on the ledger already, some still pending, some naming no transaction
    const verification = k % 4 === 1 ? 'pending' : k % 4 === 2 ? 'not_applicable' : 'verified';
    await m.execute(
      `insert into receipts (network, agent, nonce, kind, receipt_hash, source, body, created_at, decision, ts, ts_max, verification)
       values (?, ?, ?, ?, ?, 'push', ?::jsonb, now(), ?, ?, ?, ?)`,
      [NET, agent, head!.n + i, kind, `rr${nextHash++}`, JSON.stringify(body), decision, ts, ts, verification],
    );
  }
}

/** The rollup reads and the same aggregates straight from receipts (the queries they replaced). */
async function compare(t: ExecutionContext<{ app: TestApp }>, agent: string, label: string): Promise<void> {
  const m = em(t);
  const rep = reputationSql(NET, agent);
  const got = (await m.execute(rep.sql, rep.params)) as Record<string, unknown>[];
  const want = (await m.execute(
    `select body->'price'->>'currency' as currency, body->'price'->>'asset' as asset, count(*)::int as calls,
            (count(*) filter (where (body->'response'->>'status')::int between 200 and 299 or body->'response' is null))::int as ok_calls,
            coalesce(sum((body->'price'->>'amount_atomic')::numeric), 0)::text as amount_atomic, max(ts) as last_at
       from receipts where network = ? and agent = ? and kind = 'earn' and decision = 'allow' and verification = 'verified'
      group by 1, 2 order by 1, 2`,
    [NET, agent],
  )) as Record<string, unknown>[];
  t.deepEqual(
    got.map((r) => ({ ...r })),
    want.map((r) => ({ ...r })),
    `reputation, ${label}`,
  );
  const daily = receiptDailySql(NET, agent, DAY0);
  const days = (await m.execute(daily.sql, daily.params)) as Record<string, unknown>[];
  const wantDays = (await m.execute(
    `select to_char(ts at time zone 'UTC', 'YYYY-MM-DD') as day, kind, body->'price'->>'asset' as asset,
            sum((case when kind = 'spend' then body->'price'->>'gross' else body->'price'->>'amount_atomic' end)::numeric)::text as amount_atomic,
            count(*)::int as count
       from receipts where network = ? and agent = ? and decision = 'allow' and ts >= ? group by 1, 2, 3 order by 1, 2, 3`,
    [NET, agent, DAY0],
  )) as Record<string, unknown>[];
  t.deepEqual(
    days.map((r) => ({ ...r })),
    wantDays.map((r) => ({ ...r })),
    `daily, ${label}`,
  );
  t.true(want.length > 0 && wantDays.length > 0, `${label}: nothing to compare`);
}

const compact = async (t: { context: { app: TestApp } }) => em(t).execute('select svc_compact_receipt_rollups()');

test.serial('the rollups equal the receipts aggregates: unfolded, folded, mixed, and after verifications turn verified or mismatch', async (t) => {
  const agent = 'agentRollup1';
  await insertReceipts(t, agent, 60, 1);
  await compare(t, agent, 'deltas only');
  await compact(t);
  t.is(((await em(t).execute(`select count(*)::int as n from receipt_reputation_deltas where agent = ?`, [agent])) as { n: number }[])[0]!.n, 0);
  await compare(t, agent, 'folded');
  await insertReceipts(t, agent, 40, 2);
  await compare(t, agent, 'folded + deltas');
  // verification: pending → verified brings the receipt into the reputation (only what the ledger proved counts, migration
  // 0026); → mismatch takes it out (and the newest settled time with it when it was the newest)
  await em(t).execute(`update receipts set verification = 'verified' where agent = ? and nonce % 3 = 0 and verification = 'pending'`, [agent]);
  await compare(t, agent, 'after verifications');
  const [newest] = (await em(t).execute(`select nonce from receipts where agent = ? and kind = 'earn' and decision = 'allow' order by ts desc limit 1`, [
    agent,
  ])) as { nonce: number }[];
  await em(t).execute(`update receipts set verification = 'mismatch' where agent = ? and (nonce % 5 = 1 or nonce = ?)`, [agent, newest!.nonce]);
  await compare(t, agent, 'after mismatches');
  await compact(t);
  await compare(t, agent, 'after mismatches, folded');
  // a deleted receipt leaves both rollups
  await em(t).execute(`delete from receipts where agent = ? and nonce % 9 = 4`, [agent]);
  await compare(t, agent, 'after deletes');
  await compact(t);
  await compare(t, agent, 'after deletes, folded');
});

test.serial('two open transactions writing receipts of the same agent and currency do not wait for each other', async (t) => {
  const { url } = t.context.app.database;
  const a = new pg.Client({ connectionString: url });
  const b = new pg.Client({ connectionString: url });
  await a.connect();
  await b.connect();
  const body = JSON.stringify({ price: { asset: 'USDC', currency: 'USD', amount_atomic: '5', gross: '5' }, response: { status: 200 } });
  const insert = (c: pg.Client, nonce: number) =>
    c.query(
      `insert into receipts (network, agent, nonce, kind, receipt_hash, source, body, created_at, decision, ts, ts_max, verification)
       values ($1, 'agentRollup2', $2, 'earn', $3, 'push', $4::jsonb, now(), 'allow', $5, $5, 'verified')`,
      [NET, nonce, `rw${nonce}`, body, DAY0],
    );
  try {
    await a.query('begin');
    await insert(a, 0);
    // b would block on a's counter row with an upserting rollup; a lock wait fails it here instead of hanging
    await b.query(`set lock_timeout = '5s'`);
    await b.query('begin');
    await insert(b, 1);
    await b.query('commit');
    await a.query('commit');
    t.pass();
  } finally {
    await a.end();
    await b.end();
  }
  await compare(t, 'agentRollup2', 'two writers');
});
