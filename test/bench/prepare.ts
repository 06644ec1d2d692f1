// Prepare and submit throughput on a gateway whose embedded devnet runs the real Metaplex Core program, against
// a plain createV1 / execute build (the official mpl-core client through umi, compiled and serialized, no gateway) and a
// plain fastify route, all in the same run on the same machine.
//
//   npm run bench:prepare      (BENCH_SECONDS=5 BENCH_CONNECTIONS=50 BENCH_SUBMITS=500 BENCH_SUBMIT_CONNECTIONS=16)
//
// (a) prepare over REST, autocannon in its own process (test/bench/support/load.ts), BENCH_CONNECTIONS connections for
//     BENCH_SECONDS: POST /v1/agents/prepare (createV1 of a fresh asset) and POST /v1/agents/{mint}/treasury/
//     withdraw-sol/prepare (a System transfer through Core execute); every answer must be 200 and every one must have
//     stored its prepared transaction.
// (b) submit: BENCH_SUBMITS withdraw-sol transactions (distinct lamports, so distinct messages) prepared and signed by
//     the asset owner BEFORE the timed section, then POSTed to /v1/submit by the closed-loop generator in its own process
//     (BENCH_SUBMIT_CONNECTIONS in flight, each body once); every answer must be 202. Then the confirmations job must
//     confirm them all: confirmations/s = count / (last confirmed_at − first submit), and the treasury and the
//     destination must move by exactly the sum withdrawn.
// (c) baselines: the same instructions built with the mpl-core client (createV1; execute around the same transfer) and
//     compiled + serialized in a loop in this process (CPU work, no server), builds/s; and a plain fastify route
//     answering a fixed JSON body, measured with the same generator and settings as each route.
import { Keypair, PublicKey, SystemProgram, Transaction } from '@solana/web3.js';
import { createNoopSigner, publicKey } from '@metaplex-foundation/umi';
import { createUmi } from '@metaplex-foundation/umi-bundle-defaults';
import { fromWeb3JsInstruction, toWeb3JsInstruction } from '@metaplex-foundation/umi-web3js-adapters';
import { createV1, execute, mplCore } from '@metaplex-foundation/mpl-core';
import pg from 'pg';
import { umi as gatewayUmi } from '../../domain/agents/build/execute.ts';
import { treasuryOf } from '../../domain/treasury/derive.ts';
import type { PreparedEnvelope } from '../../domain/transactions/schema.ts';
import { http, issueKey, removeDataDir, startTestApp, type TestApp } from '../support/app.ts';
import { coreProgramsDir, ENABLE_HINT } from '../support/programs.ts';
import { expectAll, header, loadavg, machineLine, plainBaseline, row, startPlainServer, type LoadResult } from './support/load.ts';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const SUBMITS = Number(process.env.BENCH_SUBMITS ?? 500);
const SUBMIT_CONNECTIONS = Number(process.env.BENCH_SUBMIT_CONNECTIONS ?? 16);

if (!coreProgramsDir()) {
  console.error(`bench:prepare needs the Metaplex Core binary: ${ENABLE_HINT}`);
  process.exit(1);
}

const loadBefore = loadavg();
const limits = { prepare: 10_000_000, submit: 10_000_000, 'events.read': 10_000_000, default: 10_000_000 };
const app: TestApp = await startTestApp({ env: { SVC_RATE_LIMITS: JSON.stringify(limits), SVC_LOG_LEVEL: 'silent' } });
const plain = await startPlainServer();
const pool = new pg.Pool({ connectionString: app.database.url, max: 2 });
const ledger = app.services.ledgers['chain-devnet']!;

const sign = (envelope: PreparedEnvelope, signer: Keypair): string => {
  const tx = Transaction.from(Buffer.from(envelope.transaction!.base64, 'base64'));
  tx.partialSign(signer);
  return tx.serialize({ requireAllSignatures: true }).toString('base64');
};

/** Phases of the given events, counted, with the last confirmed_at (ms). */
async function phases(ids: string[]): Promise<{ confirmed: number; failed: number; lastConfirmedMs: number }> {
  const r = await pool.query<{ confirmed: number; failed: number; last: Date | null }>(
    `select count(*) filter (where phase = 'confirmed')::int as confirmed, count(*) filter (where phase = 'failed')::int as failed,
            max(confirmed_at) as last from events where id = any($1)`,
    [ids],
  );
  const x = r.rows[0]!;
  return { confirmed: x.confirmed, failed: x.failed, lastConfirmedMs: x.last ? x.last.getTime() : NaN };
}

async function waitConfirmed(ids: string[], timeoutMs: number): Promise<{ confirmed: number; failed: number; lastConfirmedMs: number }> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const p = await phases(ids);
    if (p.failed > 0) {
      const failed = await pool.query(`select id, error_code, error_logs from events where id = any($1) and phase = 'failed' limit 3`, [ids]);
      throw new Error(`${p.failed} of ${ids.length} failed, e.g. ${JSON.stringify(failed.rows)}`);
    }
    if (p.confirmed === ids.length) return p;
    if (Date.now() > deadline) throw new Error(`only ${p.confirmed} of ${ids.length} confirmed after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

const preparedCount = async (kind: string) =>
  (await pool.query<{ n: number }>(`select count(*)::int as n from prepared_transactions where kind = $1`, [kind])).rows[0]!.n;

/** Calls `build` in a loop for `seconds` (after a short warm-up); builds per second. */
function loop(seconds: number, build: (i: number) => unknown): number {
  for (let i = 0; i < 200; i++) build(i);
  let n = 0;
  const started = performance.now();
  const until = started + seconds * 1000;
  while (performance.now() < until) {
    for (let k = 0; k < 20; k++) build(n++);
  }
  return (n / (performance.now() - started)) * 1000;
}

try {
  const key = await issueKey(app);
  const auth = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };

  // Set-up: an owner, an agent minted through prepare → sign → submit, its treasury and a destination funded.
  const owner = Keypair.generate();
  const ownerAddress = owner.publicKey.toBase58();
  await app.services.dev.fund('chain-devnet', { address: ownerAddress, sol: '100' });
  const agentBody = { owner: ownerAddress, name: 'Bench agent', uri: 'https://example.com/agent.json' };
  const minted = await http<PreparedEnvelope>(app, 'POST', '/v1/agents/prepare', { key, body: agentBody });
  if (minted.status !== 200) throw new Error(`agents/prepare: ${minted.status} ${JSON.stringify(minted.body)}`);
  const mintSubmit = await http(app, 'POST', '/v1/submit', { key, body: { event_id: minted.body.event_id, transaction_base64: sign(minted.body, owner) } });
  if (mintSubmit.status !== 202) throw new Error(`submit of the mint: ${mintSubmit.status} ${JSON.stringify(mintSubmit.body)}`);
  await waitConfirmed([minted.body.event_id!], 30_000);
  const mint = String(minted.body.echo.asset);
  const treasury = treasuryOf(mint);
  const destination = Keypair.generate().publicKey.toBase58();
  await app.services.dev.fund('chain-devnet', { address: treasury, sol: '10' });
  await app.services.dev.fund('chain-devnet', { address: destination, sol: '1' });
  const withdrawPath = `/v1/agents/${mint}/treasury/withdraw-sol/prepare`;
  const withdrawBody = (lamports: number) => ({ payer: ownerAddress, authority: ownerAddress, destination, lamports: String(lamports) });

  // ---------------------------------------------------------------------------------------------------------------
  // (c) plain builds, in this process
  const { blockhash, lastValidBlockHeight } = await ledger.getLatestBlockhash();
  const plainUmi = createUmi('http://127.0.0.1:1').use(mplCore());
  const ownerKey = publicKey(ownerAddress);
  const noop = createNoopSigner(ownerKey);
  const compileSerialize = (instructions: ReturnType<typeof toWeb3JsInstruction>[], presign?: Keypair) => {
    const tx = new Transaction({ feePayer: owner.publicKey, blockhash, lastValidBlockHeight }).add(...instructions);
    if (presign) tx.partialSign(presign);
    else tx.compileMessage().serialize();
    return tx.serialize({ requireAllSignatures: false, verifySignatures: false });
  };
  const plainCreate = () => {
    const asset = Keypair.generate(); // a fresh asset signs its creation, as agents/prepare does
    const ixs = createV1(plainUmi, {
      asset: createNoopSigner(publicKey(asset.publicKey.toBase58())),
      payer: noop,
      owner: ownerKey,
      updateAuthority: ownerKey,
      name: agentBody.name,
      uri: agentBody.uri,
    })
      .getInstructions()
      .map(toWeb3JsInstruction);
    return compileSerialize(ixs, asset);
  };
  const treasuryKey = new PublicKey(treasury);
  const destinationKey = new PublicKey(destination);
  const plainExecute = (u: typeof plainUmi) => (i: number) => {
    const transfer = SystemProgram.transfer({ fromPubkey: treasuryKey, toPubkey: destinationKey, lamports: 1000 + i });
    const ixs = execute(u, { asset: { publicKey: publicKey(mint) }, authority: noop, payer: noop, instructions: [fromWeb3JsInstruction(transfer)] })
      .getInstructions()
      .map(toWeb3JsInstruction);
    return compileSerialize(ixs);
  };
  const buildCreate = loop(SECONDS, plainCreate);
  const buildExecute = loop(SECONDS, plainExecute(plainUmi));
  const buildExecuteMemo = loop(SECONDS, plainExecute(gatewayUmi()));

  // ---------------------------------------------------------------------------------------------------------------
  // (a) prepare throughput, autocannon in its own process; the plain route with the same settings and body.
  const cannon = (url: string, body: unknown, headers: Record<string, string>) =>
    ({ generator: 'cannon', url, method: 'POST', headers, body: JSON.stringify(body), connections: CONNECTIONS, duration: SECONDS }) as const;
  const json = { 'content-type': 'application/json' };
  await plainBaseline(plain, { ...cannon(plain.url, agentBody, json), duration: 1 }); // warm-up
  await expectAll({ ...cannon(`${app.url}/v1/agents/prepare`, agentBody, auth), duration: 1 }, 200);
  await expectAll({ ...cannon(`${app.url}${withdrawPath}`, withdrawBody(1000), auth), duration: 1 }, 200);

  const plainCannon = await plainBaseline(plain, cannon(plain.url, agentBody, json));
  const createdBefore = await preparedCount('agent.create');
  const prepareCreate = await expectAll(cannon(`${app.url}/v1/agents/prepare`, agentBody, auth), 200);
  const createdStored = (await preparedCount('agent.create')) - createdBefore;
  const withdrawBefore = await preparedCount('agent.treasury.withdraw_sol');
  const prepareWithdraw = await expectAll(cannon(`${app.url}${withdrawPath}`, withdrawBody(1000), auth), 200);
  const withdrawStored = (await preparedCount('agent.treasury.withdraw_sol')) - withdrawBefore;
  // autocannon stops counting at the deadline: the requests still in flight then (at most one per connection) were
  // answered and stored too.
  const storedEach = (name: string, answered: number, stored: number) => {
    if (stored < answered || stored > answered + CONNECTIONS) throw new Error(`${name}: ${answered} answers 200 but ${stored} prepared transactions stored`);
  };
  storedEach('agents/prepare', prepareCreate.total, createdStored);
  storedEach('withdraw-sol/prepare', prepareWithdraw.total, withdrawStored);

  // ---------------------------------------------------------------------------------------------------------------
  // (b) submit: prepared and signed before the timed section, each posted once; then the confirmations job.
  const envelopes: PreparedEnvelope[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (next < SUBMITS) {
        const i = next++;
        const r = await http<PreparedEnvelope>(app, 'POST', withdrawPath, { key, body: withdrawBody(1000 + i) });
        if (r.status !== 200) throw new Error(`prepare ${i}: ${r.status} ${JSON.stringify(r.body)}`);
        envelopes[i] = r.body;
      }
    }),
  );
  const bodies = envelopes.map((e) => ({ body: JSON.stringify({ event_id: e.event_id, transaction_base64: sign(e, owner) }) }));
  const ids = envelopes.map((e) => e.event_id!);
  const withdrawn = envelopes.reduce((n, _e, i) => n + BigInt(1000 + i), 0n);
  const treasuryBefore = await ledger.getBalance(treasury);
  const destinationBefore = await ledger.getBalance(destination);

  const submitJob = { generator: 'closed', method: 'POST', connections: SUBMIT_CONNECTIONS, requests: bodies } as const;
  const plainClosed = await plainBaseline(plain, { ...submitJob, headers: json });
  const submitStarted = Date.now();
  const submit = await expectAll({ ...submitJob, url: `${app.url}/v1/submit`, headers: auth }, 202);
  const submitEnded = Date.now();
  const confirmed = await waitConfirmed(ids, 120_000);
  const confirmSeconds = (confirmed.lastConfirmedMs - submitStarted) / 1000;
  const lag = await pool.query<{ p50: number; p99: number; max: number }>(
    `select percentile_cont(0.5) within group (order by ms) as p50, percentile_cont(0.99) within group (order by ms) as p99, max(ms) as max
       from (select extract(epoch from (e.confirmed_at - p.submitted_at)) * 1000 as ms
               from events e join prepared_transactions p on p.event_id = e.id where e.id = any($1)) x`,
    [ids],
  );
  const treasuryMoved = treasuryBefore - (await ledger.getBalance(treasury));
  const destinationMoved = (await ledger.getBalance(destination)) - destinationBefore;
  if (treasuryMoved !== withdrawn || destinationMoved !== withdrawn) {
    throw new Error(`withdrawn ${withdrawn} lamports, but the treasury moved by ${treasuryMoved} and the destination by ${destinationMoved}`);
  }

  // ---------------------------------------------------------------------------------------------------------------
  const pct = (a: number, b: number) => `${((a / b) * 100).toFixed(1)}%`.padStart(7);
  const rate = (name: string, n: number) => `  ${name.padEnd(52)} ${n.toFixed(0).padStart(8)}`;
  console.log('\nbench:prepare');
  console.log(`  machine: ${machineLine()}; load before ${loadBefore}`);
  console.log(
    `  command: BENCH_SECONDS=${SECONDS} BENCH_CONNECTIONS=${CONNECTIONS} BENCH_SUBMITS=${SUBMITS} BENCH_SUBMIT_CONNECTIONS=${SUBMIT_CONNECTIONS} npm run bench:prepare`,
  );
  console.log(`\n  (c) plain builds in-process (mpl-core client via umi, compiled + serialized)         builds/s`);
  console.log(rate('createV1 (fresh asset keypair, presigned)', buildCreate));
  console.log(rate('execute(System transfer), plain umi', buildExecute));
  console.log(rate("execute(System transfer), the gateway's umi() (memoised PDAs)", buildExecuteMemo));
  console.log(`\n${header(`(a) prepare, autocannon ${CONNECTIONS} connections, ${SECONDS}s`)}`);
  console.log(row('plain fastify POST, fixed {"ok":true}', plainCannon));
  console.log(row(`POST /v1/agents/prepare (createV1), ${prepareCreate.total}×200`, prepareCreate));
  console.log(row(`POST …/withdraw-sol/prepare (execute), ${prepareWithdraw.total}×200`, prepareWithdraw));
  console.log(`\n${header(`(b) submit, closed loop ${SUBMIT_CONNECTIONS} in flight, ${SUBMITS} bodies once each`)}`);
  console.log(row('plain fastify POST, same bodies', plainClosed));
  console.log(row(`POST /v1/submit (withdraw-sol), ${submit.total}×202`, submit));
  const l = lag.rows[0]!;
  console.log(
    `  confirmations: all ${SUBMITS} confirmed by the job ${((confirmed.lastConfirmedMs - submitEnded) / 1000).toFixed(2)} s after the last submit answer; ` +
      `${(SUBMITS / confirmSeconds).toFixed(0)} confirmations/s (first submit → last confirmed_at ${confirmSeconds.toFixed(2)} s); ` +
      `submitted → confirmed p50 ${Number(l.p50).toFixed(0)} ms, p99 ${Number(l.p99).toFixed(0)} ms, max ${Number(l.max).toFixed(0)} ms`,
  );
  console.log(`\n  ratios                                                  / plain build  / plain fastify`);
  const ratio = (name: string, r: LoadResult | number, build: number, fastify: LoadResult) => {
    const rps = typeof r === 'number' ? r : r.rps;
    console.log(`  ${name.padEnd(52)} ${pct(rps, build)}       ${pct(rps, fastify.rps)}`);
  };
  ratio('agents/prepare rps / createV1 builds/s', prepareCreate, buildCreate, plainCannon);
  ratio('withdraw-sol/prepare rps / execute builds/s', prepareWithdraw, buildExecute, plainCannon);
  ratio('submit rps / execute builds/s', submit, buildExecute, plainClosed);
  ratio('confirmations/s / execute builds/s', SUBMITS / confirmSeconds, buildExecute, plainClosed);
  console.log(
    `\n  checks: every prepare answer 200 with its prepared transaction stored (${createdStored} createV1, ${withdrawStored} withdraw-sol, in-flight ones at the deadline included); ` +
      `every submit 202; all ${SUBMITS} confirmed, none failed; treasury −${treasuryMoved} and destination +${destinationMoved} lamports = the ${withdrawn} withdrawn`,
  );
  console.log(`  load after: ${loadavg()}`);
} finally {
  await pool.end();
  await plain.close();
  await app.close();
  await removeDataDir(app.dataDir);
}
