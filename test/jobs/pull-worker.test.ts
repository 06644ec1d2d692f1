import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import anyTest, { type TestFn } from 'ava';
import { http, issueKey, recordAgent, startTestApp, type TestApp } from '../support/app.ts';
import { until as waitUntil } from '../support/until.ts';
import { quickAddJob } from 'graphile-worker';
import { buildChain, buildReceipt, headOf, unknownSignature } from '../support/receipts.ts';
import { RUN_TS } from '../support/commands.ts';
import { spawnChild } from '../support/children.ts';

// hosted-api §2.9, §4.7: the pull worker, run by the real job runner process (`npm run jobs`), fetches a
// real local HTTP server serving an agent's chain — with a malformed line and a forked item in it — ingests the good
// items once, writes receipt.pulled per accepted item, and records failures with backoff on the target.

const root = fileURLToPath(new URL('../..', import.meta.url));

interface Ctx {
  app: TestApp;
  key: string;
  server: Server;
  base: string;
  /** path → [status, body] */
  routes: Map<string, [number, string]>;
  hits: Map<string, number>;
}
const test = anyTest as TestFn<Ctx>;

test.before(async (t) => {
  const routes = new Map<string, [number, string]>();
  const hits = new Map<string, number>();
  const server = createServer((req, res) => {
    const path = req.url ?? '/';
    hits.set(path, (hits.get(path) ?? 0) + 1);
    const [status, body] = routes.get(path) ?? [404, 'no such feed'];
    res.writeHead(status, { 'content-type': path.endsWith('.json') ? 'application/json' : 'application/x-ndjson' }).end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const hostPort = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  // The gateway runs no job runner of its own: only the separate process below may run the pull worker.
  const app = await startTestApp({ env: { SVC_JOBS: 'off', SVC_OUTBOUND_ALLOW: hostPort } });
  t.context = { app, key: await issueKey(app), server, base: `http://${hostPort}`, routes, hits };
});

test.after.always(async (t) => {
  t.context.server?.close();
});

function startRunner(ctx: Ctx): { output(): string; stop(): Promise<void> } {
  const child = spawnChild(process.execPath, [RUN_TS, 'interfaces/jobs.ts'], {
    cwd: root,
    env: {
      ...process.env,
      DATABASE_URL: ctx.app.database.url,
      SVC_DATA_DIR: ctx.app.dataDir,
      SVC_LOG_LEVEL: 'info',
      SVC_OUTBOUND_ALLOW: new URL(ctx.base).host,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (out += d));
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  return {
    output: () => out,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      const force = setTimeout(() => child.kill('SIGKILL'), 15_000);
      await exited;
      clearTimeout(force);
    },
  };
}

async function until<T>(what: string, poll: { read: () => Promise<T>; done: (v: T) => boolean }): Promise<T> {
  const found = await waitUntil(
    what,
    async () => {
      const v = await poll.read();
      return poll.done(v) ? { v } : undefined;
    },
    { everyMs: 250 },
  );
  return found.v;
}

test.serial('the job runner process pulls a jsonl chain: good items once, the malformed and the forked one refused, failures backed off', async (t) => {
  const { app, key } = t.context;
  const { mint } = await recordAgent(app, key);
  const chain = buildChain(mint, 3);
  const fork = buildReceipt(mint, headOf(chain[0]!), { request: { method: 'GET', url: 'https://fork.example/' } });
  const lines = [JSON.stringify(chain[0]), JSON.stringify(chain[1]), '{"v":"0.1", this is not json', JSON.stringify(fork), JSON.stringify(chain[2])];
  t.context.routes.set('/feed.jsonl', [200, `${lines.join('\n')}\n`]);

  const json = await recordAgent(app, key);
  const jsonChain = buildChain(json.mint, 2);
  t.context.routes.set('/feed.json', [200, JSON.stringify([...jsonChain, { v: '0.1', agent: json.mint }])]);
  t.context.routes.set('/down.jsonl', [503, 'maintenance']);

  const created = await http(app, 'POST', `/v1/agents/${mint}/pull-targets`, { key, body: { url: `${t.context.base}/feed.jsonl`, interval_seconds: 10 } });
  t.is(created.status, 201, JSON.stringify(created.body));
  t.like(created.body, { agent: mint, format: 'jsonl', interval_seconds: 10, last_run_at: null });
  const jsonTarget = await http(app, 'POST', `/v1/agents/${json.mint}/pull-targets`, {
    key,
    body: { url: `${t.context.base}/feed.json`, format: 'json', interval_seconds: 10 },
  });
  t.is(jsonTarget.status, 201);
  const down = await http(app, 'POST', `/v1/agents/${json.mint}/pull-targets`, { key, body: { url: `${t.context.base}/down.jsonl`, interval_seconds: 10 } });
  t.is(down.status, 201);

  const runner = startRunner(t.context);
  try {
    const target = async (agent: string, id: string) =>
      (await http(app, 'GET', `/v1/agents/${agent}/pull-targets`, { key })).body.data.find((x: any) => x.id === id);
    const first = await until('the jsonl target ran', { read: () => target(mint, created.body.id), done: (x) => x?.last_run_at !== null });
    t.like(first, { last_status: 'ok', accepted_total: 3, rejected_total: 2, consecutive_failures: 0 });
    t.regex(first.last_error, /2 item\(s\) refused; first at index 2/);

    const list = await http(app, 'GET', `/v1/receipts/${mint}`, { key });
    t.deepEqual(
      list.body.data.map((r: any) => [r.nonce, r.receipt_hash, r.source]),
      [2, 1, 0].map((n) => [n, chain[n]!.receipt_hash, 'pull']),
    );
    const pulled = await http(app, 'GET', `/v1/events?kind=receipt.pulled&agent=${mint}`, { key });
    t.is(pulled.body.data.length, 3);
    t.true(pulled.body.data.every((e: any) => e.metadata.pull_target_id === created.body.id && e.metadata.source === 'pull'));
    t.like((await http(app, 'GET', `/v1/receipts/${mint}/verify-chain`, { key })).body, { ok: true, length: 3 });

    const j = await until('the json target ran', { read: () => target(json.mint, jsonTarget.body.id), done: (x) => x?.last_run_at !== null });
    t.like(j, { last_status: 'ok', accepted_total: 2, rejected_total: 1 });

    const failed = await until('the failing target ran', { read: () => target(json.mint, down.body.id), done: (x) => x?.last_run_at !== null });
    t.like(failed, { last_status: 'failed', consecutive_failures: 1, accepted_total: 0 });
    t.regex(failed.last_error, /HTTP 503/);
    // Backoff: the next run waits twice the interval.
    t.true(Date.parse(failed.next_run_at) - Date.parse(failed.last_run_at) >= 20_000, JSON.stringify(failed));

    // Per-target cadence: the jsonl feed is fetched again after its interval; nothing new is ingested twice.
    const hitsBefore = t.context.hits.get('/feed.jsonl') ?? 0;
    const again = await until('the second run', {
      read: () => target(mint, created.body.id),
      done: (x) => x.last_run_at !== first.last_run_at,
    });
    t.true((t.context.hits.get('/feed.jsonl') ?? 0) > hitsBefore);
    t.true(Date.parse(again.last_run_at) - Date.parse(first.last_run_at) >= 10_000, 'not before its interval');
    t.like(again, { accepted_total: 3, rejected_total: 4 });
    t.is((await http(app, 'GET', `/v1/events?kind=receipt.pulled&agent=${mint}`, { key })).body.data.length, 3, 'no event for an item seen before');

    // The retry job, in the same runner process: a pending check whose last retry is due is decided (not found → mismatch).
    const pending = buildReceipt(mint, headOf(chain[2]!), { tx_sig: unknownSignature() });
    t.is((await http(app, 'POST', `/v1/receipts/${mint}`, { key, body: pending })).body.verification.status, 'pending');
    await app.database.orm.em
      .fork()
      .execute(`update receipts set verification_attempts = 7, verify_after = now() - interval '1 second' where receipt_hash = ?`, [pending.receipt_hash]);
    await quickAddJob({ connectionString: app.database.url }, 'verify_receipts', {});
    const decided = await until('the retry job decided the check', {
      read: () => http(app, 'GET', `/v1/receipts/by-hash/${pending.receipt_hash}`, { key }),
      done: (r) => r.body.verification.status !== 'pending',
    });
    t.is(decided.body.verification.status, 'mismatch', JSON.stringify(decided.body.verification));
    t.regex(decided.body.verification.reason, /not found on the ledger after 8 checks/);
    t.is((await http(app, 'GET', `/v1/events?kind=receipt.mismatch&agent=${mint}`, { key })).body.data.length, 1);
  } finally {
    await runner.stop();
  }
});

test.serial('pull targets: floor, format, SSRF guard, one per URL, owner-only, delete', async (t) => {
  const { app, key } = t.context;
  const { mint } = await recordAgent(app, key);
  const other = await issueKey(app);
  const url = `${t.context.base}/x.jsonl`;
  // hosted-api §4.7 spells the create singular; the plural collection path takes it too (the same procedure)
  const create = (body: Record<string, unknown>, k = key, path = 'pull-target') => http(app, 'POST', `/v1/agents/${mint}/${path}`, { key: k, body });

  t.is((await create({ url, interval_seconds: 9 })).status, 400, 'the interval floor is 10 s');
  t.is((await create({ url, format: 'xml' })).status, 400);
  const refused = await create({ url: 'http://127.0.0.1:9/feed' });
  t.is(refused.status, 400);
  t.is(refused.body.details.issues[0].path, 'url');
  t.is((await create({ url: 'http://10.0.0.1/feed' })).status, 400, 'private addresses are refused');
  t.is((await create({ url }, other)).status, 404, 'another principal’s agent');

  const made = await create({ url });
  t.is(made.status, 201);
  t.like(made.body, { interval_seconds: 60, format: 'jsonl' });
  const dup = await create({ url });
  t.is(dup.status, 409);
  t.is(dup.body.error, 'conflict');
  const dupPlural = await create({ url }, key, 'pull-targets');
  t.is(dupPlural.status, 409, 'the plural path is the same route');
  t.is(dupPlural.body.error, 'conflict');
  t.is((await create({ url, interval_seconds: 9 }, key, 'pull-targets')).status, 400);
  const viaPlural = await create({ url: `${t.context.base}/plural.jsonl` }, key, 'pull-targets');
  t.is(viaPlural.status, 201);
  t.is((await http(app, 'DELETE', `/v1/agents/${mint}/pull-targets/${viaPlural.body.id}`, { key })).status, 204);

  t.is((await http(app, 'GET', `/v1/agents/${mint}/pull-targets`, { key: other })).status, 404);
  t.is((await http(app, 'DELETE', `/v1/agents/${mint}/pull-targets/${made.body.id}`, { key: other })).status, 404);
  t.is((await http(app, 'DELETE', `/v1/agents/${mint}/pull-targets/${made.body.id}`, { key })).status, 204);
  t.is((await http(app, 'DELETE', `/v1/agents/${mint}/pull-targets/${made.body.id}`, { key })).status, 404);
  t.deepEqual((await http(app, 'GET', `/v1/agents/${mint}/pull-targets`, { key })).body.data, []);

  // GraphQL: the same service.
  const gql = await http(app, 'POST', '/graphql', {
    key,
    body: { query: `mutation($m: String!, $u: String!) { createPullTarget(mint: $m, url: $u, intervalSeconds: 5) { id } }`, variables: { m: mint, u: url } },
  });
  t.is(gql.body.errors[0].extensions.code, 'invalid_request');
  const ok = await http(app, 'POST', '/graphql', {
    key,
    body: {
      query: `mutation($m: String!, $u: String!) { createPullTarget(mint: $m, url: $u, format: JSON, intervalSeconds: 30) { id format intervalSeconds } }`,
      variables: { m: mint, u: url },
    },
  });
  t.like(ok.body.data.createPullTarget, { format: 'JSON', intervalSeconds: 30 });
  const listed = await http(app, 'POST', '/graphql', {
    key,
    body: { query: `query($m: String!) { pullTargets(mint: $m) { id url } }`, variables: { m: mint } },
  });
  t.deepEqual(
    listed.body.data.pullTargets.map((p: any) => p.url),
    [url],
  );
});
