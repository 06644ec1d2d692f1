// Live fan-out (bench:events): 10 / 100 / 1,000 graphql-ws subscribers of the gateway
// against a plain server doing the same path, in the same run, on the same PostgreSQL.
// Run on demand: npm run bench:events   (BENCH_EVENTS_WRITES=100 BENCH_EVENTS_SUBSCRIBERS=10,100,1000
//                                         BENCH_EVENTS_INTERVAL_MS=100 BENCH_EVENTS_PROFILE=<dir>)
//
// Four processes, so no figure shares an event loop with another: the gateway (startTestApp: embedded PostgreSQL,
// ledger) in a child; the plain server (fastify + ws + pg: INSERT + pg_notify → LISTEN → one catch-up SELECT →
// payload serialised once → ws.send of the graphql-ws `next` envelope to each matching subscriber, the
// graphql-transport-ws protocol spoken minimally) in a child on the gateway's database; the subscribers (one
// graphql-ws subscription per socket, minimal client) in a child; this process writes. Per side and subscriber count:
// open the sockets, warm up until every socket got an event, then BENCH_EVENTS_WRITES writes paced every
// BENCH_EVENTS_INTERVAL_MS (a REST POST /v1/payment-links on the gateway, POST /events on the plain server). Latency =
// a socket's receipt − the write's answer at the writer (one epoch clock; negative when a socket gets the event before
// the writer reads its answer). CPU per write = process.cpuUsage() of the server's process across the writes and their
// deliveries / writes; CPU per delivery = (CPU per write − CPU per write with no subscriber) / subscribers, the goal's
// figure (≤ 2× plain at the largest count). Missed = expected receipts that never came (must be 0). Sides alternate,
// plain first. RATIO rows: p99 per subscriber count (goal p99 ≤ 50 ms), CPU per delivery at the largest count.
import { fork, type ChildProcess } from 'node:child_process';
import { monitorEventLoopDelay, PerformanceObserver } from 'node:perf_hooks';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import Fastify from 'fastify';
import pg from 'pg';
import pino from 'pino';
import WebSocket, { WebSocketServer } from 'ws';
import { newId } from '../../domain/shared/ids.ts';
import { machineLine } from './support/load.ts';

const SELF = fileURLToPath(import.meta.url);
const ROLE = process.env.BENCH_EVENTS_ROLE;
const epochNow = () => performance.timeOrigin + performance.now();
const QUERY = 'subscription { events { id kind network agentAsset metadata createdAt } }';

type Message = Record<string, any>;

/** A child answering `{ id, ... }` to each `{ id, cmd, ... }`. */
// biome-ignore lint/suspicious/noConfusingVoidType: a handler with nothing to add returns nothing (void), answered as `{}`
function serve(handlers: Record<string, (m: Message) => Promise<Message | void> | Message | void>): void {
  process.on('message', async (m: Message) => {
    try {
      const out = (await handlers[m.cmd]!(m)) ?? {};
      process.send!({ id: m.id, ...out });
    } catch (e) {
      process.send!({ id: m.id, error: String((e as Error).stack ?? e) });
    }
  });
}

interface Child {
  ready: Message;
  ask(cmd: string, body?: Message): Promise<Message>;
  close(): Promise<void>;
}

async function spawn(role: string, env: Record<string, string> = {}): Promise<Child> {
  const child: ChildProcess = fork(SELF, [], {
    // BENCH_EVENTS_PROFILE=<dir>: the gateway child writes a V8 CPU profile there (what a write and its fan-out cost)
    execArgv: [
      '--import',
      'tsx',
      ...(role === 'gateway' && process.env.BENCH_EVENTS_PROFILE ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_EVENTS_PROFILE}`] : []),
    ],
    env: { ...process.env, ...env, BENCH_EVENTS_ROLE: role },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const ready = await new Promise<Message>((resolve, reject) => {
    child.once('message', (m: Message) => resolve(m));
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`${role} exited with ${code}`)));
  });
  let seq = 0;
  const pending = new Map<number, (m: Message) => void>();
  child.on('message', (m: Message) => {
    if (m.id === undefined) return;
    pending.get(m.id)?.(m);
    pending.delete(m.id);
  });
  const ask = (cmd: string, body: Message = {}) =>
    new Promise<Message>((resolve, reject) => {
      const id = ++seq;
      pending.set(id, (m) => (m.error ? reject(new Error(`${role}: ${m.error}`)) : resolve(m)));
      child.send({ ...body, id, cmd });
    });
  return {
    ready,
    ask,
    close: async () => {
      if (child.exitCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      await ask('close').catch(() => {});
      await exited;
    },
  };
}

// What bounds the tail: each server's event-loop stalls (the longest delay since the last `cpu` call) and its GC pauses
// (milliseconds so far). At 1,000 subscribers one write's deliveries are 1 % of the samples, so p99 is about the second
// slowest write: a stall or pause during one write's fan-out sets it.
let loop: ReturnType<typeof monitorEventLoopDelay> | undefined;
let gcMs = 0;
function watchStalls(): void {
  loop = monitorEventLoopDelay({ resolution: 5 });
  loop.enable();
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) gcMs += e.duration;
  }).observe({ entryTypes: ['gc'] });
}
const cpu = () => {
  const u = process.cpuUsage();
  const loopMaxMs = loop ? loop.max / 1e6 : 0;
  loop?.reset();
  return { cpu_us: u.user + u.system, loop_max_ms: loopMaxMs, gc_ms: gcMs };
};

// ---------------------------------------------------------------------------------------------------------------
// The gateway, as `npm start` runs it (embedded PostgreSQL, ledger), with rate limits raised for one key's 1,000 sockets.

async function gateway(): Promise<void> {
  const { issueKey, recordAgent, removeDataDir, startTestApp } = await import('../support/app.ts');
  const limits = { 'events.read': 1_000_000, graphql: 1_000_000, default: 1_000_000 };
  const app = await startTestApp({ env: { SVC_RATE_LIMITS: JSON.stringify(limits) }, appOptions: { logger: pino({ level: 'silent' }) } });
  const key = await issueKey(app);
  const { mint } = await recordAgent(app, key);
  watchStalls();
  serve({
    cpu,
    close: async () => {
      await app.close();
      await removeDataDir(app.dataDir);
      setImmediate(() => process.exit(0));
    },
  });
  process.send!({ url: app.url, databaseUrl: app.database.url, key, agent: mint });
}

// ---------------------------------------------------------------------------------------------------------------
// The plain server: fastify + ws + pg, the same path without the gateway.

async function plainServer(): Promise<void> {
  const url = process.env.BENCH_DATABASE_URL!;
  const pool = new pg.Pool({ connectionString: url, max: 10 });
  await pool.query(`CREATE TABLE IF NOT EXISTS bench_plain_events (
    seq bigserial PRIMARY KEY, id text NOT NULL, kind text NOT NULL, network text NOT NULL, owner text NOT NULL,
    agent_asset text, metadata jsonb NOT NULL, created_at timestamptz NOT NULL DEFAULT now())`);
  const app = Fastify({ logger: false });
  app.post<{ Body: { owner: string; metadata: Record<string, unknown> } }>('/events', async (req, reply) => {
    const id = newId();
    await pool.query(
      `WITH ins AS (INSERT INTO bench_plain_events (id, kind, network, owner, metadata) VALUES ($1, 'payment_link.created', 'chain-devnet', $2, $3) RETURNING seq)
       SELECT pg_notify('bench_plain', (SELECT seq FROM ins)::text)`,
      [id, req.body.owner, req.body.metadata],
    );
    return reply.status(201).send({ id });
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  watchStalls();

  interface Sub {
    socket: WebSocket;
    head: string;
  }
  const byOwner = new Map<string, Set<Sub>>();
  const wss = new WebSocketServer({ server: app.server, path: '/graphql', handleProtocols: () => 'graphql-transport-ws' });
  wss.on('connection', (socket) => {
    let owner: string | undefined;
    const subs = new Map<string, Sub>();
    socket.on('message', (data) => {
      const m = JSON.parse(String(data)) as Message;
      if (m.type === 'connection_init') {
        owner = String(m.payload?.authorization ?? '');
        socket.send('{"type":"connection_ack"}');
      } else if (m.type === 'subscribe' && owner !== undefined) {
        const sub = { socket, head: `{"id":${JSON.stringify(m.id)},"type":"next","payload":` };
        subs.set(m.id, sub);
        let set = byOwner.get(owner);
        if (!set) {
          set = new Set();
          byOwner.set(owner, set);
        }
        set.add(sub);
      } else if (m.type === 'complete') {
        const sub = subs.get(m.id);
        if (sub) byOwner.get(owner!)?.delete(sub);
        subs.delete(m.id);
      } else if (m.type === 'ping') socket.send('{"type":"pong"}');
    });
    socket.on('close', () => {
      for (const sub of subs.values()) byOwner.get(owner!)?.delete(sub);
    });
  });

  let last = 0n;
  let pumping = false;
  let again = false;
  const pump = async () => {
    if (pumping) {
      again = true;
      return;
    }
    pumping = true;
    try {
      do {
        again = false;
        const { rows } = await pool.query(
          'SELECT seq, id, kind, network, owner, agent_asset, metadata, created_at FROM bench_plain_events WHERE seq > $1 ORDER BY seq LIMIT 500',
          [last.toString()],
        );
        for (const r of rows) {
          last = BigInt(r.seq);
          const subs = byOwner.get(r.owner);
          if (!subs?.size) continue;
          const event = { id: r.id, kind: r.kind, network: r.network, agentAsset: r.agent_asset, metadata: r.metadata, createdAt: r.created_at.toISOString() };
          const payload = JSON.stringify({ data: { events: event } });
          for (const sub of subs) sub.socket.send(`${sub.head}${payload}}`);
        }
      } while (again);
    } finally {
      pumping = false;
    }
  };
  last = BigInt((await pool.query('SELECT coalesce(max(seq), 0) AS m FROM bench_plain_events')).rows[0].m);
  const listener = new pg.Client({ connectionString: url });
  await listener.connect();
  listener.on('notification', () => void pump());
  await listener.query('LISTEN bench_plain');

  serve({
    cpu,
    close: async () => {
      for (const c of wss.clients) c.terminate();
      await listener.end();
      await app.close();
      await pool.end();
      setImmediate(() => process.exit(0));
    },
  });
  process.send!({ url: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}` });
}

// ---------------------------------------------------------------------------------------------------------------
// The subscribers: N sockets, one graphql-ws subscription each, noting when each write's event arrives.

async function subscribers(): Promise<void> {
  let sockets: WebSocket[] = [];
  /** write id (metadata.payment_link_id) → arrival times */
  let arrivals = new Map<string, number[]>();
  let errors: string[] = [];
  const ID = /"payment_link_id":"([^"]+)"/;
  serve({
    open: async (m) => {
      const { url, key, n } = m as { url: string; key: string; n: number };
      const ws = `${url.replace(/^http/, 'ws')}/graphql`;
      const one = () =>
        new Promise<WebSocket>((resolve, reject) => {
          const socket = new WebSocket(ws, 'graphql-transport-ws');
          socket.on('error', reject);
          socket.on('open', () => socket.send(JSON.stringify({ type: 'connection_init', payload: { authorization: key } })));
          socket.on('message', (data) => {
            const at = epochNow();
            const text = String(data);
            if (text.includes('"type":"next"')) {
              const id = ID.exec(text)?.[1];
              if (id) {
                let list = arrivals.get(id);
                if (!list) {
                  list = [];
                  arrivals.set(id, list);
                }
                list.push(at);
              } else errors.push(text.slice(0, 300));
            } else if (text.includes('"type":"connection_ack"')) {
              socket.send(JSON.stringify({ id: '1', type: 'subscribe', payload: { query: QUERY } }));
              resolve(socket);
            } else if (text.includes('"type":"ping"')) socket.send('{"type":"pong"}');
            else if (!text.includes('"type":"pong"')) errors.push(text.slice(0, 300));
          });
          socket.on('close', (code, reason) => {
            if (code !== 1000 && code !== 1005) errors.push(`closed ${code} ${String(reason)}`);
          });
        });
      for (let i = 0; i < n; i += 50) sockets.push(...(await Promise.all(Array.from({ length: Math.min(50, n - i) }, one))));
    },
    count: (m) => ({ count: arrivals.get(m.write as string)?.length ?? 0 }),
    collect: (m) => {
      const out: Record<string, number[]> = {};
      for (const w of m.writes as string[]) out[w] = arrivals.get(w) ?? [];
      return { arrivals: out, errors };
    },
    closeAll: async () => {
      await Promise.all(
        sockets.map(
          (s) =>
            new Promise<void>((resolve) => {
              if (s.readyState === WebSocket.CLOSED) return resolve();
              s.once('close', () => resolve());
              s.close(1000);
            }),
        ),
      );
      sockets = [];
      arrivals = new Map();
      errors = [];
    },
    close: () => {
      setImmediate(() => process.exit(0));
    },
  });
  process.send!({ ready: true });
}

// ---------------------------------------------------------------------------------------------------------------
// The run.

interface Side {
  name: 'gateway' | 'plain';
  server: Child;
  url: string;
  key: string;
  /** one write; resolves with the id its event carries in metadata.payment_link_id */
  write(label: string): Promise<string>;
}

const pct = (sorted: number[], p: number) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]! : NaN);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function measure(side: Side, subs: Child, load: { n: number; writes: number; intervalMs: number }) {
  const { n, writes, intervalMs } = load;
  await subs.ask('open', { url: side.url, key: side.key, n });
  // Live only once attached: warm up until every socket got a write's event.
  let live = n === 0;
  for (let i = 0; i < 100 && !live; i++) {
    const id = await side.write('warm-up');
    const until = Date.now() + 2000;
    while (Date.now() < until) {
      if ((await subs.ask('count', { write: id })).count >= n) {
        live = true;
        break;
      }
      await sleep(20);
    }
  }
  if (!live) throw new Error(`${side.name}: ${n} subscribers never all live`);
  await sleep(200);
  const before = await side.server.ask('cpu');
  const cpu0 = before.cpu_us as number;
  const answered = new Map<string, number>();
  const started = performance.now();
  for (let i = 0; i < writes; i++) {
    const due = started + i * intervalMs;
    const wait = due - performance.now();
    if (wait > 0) await sleep(wait);
    const id = await side.write(`w${i}`);
    answered.set(id, epochNow());
  }
  const ids = [...answered.keys()];
  const deadline = Date.now() + 15_000;
  let collected: Message;
  for (;;) {
    collected = await subs.ask('collect', { writes: ids });
    const got = Object.values(collected.arrivals as Record<string, number[]>).reduce((s, a) => s + a.length, 0);
    if (got >= n * writes || Date.now() > deadline) break;
    await sleep(100);
  }
  const after = await side.server.ask('cpu');
  const cpu1 = after.cpu_us as number;
  await subs.ask('closeAll');
  const latencies: number[] = [];
  /** per write, its last delivery */
  const lastByWrite: number[] = [];
  let missed = 0;
  let duplicates = 0;
  for (const [id, at] of answered) {
    const times = (collected.arrivals as Record<string, number[]>)[id] ?? [];
    missed += Math.max(0, n - times.length);
    duplicates += Math.max(0, times.length - n);
    for (const t of times) latencies.push(t - at);
    if (times.length) lastByWrite.push(Math.max(...times) - at);
  }
  lastByWrite.sort((a, b) => b - a);
  latencies.sort((a, b) => a - b);
  const cpuPerWrite = (cpu1 - cpu0) / 1000 / writes;
  return {
    n,
    p50: pct(latencies, 50),
    p99: pct(latencies, 99),
    max: latencies.at(-1) ?? NaN,
    cpuPerWrite,
    missed,
    duplicates,
    errors: (collected.errors as string[]).slice(0, 3),
    loopMaxMs: after.loop_max_ms as number,
    gcPerWrite: ((after.gc_ms as number) - (before.gc_ms as number)) / writes,
    slowestWrites: lastByWrite.slice(0, 3),
    writesOver50: lastByWrite.filter((x) => x > 50).length,
  };
}

async function main(): Promise<void> {
  const writes = Number(process.env.BENCH_EVENTS_WRITES ?? 100);
  const intervalMs = Number(process.env.BENCH_EVENTS_INTERVAL_MS ?? 100);
  const counts = (process.env.BENCH_EVENTS_SUBSCRIBERS ?? '10,100,1000').split(',').map(Number);
  const gw = await spawn('gateway');
  const plainChild = await spawn('plain', { BENCH_DATABASE_URL: gw.ready.databaseUrl as string });
  const subs = await spawn('subscribers');
  const { http, linkBody } = await import('../support/app.ts');
  const gatewaySide: Side = {
    name: 'gateway',
    server: gw,
    url: gw.ready.url as string,
    key: gw.ready.key as string,
    write: async (label) => {
      const res = await http({ url: gw.ready.url as string } as never, 'POST', '/v1/payment-links', {
        key: gw.ready.key as string,
        body: linkBody(gw.ready.agent as string, { label }),
      });
      if (res.status !== 201) throw new Error(`gateway write: ${res.status} ${JSON.stringify(res.body)}`);
      return res.body.id as string;
    },
  };
  const plainKey = 'plain-owner';
  const plainSide: Side = {
    name: 'plain',
    server: plainChild,
    url: plainChild.ready.url as string,
    key: plainKey,
    write: async () => {
      const id = newId();
      const res = await fetch(`${plainChild.ready.url}/events`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ owner: plainKey, metadata: { payment_link_id: id, label: 'plain' } }),
      });
      if (res.status !== 201) throw new Error(`plain write: ${res.status}`);
      await res.arrayBuffer();
      return id;
    },
  };
  try {
    console.log(`machine: ${machineLine()} — shared with other work: read the ratios`);
    console.log(`${writes} writes per side, one every ${intervalMs} ms; latency from the write's answer to each socket's receipt`);
    console.log(
      '  subscribers  side       p50 ms   p99 ms   max ms   CPU/write ms   CPU/delivery µs   missed   (CPU/delivery: CPU/write above 0 subscribers, / subscribers)',
    );
    type Figures = Awaited<ReturnType<typeof measure>>;
    const results: { n: number; gateway: Figures; plain: Figures }[] = [];
    // The writes alone (no subscriber): what a delivery costs is the CPU per write above this, divided by the subscribers.
    const idle = {
      plain: await measure(plainSide, subs, { n: 0, writes, intervalMs }),
      gateway: await measure(gatewaySide, subs, { n: 0, writes, intervalMs }),
    };
    const f = (x: number, d = 1) => x.toFixed(d).padStart(8);
    for (const [name, r] of [
      ['gateway', idle.gateway],
      ['plain', idle.plain],
    ] as const) {
      console.log(
        `  ${'0'.padStart(11)}  ${name.padEnd(8)} ${'-'.padStart(8)} ${'-'.padStart(8)} ${'-'.padStart(8)}   ${f(r.cpuPerWrite, 2).padStart(12)}   ${'-'.padStart(15)}   ${String(r.missed).padStart(6)}`,
      );
    }
    const perDelivery = (r: Figures, base: Figures) => ((r.cpuPerWrite - base.cpuPerWrite) * 1000) / r.n;
    for (const n of counts) {
      const plain = await measure(plainSide, subs, { n, writes, intervalMs });
      const gateway = await measure(gatewaySide, subs, { n, writes, intervalMs });
      results.push({ n, gateway, plain });
      for (const [name, r] of [
        ['gateway', gateway],
        ['plain', plain],
      ] as const) {
        console.log(
          `  ${String(n).padStart(11)}  ${name.padEnd(8)} ${f(r.p50)} ${f(r.p99)} ${f(r.max)}   ${f(r.cpuPerWrite, 2).padStart(12)}   ${f(perDelivery(r, idle[name])).padStart(15)}   ${String(r.missed).padStart(6)}${r.duplicates ? ` dup ${r.duplicates}` : ''}${r.errors.length ? ` errors: ${r.errors.join(' | ')}` : ''}`,
        );
      }
      // what bounds the tail: the server's longest event-loop stall, its GC, and the writes whose last delivery was late
      for (const [name, r] of [
        ['gateway', gateway],
        ['plain', plain],
      ] as const) {
        console.log(
          `               ${name.padEnd(8)} tail: event loop max ${r.loopMaxMs.toFixed(0)} ms, GC ${r.gcPerWrite.toFixed(2)} ms/write; last delivery of the slowest writes ${r.slowestWrites.map((x) => x.toFixed(0)).join(', ')} ms; ${r.writesOver50} of ${writes} writes past 50 ms`,
        );
      }
    }
    for (const { n, gateway, plain } of results) {
      const label = n.toLocaleString('en-US');
      console.log(
        `RATIO|graphql-ws fan-out, ${label} subscribers, p99|${gateway.p99.toFixed(1)} ms|${plain.p99.toFixed(1)} ms|${(gateway.p99 / plain.p99).toFixed(2)}×|p99 ≤ 50 ms`,
      );
      // The goal is per delivery: CPU per write above the writes alone, per subscriber. Below 1,000 subscribers the fan-out's
      // share of a write is within the noise of the write's own cost (a REST POST: bench:paywall's and the REST benches'
      // business), so the goal row is printed where the goal is set: the largest count; the table shows every count.
      if (n !== Math.max(...counts)) continue;
      const gd = perDelivery(gateway, idle.gateway);
      const pd = perDelivery(plain, idle.plain);
      console.log(
        `RATIO|graphql-ws fan-out, ${label} subscribers, CPU per write per delivery|${gd.toFixed(1)} µs/delivery (${gateway.cpuPerWrite.toFixed(2)} ms/write)|${pd.toFixed(1)} µs/delivery (${plain.cpuPerWrite.toFixed(2)} ms/write)|${(gd / pd).toFixed(2)}×|≤ 2×`,
      );
    }
    const missed = results.reduce((s, r) => s + r.gateway.missed + r.plain.missed, 0);
    console.log(
      `missed events: ${missed} (gateway ${results.reduce((s, r) => s + r.gateway.missed, 0)}, plain ${results.reduce((s, r) => s + r.plain.missed, 0)})`,
    );
    if (missed) process.exitCode = 1;
  } finally {
    await subs.close();
    await plainChild.close();
    await gw.close();
  }
}

if (ROLE === 'gateway') await gateway();
else if (ROLE === 'plain') await plainServer();
else if (ROLE === 'subscribers') await subscribers();
else await main();
