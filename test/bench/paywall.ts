// The public paywall /x/{id} against a plain fastify route returning a fixed 402, in one run on the same machine.
// Run on demand: npm run bench:paywall   (BENCH_SECONDS=10 BENCH_CONNECTIONS=50 BENCH_PAID=400 BENCH_CONCURRENCY=16)
//
// 1. Unpaid challenges: autocannon, BENCH_CONNECTIONS connections, BENCH_SECONDS per round, baseline and paywall in
//    interleaved rounds (after a warm-up of both). The baseline answers the very bytes of a real paywall 402 (same
//    JSON body, same PAYMENT-REQUIRED and CORS headers, precomputed), so both routes write the same response.
// 2. Paid calls end to end on the embedded ledger: BENCH_PAID payments against one fee-bearing link (SVC_FEE_BPS
//    default 100: seller and fee legs), from BUYERS funded wallets, built and signed between the timed sections (a
//    fresh blockhash per batch), sent with plain fetch at BENCH_CONCURRENCY in flight; every answer must be 200 and
//    the seller's treasury must grow by exactly BENCH_PAID × price. The same-run reference is the plain route's 402
//    fetched with the same client at the same concurrency, in batches interleaved with the paid ones.
// As in the other benchmarks, the clients (autocannon, fetch) run in this process, beside both servers: on a small
// machine they take CPU from the server under test, alike for both routes; the ratios are the figures to compare.
import os from 'node:os';
import type { AddressInfo } from 'node:net';
import autocannon from 'autocannon';
import Fastify from 'fastify';
import { Keypair } from '@solana/web3.js';
import { buildPaymentTransaction } from '../../domain/facilitator/build.ts';
import { FEE_EXTENSION_KEY, FeeExtension, type PaymentRequirements } from '../../domain/facilitator/schema.ts';
import type { X402RequirementsV2 } from '../../domain/facilitator/wire.ts';
import { findStable } from '../../domain/shared/network.ts';
import { feeFor } from '../../domain/shared/money.ts';
import { treasuryOf } from '../../domain/treasury/derive.ts';
import { http, issueKey, linkBody, recordAgent, removeDataDir, startTestApp, type TestApp } from '../support/app.ts';

const DURATION = Number(process.env.BENCH_SECONDS ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const PAID = Number(process.env.BENCH_PAID ?? 400);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 16);
/** payments per blockhash (built and signed right before their batch is sent) */
const BATCH = Number(process.env.BENCH_PAID_BATCH ?? 200);
const BUYERS = 20;
const ROUNDS = 2;
const USDC = findStable('chain-devnet', 'USDC')!;

const load = () => os.loadavg().map((n) => n.toFixed(2)).join(' ');
const loadBefore = load();

// ---------------------------------------------------------------------------------------------------------------
// Measuring helpers

interface Cannon {
  rps: number;
  p50: number;
  p99: number;
  total: number;
  /** status code → count, plus errors/timeouts: must be { 402: total } */
  statuses: Record<string, number>;
}

async function cannon(url: string): Promise<Cannon> {
  const result = await autocannon({ url, connections: CONNECTIONS, duration: DURATION });
  const statuses: Record<string, number> = {};
  for (const [code, s] of Object.entries(result.statusCodeStats ?? {})) statuses[code] = s.count ?? 0;
  if (result.errors) statuses.errors = result.errors;
  if (result.timeouts) statuses.timeouts = result.timeouts;
  const total = Object.values(statuses).reduce((n, c) => n + c, 0);
  if (total === 0 || statuses['402'] !== total) throw new Error(`${url}: not every response was a 402: ${JSON.stringify(statuses)}`);
  return { rps: result.requests.average, p50: result.latency.p50, p99: result.latency.p99, total, statuses };
}

interface Fired {
  count: number;
  ms: number;
  latencies: number[];
  statuses: Record<string, number>;
  /** the first unexpected answer, for the error message */
  odd?: string;
}

/** `n` requests, `CONCURRENCY` in flight, each timed from send to the last byte of its body. */
async function fire(n: number, expect: number, send: (i: number) => Promise<Response>): Promise<Fired> {
  const fired: Fired = { count: n, ms: 0, latencies: [], statuses: {} };
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: Math.min(CONCURRENCY, n) }, async () => {
      while (next < n) {
        const i = next++;
        const t0 = performance.now();
        let status: string;
        try {
          const res = await send(i);
          const body = await res.text();
          status = String(res.status);
          if (res.status !== expect) fired.odd ??= `${res.status} ${body.slice(0, 300)}`;
        } catch (e) {
          status = 'error';
          fired.odd ??= String(e);
        }
        fired.latencies.push(performance.now() - t0);
        fired.statuses[status] = (fired.statuses[status] ?? 0) + 1;
      }
    }),
  );
  fired.ms = performance.now() - started;
  return fired;
}

function merge(parts: Fired[]): Fired {
  const all: Fired = { count: 0, ms: 0, latencies: [], statuses: {} };
  for (const p of parts) {
    all.count += p.count;
    all.ms += p.ms;
    all.latencies.push(...p.latencies);
    for (const [k, v] of Object.entries(p.statuses)) all.statuses[k] = (all.statuses[k] ?? 0) + v;
    all.odd ??= p.odd;
  }
  return all;
}

/** nearest rank */
const percentile = (sorted: number[], p: number) => sorted[Math.max(0, Math.ceil(p * sorted.length) - 1)] ?? NaN;

function figures(f: Fired) {
  const sorted = [...f.latencies].sort((a, b) => a - b);
  return { rps: (f.count / f.ms) * 1000, p50: percentile(sorted, 0.5), p99: percentile(sorted, 0.99), max: sorted[sorted.length - 1] ?? NaN };
}

// ---------------------------------------------------------------------------------------------------------------
// The two servers

const app: TestApp = await startTestApp({ env: { SVC_RATE_LIMITS: JSON.stringify({ paywall: 10_000_000 }), SVC_LOG_LEVEL: 'silent' } });
const plain = Fastify({ logger: false });
try {
  const key = await issueKey(app);
  const { mint: agent } = await recordAgent(app, key);
  const created = await http(app, 'POST', '/v1/payment-links', { key, body: linkBody(agent, { response: { status: 200, body: { forecast: 'sunny' } } }) });
  if (created.status !== 201) throw new Error(`create link: ${created.status} ${JSON.stringify(created.body)}`);
  const linkId = (created.body as { id: string }).id;
  const paywallUrl = `${app.url}/x/${linkId}?network=chain-devnet`;

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

  console.log(`unpaid 402: ${CONNECTIONS} connections, ${DURATION}s per round, ${ROUNDS} interleaved rounds; body ${challengeBody.length} B, PAYMENT-REQUIRED ${paymentRequired.length} B`);
  await cannon(plainUrl); // warm-up both
  await cannon(paywallUrl);
  const rounds: { base: Cannon; paywall: Cannon }[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    const base = await cannon(plainUrl);
    const paywall = await cannon(paywallUrl);
    rounds.push({ base, paywall });
    console.log(
      `  round ${i + 1}: plain ${base.rps.toFixed(0)} req/s (p50 ${base.p50} ms, p99 ${base.p99} ms, ${base.total}×402) | ` +
        `paywall ${paywall.rps.toFixed(0)} req/s (p50 ${paywall.p50} ms, p99 ${paywall.p99} ms, ${paywall.total}×402)`,
    );
  }
  const avg = (f: (r: (typeof rounds)[number]) => number) => rounds.reduce((n, r) => n + f(r), 0) / rounds.length;
  const unpaidFig = {
    base: { rps: avg((r) => r.base.rps), p50: avg((r) => r.base.p50), p99: avg((r) => r.base.p99) },
    paywall: { rps: avg((r) => r.paywall.rps), p50: avg((r) => r.paywall.p50), p99: avg((r) => r.paywall.p99) },
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
  const fundAtoms = BigInt(perBuyer) * (price + fee) * 2n;
  const fundAmount = `${fundAtoms / 10n ** BigInt(USDC.decimals)}.${(fundAtoms % 10n ** BigInt(USDC.decimals)).toString().padStart(USDC.decimals, '0')}`;
  for (const b of buyers) await app.services.dev.fund('chain-devnet', { address: b.publicKey.toBase58(), token: 'USDC', amount: fundAmount });

  let order = 0;
  /** PAYMENT-SIGNATURE values for `n` payments, one blockhash, buyers in turn (random memo each) */
  async function payments(n: number): Promise<string[]> {
    const { blockhash } = await ledger.getLatestBlockhash();
    return Array.from({ length: n }, () => {
      const buyer = buyers[order++ % BUYERS]!;
      const tx = buildPaymentTransaction({ feePayer, payer: buyer.publicKey.toBase58(), requirements, blockhash });
      tx.sign([buyer]); // the buyer's slot only: the facilitator co-signs as fee payer
      const payload = { x402Version: 2, accepted: accept, payload: { transaction: Buffer.from(tx.serialize()).toString('base64') } };
      return Buffer.from(JSON.stringify(payload)).toString('base64');
    });
  }
  const pay = (header: string) => fetch(paywallUrl, { headers: { 'PAYMENT-SIGNATURE': header } });

  // Warm-up: the first payment creates the seller's token account; then both paths once at the bench's concurrency.
  const [first] = await payments(1);
  const warm = await pay(first!);
  if (warm.status !== 200) throw new Error(`warm-up payment: ${warm.status} ${await warm.text()}`);
  await warm.arrayBuffer();
  await fire(CONCURRENCY * 2, 402, () => fetch(plainUrl));
  await fire(CONCURRENCY * 2, 402, () => fetch(paywallUrl));
  const warmSigs = await payments(CONCURRENCY);
  const warmPaid = await fire(warmSigs.length, 200, (i) => pay(warmSigs[i]!));
  if (warmPaid.statuses['200'] !== warmSigs.length) throw new Error(`warm-up payments: ${JSON.stringify(warmPaid.statuses)} ${warmPaid.odd}`);

  const before = await sellerBalance();
  const paidParts: Fired[] = [];
  const plainParts: Fired[] = [];
  const unpaidParts: Fired[] = [];
  for (let done = 0; done < PAID; done += BATCH) {
    const n = Math.min(BATCH, PAID - done);
    plainParts.push(await fire(n, 402, () => fetch(plainUrl)));
    unpaidParts.push(await fire(n, 402, () => fetch(paywallUrl)));
    const headers = await payments(n); // untimed: the buyers' cost
    paidParts.push(await fire(n, 200, (i) => pay(headers[i]!)));
  }
  const after = await sellerBalance();
  const paid = merge(paidParts);
  const plainFetch = merge(plainParts);
  const unpaidFetch = merge(unpaidParts);
  for (const [name, f, code] of [['paid', paid, '200'], ['plain 402', plainFetch, '402'], ['paywall 402', unpaidFetch, '402']] as const) {
    if (f.statuses[code] !== f.count) throw new Error(`${name}: not every answer was ${code}: ${JSON.stringify(f.statuses)}; first: ${f.odd}`);
  }
  const grew = after - before;
  if (grew !== BigInt(PAID) * price) throw new Error(`the seller's balance grew by ${grew}, not ${PAID} × ${price}`);

  const paidFig = figures(paid);
  const plainFig = figures(plainFetch);
  const unpaidFetchFig = figures(unpaidFetch);
  const loadAfter = load();

  // -------------------------------------------------------------------------------------------------------------
  // Summary

  const f0 = (n: number) => n.toFixed(0).padStart(7);
  const f1 = (n: number) => n.toFixed(1).padStart(7);
  const row = (name: string, r: { rps: number; p50: number; p99: number; max?: number }) =>
    `  ${name.padEnd(44)} ${f0(r.rps)} ${f1(r.p50)} ${f1(r.p99)} ${r.max === undefined ? '      -' : f1(r.max)}`;
  console.log('\nsummary');
  console.log(`  machine: ${os.cpus().length} CPUs (${os.cpus()[0]?.model ?? '?'}), ${os.platform()} ${os.release()}, node ${process.version}, fastify ${plain.version}`);
  console.log(`  load average (1/5/15 min) before: ${loadBefore}   after: ${loadAfter}`);
  console.log(`  command: BENCH_SECONDS=${DURATION} BENCH_CONNECTIONS=${CONNECTIONS} BENCH_PAID=${PAID} BENCH_CONCURRENCY=${CONCURRENCY} npm run bench:paywall`);
  console.log(`\n  unpaid GET /x/{id}, autocannon ${CONNECTIONS} connections, ${DURATION}s × ${ROUNDS} rounds   req/s  p50 ms  p99 ms  max ms`);
  console.log(row('plain fastify route, fixed 402', unpaidFig.base));
  console.log(row('paywall 402 challenge', unpaidFig.paywall));
  console.log(`  ratio paywall / plain: ${(unpaidRatio * 100).toFixed(1)}%   (aim ≥ 50%)`);
  console.log(`\n  fetch, ${CONCURRENCY} in flight, ${PAID} requests each (batches of ${BATCH}, interleaved)    req/s  p50 ms  p99 ms  max ms`);
  console.log(row('plain fastify route, fixed 402', plainFig));
  console.log(row('paywall 402 challenge', unpaidFetchFig));
  console.log(row(`paid call, 200 (${feeTerms.success ? 'seller + fee legs' : 'seller leg'}, settled)`, paidFig));
  console.log(`  ratio paid / plain 402 (fetch): ${((paidFig.rps / plainFig.rps) * 100).toFixed(1)}%   paid / paywall 402 (fetch): ${((paidFig.rps / unpaidFetchFig.rps) * 100).toFixed(1)}%`);
  console.log(`  checks: every unpaid answer 402, all ${PAID} paid answers 200; seller treasury grew by ${grew} = ${PAID} × ${price} atoms (fee ${fee} per call, ${BUYERS} buyers)`);
} finally {
  await plain.close();
  await app.close();
  await removeDataDir(app.dataDir);
}
