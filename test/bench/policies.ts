// Cost of the request policies (rate-limit window in PostgreSQL, usage records) on GET /v1/health, measured in one
// run against the same app whose policy storage does nothing. Run on demand: npm run bench:policies
// autocannon runs in its own process (test/bench/support/load.ts); a plain fastify route answering {"ok":true} is
// measured with the same generator in the same run, with a warning when it is generator- or load-bound.
import type { PolicyStore } from '../../domain/ports/policy-store.ts';
import { issueKey, removeDataDir, startTestApp } from '../support/app.ts';
import { expectAll, header, machineLine, plainBaseline, row, runLoad, startPlainServer } from './support/load.ts';

const DURATION = Number(process.env.BENCH_SECONDS ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);

/** The baseline's policy storage: admits everything, keeps nothing. A measuring instrument, not a test double. */
const nothingStored: PolicyStore = {
  idempotency: {
    claim: async () => 'claimed',
    get: async () => null,
    complete: async () => {},
    release: async () => {},
    deleteExpired: async () => 0,
  },
  rateLimits: {
    hit: async (_window, { now }) => ({ allowed: true, used: 1, oldest: now }),
    sync: async () => [],
  },
  requestRecords: { insertMany: async () => {}, usage: async () => [], deleteOlderThan: async () => 0 },
};

/** GET /v1/health with the key: every answer must be a 200. */
async function measure(url: string, key: string): Promise<{ rps: number; p50: number; p99: number; total: number }> {
  const r = await expectAll(
    { generator: 'cannon', url: `${url}/v1/health`, connections: CONNECTIONS, duration: DURATION, headers: { authorization: `Bearer ${key}` } },
    200,
  );
  return { rps: r.rps, p50: r.p50, p99: r.p99, total: r.total };
}

/** Near the limit: a key over its limit, 200 connections; almost every answer is a 429, none anything else. */
async function measureNearLimit(url: string, key: string): Promise<{ rps: number; p50: number; p99: number; refused: number; answered: number }> {
  const r = await runLoad({ generator: 'cannon', url: `${url}/v1/version`, connections: 200, duration: DURATION, headers: { authorization: `Bearer ${key}` } });
  const answered = r.statuses['200'] ?? 0;
  const refused = r.statuses['429'] ?? 0;
  if (answered + refused !== r.total || answered > 600)
    throw new Error(`over the limit: expected at most 600 × 200 and the rest 429: ${JSON.stringify(r.statuses)}`);
  return { rps: r.rps, p50: r.p50, p99: r.p99, refused, answered };
}

const env = { SVC_RATE_LIMITS: JSON.stringify({ meta: 10_000_000 }), SVC_JOBS: 'off', SVC_DB_POOL_MAX: '20' };
const withPolicies = await startTestApp({ env });
const baseline = await startTestApp({ databaseUrl: withPolicies.database.url, env, appOptions: { policyStore: nothingStored } });
const plain = await startPlainServer();
try {
  const key = await issueKey(withPolicies);
  await measure(baseline.url, key); // warm-up both
  await measure(withPolicies.url, key);
  const plainFig = await plainBaseline(plain, { generator: 'cannon', connections: CONNECTIONS, duration: DURATION });
  const rounds: { base: Awaited<ReturnType<typeof measure>>; full: Awaited<ReturnType<typeof measure>> }[] = [];
  for (let i = 0; i < 2; i++) {
    const base = await measure(baseline.url, key);
    const full = await measure(withPolicies.url, key);
    rounds.push({ base, full });
  }
  const avg = (f: (r: (typeof rounds)[number]) => number) => rounds.reduce((n, r) => n + f(r), 0) / rounds.length;
  const baseRps = avg((r) => r.base.rps);
  const fullRps = avg((r) => r.full.rps);
  console.log(JSON.stringify(rounds, null, 2));
  console.log(`machine: ${machineLine()}`);
  console.log(header(`autocannon ${CONNECTIONS} connections, ${DURATION}s`));
  console.log(row('plain fastify route, fixed {"ok":true}', plainFig));
  console.log(`GET /v1/health, ${CONNECTIONS} connections, ${DURATION}s x ${rounds.length} rounds (every answer 200)`);
  console.log(`  without policies: ${baseRps.toFixed(0)} req/s, p99 ${avg((r) => r.base.p99).toFixed(1)} ms`);
  console.log(`  with policies:    ${fullRps.toFixed(0)} req/s, p99 ${avg((r) => r.full.p99).toFixed(1)} ms`);
  console.log(`  throughput ratio ${(fullRps / baseRps).toFixed(3)} (policies cost ${((1 - fullRps / baseRps) * 100).toFixed(1)}%)`);
  // A third instance on the same database whose meta limit is 600: the key is over it after its first 600 answers.
  const near = await startTestApp({ databaseUrl: withPolicies.database.url, env: { ...env, SVC_RATE_LIMITS: JSON.stringify({ meta: 600 }) } });
  try {
    const nearKey = await issueKey(near);
    const r = await measureNearLimit(near.url, nearKey);
    console.log(`GET /v1/version over the key's limit of 600, 200 connections, ${DURATION}s`);
    console.log(`  ${r.rps.toFixed(0)} req/s, ${r.answered} answered (≤ 600), ${r.refused} refused with 429, p50 ${r.p50} ms, p99 ${r.p99} ms`);
  } finally {
    await near.close();
  }
} finally {
  await plain.close();
  await baseline.close();
  await withPolicies.close();
  await removeDataDir(withPolicies.dataDir);
  await removeDataDir(baseline.dataDir);
}
