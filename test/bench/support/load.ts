// The benches' load generator, always in a process of its own (test/bench/support/load-child.ts, forked per run): it
// never shares an event loop with a server it measures. Every bench also measures a plain fastify route (a fixed small
// JSON answer, `startPlainServer`) in the same run with the same generator: when that baseline is far below what plain
// fastify serves on an idle machine (~10k req/s), the generator or the machine's load is the limit, not the server,
// and `baselineWarning` says so.
import { fork } from 'node:child_process';
import os from 'node:os';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import Fastify from 'fastify';

export interface LoadRequest {
  /** path (and query) relative to the job's URL; default: the job's URL */
  path?: string;
  /** merged over the job's headers */
  headers?: Record<string, string>;
  /** default: the job's body */
  body?: string;
}

export interface LoadJob {
  /** 'cannon': autocannon, one fixed request; 'closed': node:http closed loop (requests that differ, or a fixed one) */
  generator: 'cannon' | 'closed';
  url: string;
  method?: string;
  headers?: Record<string, string>;
  body?: string;
  connections: number;
  /** seconds, for a fixed request */
  duration: number;
  /** closed: each sent once, `connections` in flight */
  requests?: LoadRequest[];
  /** closed: each lane sent in order by its own worker (lanes.length in flight) */
  lanes?: LoadRequest[][];
  /** closed: the expected status; the first other answer is kept in `odd` */
  expect?: number;
}

export interface LoadResult {
  generator: 'autocannon' | 'closed-loop';
  /** requests per second */
  rps: number;
  /** latency, ms */
  p50: number;
  p99: number;
  max: number;
  total: number;
  seconds: number;
  /** status code → count, plus `errors` / `timeouts` */
  statuses: Record<string, number>;
  /** closed loop: the first answer whose status was not `expect` */
  odd?: string;
  /** closed loop: every request's latency, ms, ascending (so runs can be merged into true percentiles) */
  samples?: number[];
}

const CHILD = fileURLToPath(new URL('./load-child.ts', import.meta.url));

/** Runs one job in a fresh child process and returns its figures. */
export function runLoad(job: Omit<LoadJob, 'duration' | 'connections'> & { duration?: number; connections?: number }): Promise<LoadResult> {
  const full: LoadJob = { duration: 5, connections: 50, ...job };
  return new Promise((resolve, reject) => {
    const child = fork(CHILD, [], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    let answered = false;
    child.once('message', (m: { ok: true; result: LoadResult } | { ok: false; error: string }) => {
      answered = true;
      if (m.ok) resolve(m.result);
      else reject(new Error(`load generator: ${m.error}`));
    });
    child.once('error', reject);
    child.once('exit', (code) => {
      if (!answered) reject(new Error(`load generator exited with ${code} before answering`));
    });
    child.send(full);
  });
}

/** `runLoad`, then throws unless every answer had status `expect` (errors and timeouts count as wrong answers). */
export async function expectAll(job: Parameters<typeof runLoad>[0], expect: number): Promise<LoadResult> {
  const result = await runLoad({ ...job, expect });
  const good = result.statuses[String(expect)] ?? 0;
  if (result.total === 0 || good !== result.total) {
    throw new Error(
      `${job.method ?? 'GET'} ${job.url}: not every answer was ${expect}: ${JSON.stringify(result.statuses)}${result.odd ? `; first: ${result.odd}` : ''}`,
    );
  }
  return result;
}

export interface PlainServer {
  /** GET or POST: 200 {"ok":true} */
  url: string;
  version: string;
  close(): Promise<void>;
}

/** The same-run baseline: plain fastify answering a fixed small JSON body, in the bench's process (beside the app). */
export async function startPlainServer(): Promise<PlainServer> {
  const plain = Fastify({ logger: false });
  const answer = { ok: true };
  plain.get('/plain', async () => answer);
  plain.post('/plain', async () => answer);
  await plain.listen({ port: 0, host: '127.0.0.1' });
  return { url: `http://127.0.0.1:${(plain.server.address() as AddressInfo).port}/plain`, version: plain.version, close: () => plain.close() };
}

/** Below this the plain route is taken as generator- or machine-bound (BENCH_BASELINE_MIN, default 5000 req/s). */
export const BASELINE_MIN = Number(process.env.BENCH_BASELINE_MIN ?? 5000);

/** A warning line when the plain fastify baseline is far below ~10k req/s, else null. */
export function baselineWarning(plain: LoadResult, what = 'plain fastify route'): string | null {
  if (plain.rps >= BASELINE_MIN) return null;
  return (
    `WARNING: the ${what} served only ${plain.rps.toFixed(0)} req/s with the ${plain.generator} generator (plain fastify serves ~10k+ ` +
    `on an idle machine): the generator or the machine's load (${loadavg()}) is the limit here, not the server — read the ratios, not the absolute figures`
  );
}

/** Measures the plain route with the given generator settings, checks every answer is 200, prints the warning if any. */
export async function plainBaseline(server: PlainServer, job: Omit<Parameters<typeof runLoad>[0], 'url'>): Promise<LoadResult> {
  const result = await expectAll(
    {
      ...job,
      url: server.url,
      requests: job.requests?.map((r) => ({ ...r, path: undefined })),
      lanes: job.lanes?.map((l) => l.map((r) => ({ ...r, path: undefined }))),
    },
    200,
  );
  // One request at a time measures round trips, not throughput: ~10k req/s is not expected there.
  const inFlight = job.lanes ? job.lanes.length : (job.connections ?? 50);
  const warning = inFlight >= 8 ? baselineWarning(result) : null;
  if (warning) console.log(warning);
  return result;
}

export const loadavg = () =>
  os
    .loadavg()
    .map((n) => n.toFixed(2))
    .join(' ');

export function machineLine(): string {
  return `${os.cpus().length} CPUs (${os.cpus()[0]?.model ?? '?'}), ${os.platform()} ${os.release()}, node ${process.version}, load ${loadavg()}`;
}

/** A row of figures: name, req/s, p50, p99, max (ms). */
export function row(name: string, r: Pick<LoadResult, 'rps' | 'p50' | 'p99'> & { max?: number }, width = 52): string {
  const f0 = (n: number) => n.toFixed(0).padStart(8);
  const f1 = (n: number) => (Number.isFinite(n) ? n.toFixed(1) : '-').padStart(8);
  return `  ${name.padEnd(width)} ${f0(r.rps)} ${f1(r.p50)} ${f1(r.p99)} ${r.max === undefined ? '       -' : f1(r.max)}`;
}

export const header = (title: string, width = 52) => `  ${title.padEnd(width)}    req/s   p50 ms   p99 ms   max ms`;
