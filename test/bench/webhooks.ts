// Webhook deliveries (DECISIONS "Webhooks"): how many deliveries per second the job runner makes to a local
// receiver, and the time from an event's commit to its receipt, with 1 and with 100 subscriptions.
// Run on demand: npm run bench:webhooks   (BENCH_EVENTS_ONE=400 BENCH_EVENTS_MANY=30 BENCH_APPENDERS=8)
//
// One app (embedded PostgreSQL, the job runner inline as `npm start` runs it) in this process and a receiver answering
// 204 in a process of its own (test/bench/support/receiver.ts; arrival and commit times on one epoch clock). Each round appends its events from BENCH_APPENDERS concurrent writers, each event in its own
// transaction (as services do), noting the commit time; the receiver notes when each (subscription, event) arrives. Latency = arrival − commit of its event;
// throughput = deliveries / (last arrival − first commit). Same-run baseline: the same number of signed POSTs made
// straight through the outbound port at the runner's concurrency (8), i.e. the HTTP cost alone without the queue;
// and appends of a kind nobody subscribed to, i.e. an append without deliveries. A plain fastify route answering
// {"ok":true} is measured with the benches' load generator (autocannon in its own process) as the machine's check.
import os from 'node:os';
import pino from 'pino';
import { newId } from '../../domain/shared/ids.ts';
import { signWebhook } from '../../domain/webhooks/signature.ts';
import { removeDataDir, startTestApp, syntheticEvent } from '../support/app.ts';
import { header, machineLine, plainBaseline, row, startPlainServer } from './support/load.ts';
import { epochNow, startReceiverProcess } from './support/receiver.ts';

const EVENTS_ONE = Number(process.env.BENCH_EVENTS_ONE ?? 400);
const EVENTS_MANY = Number(process.env.BENCH_EVENTS_MANY ?? 30);
/** transactions appending at once (appends serialise on the events lock; several keep it busy) */
const APPENDERS = Number(process.env.BENCH_APPENDERS ?? 8);
const load = () =>
  os
    .loadavg()
    .map((n) => n.toFixed(2))
    .join(' ');
const loadBefore = load();

const receiver = await startReceiverProcess();
const allow = `127.0.0.1:${receiver.port}`;

const app = await startTestApp({
  env: { SVC_OUTBOUND_ALLOW: allow, SVC_LOG_LEVEL: 'silent' },
  appOptions: { ledgers: false, logger: pino({ level: 'silent' }) },
});
const admin = await app.services.access.issueKey({ network: 'chain-devnet', role: 'admin' });
const caller = { network: 'chain-devnet' as const, role: 'admin' as const, owner: `key:${admin.id}`, ownerWallet: null };

const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;

async function round(kind: string, subscriptions: number, events: number) {
  for (let i = 0; i < subscriptions; i++) await app.services.webhooks.create(caller, admin.id, { url: `http://${allow}/${kind}/${i}`, events: [kind] });
  const committed = new Map<string, number>();
  const expected = subscriptions * events;
  const startReceived = await receiver.count();
  const started = epochNow();
  let next = 0;
  const appender = async () => {
    while (next < events) {
      const i = next++;
      const id = newId();
      await app.database.store.transaction((tx) =>
        tx.events.append(
          syntheticEvent({
            id,
            kind,
            phase: 'confirmed',
            network: 'chain-devnet',
            agentAsset: null,
            owner: caller.owner,
            metadata: { i },
            createdAt: new Date(),
          }),
        ),
      );
      committed.set(id, epochNow());
    }
  };
  await Promise.all(Array.from({ length: APPENDERS }, appender));
  const appended = epochNow();
  const deadline = Date.now() + 600_000;
  for (;;) {
    const got = (await receiver.count()) - startReceived;
    if (got >= expected) break;
    if (Date.now() > deadline) throw new Error(`${kind}: ${got} of ${expected} deliveries arrived`);
    await new Promise((r) => setTimeout(r, 20));
  }
  const arrivals = await receiver.arrivals();
  const latencies: number[] = [];
  let last = 0;
  let duplicates = 0;
  for (const [id, at] of committed) {
    const times = arrivals.get(id) ?? [];
    duplicates += Math.max(0, times.length - subscriptions);
    for (const t of times) {
      latencies.push(t - at);
      last = Math.max(last, t);
    }
  }
  latencies.sort((a, b) => a - b);
  const seconds = (last - started) / 1000;
  return {
    subscriptions,
    events,
    deliveries: latencies.length,
    duplicates,
    append_per_s: Math.round(events / ((appended - started) / 1000)),
    deliveries_per_s: Math.round(latencies.length / seconds),
    p50_ms: Math.round(pct(latencies, 50)),
    p99_ms: Math.round(pct(latencies, 99)),
    max_ms: Math.round(latencies[latencies.length - 1]!),
  };
}

/** Appends alone, to a kind no subscription matches: what the outbox adds to an append is the difference. */
async function appendsOnly(events: number) {
  let next = 0;
  const started = performance.now();
  const appender = async () => {
    while (next < events) {
      const i = next++;
      await app.database.store.transaction((tx) =>
        tx.events.append(
          syntheticEvent({
            id: newId(),
            kind: 'bench.nobody',
            phase: 'confirmed',
            network: 'chain-devnet',
            agentAsset: null,
            owner: caller.owner,
            metadata: { i },
            createdAt: new Date(),
          }),
        ),
      );
    }
  };
  await Promise.all(Array.from({ length: APPENDERS }, appender));
  return { events, append_per_s: Math.round(events / ((performance.now() - started) / 1000)) };
}

/** Baseline: `count` signed POSTs straight through the outbound port, 8 at a time (the runner's concurrency). */
async function baseline(count: number) {
  const secret = 'whsec_3fQ9xK2mLp7VbN8cR1tZ4wY6uH0jE5sD';
  let next = 0;
  const started = performance.now();
  const worker = async () => {
    while (next < count) {
      next++;
      const body = JSON.stringify({ id: newId(), type: 'bench.baseline', data: {} });
      const headers = { ...signWebhook({ secret, body, timestamp: Math.floor(Date.now() / 1000), id: newId() }), 'content-type': 'application/json' };
      const r = await app.outbound.request({ url: `http://${allow}/baseline`, method: 'POST', headers, body, timeoutMs: 15_000 });
      if (!r.ok || r.status !== 204) throw new Error(`baseline POST failed: ${JSON.stringify(r)}`);
    }
  };
  await Promise.all(Array.from({ length: 8 }, worker));
  return { posts: count, posts_per_s: Math.round(count / ((performance.now() - started) / 1000)) };
}

const plain = await startPlainServer();
try {
  const plainFig = await plainBaseline(plain, { generator: 'cannon', connections: 50, duration: Number(process.env.BENCH_SECONDS ?? 5) });
  console.log(`machine: ${machineLine()}`);
  console.log(header('autocannon 50 connections (in its own process)'));
  console.log(row('plain fastify route, fixed {"ok":true}', plainFig));
  const warm = await round('bench.warmup', 1, 20);
  void warm;
  const base = await baseline(2000);
  const unsubscribed = await appendsOnly(EVENTS_ONE);
  const one = await round('bench.one', 1, EVENTS_ONE);
  const many = await round('bench.many', 100, EVENTS_MANY);
  console.log(
    JSON.stringify(
      {
        machine: { cpus: os.cpus().length, load_before: loadBefore, load_after: load() },
        baseline_outbound_posts: base,
        baseline_appends_without_subscribers: unsubscribed,
        one_subscription: { ...one, vs_baseline: +(one.deliveries_per_s / base.posts_per_s).toFixed(3) },
        hundred_subscriptions: { ...many, vs_baseline: +(many.deliveries_per_s / base.posts_per_s).toFixed(3) },
      },
      null,
      2,
    ),
  );
} finally {
  await app.close();
  await removeDataDir(app.dataDir);
  await plain.close();
  await receiver.close();
}
