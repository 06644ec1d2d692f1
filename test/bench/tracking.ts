// npm run bench:tracking — how soon the gateway tells what the ledger did (hosted-api §3.1, §6), at the default
// settings (SVC_LOG_LEVEL=info, the in-process job runner), beside the ledger's own confirmation of the same
// transactions in the same run:
//
//   BENCH_TRACKING=50 npm run bench:tracking
//
// - submit → confirmed: POST /v1/submit of a signed transfer, until its event arrives as CONFIRMED on a GraphQL
//   subscription (the event feed a client watches). Baseline: the same transaction's signatureNotification
//   (commitment confirmed) from the ledger's own PubSub, subscribed before the submit.
// - deposit → agent.treasury.fund_sol: a plain SOL transfer into an agent's treasury sent with web3.js to the ledger's
//   JSON-RPC, until agent.treasury.fund_sol arrives on the subscription. Baseline: its signatureNotification likewise.
//
// One transaction at a time (a latency, not a throughput); the client's building and signing happen outside the timed
// sections. The gateway, its embedded ledger and this client share one process and the machine's cores: a busy
// machine shows in both columns.

import { Connection, Keypair, PublicKey, SystemProgram, Transaction } from '@solana/web3.js';
import { createClient } from 'graphql-ws';
import WebSocket from 'ws';
import { issueKey, recordAgent, removeDataDir, startTestApp } from '../support/app.ts';
import { treasuryOf } from '../../domain/treasury/derive.ts';
import { encodeBase58 } from '../../domain/shared/base58.ts';
import { benchLogger } from './support/gateway-log.ts';
import { loadavg, machineLine } from './support/load.ts';

const COUNT = Number(process.env.BENCH_TRACKING ?? 50);
const NET = 'chain-devnet' as const;

const log = await benchLogger('info');
const app = await startTestApp({ env: { SVC_LOG_LEVEL: 'info' }, appOptions: { logger: log.logger } });
const loadBefore = loadavg();

/** arrival time (performance.now()) of each awaited thing, by key */
function arrivals() {
  const seen = new Map<string, number>();
  const waiting = new Map<string, (at: number) => void>();
  return {
    arrived(key: string, at = performance.now()) {
      const wake = waiting.get(key);
      if (wake) {
        waiting.delete(key);
        wake(at);
      } else seen.set(key, at);
    },
    when(key: string): Promise<number> {
      const at = seen.get(key);
      if (at !== undefined) {
        seen.delete(key);
        return Promise.resolve(at);
      }
      return new Promise((resolve) => waiting.set(key, resolve));
    },
  };
}

/** The ledger's own PubSub: signatureSubscribe(confirmed) resolving `ready` once subscribed, then the notification's time. */
function ledgerPubSub(wsUrl: string) {
  const socket = new WebSocket(wsUrl);
  const opened = new Promise<void>((resolve, reject) => {
    socket.once('open', () => resolve());
    socket.once('error', reject);
  });
  const answers = new Map<number, (subscription: number) => void>();
  const bySubscription = new Map<number, string>();
  const confirmed = arrivals();
  let next = 1;
  socket.on('message', (raw) => {
    const at = performance.now();
    const m = JSON.parse(raw.toString()) as { id?: number; result?: number; method?: string; params?: { subscription: number } };
    if (m.id !== undefined && typeof m.result === 'number') answers.get(m.id)?.(m.result);
    else if (m.method === 'signatureNotification' && m.params) {
      const signature = bySubscription.get(m.params.subscription);
      if (signature) confirmed.arrived(signature, at);
    }
  });
  return {
    async subscribe(signature: string): Promise<void> {
      await opened;
      const id = next++;
      const subscription = await new Promise<number>((resolve) => {
        answers.set(id, resolve);
        socket.send(JSON.stringify({ jsonrpc: '2.0', id, method: 'signatureSubscribe', params: [signature, { commitment: 'confirmed' }] }));
      });
      answers.delete(id);
      bySubscription.set(subscription, signature);
    },
    confirmedAt: (signature: string) => confirmed.when(signature),
    close: () => socket.terminate(),
  };
}

const pct = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
};
const ms = (v: number) => `${v.toFixed(1)} ms`;

try {
  const key = await issueKey(app);
  const caller = await app.services.access.authenticate(`Bearer ${key}`);
  const { mint } = await recordAgent(app, key);
  const treasury = treasuryOf(mint);
  const rpcUrl = app.ledgers.rpcUrls[NET]!;
  const connection = new Connection(rpcUrl, 'confirmed');
  const ledger = ledgerPubSub(rpcUrl.replace(/^http/, 'ws')); // the embedded server takes upgrades on its HTTP port
  const payer = Keypair.generate();
  await app.services.dev.fund(NET, { address: payer.publicKey.toBase58(), sol: '100' });

  // the gateway's side: every event of the key, live
  const events = arrivals();
  const client = createClient({ url: `${app.url.replace(/^http/, 'ws')}/graphql`, webSocketImpl: WebSocket, connectionParams: { authorization: key } });
  const connected = new Promise<void>((resolve) => client.on('connected', () => resolve()));
  const stop = client.subscribe<{ events: { id: string; kind: string; phase: string; signature: string | null } }>(
    { query: 'subscription { events { id kind phase signature } }' },
    {
      next: (r) => {
        const e = r.data?.events;
        if (!e) return;
        if (e.phase === 'CONFIRMED') events.arrived(e.kind === 'agent.treasury.fund_sol' ? `fund_sol:${e.signature}` : `confirmed:${e.id}`);
      },
      error: (e) => console.error('subscription error', e),
      complete: () => {},
    },
  );
  await connected;

  const submitRound = async () => {
    const to = Keypair.generate().publicKey;
    const envelope = await app.services.transactions.prepareForAgent(caller, mint, async () => ({
      kind: 'agent.treasury.withdraw_sol',
      agent: mint,
      feePayer: payer.publicKey.toBase58(),
      instructions: [SystemProgram.transfer({ fromPubkey: payer.publicKey, toPubkey: to, lamports: 1_000_000 })],
      echo: {},
      metadata: { lamports: '1000000', destination: to.toBase58() },
    }));
    const tx = Transaction.from(Buffer.from(envelope.transaction!.base64, 'base64'));
    tx.partialSign(payer);
    const body = JSON.stringify({ event_id: envelope.event_id, transaction_base64: tx.serialize().toString('base64') });
    const sig = encodeBase58(tx.signatures[0]!.signature!);
    await ledger.subscribe(sig);
    const t0 = performance.now();
    const res = await fetch(`${app.url}/v1/submit`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body });
    if (res.status !== 202) throw new Error(`submit: ${res.status} ${await res.text()}`);
    const answered = performance.now() - t0;
    const [gateway, own] = await Promise.all([events.when(`confirmed:${envelope.event_id}`), ledger.confirmedAt(sig)]);
    return { gateway: gateway - t0, ledger: own - t0, answered };
  };

  const depositRound = async (i: number) => {
    const { blockhash } = await connection.getLatestBlockhash();
    const tx = new Transaction({ feePayer: payer.publicKey, recentBlockhash: blockhash }).add(
      SystemProgram.transfer({ fromPubkey: payer.publicKey, toPubkey: new PublicKey(treasury), lamports: 1_000_000 + i }),
    );
    tx.sign(payer);
    const wire = tx.serialize();
    const sig = encodeBase58(tx.signatures[0]!.signature!);
    await ledger.subscribe(sig);
    const t0 = performance.now();
    await connection.sendRawTransaction(wire);
    const [gateway, own] = await Promise.all([events.when(`fund_sol:${sig}`), ledger.confirmedAt(sig)]);
    return { gateway: gateway - t0, ledger: own - t0 };
  };

  // warm-up outside the figures
  for (let i = 0; i < 3; i++) {
    await submitRound();
    await depositRound(i);
  }
  const submits: { gateway: number; ledger: number; answered: number }[] = [];
  const deposits: { gateway: number; ledger: number }[] = [];
  for (let i = 0; i < COUNT; i++) {
    submits.push(await submitRound());
    deposits.push(await depositRound(100 + i));
  }
  stop();
  await client.dispose();
  ledger.close();

  const s = {
    p50: pct(
      submits.map((r) => r.gateway),
      50,
    ),
    p99: pct(
      submits.map((r) => r.gateway),
      99,
    ),
  };
  const sl = {
    p50: pct(
      submits.map((r) => r.ledger),
      50,
    ),
    p99: pct(
      submits.map((r) => r.ledger),
      99,
    ),
  };
  const d = {
    p50: pct(
      deposits.map((r) => r.gateway),
      50,
    ),
    p99: pct(
      deposits.map((r) => r.gateway),
      99,
    ),
  };
  const dl = {
    p50: pct(
      deposits.map((r) => r.ledger),
      50,
    ),
    p99: pct(
      deposits.map((r) => r.ledger),
      99,
    ),
  };
  console.log(`tracking bench — ${COUNT} submits and ${COUNT} deposits, one at a time; load ${loadBefore} → ${loadavg()}; ${machineLine()}`);
  console.log(
    `  submit → confirmed on the subscription: p50 ${ms(s.p50)}, p99 ${ms(s.p99)} (the ledger's own confirmation: p50 ${ms(sl.p50)}, p99 ${ms(sl.p99)}; the 202 answered: p50 ${ms(
      pct(
        submits.map((r) => r.answered),
        50,
      ),
    )})`,
  );
  console.log(
    `  deposit → fund_sol on the subscription: p50 ${ms(d.p50)}, p99 ${ms(d.p99)} (the ledger's own confirmation: p50 ${ms(dl.p50)}, p99 ${ms(dl.p99)})`,
  );
  console.log(`  access lines written: ${await log.accessLines()}`);
  console.log(`RATIO|submit → confirmed, p50 (default settings)|${ms(s.p50)}|ledger confirmed ${ms(sl.p50)}|${ms(s.p50)}|≤ 100 ms`);
  console.log(`RATIO|submit → confirmed, p99 (default settings)|${ms(s.p99)}|ledger confirmed ${ms(sl.p99)}|${ms(s.p99)}|≤ 300 ms`);
  console.log(`RATIO|deposit → agent.treasury.fund_sol, p50 (default settings)|${ms(d.p50)}|ledger confirmed ${ms(dl.p50)}|${ms(d.p50)}|≤ 500 ms`);
} finally {
  await app.close();
  await removeDataDir(app.dataDir);
  await log.remove();
}
