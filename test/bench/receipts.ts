// npm run bench:receipts — receipt pushes per second through the whole stack (REST: auth, rate limit, schema, RFC 8785
// hash, idempotency on receipt_hash, the agent's head lock, the chain rule, the row and its receipt.published event in
// one transaction) for one agent (its chain is sequential by nature: one client pushing nonce after nonce) and for
// 50 agents pushing at once, each against a plain INSERT of the same rows into a table of the same shape (same indexes),
// one statement per row over the same number of connections, in the same run on the same database.
//
//   BENCH_RECEIPTS=2000 npm run bench:receipts
//
// The pushes are sent by the closed-loop generator in its own process (test/bench/support/load.ts), one lane per
// agent (each chain in order); a plain fastify route answering {"ok":true} gets the same bodies over the same lanes in
// the same run, with a warning when it is generator- or load-bound.

import os from 'node:os';
import pg from 'pg';
import { receiptInsertParams } from '../../adapters/store/repositories/receipts.ts';
import type { ReceiptV1 } from '../../domain/receipts/schema.ts';
import { issueKey, recordAgent, removeDataDir, startTestApp } from '../support/app.ts';
import { buildChain } from '../support/receipts.ts';
import { expectAll, machineLine, plainBaseline, startPlainServer, type LoadRequest } from './support/load.ts';

const TOTAL = Number(process.env.BENCH_RECEIPTS ?? 2000);
const AGENTS = 50;
const load = () =>
  os
    .loadavg()
    .map((n) => n.toFixed(2))
    .join(' ');
const loadBefore = load();

const app = await startTestApp({ env: { SVC_JOBS: 'off', SVC_RATE_LIMITS: JSON.stringify({ 'receipts.write': 10_000_000, default: 10_000_000 }) } });
const pool = new pg.Pool({ connectionString: app.database.url, max: app.config.dbPoolMax });
const plain = await startPlainServer();
try {
  const key = await issueKey(app);
  const one = (await recordAgent(app, key)).mint;
  const many: string[] = [];
  for (let i = 0; i < AGENTS; i++) many.push((await recordAgent(app, key)).mint);
  const oneChain = buildChain(one, TOTAL);
  const perAgent = Math.max(1, Math.floor(TOTAL / AGENTS));
  const manyChains = many.map((a) => buildChain(a, perAgent));

  await pool.query('create table bench_receipts (like receipts including all)');

  // The same row values, one plain INSERT per row (ts_max given, not looked up), autocommit.
  const plainInsert = `insert into bench_receipts (network, agent, nonce, kind, decision, ts, ts_max, receipt_hash, prev_receipt_hash, tx_sig, source,
      body, created_at, verification, verification_reason, verification_checked_at, verification_attempts, verify_after)
    values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12::jsonb, $13, $14, $15, $16, $17, $18)`;
  const plainParams = (r: ReceiptV1) => {
    const p = receiptInsertParams({ network: 'chain-devnet', receipt: r, source: 'push', createdAt: new Date() });
    // INSERT_SQL's order: 7 values, then the three of the ts_max lookup, then the rest.
    return [...p.slice(0, 7), ...p.slice(10)];
  };

  // One lane per agent, its receipts in chain order; every answer must be 200 (a duplicate would not be stored: the
  // count at the end checks it).
  const lane = (agent: string, chain: ReceiptV1[]): LoadRequest[] => chain.map((r) => ({ path: `/v1/receipts/${agent}`, body: JSON.stringify(r) }));
  const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
  const push = async (lanes: LoadRequest[][]) => {
    const r = await expectAll({ generator: 'closed', url: app.url, method: 'POST', headers, connections: lanes.length, lanes }, 200);
    return r.seconds;
  };
  const plainHttp = async (lanes: LoadRequest[][]) =>
    (await plainBaseline(plain, { generator: 'closed', method: 'POST', headers: { 'content-type': 'application/json' }, connections: lanes.length, lanes }))
      .seconds;
  // The same use case without HTTP: ReceiptService.push as every door calls it.
  const caller = await app.services.access.authenticate(`Bearer ${key}`);
  const serviceAll = async (agent: string, chain: ReceiptV1[]) => {
    for (const r of chain) await app.services.receipts.push(caller, agent, r);
  };
  const insertAll = async (chain: ReceiptV1[]) => {
    for (const r of chain) await pool.query(plainInsert, plainParams(r));
  };

  const time = async (work: () => Promise<unknown>) => {
    const started = performance.now();
    await work();
    return (performance.now() - started) / 1000;
  };

  // Warm-up: a short chain each way, outside the measurement.
  const warm = (await recordAgent(app, key)).mint;
  await push([lane(warm, buildChain(warm, 50))]);
  await plainHttp([lane(warm, buildChain(warm, 50))]);
  await insertAll(buildChain(warm, 50).map((r) => ({ ...r, agent: `${r.agent}-warm` })));

  const svcOne = (await recordAgent(app, key)).mint;
  const svcOneChain = buildChain(svcOne, TOTAL);
  const httpOne = await plainHttp([lane(one, oneChain)]);
  const pushOne = await push([lane(one, oneChain)]);
  const serviceOne = await time(() => serviceAll(svcOne, svcOneChain));
  const plainOne = await time(() => insertAll(oneChain));
  const httpMany = await plainHttp(many.map((a, i) => lane(a, manyChains[i]!)));
  const pushMany = await push(many.map((a, i) => lane(a, manyChains[i]!)));
  const plainMany = await time(() => Promise.all(manyChains.map((c) => insertAll(c))));
  const manyTotal = perAgent * AGENTS;

  const rate = (count: number, s: number) => Math.round(count / s);
  const rows = [
    {
      case: `1 agent, ${TOTAL} receipts (sequential chain)`,
      push: rate(TOTAL, pushOne),
      plain: rate(TOTAL, plainOne),
      http: rate(TOTAL, httpOne),
      service: rate(TOTAL, serviceOne),
    },
    {
      case: `${AGENTS} agents × ${perAgent} receipts (50 concurrent clients)`,
      push: rate(manyTotal, pushMany),
      plain: rate(manyTotal, plainMany),
      http: rate(manyTotal, httpMany),
    },
  ];
  console.log(`receipts bench — ${os.cpus().length} cores, load ${loadBefore} → ${load()}, pool ${app.config.dbPoolMax} connections; ${machineLine()}`);
  for (const r of rows) {
    console.log(
      `${r.case}: push ${r.push}/s over REST${'service' in r ? ` (${r.service}/s calling ReceiptService directly)` : ''}, ` +
        `plain INSERT ${r.plain}/s (push = ${((r.push / r.plain) * 100).toFixed(0)}% of plain); ` +
        `plain fastify POST {"ok":true} with the same bodies and lanes ${r.http}/s (push = ${((r.push / r.http) * 100).toFixed(1)}% of it)`,
    );
  }
  const check = await pool.query(`select count(*)::int as n from receipts where agent = any($1)`, [[one, ...many]]);
  console.log(`stored: ${check.rows[0].n} receipts (expected ${TOTAL + manyTotal})`);
  if (check.rows[0].n !== TOTAL + manyTotal) throw new Error(`stored ${check.rows[0].n} receipts, expected ${TOTAL + manyTotal}`);
} finally {
  await pool.query('drop table if exists bench_receipts').catch(() => {});
  await pool.end();
  await plain.close();
  await app.close();
  await removeDataDir(app.dataDir);
}
