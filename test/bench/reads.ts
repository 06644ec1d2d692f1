// The /v1 authenticated read hot path. The gateway's GET /v1/payment-links/{id} at the default settings (SVC_LOG_LEVEL=info:
// one JSON access line per request, the logger `npm start` makes, writing a file) and tuned (SVC_LOG_LEVEL=warn: no
// access line), rate limits raised by config in both (the load is one key), against a plain fastify + `pg` server
// running the same `select` on the same database, measured alternately in one run (after a warm-up of each),
// autocannon in its own process (test/bench/support/load.ts). The tuned gateway is a second instance on the same database.
// Run on demand: npm run bench:reads   (BENCH_SECONDS, BENCH_CONNECTIONS, BENCH_ROUNDS; BENCH_CPU_PROF=dir writes a
// CPU profile of each server's last round there — node's inspector, in this process)
import { profiled } from './support/profile.ts';
import Fastify from 'fastify';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { BUCKETS } from '../../domain/policies/rate-limit.ts';
import { http, issueKey, linkBody, recordAgent, removeDataDir, startTestApp } from '../support/app.ts';
import { benchLogger } from './support/gateway-log.ts';
import { expectAll, header, machineLine, plainBaseline, row, startPlainServer, type LoadResult } from './support/load.ts';

const DURATION = Number(process.env.BENCH_SECONDS ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
const GOAL = 0.6;
const PATH_NAME = 'GET /v1/payment-links/{id}';

const limits = Object.fromEntries(BUCKETS.map((b) => [b, 10_000_000]));
const env = { SVC_RATE_LIMITS: JSON.stringify(limits), SVC_JOBS: 'off' };
const defaultLog = await benchLogger('info');
const tunedLog = await benchLogger('warn');
const app = await startTestApp({ env, appOptions: { logger: defaultLog.logger } });
const tuned = await startTestApp({ env, databaseUrl: app.database.url, appOptions: { logger: tunedLog.logger } });
const pool = new pg.Pool({ connectionString: app.database.url, max: 10 });
const plainRead = Fastify({ logger: false });
// The same select the gateway's repository runs for this read (adapters/store/repositories/payment-links.ts).
plainRead.get<{ Params: { id: string } }>('/v1/payment-links/:id', async (request, reply) => {
  const { rows } = await pool.query('select * from payment_links where network = $1 and id = $2', ['chain-devnet', request.params.id]);
  if (!rows.length) return reply.code(404).send({ error: 'not_found' });
  return rows[0];
});
await plainRead.listen({ port: 0, host: '127.0.0.1' });
const plainUrl = `http://127.0.0.1:${(plainRead.server.address() as AddressInfo).port}`;
const tiny = await startPlainServer();

try {
  const key = await issueKey(app);
  const { mint } = await recordAgent(app, key);
  const created = await http(app, 'POST', '/v1/payment-links', { key, body: linkBody(mint) });
  if (created.status !== 201) throw new Error(`create link: ${created.status} ${JSON.stringify(created.body)}`);
  const id = created.body.id as string;
  const gatewayJob = {
    generator: 'cannon' as const,
    url: `${app.url}/v1/payment-links/${id}`,
    connections: CONNECTIONS,
    duration: DURATION,
    headers: { authorization: `Bearer ${key}` },
  };
  const tunedJob = { ...gatewayJob, url: `${tuned.url}/v1/payment-links/${id}` };
  const plainJob = { generator: 'cannon' as const, url: `${plainUrl}/v1/payment-links/${id}`, connections: CONNECTIONS, duration: DURATION };
  const queries = await countQueries(async () => void (await http(app, 'GET', `/v1/payment-links/${id}`, { key })));

  // warm-up of each, then alternated rounds
  for (const job of [plainJob, gatewayJob, tunedJob]) await expectAll({ ...job, duration: Math.min(DURATION, 3) }, 200);
  const tinyFig = await plainBaseline(tiny, { generator: 'cannon', connections: CONNECTIONS, duration: DURATION });
  const rounds: { plain: Measured; gateway: Measured; tuned: Measured }[] = [];
  let accessLines = 0;
  let answered = 0;
  for (let i = 0; i < ROUNDS; i++) {
    const last = i === ROUNDS - 1;
    const plain = await withCpu(() => profiled(last, 'reads-plain', () => expectAll(plainJob, 200)));
    const before = await defaultLog.accessLines();
    const gateway = await withCpu(() => profiled(last, 'reads-gateway', () => expectAll(gatewayJob, 200)));
    accessLines += (await defaultLog.accessLines()) - before;
    answered += gateway.total;
    const tunedRound = await withCpu(() => profiled(last, 'reads-gateway-tuned', () => expectAll(tunedJob, 200)));
    rounds.push({ plain, gateway, tuned: tunedRound });
    const fig = (m: Measured) => `${m.rps.toFixed(0)} req/s (p99 ${m.p99} ms, ${m.cpuUs.toFixed(0)} µs CPU/req, ${m.sysUs.toFixed(0)} of it system)`;
    console.log(`  round ${i + 1}: plain ${fig(plain)} | gateway ${fig(gateway)} | gateway tuned ${fig(tunedRound)}`);
  }
  const avg = (f: (r: (typeof rounds)[number]) => number) => rounds.reduce((n, r) => n + f(r), 0) / rounds.length;
  const of = (k: 'plain' | 'gateway' | 'tuned') => ({
    rps: avg((r) => r[k].rps),
    p50: avg((r) => r[k].p50),
    p99: avg((r) => r[k].p99),
    cpuUs: avg((r) => r[k].cpuUs),
  });
  const [p, g, t] = [of('plain'), of('gateway'), of('tuned')];
  console.log(`machine: ${machineLine()}`);
  console.log(`  command: BENCH_SECONDS=${DURATION} BENCH_CONNECTIONS=${CONNECTIONS} BENCH_ROUNDS=${ROUNDS} npm run bench:reads`);
  console.log(`  PostgreSQL statements of one warm gateway read (after the key's first use): ${queries}`);
  console.log(`  access lines the default gateway wrote in its measured rounds: ${accessLines} for ${answered} answers`);
  console.log(header(`autocannon ${CONNECTIONS} connections, ${DURATION}s × ${ROUNDS} rounds`));
  console.log(row('plain fastify route, fixed {"ok":true}', tinyFig));
  console.log(row('plain fastify + pg, same select', p));
  console.log(row(`gateway ${PATH_NAME}, default (info)`, g));
  console.log(row(`gateway ${PATH_NAME}, tuned (warn)`, t));
  console.log(`  ratio gateway / plain: default ${(g.rps / p.rps).toFixed(2)}×, tuned ${(t.rps / p.rps).toFixed(2)}× (goal ≥ ${GOAL}×)`);
  // This process's CPU per answered request (the servers live here; PostgreSQL and autocannon run apart): steadier than
  // req/s on a shared machine.
  console.log(
    `  CPU per request in the server process: gateway default ${g.cpuUs.toFixed(0)} µs, tuned ${t.cpuUs.toFixed(0)} µs, plain ${p.cpuUs.toFixed(0)} µs (plain / gateway default ${(p.cpuUs / g.cpuUs).toFixed(2)}×)`,
  );
  const fig = (r: typeof g) => `${Math.round(r.rps).toLocaleString('en-US')} req/s p99 ${r.p99.toFixed(0)} ms, ${r.cpuUs.toFixed(0)} µs CPU/req`;
  console.log(`RATIO|${PATH_NAME} (default settings, SVC_LOG_LEVEL=info)|${fig(g)}|${fig(p)}|${(g.rps / p.rps).toFixed(2)}×|≥ ${GOAL}×`);
  console.log(`RATIO|${PATH_NAME} (tuned: SVC_LOG_LEVEL=warn)|${fig(t)}|${fig(p)}|${(t.rps / p.rps).toFixed(2)}×|≥ ${GOAL}×`);
} finally {
  await tiny.close();
  await plainRead.close();
  await pool.end();
  await tuned.close();
  await app.close();
  await removeDataDir(tuned.dataDir);
  await removeDataDir(app.dataDir);
  await defaultLog.remove();
  await tunedLog.remove();
}

type Measured = LoadResult & { cpuUs: number; sysUs: number };

/** A round with this process's CPU time (user + system) per answered request. */
async function withCpu(fn: () => Promise<LoadResult>): Promise<Measured> {
  const before = process.cpuUsage();
  const r = await fn();
  const used = process.cpuUsage(before);
  return { ...r, cpuUs: (used.user + used.system) / Math.max(1, r.total), sysUs: used.system / Math.max(1, r.total) };
}

/**
 * Statements sent during `fn` (a warm gateway read; the plain server is idle meanwhile), background ones left out: noted
 * on node-postgres's client itself, so the raw hot read counts as well as MikroORM's statements.
 */
async function countQueries(fn: () => Promise<void>): Promise<number> {
  // the background statements of the app's timers (rate-limit exchange, usage flush, event catch-up, indexer): not a request's
  const BACKGROUND = [/insert into rate_hits/i, /insert into request_records/i, /from events\b.*seq >/is, /insert into indexer_runs/i, /\bindexer_watch\b/i];
  await fn(); // the key's first use: resolution and last_used_at
  await app.services.recorder.flush();
  const proto = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
  const original = proto.query;
  let n = 0;
  proto.query = function (this: unknown, ...args: unknown[]) {
    const first = args[0] as string | { text: string };
    if (!BACKGROUND.some((re) => re.test(typeof first === 'string' ? first : first.text))) n++;
    return original.apply(this, args);
  };
  try {
    await fn();
  } finally {
    proto.query = original;
  }
  return n;
}
