// The public paywall /x/{id} against same-run baselines, on the same machine.
// Run on demand: npm run bench:paywall   (BENCH_SECONDS=10 BENCH_CONNECTIONS=50 BENCH_PAID=400 BENCH_CONCURRENCY=16)
//
// 1. Unpaid challenges: autocannon, BENCH_CONNECTIONS connections, BENCH_SECONDS per round, baseline and paywall in
//    interleaved rounds (after a warm-up of both). The baseline answers the very bytes of a real paywall 402 (same
//    JSON body, same PAYMENT-REQUIRED and CORS headers, precomputed), so both routes write the same response.
//    (autocannon reports percentiles only: the rounds' p50/p99 are averaged; the ratio is of req/s.)
// 2. Paid calls end to end on the embedded ledger: BENCH_PAID payments against one fee-bearing link (SVC_FEE_BPS
//    default 100: seller and fee legs; one seller), from BUYERS funded wallets, built and signed between the timed
//    sections (a fresh blockhash per batch), sent by the closed loop at BENCH_CONCURRENCY in flight; every answer must
//    be 200 and the seller's treasury must grow by exactly BENCH_PAID × price. The goal's baseline is LiteSVM
//    executing the same settlement transactions (an in-process embedded ledger, no preflight, one at a time), in
//    batches interleaved with the paid ones; the plain route's 402 fetched by the same closed loop is shown beside.
//    Batches are merged from all their latency samples (p50/p99 of the whole run, not averages of batches).
// Per paid call, the steadier figures on a shared machine: CPU of this process (all threads), busy time of
// its main and ledger threads, CPU of the PostgreSQL backends serving the app's database (from /proc), statements
// sent to PostgreSQL, and calls and messages to the ledger thread.
// Prints `RATIO|path|gateway|baseline|ratio|goal` per goal row for `npm run bench`.
// BENCH_BREAKDOWN=1: skips the autocannon rounds and prints where a paid call's time goes (timers around the paid
// path's steps, patched on the prototypes in this process, and PostgreSQL's wait events sampled every 10 ms).
// The clients (autocannon; the closed loop for the paid calls, whose headers differ per request) run in a process of
// their own (test/bench/support/load.ts), apart from both servers; a plain fastify route answering {"ok":true} is
// measured with the same generator, and a warning says when it is far below ~10k req/s (generator- or load-bound).
import { profiled } from './support/profile.ts';
import os from 'node:os';
import { performance as nodePerformance } from 'node:perf_hooks';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { EmbeddedLedger } from '../../adapters/ledger/embedded/ledger.ts';
import type { AddressInfo } from 'node:net';
import Fastify from 'fastify';
import { Keypair } from '@solana/web3.js';
import { buildPaymentTransaction } from '../../domain/facilitator/build.ts';
import { FEE_EXTENSION_KEY, FeeExtension, type PaymentRequirements } from '../../domain/facilitator/schema.ts';
import type { X402RequirementsV2 } from '../../domain/facilitator/wire.ts';
import { findStable } from '../../domain/shared/network.ts';
import { feeFor } from '../../domain/shared/money.ts';
import { treasuryOf } from '../../domain/treasury/derive.ts';
import { http, issueKey, linkBody, recordAgent, removeDataDir, startTestApp, type TestApp } from '../support/app.ts';
import pg from 'pg';
import { PaidCalls } from '../../domain/paywall/call.ts';
import { PaidCallRecorder } from '../../domain/paywall/record.ts';
import { FacilitatorService } from '../../domain/facilitator/service.ts';
import { LedgerThread } from '../../adapters/ledger/embedded/ledger-thread.ts';
import { MikroOrmStore } from '../../adapters/store/mikro-orm-store.ts';
import { MikroOrmFacilitatorStore } from '../../adapters/store/repositories/facilitator.ts';
import { benchLogger } from './support/gateway-log.ts';
import { baselineWarning, expectAll, plainBaseline, runLoad, startPlainServer, type LoadRequest, type LoadResult } from './support/load.ts';

/** BENCH_BREAKDOWN=1: where a paid call's time goes (method timings and PostgreSQL wait sampling); not for figures. */
const BREAKDOWN = process.env.BENCH_BREAKDOWN === '1';
/** BENCH_CPU_PROF=dir: CPU profiles of this process's main thread (the gateway) during the last paywall 402 round and the last paid batch (read them with test/bench/support/profile-top.ts) */
const DURATION = Number(process.env.BENCH_SECONDS ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const PAID = Number(process.env.BENCH_PAID ?? 400);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 16);
/** payments per blockhash (built and signed right before their batch is sent) */
const BATCH = Number(process.env.BENCH_PAID_BATCH ?? 200);
const BUYERS = 20;
/** the several-sellers round: payments spread over this many links of as many agents */
const SELLERS = Number(process.env.BENCH_SELLERS ?? 8);
const ROUNDS = BREAKDOWN ? 0 : 2;
const USDC = findStable('chain-devnet', 'USDC')!;

const load = () =>
  os
    .loadavg()
    .map((n) => n.toFixed(2))
    .join(' ');
const loadBefore = load();

// ---------------------------------------------------------------------------------------------------------------
// Measuring helpers

type Cannon = LoadResult;

/** autocannon in its own process; every answer must be a 402 */
const cannon = async (url: string): Promise<Cannon & { cpuUs: number }> => {
  const before = process.cpuUsage();
  const result = await expectAll({ generator: 'cannon', url, connections: CONNECTIONS, duration: DURATION }, 402);
  const used = process.cpuUsage(before);
  // CPU of this process (where both servers run; the generator has its own) per answer: steadier than req/s on a busy machine
  return { ...result, cpuUs: (used.user + used.system) / Math.max(1, result.total) };
};

type Fired = LoadResult;

/** `requests` (or `n` plain GETs) sent once each, `CONCURRENCY` in flight, by the closed loop in its own process. */
const fire = (url: string, expect: number, requests: LoadRequest[]): Promise<Fired> =>
  runLoad({ generator: 'closed', url, connections: CONCURRENCY, requests, expect });

const times = (n: number): LoadRequest[] => Array.from({ length: n }, () => ({}));

const percentile = (sorted: number[], p: number) => sorted[Math.max(0, Math.ceil(p * sorted.length) - 1)] ?? NaN;

/** Batches merged: counts, statuses and time add up; p50/p99/max are computed from all the batches' samples together. */
function merge(parts: Fired[]): Fired & { count: number } {
  const total = parts.reduce((n, p) => n + p.total, 0);
  const seconds = parts.reduce((n, p) => n + p.seconds, 0);
  const samples = parts.flatMap((p) => p.samples ?? []).sort((a, b) => a - b);
  if (samples.length !== total) throw new Error(`merge: ${samples.length} latency samples for ${total} requests`);
  const statuses: Record<string, number> = {};
  for (const p of parts) for (const [k, v] of Object.entries(p.statuses)) statuses[k] = (statuses[k] ?? 0) + v;
  return {
    generator: 'closed-loop',
    count: total,
    total,
    seconds,
    rps: total / seconds,
    p50: percentile(samples, 0.5),
    p99: percentile(samples, 0.99),
    max: samples[samples.length - 1] ?? NaN,
    statuses,
    ...(parts.find((p) => p.odd) ? { odd: parts.find((p) => p.odd)!.odd } : {}),
  };
}

/** The line `npm run bench` collects: RATIO|path|gateway|baseline|ratio|goal. */
function ratioLine(
  path: string,
  figures: { gateway: { rps: number; p50: number; p99: number }; baseline: { rps: number; p50: number; p99: number } },
  verdict: { ratio: number; goal: string },
): string {
  const { gateway, baseline } = figures;
  const { ratio, goal } = verdict;
  const fig = (r: { rps: number; p50: number; p99: number }) =>
    `${Math.round(r.rps).toLocaleString('en-US')} req/s p50 ${r.p50.toFixed(1)} ms p99 ${r.p99.toFixed(1)} ms`;
  return `RATIO|${path}|${fig(gateway)}|${fig(baseline)}|${ratio.toFixed(2)}×|${goal}`;
}

// ---------------------------------------------------------------------------------------------------------------
// BENCH_BREAKDOWN=1: each named method of the paid path wrapped with a timer (prototype patches in this process only),
// and PostgreSQL's wait events sampled every 10 ms from a connection of its own while the paid batches run.

const timings = new Map<string, { calls: number; ms: number }>();
const groups: number[] = [];
/** BENCH_BREAKDOWN: the statements PostgreSQL was seen running, by how often */
const activeQueries = new Map<string, number>();
let timingOn = false;
function timed(proto: object, method: string, label: string): void {
  const target = proto as Record<string, (...args: unknown[]) => Promise<unknown>>;
  const original = target[method]!;
  target[method] = async function (this: unknown, ...args: unknown[]) {
    const start = performance.now();
    try {
      return await original.apply(this, args);
    } finally {
      if (timingOn) {
        const t = timings.get(label) ?? { calls: 0, ms: 0 };
        t.calls++;
        t.ms += performance.now() - start;
        timings.set(label, t);
      }
    }
  };
}
if (BREAKDOWN) {
  timed(PaidCalls.prototype, 'pay', 'paywall core: claim → settle → record');
  timed(FacilitatorService.prototype, 'settle', '  facilitator settle (all)');
  timed(FacilitatorService.prototype, 'check', '    check: parse, verify, co-sign, accounts read');
  timed(MikroOrmFacilitatorStore.prototype, 'claimSettlement', '    settlement guard claim (pg)');
  timed(FacilitatorService.prototype, 'simulate', '    simulate');
  timed(FacilitatorService.prototype, 'broadcast', '    broadcast: send + confirm + finish');
  timed(LedgerThread.prototype, 'sendTransaction', '      ledger sendTransaction');
  timed(FacilitatorService.prototype, 'confirm', '      confirmation wait');
  timed(MikroOrmFacilitatorStore.prototype, 'finishSettlement', '      settlement guard finish (pg)');
  timed(PaidCallRecorder.prototype, 'record', '  record (all)');
  timed(MikroOrmStore.prototype, 'transaction', '    store.transaction (record and others)');
  timed(LedgerThread.prototype, 'getSignatureStatuses', 'ledger getSignatureStatuses (any caller)');
  timed(LedgerThread.prototype, 'getAccount', 'ledger getAccount (any caller)');
  // the record transactions' group sizes (group commit): how many paid calls each one wrote
  const recorder = PaidCallRecorder.prototype as unknown as Record<string, (...args: unknown[]) => Promise<void>>;
  const commitGroup = recorder.commitGroup!;
  recorder.commitGroup = function (this: unknown, network: unknown, batch: unknown) {
    if (timingOn) groups.push((batch as unknown[]).length);
    return commitGroup.call(this, network, batch);
  };
}

/** PostgreSQL wait events of the app's sessions, sampled while `work` runs. */
async function sampleWaits<T>(url: string, work: () => Promise<T>): Promise<{ value: T; samples: number; waits: Map<string, number> }> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const waits = new Map<string, number>();
  let samples = 0;
  let running = true;
  const loop = (async () => {
    while (running) {
      const r = await client.query<{ w: string; n: number }>(
        `select coalesce(wait_event_type || ':' || wait_event, state) as w, count(*)::int as n from pg_stat_activity
          where datname = current_database() and pid <> pg_backend_pid() and backend_type = 'client backend' and state <> 'idle' group by 1`,
      );
      samples++;
      for (const { w, n } of r.rows) waits.set(w, (waits.get(w) ?? 0) + n);
      // what the active sessions run (the statement's start, literals cut): where PostgreSQL's own time goes
      const q = await client.query<{ q: string }>(
        `select left(regexp_replace(regexp_replace(query, '^/\\* svc:[^*]*\\*/ ', ''), '\\s+', ' ', 'g'), 70) as q from pg_stat_activity
          where datname = current_database() and pid <> pg_backend_pid() and backend_type = 'client backend' and state = 'active'`,
      );
      for (const { q: text } of q.rows) activeQueries.set(text, (activeQueries.get(text) ?? 0) + 1);
      await new Promise((res) => setTimeout(res, 10));
    }
  })();
  try {
    const value = await work();
    return { value, samples, waits };
  } finally {
    running = false;
    await loop;
    await client.end();
  }
}

// ---------------------------------------------------------------------------------------------------------------
// The two servers

// The gateway at the default settings (SVC_LOG_LEVEL=info: an access line per request, the logger npm start makes,
// writing a file); the tuned one (SVC_LOG_LEVEL=warn), a second instance on the same database, answers the unpaid rounds
// beside it. The per-IP window is raised in both: the load comes from one address.
const defaultLog = await benchLogger('info');
const tunedLog = await benchLogger('warn');
const benchEnv = { SVC_RATE_LIMITS: JSON.stringify({ paywall: 10_000_000 }) };
const app: TestApp = await startTestApp({ env: benchEnv, appOptions: { logger: defaultLog.logger } });
const tunedApp: TestApp = await startTestApp({ env: { ...benchEnv, SVC_JOBS: 'off' }, databaseUrl: app.database.url, appOptions: { logger: tunedLog.logger } });
const plain = Fastify({ logger: false });
const tiny = await startPlainServer();
try {
  const key = await issueKey(app);
  const { mint: agent } = await recordAgent(app, key);
  const created = await http(app, 'POST', '/v1/payment-links', { key, body: linkBody(agent, { response: { status: 200, body: { forecast: 'sunny' } } }) });
  if (created.status !== 201) throw new Error(`create link: ${created.status} ${JSON.stringify(created.body)}`);
  const linkId = (created.body as { id: string }).id;
  const paywallUrl = `${app.url}/x/${linkId}?network=chain-devnet`;
  const tunedUrl = `${tunedApp.url}/x/${linkId}?network=chain-devnet`;

  // One real challenge: its bytes are the baseline's fixed answer, its PAYMENT-REQUIRED names what the payments answer.
  const unpaid = await fetch(paywallUrl);
  const challengeBody = Buffer.from(await unpaid.arrayBuffer());
  const paymentRequired = unpaid.headers.get('payment-required');
  if (unpaid.status !== 402 || !paymentRequired) throw new Error(`unpaid call: ${unpaid.status} ${challengeBody.toString()}`);
  const challengeHeaders: Record<string, string> = {};
  for (const name of ['content-type', 'payment-required', 'cache-control', 'access-control-allow-origin', 'access-control-expose-headers']) {
    const value = unpaid.headers.get(name);
    if (value !== null) challengeHeaders[name] = value;
  }
  plain.get('/x/:id', (_req, reply) => reply.code(402).headers(challengeHeaders).send(challengeBody));
  await plain.listen({ port: 0, host: '127.0.0.1' });
  const plainUrl = `http://127.0.0.1:${(plain.server.address() as AddressInfo).port}/x/${linkId}?network=chain-devnet`;

  // -------------------------------------------------------------------------------------------------------------
  // 1. Unpaid 402 challenges, autocannon

  console.log(
    `unpaid 402: ${CONNECTIONS} connections, ${DURATION}s per round, ${ROUNDS} interleaved rounds; body ${challengeBody.length} B, PAYMENT-REQUIRED ${paymentRequired.length} B`,
  );
  if (!BREAKDOWN) {
    await cannon(plainUrl); // warm-up of each
    await cannon(paywallUrl);
    await cannon(tunedUrl);
  }
  const tinyFig = await plainBaseline(tiny, { generator: 'cannon', connections: CONNECTIONS, duration: DURATION });
  const rounds: { base: Cannon & { cpuUs: number }; paywall: Cannon & { cpuUs: number }; tuned: Cannon & { cpuUs: number } }[] = [];
  let accessLines = 0;
  let answered402 = 0;
  const fig402 = (r: Cannon & { cpuUs: number }) =>
    `${r.rps.toFixed(0)} req/s (p50 ${r.p50} ms, p99 ${r.p99} ms, ${r.total}×402, ${r.cpuUs.toFixed(0)} µs CPU/req)`;
  for (let i = 0; i < ROUNDS; i++) {
    const base = await profiled(i === ROUNDS - 1, 'paywall-402-plain', () => cannon(plainUrl));
    const linesBefore = await defaultLog.accessLines();
    const paywall = await profiled(i === ROUNDS - 1, 'paywall-402', () => cannon(paywallUrl));
    accessLines += (await defaultLog.accessLines()) - linesBefore;
    answered402 += paywall.total;
    const tuned = await profiled(i === ROUNDS - 1, 'paywall-402-tuned', () => cannon(tunedUrl));
    rounds.push({ base, paywall, tuned });
    console.log(`  round ${i + 1}: plain ${fig402(base)} | paywall default ${fig402(paywall)} | paywall tuned ${fig402(tuned)}`);
  }
  const avg = (f: (r: (typeof rounds)[number]) => number) => rounds.reduce((n, r) => n + f(r), 0) / rounds.length;
  const unpaidFig = {
    base: { rps: avg((r) => r.base.rps), p50: avg((r) => r.base.p50), p99: avg((r) => r.base.p99) },
    paywall: { rps: avg((r) => r.paywall.rps), p50: avg((r) => r.paywall.p50), p99: avg((r) => r.paywall.p99) },
    tuned: { rps: avg((r) => r.tuned.rps), p50: avg((r) => r.tuned.p50), p99: avg((r) => r.tuned.p99) },
  };
  const unpaidRatio = unpaidFig.paywall.rps / unpaidFig.base.rps;

  // -------------------------------------------------------------------------------------------------------------
  // 2. Paid calls end to end

  const required = JSON.parse(Buffer.from(paymentRequired, 'base64').toString('utf8')) as { accepts: X402RequirementsV2[] };
  const accept = required.accepts[0]!;
  const feeTerms = FeeExtension.safeParse(accept.extra[FEE_EXTENSION_KEY]);
  const feePayer = accept.extra.feePayer as string;
  const price = BigInt(accept.amount);
  const fee = feeTerms.success ? feeFor(price, feeTerms.data.bps) : 0n;
  const requirements: PaymentRequirements = {
    scheme: 'exact',
    network: 'chain-devnet',
    payTo: accept.payTo,
    asset: accept.asset,
    amount: price,
    tokenProgram: USDC.tokenProgramId as PaymentRequirements['tokenProgram'],
    decimals: USDC.decimals,
    ...(feeTerms.success ? { fee: { bps: feeTerms.data.bps, feeAuthority: feeTerms.data.feeAuthority } } : {}),
  };
  if (accept.payTo !== treasuryOf(agent)) throw new Error('payTo is not the agent treasury');
  const ledger = app.services.ledgers['chain-devnet']!;
  const sellerBalance = async () => (await ledger.getTokenBalances(accept.payTo, { mint: USDC.mint })).reduce((n, b) => n + b.amount, 0n);

  const perBuyer = Math.ceil(PAID / BUYERS) + 1;
  const buyers = Array.from({ length: BUYERS }, () => Keypair.generate());
  const fundAtoms = BigInt(perBuyer) * (price + fee) * 3n; // the one-seller round, the several-sellers round, spare
  const fundAmount = `${fundAtoms / 10n ** BigInt(USDC.decimals)}.${(fundAtoms % 10n ** BigInt(USDC.decimals)).toString().padStart(USDC.decimals, '0')}`;
  for (const b of buyers) await app.services.dev.fund('chain-devnet', { address: b.publicKey.toBase58(), token: 'USDC', amount: fundAmount });

  let order = 0;
  /** PAYMENT-SIGNATURE values for `n` payments, one blockhash, buyers in turn (random memo each); `to` picks the seller */
  async function payments(
    n: number,
    to: (i: number) => { accept: X402RequirementsV2; requirements: PaymentRequirements } = () => ({ accept, requirements }),
  ): Promise<string[]> {
    const { blockhash } = await ledger.getLatestBlockhash();
    return Array.from({ length: n }, (_, i) => {
      const buyer = buyers[order++ % BUYERS]!;
      const seller = to(i);
      const tx = buildPaymentTransaction({ feePayer, payer: buyer.publicKey.toBase58(), requirements: seller.requirements, blockhash });
      tx.sign([buyer]); // the buyer's slot only: the facilitator co-signs as fee payer
      const payload = { x402Version: 2, accepted: seller.accept, payload: { transaction: Buffer.from(tx.serialize()).toString('base64') } };
      return Buffer.from(JSON.stringify(payload)).toString('base64');
    });
  }
  // The same-run reference: LiteSVM (an in-process embedded ledger, the gateway's execution engine without its
  // thread, HTTP, facilitator or database) executing the same settlement transactions — same instructions, same
  // seller, fee authority and mint, its own fee payer and buyers funded alike — timed batch by batch, interleaved
  // with the paid batches. Sent without preflight: executed (and signatures verified) once, as a validator does.
  const svmDir = await mkdtemp(join(tmpdir(), 'bench-paywall-svm-'));
  const svm = await EmbeddedLedger.open({ network: 'chain-devnet', dir: svmDir, slotMs: 400 });
  const svmFeePayer = Keypair.generate();
  svm.airdrop(svmFeePayer.publicKey.toBase58(), 1_000_000_000_000n);
  svm.mintTo(accept.payTo, USDC.mint, 1n);
  if (requirements.fee) svm.mintTo(requirements.fee.feeAuthority, USDC.mint, 1n);
  for (const b of buyers) svm.mintTo(b.publicKey.toBase58(), USDC.mint, fundAtoms);
  let svmOrder = 0;
  function svmPayments(n: number): Uint8Array[] {
    const { blockhash } = svm.latestBlockhash();
    return Array.from({ length: n }, () => {
      const buyer = buyers[svmOrder++ % BUYERS]!;
      const tx = buildPaymentTransaction({ feePayer: svmFeePayer.publicKey.toBase58(), payer: buyer.publicKey.toBase58(), requirements, blockhash });
      tx.sign([svmFeePayer, buyer]);
      return tx.serialize();
    });
  }
  /** executes `wires` one after the other; figures as a closed loop of one (each latency is one execution) */
  function svmExecute(wires: Uint8Array[]): Fired {
    const samples: number[] = [];
    const started = performance.now();
    for (const wire of wires) {
      const t0 = performance.now();
      const sent = svm.sendWire(wire, { skipPreflight: true });
      samples.push(performance.now() - t0);
      if (!sent.ok) throw new Error(`LiteSVM baseline: ${JSON.stringify(sent.err)} ${sent.logs.slice(-2).join(' | ')}`);
      if (svm.signatureStatus(sent.signature)?.err)
        throw new Error(`LiteSVM baseline: the settlement failed: ${JSON.stringify(svm.signatureStatus(sent.signature)?.err)}`);
    }
    const seconds = (performance.now() - started) / 1000;
    samples.sort((a, b) => a - b);
    return {
      generator: 'closed-loop',
      rps: wires.length / seconds,
      p50: percentile(samples, 0.5),
      p99: percentile(samples, 0.99),
      max: samples[samples.length - 1]!,
      total: wires.length,
      seconds,
      statuses: { '200': wires.length },
      samples,
    };
  }
  svmExecute(svmPayments(CONCURRENCY)); // warm-up

  const pay = (header: string) => fetch(paywallUrl, { headers: { 'PAYMENT-SIGNATURE': header } });
  const paying = (headers: string[]): LoadRequest[] => headers.map((h) => ({ headers: { 'PAYMENT-SIGNATURE': h } }));

  // Warm-up: the first payment creates the seller's token account; then both paths once at the bench's concurrency.
  const [first] = await payments(1);
  const warm = await pay(first!);
  if (warm.status !== 200) throw new Error(`warm-up payment: ${warm.status} ${await warm.text()}`);
  await warm.arrayBuffer();
  await fire(plainUrl, 402, times(CONCURRENCY * 2));
  await fire(paywallUrl, 402, times(CONCURRENCY * 2));
  const warmSigs = await payments(CONCURRENCY);
  const warmPaid = await fire(paywallUrl, 200, paying(warmSigs));
  if (warmPaid.statuses['200'] !== warmSigs.length) throw new Error(`warm-up payments: ${JSON.stringify(warmPaid.statuses)} ${warmPaid.odd}`);

  const before = await sellerBalance();
  const paidParts: Fired[] = [];
  const plainParts: Fired[] = [];
  const unpaidParts: Fired[] = [];
  const svmParts: Fired[] = [];
  let pgSamples = 0;
  /** CPU of this process (gateway, facilitator, ledger thread; not PostgreSQL, not the load generator) over the paid batches */
  let paidCpuUs = 0;
  /** busy (event-loop active) time of the main thread and of the ledger thread, and CPU of the app database's backends */
  let mainActiveMs = 0;
  let ledgerActiveMs = 0;
  let pgCpuMsTotal = 0;
  // every statement this process sends PostgreSQL (the app's pool, its event feed, the job queue; node-postgres clients)
  let statementsOn = false;
  let statements = 0;
  const clientQuery = pg.Client.prototype.query as (...args: unknown[]) => unknown;
  pg.Client.prototype.query = function (this: unknown, ...args: unknown[]) {
    if (statementsOn) statements++;
    return clientQuery.apply(this, args);
  } as typeof pg.Client.prototype.query;
  let paidThreadMessages = 0;
  let paidThreadCalls = 0;
  const ledgerWorker = (ledger as unknown as { worker?: { performance?: { eventLoopUtilization: () => { active: number } } } }).worker;
  const ledgerElu = () => ledgerWorker?.performance?.eventLoopUtilization();
  // messages to the ledger thread and the calls they carry (one message per turn of the event loop)
  let threadMessages = 0;
  let threadCalls = 0;
  const threadPort = ledgerWorker as unknown as { postMessage?: (calls: unknown) => void } | undefined;
  const threadPost = threadPort?.postMessage;
  if (threadPort && threadPost) {
    threadPort.postMessage = function (this: unknown, calls: unknown) {
      if (timingOn || !BREAKDOWN) {
        threadMessages++;
        threadCalls += Array.isArray(calls) ? calls.length : 1;
      }
      return threadPost.call(this, calls);
    };
  }
  const pgClient = new pg.Client({ connectionString: app.database.url });
  await pgClient.connect();
  const tick = 100; // USER_HZ
  /** CPU (user + system) of the PostgreSQL backends serving the app's database (from /proc; 0 where unreadable) */
  const pgCpuMs = async (): Promise<number> => {
    const { rows } = await pgClient.query<{ pid: number }>(`select pid from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()`);
    let ms = 0;
    for (const { pid } of rows) {
      try {
        const stat = (await readFile(`/proc/${pid}/stat`, 'utf8')).split(') ')[1]!.split(' ');
        ms += ((Number(stat[11]) + Number(stat[12])) * 1000) / tick;
      } catch {
        // gone meanwhile
      }
    }
    return ms;
  };
  const pgWaits = new Map<string, number>();
  for (let done = 0; done < PAID; done += BATCH) {
    const n = Math.min(BATCH, PAID - done);
    plainParts.push(await fire(plainUrl, 402, times(n)));
    unpaidParts.push(await fire(paywallUrl, 402, times(n)));
    svmParts.push(svmExecute(svmPayments(n)));
    const headers = await payments(n); // untimed: the buyers' cost
    timingOn = BREAKDOWN;
    const messagesBefore = [threadMessages, threadCalls];
    const cpuBefore = process.cpuUsage();
    const eluBefore = nodePerformance.eventLoopUtilization();
    const ledgerEluBefore = ledgerElu();
    const pgBefore = await pgCpuMs();
    const last = done + BATCH >= PAID;
    statementsOn = !BREAKDOWN; // (the breakdown's wait sampler would count too)
    const sampled = await profiled(last, 'paid-calls', () =>
      BREAKDOWN
        ? sampleWaits(app.database.url, () => fire(paywallUrl, 200, paying(headers)))
        : fire(paywallUrl, 200, paying(headers)).then((value) => ({ value, samples: 0, waits: new Map<string, number>() })),
    );
    statementsOn = false;
    const cpuUsed = process.cpuUsage(cpuBefore);
    paidCpuUs += cpuUsed.user + cpuUsed.system;
    mainActiveMs += nodePerformance.eventLoopUtilization(eluBefore).active;
    const ledgerAfter = ledgerElu();
    if (ledgerEluBefore && ledgerAfter) ledgerActiveMs += ledgerAfter.active - ledgerEluBefore.active;
    pgCpuMsTotal += (await pgCpuMs()) - pgBefore;
    paidThreadMessages += threadMessages - messagesBefore[0]!;
    paidThreadCalls += threadCalls - messagesBefore[1]!;
    timingOn = false;
    paidParts.push(sampled.value);
    pgSamples += sampled.samples;
    for (const [w, c] of sampled.waits) pgWaits.set(w, (pgWaits.get(w) ?? 0) + c);
  }
  const after = await sellerBalance();

  // Several sellers: the same payments spread over SELLERS links of SELLERS agents (different sellers share
  // no lock), interleaved with LiteSVM batches of the same size.
  const sellers = [{ linkId, agent, accept, requirements }];
  for (let i = 1; i < SELLERS; i++) {
    const { mint } = await recordAgent(app, key);
    const made = await http(app, 'POST', '/v1/payment-links', { key, body: linkBody(mint, { response: { status: 200, body: { forecast: 'sunny' } } }) });
    if (made.status !== 201) throw new Error(`create link: ${made.status} ${JSON.stringify(made.body)}`);
    const payTo = treasuryOf(mint);
    sellers.push({ linkId: (made.body as { id: string }).id, agent: mint, accept: { ...accept, payTo }, requirements: { ...requirements, payTo } });
  }
  const balances = async () =>
    Promise.all(sellers.map(async (x) => (await ledger.getTokenBalances(x.accept.payTo, { mint: USDC.mint })).reduce((n, b) => n + b.amount, 0n)));
  const spread = (headers: string[]): LoadRequest[] =>
    headers.map((h, i) => ({ path: `/x/${sellers[i % SELLERS]!.linkId}?network=chain-devnet`, headers: { 'PAYMENT-SIGNATURE': h } }));
  const warmMany = await payments(SELLERS * 2, (i) => sellers[i % SELLERS]!);
  await fire(paywallUrl, 200, spread(warmMany)); // each new seller's first payments
  const manyBefore = await balances();
  const manyParts: Fired[] = [];
  const manySvmParts: Fired[] = [];
  for (let done = 0; done < PAID; done += BATCH) {
    const n = Math.min(BATCH, PAID - done);
    manySvmParts.push(svmExecute(svmPayments(n)));
    const headers = await payments(n, (i) => sellers[i % SELLERS]!);
    manyParts.push(await fire(paywallUrl, 200, spread(headers)));
  }
  const manyAfter = await balances();
  const manyGrew = manyAfter.reduce((n, b, i) => n + b - manyBefore[i]!, 0n);
  if (manyGrew !== BigInt(PAID) * price) throw new Error(`the sellers' balances grew by ${manyGrew}, not ${PAID} × ${price}`);
  const many = merge(manyParts);
  if (many.statuses['200'] !== many.count) throw new Error(`paid (several sellers): ${JSON.stringify(many.statuses)}; first: ${many.odd}`);
  const manySvm = merge(manySvmParts);
  const paid = merge(paidParts);
  const plainFetch = merge(plainParts);
  const unpaidFetch = merge(unpaidParts);
  for (const [name, f, code] of [
    ['paid', paid, '200'],
    ['plain 402', plainFetch, '402'],
    ['paywall 402', unpaidFetch, '402'],
  ] as const) {
    if (f.statuses[code] !== f.count) throw new Error(`${name}: not every answer was ${code}: ${JSON.stringify(f.statuses)}; first: ${f.odd}`);
  }
  const grew = after - before;
  if (grew !== BigInt(PAID) * price) throw new Error(`the seller's balance grew by ${grew}, not ${PAID} × ${price}`);

  await pgClient.end();
  const svmFig = merge(svmParts);
  await svm.close();
  await rm(svmDir, { recursive: true, force: true });
  const paidFig = paid;
  const plainFig = plainFetch;
  const unpaidFetchFig = unpaidFetch;
  const loadAfter = load();

  // -------------------------------------------------------------------------------------------------------------
  // Summary

  const f0 = (n: number) => n.toFixed(0).padStart(7);
  const f1 = (n: number) => n.toFixed(1).padStart(7);
  const row = (name: string, r: { rps: number; p50: number; p99: number; max?: number }) =>
    `  ${name.padEnd(44)} ${f0(r.rps)} ${f1(r.p50)} ${f1(r.p99)} ${r.max === undefined ? '      -' : f1(r.max)}`;
  console.log('\nsummary');
  console.log(
    `  machine: ${os.cpus().length} CPUs (${os.cpus()[0]?.model ?? '?'}), ${os.platform()} ${os.release()}, node ${process.version}, fastify ${plain.version}`,
  );
  console.log(`  load average (1/5/15 min) before: ${loadBefore}   after: ${loadAfter}`);
  console.log(
    `  command: BENCH_SECONDS=${DURATION} BENCH_CONNECTIONS=${CONNECTIONS} BENCH_PAID=${PAID} BENCH_CONCURRENCY=${CONCURRENCY} npm run bench:paywall`,
  );
  console.log(`\n  unpaid GET /x/{id}, autocannon ${CONNECTIONS} connections, ${DURATION}s × ${ROUNDS} rounds   req/s  p50 ms  p99 ms  max ms`);
  console.log(row('plain fastify route, fixed {"ok":true}', tinyFig));
  console.log(row('plain fastify route, fixed 402', unpaidFig.base));
  console.log(row('paywall 402 challenge, default (info)', unpaidFig.paywall));
  console.log(row('paywall 402 challenge, tuned (warn)', unpaidFig.tuned));
  console.log(
    `  ratio paywall / plain: default ${(unpaidRatio * 100).toFixed(1)}%, tuned ${((unpaidFig.tuned.rps / unpaidFig.base.rps) * 100).toFixed(1)}%   (goal ≥ 50%)`,
  );
  console.log(`  access lines the default gateway wrote in its measured rounds: ${accessLines} for ${answered402} answers`);
  const cpu402 = { paywall: avg((r) => r.paywall.cpuUs), tuned: avg((r) => r.tuned.cpuUs), base: avg((r) => r.base.cpuUs) };
  if (rounds.length)
    console.log(
      `  CPU per 402 in the server process: paywall default ${cpu402.paywall.toFixed(0)} µs, tuned ${cpu402.tuned.toFixed(0)} µs, plain ${cpu402.base.toFixed(0)} µs (goal ≤ 30 µs)`,
    );
  console.log(
    ratioLine(
      `unpaid 402 on /x/{id}, default settings (SVC_LOG_LEVEL=info; ${cpu402.paywall.toFixed(0)} µs CPU/402)`,
      { gateway: unpaidFig.paywall, baseline: unpaidFig.base },
      { ratio: unpaidRatio, goal: '≥ 0.5×' },
    ),
  );
  console.log(
    ratioLine(
      `unpaid 402 on /x/{id}, tuned (SVC_LOG_LEVEL=warn; ${cpu402.tuned.toFixed(0)} µs CPU/402)`,
      { gateway: unpaidFig.tuned, baseline: unpaidFig.base },
      { ratio: unpaidFig.tuned.rps / unpaidFig.base.rps, goal: '≥ 0.5×' },
    ),
  );
  console.log(`\n  closed loop, ${CONCURRENCY} in flight, ${PAID} requests each (batches of ${BATCH}, interleaved)    req/s  p50 ms  p99 ms  max ms`);
  console.log(row('plain fastify route, fixed 402', plainFig));
  console.log(row('paywall 402 challenge', unpaidFetchFig));
  console.log(row(`paid call, 200 (${feeTerms.success ? 'seller + fee legs' : 'seller leg'}, settled)`, paidFig));
  console.log(row('LiteSVM executing the same settlement transaction, 1 at a time', svmFig));
  console.log(`  ratio paid calls / LiteSVM executions: ${(paidFig.rps / svmFig.rps).toFixed(3)}×   (goal ≥ 0.3×)`);
  console.log(
    `  CPU per paid call in the server process (all its threads: gateway, facilitator, ledger): ${(paidCpuUs / PAID).toFixed(0)} µs (${((paidCpuUs / 1e6 / paidFig.seconds) * 100).toFixed(0)}% of one core while paying)`,
  );
  console.log(
    `    of which busy per paid call: main thread ${((mainActiveMs * 1000) / PAID).toFixed(0)} µs (${((mainActiveMs / 1000 / paidFig.seconds) * 100).toFixed(0)}% busy), ledger thread ${((ledgerActiveMs * 1000) / PAID).toFixed(0)} µs (${((ledgerActiveMs / 1000 / paidFig.seconds) * 100).toFixed(0)}% busy); PostgreSQL backends of the app's database: ${((pgCpuMsTotal * 1000) / PAID).toFixed(0)} µs CPU per paid call`,
  );
  if (!BREAKDOWN)
    console.log(
      `    PostgreSQL statements sent by this process per paid call: ${(statements / PAID).toFixed(2)} (all of its clients, transaction control included)`,
    );
  console.log(
    `    ledger thread: ${(paidThreadCalls / PAID).toFixed(2)} calls and ${(paidThreadMessages / PAID).toFixed(2)} messages to it per paid call (${(paidThreadCalls / Math.max(1, paidThreadMessages)).toFixed(2)} calls per message)`,
  );
  console.log(ratioLine('paid calls end to end', { gateway: paidFig, baseline: svmFig }, { ratio: paidFig.rps / svmFig.rps, goal: '≥ 0.3×' }));
  console.log(row(`paid call, 200, spread over ${SELLERS} sellers`, many));
  console.log(row('LiteSVM, same transactions (batches interleaved with those)', manySvm));
  console.log(
    `  ratio paid calls (${SELLERS} sellers) / LiteSVM executions: ${(many.rps / manySvm.rps).toFixed(3)}×; ${SELLERS} sellers / 1 seller: ${(many.rps / paidFig.rps).toFixed(2)}×`,
  );
  console.log(
    `  ratio paid / plain 402 (closed loop): ${((paidFig.rps / plainFig.rps) * 100).toFixed(1)}%   paid / paywall 402 (closed loop): ${((paidFig.rps / unpaidFetchFig.rps) * 100).toFixed(1)}%`,
  );
  if (BREAKDOWN) {
    console.log(`\n  breakdown (BENCH_BREAKDOWN=1): mean ms per call of each step, over the ${PAID} timed paid calls (steps overlap across calls)`);
    for (const [name, t] of timings)
      console.log(
        `  ${name.padEnd(52)} ${String(t.calls).padStart(6)} calls ${(t.ms / t.calls).toFixed(2).padStart(8)} ms/call ${(t.ms / PAID).toFixed(2).padStart(8)} ms/paid`,
      );
    if (groups.length)
      console.log(
        `  record transactions: ${groups.length} for ${PAID} paid calls (group sizes: mean ${(groups.reduce((a, b) => a + b, 0) / groups.length).toFixed(1)}, max ${Math.max(...groups)})`,
      );
    console.log(`  PostgreSQL sessions of the app, sampled ${pgSamples}× every 10 ms: mean sessions per sample by state or wait event`);
    for (const [w, n] of [...pgWaits].sort((a, b) => b[1] - a[1])) console.log(`    ${w.padEnd(40)} ${(n / Math.max(pgSamples, 1)).toFixed(2)}`);
    console.log(`  statements seen active (mean sessions per sample running each):`);
    for (const [q, n] of [...activeQueries].sort((a, b) => b[1] - a[1]).slice(0, 15)) console.log(`    ${(n / Math.max(pgSamples, 1)).toFixed(3)}  ${q}`);
  }
  const warning = baselineWarning(tinyFig);
  if (warning) console.log(`  ${warning}`);
  console.log(
    `  checks: every unpaid answer 402, all ${PAID} paid answers 200; seller treasury grew by ${grew} = ${PAID} × ${price} atoms (fee ${fee} per call, ${BUYERS} buyers)`,
  );
} finally {
  await plain.close();
  await tiny.close();
  await tunedApp.close();
  await app.close();
  await removeDataDir(tunedApp.dataDir);
  await removeDataDir(app.dataDir);
  await defaultLog.remove();
  await tunedLog.remove();
}
