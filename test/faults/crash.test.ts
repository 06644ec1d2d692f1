import test from 'ava';
import type { ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Keypair, Transaction } from '@solana/web3.js';
import { quickAddJob } from 'graphile-worker';
import { createPayingFetch, decodePaymentResponse } from '../../interfaces/client/paying-fetch.ts';
import { openAccess } from '../../interfaces/app.ts';
import { RpcLedger } from '../../adapters/ledger/rpc/rpc-ledger.ts';
import { feeFor } from '../../domain/shared/money.ts';
import { findStable } from '../../domain/shared/network.ts';
import { receiptHash, type ReceiptV1 } from '../../domain/receipts/schema.ts';
import { treasuryOf } from '../../domain/treasury/derive.ts';
import { makeDataDir, removeDataDir, testConfig } from '../support/app.ts';
import { programsDir } from '../support/programs.ts';
import { RUN_TS } from '../support/commands.ts';
import { until } from '../support/until.ts';
import { spawnChild } from '../support/children.ts';

// No money lost on a crash, end to end: the gateway runs as a child process (`npm start`'s entry point) on one
// data directory; N buyers pay one link concurrently through the buyer kit; the gateway is kill -9'd at random moments
// K times and restarted on the same directory (the embedded PostgreSQL, a child that outlives it, is reused through
// postmaster.pid; the embedded ledger comes back from its files). After each restart every payment that got no answer
// is replayed; at the end the reconciliation job runs. Then, whatever the kills hit:
//   landed payments (the seller's balance) == recorded paid calls == earn receipts (== the link's settled_count),
//   each buyer's debit == its recorded payments × (price + fee), every 200 a buyer saw is a landed, recorded payment,
//   nothing is left unresolved, and the receipt chain is gapless and linked.

const root = fileURLToPath(new URL('../..', import.meta.url));
const BUYERS = 10;
const KILLS = 5;
const USDC = findStable('chain-devnet', 'USDC')!;
const PRICE = 10_000n; // $0.01
const GROSS = PRICE + feeFor(PRICE, 100);
const FUNDING = 5_000_000n; // 5 USDC per buyer
/** how long a request holds a payment before another may take it over (LEASE_MS, domain/paywall/call.ts) */
const CLAIM_LEASE_MS = 120_000;

async function freePort(pair = false): Promise<number> {
  const listen = (port: number) =>
    new Promise<number>((resolve, reject) => {
      const srv = createServer();
      srv.on('error', reject);
      srv.listen(port, '127.0.0.1', () => {
        const p = (srv.address() as { port: number }).port;
        srv.close(() => resolve(p));
      });
    });
  for (;;) {
    const port = await listen(0);
    if (!pair) return port;
    if (
      await listen(port + 1).then(
        () => true,
        () => false,
      )
    )
      return port; // JSON-RPC on port, its WebSocket on port + 1
  }
}

interface Gateway {
  child: ChildProcess;
  output(): string;
  exited: Promise<void>;
}

/** `npm start` as a child process; resolves once it printed that it is ready. */
async function startGateway(env: Record<string, string>): Promise<Gateway> {
  const child = spawnChild(process.execPath, [RUN_TS, 'interfaces/main.ts'], { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  const keep = (d: Buffer) => {
    out = (out + d.toString()).slice(-20_000);
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  // No deadline (test/support/until.ts says why): a start that never comes is the test's timeout to report.
  await until('the gateway is ready', () => {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`the gateway exited while starting:\n${out}`);
    return out.includes(' ready in ');
  });
  return { child, output: () => out, exited };
}

async function kill9(g: Gateway): Promise<void> {
  g.child.kill('SIGKILL');
  await g.exited;
}

/** The embedded PostgreSQL outlives a kill -9 of the gateway that started it: stop it by its postmaster.pid. */
async function stopPostgres(dataDir: string): Promise<void> {
  let pid: number;
  try {
    pid = Number(readFileSync(join(dataDir, 'pg', 'postmaster.pid'), 'utf8').split('\n')[0]);
  } catch {
    return;
  }
  if (!pid) return;
  const alive = () => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  };
  if (!alive()) return;
  process.kill(pid, 'SIGINT'); // fast shutdown
  await until('the embedded PostgreSQL stopped', () => !alive());
}

interface Attempt {
  buyer: number;
  /** PAYMENT-SIGNATURE as sent (undefined when the kit never got that far) */
  header?: string;
  status?: number;
  /** PAYMENT-RESPONSE's transaction of a 200 */
  signature?: string;
  error?: string;
  replay?: { status: number; signature?: string; after: number; ms: number };
}

test('kill -9 at random moments, K times, under N concurrent buyers: every landed payment is recorded once, every answer was paid for', async (t) => {
  // AVA's timeout, re-armed at every step: a step that never ends (a start, a replay, a resolve round) is reported
  // as a hang, and a loaded machine makes the run longer without failing it — no deadline on the whole run.
  const step = () => t.timeout(5 * 60_000, 'a step of the crash run made no progress (a hang)');
  step();
  const dataDir = await makeDataDir();
  const port = await freePort();
  const rpcPort = await freePort(true);
  const base = `http://127.0.0.1:${port}`;
  const rpcUrl = `http://127.0.0.1:${rpcPort}`;
  const env = {
    PORT: String(port),
    HOST: '127.0.0.1',
    SVC_BASE_URL: base,
    SVC_DATA_DIR: dataDir,
    SVC_DEVNET_RPC_PORT: String(rpcPort),
    SVC_MAINNET_RPC_PORT: '0',
    SVC_LOG_LEVEL: 'warn',
    SVC_COMMIT: 'test',
    SVC_RATE_LIMITS: JSON.stringify({ paywall: 10_000_000, default: 10_000_000 }),
    SVC_JOBS: 'inline',
    // the seller agent is minted for real (Metaplex Core on the child's embedded devnet)
    ...(programsDir() ? { SVC_LEDGER_PROGRAMS: programsDir()! } : {}),
  };
  let gateway: Gateway | undefined;
  let access: Awaited<ReturnType<typeof openAccess>> | undefined;
  const ledger = new RpcLedger({ url: rpcUrl });
  t.teardown(async () => {
    ledger.close();
    if (gateway && gateway.child.exitCode === null && gateway.child.signalCode === null) await kill9(gateway);
    await access?.close().catch(() => {});
    await stopPostgres(dataDir);
    await removeDataDir(dataDir);
  });

  gateway = await startGateway(env);
  step();
  access = await openAccess(testConfig({ SVC_DATA_DIR: dataDir }));
  const { key } = await access.access.issueKey({ network: 'chain-devnet', role: 'user' });
  const api = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${base}${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    const json = (await res.json()) as any;
    if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json)}`);
    return json;
  };
  // DECISIONS "Agents, submissions and events": the seller is an agent on the ledger — minted through the API
  // (prepare → sign → submit), recorded by the gateway once its mint confirms.
  const sellerOwner = Keypair.generate();
  await api('POST', '/v1/dev/faucet', { address: sellerOwner.publicKey.toBase58(), sol: '1' });
  const minted = await api('POST', '/v1/agents/prepare', {
    owner: sellerOwner.publicKey.toBase58(),
    name: 'crash seller',
    uri: 'https://example.com/agent.json',
  });
  const mintTx = Transaction.from(Buffer.from(minted.transaction.base64, 'base64'));
  mintTx.partialSign(sellerOwner);
  await api('POST', '/v1/submit', { event_id: minted.event_id, transaction_base64: mintTx.serialize({ requireAllSignatures: true }).toString('base64') });
  const agent = String(minted.echo.asset);
  await until(
    "the seller's mint confirmed",
    async () => {
      const event = await api('GET', `/v1/events/${minted.event_id}`);
      if (event.phase === 'failed') throw new Error(`the seller's mint failed: ${JSON.stringify(event)}`);
      return event.phase === 'confirmed';
    },
    { everyMs: 100 },
  );
  step();
  const link = await api('POST', '/v1/payment-links', {
    label: 'crash',
    owner_agent: agent,
    method: 'GET',
    price: '$0.01',
    response: { body: { paid: true } },
  });
  const url = `${base}/x/${link.id}?network=chain-devnet`;
  const treasury = treasuryOf(agent);
  const feeAuthority = ((await (await fetch(`${base}/facilitator/health`)).json()) as any).protocol_fee.authorities['chain-devnet'] as string;
  await api('POST', '/v1/dev/faucet', { address: feeAuthority, token: 'USDC', amount: '1' }); // its token account exists before the rush
  const buyers = Array.from({ length: BUYERS }, () => Keypair.generate());
  for (const b of buyers) await api('POST', '/v1/dev/faucet', { address: b.publicKey.toBase58(), token: 'USDC', amount: (Number(FUNDING) / 1e6).toString() });

  const attempts: Attempt[] = [];
  const usdc = async (owner: string) => (await ledger.getTokenBalances(owner, { mint: USDC.mint })).reduce((s, b) => s + b.amount, 0n);

  /** Buyer i pays the link again and again until the gateway is gone. */
  const payUntilGone = async (i: number, state: { stop: boolean }) => {
    let current: Attempt | undefined;
    const pay = createPayingFetch({
      signer: buyers[i]!,
      rpcUrl,
      network: 'chain-devnet',
      fetch: (async (input: RequestInfo | URL, init?: RequestInit) => {
        const header = new Request(input, init).headers.get('PAYMENT-SIGNATURE');
        if (header && current) current.header = header;
        return fetch(input, init);
      }) as typeof fetch,
    });
    while (!state.stop) {
      current = { buyer: i };
      attempts.push(current);
      try {
        const res = await pay(url);
        current.status = res.status;
        if (res.status === 200) current.signature = decodePaymentResponse(res.headers.get('PAYMENT-RESPONSE')!).transaction;
        await res.arrayBuffer();
      } catch (e) {
        current.error = (e as Error).message;
        return; // the gateway is gone (or going)
      }
    }
  };

  /**
   * Replays every payment that was sent and never answered, until each gets a final answer: a 504 (still pending) is
   * asked again, with no deadline — how long it took is logged (a few seconds on an idle machine), and an answer that
   * never comes is the test's timeout to report.
   */
  const replayUnanswered = async (kill: number) => {
    const open = attempts.filter((a) => a.header && a.status === undefined && !a.replay);
    await Promise.all(
      open.map(async (a) => {
        const started = performance.now();
        // a 504 is asked again, half a second apart (a pace between polls)
        const res = await until(
          'the replay got its final answer',
          async () => {
            const res = await fetch(url, { headers: { 'PAYMENT-SIGNATURE': a.header! } });
            await res.arrayBuffer();
            return res.status !== 504 && res;
          },
          { everyMs: 500 },
        );
        a.replay = { status: res.status, after: kill, ms: Math.round(performance.now() - started) };
        if (res.status === 200) a.replay.signature = decodePaymentResponse(res.headers.get('PAYMENT-RESPONSE')!).transaction;
        step();
      }),
    );
    return open;
  };

  const restartMs: number[] = [];
  const recordedCount = async () =>
    ((await access!.database.orm.em.fork().execute(`select count(*)::int as n from paid_calls where status = 'done'`)) as { n: number }[])[0]!.n;
  const perKill: { landedUnrecorded: number; unanswered: number; replayed: Record<number, number>; slowestReplayMs: number }[] = [];
  for (let kill = 1; kill <= KILLS; kill++) {
    const state = { stop: false };
    const sent = () => attempts.filter((a) => a.header).length;
    const sentBefore = sent();
    let ended = 0;
    const loops = buyers.map((_, i) => payUntilGone(i, state).finally(() => ended++));
    // A random moment of this round's traffic: once 1 to 3 × N payments of it went out. Counted in payments, not
    // timed, so a loaded machine moves the moment along with the traffic; the N buyers are at random points of
    // their calls (signing, settling, recording, answering) when it comes.
    const moment = sentBefore + 1 + Math.floor(Math.random() * 3 * BUYERS);
    await until("the round's kill moment", () => sent() >= moment || ended === BUYERS, { everyMs: 10 });
    await kill9(gateway);
    state.stop = true;
    await Promise.all(loops);

    const restarting = Date.now();
    gateway = await startGateway(env);
    restartMs.push(Date.now() - restarting);
    step();
    // What the kill left: payments on the ledger with no record yet (once 5–7 per kill, never recovered).
    const landedUnrecorded = Number((await usdc(treasury)) / PRICE) - (await recordedCount());
    const open = await replayUnanswered(kill);
    const replayed: Record<number, number> = {};
    for (const a of open) replayed[a.replay!.status] = (replayed[a.replay!.status] ?? 0) + 1;
    perKill.push({ landedUnrecorded, unanswered: open.length, replayed, slowestReplayMs: Math.max(0, ...open.map((a) => a.replay!.ms)) });
  }
  t.log('per kill:', JSON.stringify(perKill));
  t.log('restarts (ms):', restartMs.join(', '));

  // The reconciliation job, through the gateway's inline runner, with no grace period.
  const unresolved = async () =>
    ((await access!.database.orm.em.fork().execute(`select count(*)::int as n from paid_calls where status <> 'done'`)) as { n: number }[])[0]!.n;
  // A job not yet run (or running): one that failed waits for its retry with last_error set, and does not hold the round.
  const pending = async () =>
    (
      (await access!.database.orm.em
        .fork()
        .execute(`select count(*)::int as n from graphile_worker.jobs where task_identifier = 'resolve_paid_calls' and last_error is null`)) as {
        n: number;
      }[]
    )[0]!.n;
  // Rounds until nothing is unresolved (a paid call whose transaction is still on its way is resolved by a later
  // round, a second apart: a pace between polls), with no deadline: a call that is never resolved is the test's
  // timeout to report.
  await until(
    'no paid call is left unresolved',
    async () => {
      await quickAddJob({ connectionString: access!.database.url }, 'resolve_paid_calls', { older_than_ms: 0 });
      await until('the round ran', async () => (await pending()) === 0, { everyMs: 200 });
      step();
      return (await unresolved()) === 0;
    },
    { everyMs: 1_000 },
  );

  const em = access.database.orm.em.fork();
  const done = (await em.execute(`select signature, payer from paid_calls where network = 'chain-devnet' and link_id = ? and status = 'done'`, [link.id])) as {
    signature: string;
    payer: string;
  }[];
  const receipts = (
    (await em.execute(`select body from receipts where network = 'chain-devnet' and agent = ? order by nonce`, [agent])) as { body: unknown }[]
  ).map((r) => (typeof r.body === 'string' ? JSON.parse(r.body) : r.body) as ReceiptV1);
  const landed = (await usdc(treasury)) / PRICE;
  const answered = attempts.filter((a) => a.status === 200 || a.replay?.status === 200);
  const lostBeforeReplay = attempts.filter((a) => a.header && a.status === undefined).length;
  t.log(
    `attempts ${attempts.length}, answered 200 ${answered.length}, unanswered at a kill ${lostBeforeReplay}, landed ${landed}, recorded ${done.length}, receipts ${receipts.length}`,
  );

  t.deepEqual(
    attempts.filter((a) => a.replay && a.replay.status !== 200 && a.replay.status !== 402).map((a) => a.replay!.status),
    [],
    'every replay after a restart got its final answer (200 or 402)',
  );
  // What that guards: a restart takes over what the dead process held instead of waiting out its claim's lease. How long
  // the replays took is logged per kill; asserted only against the lease, which load does not come near.
  const slowestReplayMs = Math.max(0, ...perKill.map((k) => k.slowestReplayMs));
  t.true(slowestReplayMs < CLAIM_LEASE_MS, `the slowest replay took ${slowestReplayMs} ms: taken over, not waited out`);
  t.is(await unresolved(), 0, 'no paid call is left unresolved');
  t.is(Number(landed), done.length, 'landed payments == recorded paid calls');
  t.is(receipts.length, done.length, 'recorded paid calls == earn receipts');
  t.is((await api('GET', `/v1/payment-links/${link.id}`)).counters.settled_count, done.length, 'the link counts each once');
  t.is(new Set(done.map((d) => d.signature)).size, done.length);
  t.deepEqual(receipts.map((r) => r.tx_sig).sort(), done.map((d) => d.signature).sort(), 'one receipt per recorded payment');

  for (const [i, b] of buyers.entries()) {
    const address = b.publicKey.toBase58();
    const recorded = BigInt(done.filter((d) => d.payer === address).length);
    t.is(FUNDING - (await usdc(address)), recorded * GROSS, `buyer ${i}: debit == recorded payments × (price + fee)`);
  }

  // Zero answers without payment: every 200 names a recorded payment that landed.
  const recordedSigs = new Set(done.map((d) => d.signature));
  const served = [...new Set(answered.map((a) => (a.status === 200 ? a.signature! : a.replay!.signature!)))];
  t.true(
    served.every((s) => recordedSigs.has(s)),
    'every 200 is a recorded payment',
  );
  const statuses = await ledger.getSignatureStatuses(served);
  t.true(
    statuses.every((s) => s !== null && s.err === null),
    'every 200 is a payment on the ledger',
  );

  // The receipt chain: gapless nonces, each linked to the one before, each hash as computed.
  receipts.forEach((r, n) => {
    t.is(r.nonce, n);
    t.is(r.prev_receipt_hash, n === 0 ? null : receipts[n - 1]!.receipt_hash);
    t.is(receiptHash(r), r.receipt_hash);
  });

  t.true(perKill.length >= 5, 'at least 5 kills');
  t.true(done.length > 0);

  await kill9(gateway);
});
