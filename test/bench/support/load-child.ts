// The load generator's own process (forked by test/bench/support/load.ts): it gets one job over IPC, runs it against
// the given URL and answers its figures, so no generator shares an event loop or a core's time slice with a server
// it measures. Two generators:
// - 'cannon': autocannon, one fixed request (method, headers, body), `connections` connections for `duration` s;
// - 'closed': a closed loop over node:http keep-alive connections for requests that differ (body, headers, path):
//   `requests` are each sent exactly once by `connections` workers taking the next one in turn; `lanes` are sequences
//   each sent in order by one worker (e.g. one hash chain per lane); with neither, the fixed request for `duration` s.
import http from 'node:http';
import autocannon from 'autocannon';
import type { LoadJob, LoadRequest, LoadResult } from './load.ts';

const percentile = (sorted: number[], p: number) => sorted[Math.max(0, Math.ceil(p * sorted.length) - 1)] ?? NaN;

async function cannon(job: LoadJob): Promise<LoadResult> {
  const result = await autocannon({
    url: job.url,
    method: (job.method ?? 'GET') as 'GET',
    headers: job.headers,
    body: job.body,
    connections: job.connections,
    duration: job.duration,
  });
  const statuses: Record<string, number> = {};
  for (const [code, s] of Object.entries(result.statusCodeStats ?? {})) statuses[code] = s.count ?? 0;
  if (result.errors) statuses.errors = result.errors;
  if (result.timeouts) statuses.timeouts = result.timeouts;
  const total = Object.values(statuses).reduce((n, c) => n + c, 0);
  return {
    generator: 'autocannon',
    rps: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    max: result.latency.max,
    total,
    seconds: result.duration,
    statuses,
  };
}

async function closed(job: LoadJob): Promise<LoadResult> {
  const base = new URL(job.url);
  const agent = new http.Agent({ keepAlive: true, maxSockets: job.connections, maxFreeSockets: job.connections });
  const latencies: number[] = [];
  const statuses: Record<string, number> = {};
  let odd: string | undefined;
  const expect = job.expect;

  const send = (r: LoadRequest) =>
    new Promise<void>((resolve) => {
      const body = r.body ?? job.body;
      const headers: Record<string, string> = { ...job.headers, ...r.headers };
      if (body !== undefined) headers['content-length'] = String(Buffer.byteLength(body));
      const url = r.path ? new URL(r.path, base) : base;
      const t0 = performance.now();
      const done = (status: string, text: string) => {
        latencies.push(performance.now() - t0);
        statuses[status] = (statuses[status] ?? 0) + 1;
        if (expect !== undefined && status !== String(expect)) odd ??= `${status} ${text.slice(0, 400)}`;
        resolve();
      };
      const req = http.request(url, { method: job.method ?? 'GET', headers, agent }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => done(String(res.statusCode), Buffer.concat(chunks).toString('utf8')));
        res.on('error', (e) => done('errors', String(e)));
      });
      req.on('error', (e) => done('errors', String(e)));
      req.end(body);
    });

  const started = performance.now();
  if (job.lanes) {
    await Promise.all(
      job.lanes.map(async (lane) => {
        for (const r of lane) await send(r);
      }),
    );
  } else if (job.requests) {
    const requests = job.requests;
    let next = 0;
    await Promise.all(
      Array.from({ length: Math.min(job.connections, requests.length) }, async () => {
        while (next < requests.length) await send(requests[next++]!);
      }),
    );
  } else {
    const until = started + job.duration * 1000;
    await Promise.all(
      Array.from({ length: job.connections }, async () => {
        while (performance.now() < until) await send({});
      }),
    );
  }
  const seconds = (performance.now() - started) / 1000;
  agent.destroy();
  latencies.sort((a, b) => a - b);
  return {
    generator: 'closed-loop',
    rps: latencies.length / seconds,
    p50: percentile(latencies, 0.5),
    p99: percentile(latencies, 0.99),
    max: latencies[latencies.length - 1] ?? NaN,
    total: latencies.length,
    seconds,
    statuses,
    samples: latencies,
    ...(odd !== undefined ? { odd } : {}),
  };
}

process.once('message', (job: LoadJob) => {
  (job.generator === 'cannon' ? cannon(job) : closed(job)).then(
    (result) => process.send!({ ok: true, result }, () => process.exit(0)),
    (e: unknown) => process.send!({ ok: false, error: e instanceof Error ? (e.stack ?? e.message) : String(e) }, () => process.exit(1)),
  );
});
