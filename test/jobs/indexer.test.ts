import anyTest, { type ExecutionContext, type TestFn } from 'ava';
import { Connection, Keypair, PublicKey, SystemProgram, Transaction } from '@solana/web3.js';
import {
  createAssociatedTokenAccountIdempotentInstruction,
  createInitializeMint2Instruction,
  createMintToInstruction,
  createTransferCheckedInstruction,
  getAssociatedTokenAddressSync,
  getMinimumBalanceForRentExemptMint,
  MINT_SIZE,
  TOKEN_PROGRAM_ID,
} from '@solana/spl-token';
import pino from 'pino';
import { http, issueKey, recordAgent, startTestApp, writeAgentAsset, type TestApp } from '../support/app.ts';
import { startNodeProxy } from '../support/node-proxy.ts';
import { faultyLedger, refuses } from '../support/faulty-ledger.ts';
import { until } from '../support/until.ts';
import { watchEvents, type WatchedEvent } from '../support/graphql.ts';
import { metaplexTest } from '../support/programs.ts';
import { createClient } from '../../interfaces/client/index.ts';
import { STABLES } from '../../domain/shared/network.ts';
import { treasuryOf } from '../../domain/treasury/derive.ts';
import type { PreparedEnvelope } from '../../domain/transactions/schema.ts';
import type { LedgerTransaction } from '../../domain/ports/ledger.ts';
import type { WatchedAddress } from '../../domain/ports/indexer-store.ts';
import { findingsOf } from '../../domain/indexer/rules.ts';
import { IndexerService } from '../../domain/indexer/service.ts';
import { MPL_CORE_PROGRAM_ID } from '../../domain/treasury/derive.ts';

// The indexer: deposits made with plain web3.js (no gateway involvement) reach the owner's GraphQL
// subscription as agent.treasury.fund / fund_sol, on the embedded ledger and through the rpc adapter; each event is
// written once however often the ledger is scanned; a transaction submitted through /v1/submit is not reported again;
// a transfer into a fee authority's token account is protocol.fee.collected (on_chain); failed transactions write
// nothing; GET /v1/indexer/status on the three doors. Deposits are indexed from the ledger's notifications (hosted-api
// §6: a's commit events, b's logsSubscribe), and b's node sits behind a proxy whose WebSocket a test cuts.

type LogLine = { msg?: string; signature?: string; events?: number; via?: string; [key: string]: unknown };
interface Ctx {
  a: TestApp;
  b: TestApp;
  /** b's node (a's embedded JSON-RPC) behind a fault-injecting proxy: JSON-RPC on P, PubSub on P + 1 */
  node: Awaited<ReturnType<typeof startNodeProxy>>;
  /** each app's log lines at info, to see which path reported a transaction */
  logs: Map<TestApp, LogLine[]>;
}
const test = anyTest as TestFn<Ctx>;

/** An app logger keeping its lines (info and up). */
function keptLogger(lines: LogLine[]): pino.Logger {
  return pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line) as LogLine) });
}
const NET = 'chain-devnet' as const;
const USDC = STABLES[NET][0]!;

test.before(async (t) => {
  const aLines: LogLine[] = [];
  const bLines: LogLine[] = [];
  const a = await startTestApp({ appOptions: { logger: keptLogger(aLines) } });
  // b follows a's embedded devnet through the rpc ledger adapter (SVC_DEVNET_LEDGER = a's JSON-RPC, through the proxy)
  const node = await startNodeProxy(a.ledgers.rpcUrls[NET]!);
  const b = await startTestApp({ env: { SVC_DEVNET_LEDGER: node.url, SVC_MAINNET_LEDGER: 'embedded' }, appOptions: { logger: keptLogger(bLines) } });
  t.context = {
    a,
    b,
    node,
    logs: new Map([
      [a, aLines],
      [b, bLines],
    ]),
  };
});

test.after.always(async (t) => {
  await t.context.node?.close();
});

/** `app`'s follower wrote `signature`'s events from the ledger's notification (a catch-up or a polling run names none). */
function notified(t: ExecutionContext<Ctx>, app: TestApp, signature: string): boolean {
  return t.context.logs
    .get(app)!
    .some((l) => l.msg === 'indexer reported ledger activity' && l.via === 'notification' && l.signature === signature && (l.events ?? 0) > 0);
}

/** A plain SOL transfer of `lamports` from `from` to `to`, sent with web3.js; its signature and slot. */
async function sendSol(connection: Connection, from: Keypair, to: string, lamports: number): Promise<{ signature: string; slot: number; err: unknown }> {
  const { blockhash } = await connection.getLatestBlockhash();
  const tx = new Transaction({ feePayer: from.publicKey, recentBlockhash: blockhash }).add(
    SystemProgram.transfer({ fromPubkey: from.publicKey, toPubkey: new PublicKey(to), lamports }),
  );
  tx.sign(from);
  return send(connection, tx.serialize());
}

/** An agent recorded on `gateway`, its asset written on a's embedded ledger (b reads that ledger through the proxy). */
async function recordOn(t: ExecutionContext<Ctx>, gateway: TestApp, key: string): Promise<{ mint: string }> {
  if (gateway === t.context.a) return recordAgent(gateway, key);
  const { mint, owner } = await writeAgentAsset(t.context.a, NET);
  const res = await http(gateway, 'POST', '/v1/agents/record', { key, body: { mint, owner } });
  if (res.status !== 200) throw new Error(`record agent failed: ${res.status} ${JSON.stringify(res.body)}`);
  return { mint };
}

type SeenEvent = WatchedEvent;

/** Every event the key may read, live, over graphql-ws; closed when the test ends. */
async function watch(t: ExecutionContext, app: TestApp, key: string): Promise<SeenEvent[]> {
  const { seen, close } = await watchEvents(app, key);
  t.teardown(close);
  return seen;
}

/** Plain web3.js against the embedded devnet's JSON-RPC (app a serves it). */
function rpc(t: ExecutionContext<Ctx>): Connection {
  return new Connection(t.context.a.ledgers.rpcUrls[NET]!, 'confirmed');
}

/** Sends signed bytes with web3.js and waits until the signature has a status; returns signature and slot. */
async function send(connection: Connection, wire: Uint8Array | Buffer, skipPreflight = false): Promise<{ signature: string; slot: number; err: unknown }> {
  const signature = await connection.sendRawTransaction(wire, { skipPreflight });
  const status = await until(`status of ${signature}`, async () => (await connection.getSignatureStatuses([signature])).value[0] ?? undefined);
  return { signature, slot: status.slot, err: status.err };
}

async function donor(t: ExecutionContext<Ctx>, usdc = '10'): Promise<Keypair> {
  const kp = Keypair.generate();
  await t.context.a.services.dev.fund(NET, { address: kp.publicKey.toBase58(), sol: '1', token: 'USDC', amount: usdc });
  return kp;
}

/** The indexer of `app` has scanned every watched address past `slot` (a complete run that started after it). */
async function indexedPast(app: TestApp, slot: number): Promise<void> {
  await until(`indexer past slot ${slot}`, async () => {
    const [s] = (await app.services.indexer.status({ network: NET, role: 'admin', owner: null, ownerWallet: null } as never)).data;
    return (s!.cursor_slot ?? -1) >= slot || undefined;
  });
}

async function eventsOf(
  app: TestApp,
  key: string,
  agent: string,
): Promise<{ id: string; kind: string; phase: string; signature: string | null; metadata: Record<string, unknown> }[]> {
  const res = await http(app, 'GET', `/v1/events?agent=${agent}&limit=200`, { key });
  if (res.status !== 200) throw new Error(`events: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.data;
}

/** A deposit with plain web3.js: 2.5 USDC (TransferChecked) and 0.01 SOL in one transaction, then 1000 lamports (noise). */
async function deposit(t: ExecutionContext<Ctx>, gateway: TestApp): Promise<void> {
  const key = (await gateway.services.access.issueKey({ network: NET, role: 'user' })).key;
  const seen = await watch(t, gateway, key);
  const { mint } = await recordOn(t, gateway, key); // recording prepares the treasury's USDC account and watches it
  const treasury = treasuryOf(mint);
  const from = await donor(t);
  const connection = rpc(t);
  const treasuryUsdc = getAssociatedTokenAddressSync(new PublicKey(USDC.mint), new PublicKey(treasury), true, TOKEN_PROGRAM_ID);
  const donorUsdc = getAssociatedTokenAddressSync(new PublicKey(USDC.mint), from.publicKey, false, TOKEN_PROGRAM_ID);
  // a's facilitator made the account when the agent was recorded; b's (unfunded on a's ledger) could not: the donor
  // makes it then, which the indexer reports as agent.treasury.provision
  const existed = (await connection.getAccountInfo(treasuryUsdc)) !== null;

  const { blockhash } = await connection.getLatestBlockhash();
  const tx = new Transaction({ feePayer: from.publicKey, recentBlockhash: blockhash }).add(
    createAssociatedTokenAccountIdempotentInstruction(from.publicKey, treasuryUsdc, new PublicKey(treasury), new PublicKey(USDC.mint)),
    createTransferCheckedInstruction(donorUsdc, new PublicKey(USDC.mint), treasuryUsdc, from.publicKey, 2_500_000n, USDC.decimals),
    SystemProgram.transfer({ fromPubkey: from.publicKey, toPubkey: new PublicKey(treasury), lamports: 10_000_000 }),
  );
  tx.sign(from);
  const sentAt = Date.now();
  const funded = await send(connection, tx.serialize());
  t.is(funded.err, null);
  const noise = new Transaction({ feePayer: from.publicKey, recentBlockhash: blockhash }).add(
    SystemProgram.transfer({ fromPubkey: from.publicKey, toPubkey: new PublicKey(treasury), lamports: 1_000 }),
  );
  noise.sign(from);
  const small = await send(connection, noise.serialize());
  t.is(small.err, null);

  const fund = await until('agent.treasury.fund on the subscription', () =>
    seen.find((e) => e.kind === 'agent.treasury.fund' && e.signature === funded.signature),
  );
  t.log(`deposit sent → agent.treasury.fund on the subscription: ${Date.now() - sentAt} ms`);
  t.like(fund, { phase: 'CONFIRMED', agentAsset: mint, slot: funded.slot });
  t.like(fund.metadata, {
    source: 'indexer',
    token_account: treasuryUsdc.toBase58(),
    mint: USDC.mint,
    currency: 'USDC',
    amount_atomic: '2500000',
    from: from.publicKey.toBase58(),
  });
  const sol = await until('agent.treasury.fund_sol on the subscription', () =>
    seen.find((e) => e.kind === 'agent.treasury.fund_sol' && e.signature === funded.signature),
  );
  t.like(sol, { phase: 'CONFIRMED', agentAsset: mint });
  t.like(sol.metadata, { source: 'indexer', treasury, lamports: '10000000', from: from.publicKey.toBase58() });

  // 1000 lamports are noise: nothing for that signature once the indexer is past it
  await indexedPast(gateway, small.slot);
  t.deepEqual(
    seen.filter((e) => e.signature === small.signature),
    [],
  );
  t.deepEqual(
    (await eventsOf(gateway, key, mint)).filter((e) => e.signature === small.signature),
    [],
  );
  // the facilitator's sponsored token account is the gateway's own doing (not reported); the donor's is
  t.deepEqual((await eventsOf(gateway, key, mint)).map((e) => e.kind).sort(), [
    'agent.treasury.fund',
    'agent.treasury.fund_sol',
    ...(existed ? [] : ['agent.treasury.provision']),
  ]);

  // followed now: a plain SOL deposit is fund_sol from the ledger's notification (a: its commit event; b: logsSubscribe)
  const started = performance.now();
  const more = await sendSol(connection, from, treasury, 20_000_000);
  const notice = await until('fund_sol of the next deposit', () => seen.find((e) => e.kind === 'agent.treasury.fund_sol' && e.signature === more.signature));
  t.log(`deposit sent → agent.treasury.fund_sol on the subscription: ${Math.round(performance.now() - started)} ms`);
  t.like(notice.metadata, { source: 'indexer', treasury, lamports: '20000000' });
  t.true(notified(t, gateway, more.signature), 'written on the notification, not by a catch-up or a poll');
}

// serial: these check that a deposit is written from the ledger's notification; a concurrent test's new watch entry
// starts a catch-up that may index the same deposit first (once either way, but then not from the notification)
test.serial(
  'a plain web3.js deposit arrives as agent.treasury.fund and fund_sol on the GraphQL subscription; under 5000 lamports is ignored (embedded ledger)',
  async (t) => {
    await deposit(t, t.context.a);
  },
);

test.serial('the same through the rpc ledger adapter (the embedded JSON-RPC as the node)', async (t) => {
  await deposit(t, t.context.b);
});

// serial: b's notifications are down while it runs, which the deposit test through b would see
test.serial(
  'the rpc adapter’s WebSocket cut mid-flight and refused: deposits meanwhile are indexed through the fallback, each once; notifications come back',
  async (t) => {
    const { b, node } = t.context;
    const lines = t.context.logs.get(b)!;
    const key = await issueKey(b);
    const { mint } = await recordOn(t, b, key);
    const treasury = treasuryOf(mint);
    const from = await donor(t);
    const connection = rpc(t);
    const fundSol = async (signature: string) =>
      (await eventsOf(b, key, mint)).filter((e) => e.kind === 'agent.treasury.fund_sol' && e.signature === signature);
    const first = await sendSol(connection, from, treasury, 6_000_000);
    await until('the first deposit indexed', async () => (await fundSol(first.signature)).length > 0 || undefined, { everyMs: 100 });
    const backs = () => lines.filter((l) => l.msg?.startsWith('ledger notifications back')).length;
    const backBefore = backs();

    node.ws.refuse(true);
    node.ws.cut();
    const during = [await sendSol(connection, from, treasury, 7_000_000), await sendSol(connection, from, treasury, 8_000_000)];
    for (const d of during) await until('indexed through the fallback', async () => (await fundSol(d.signature)).length > 0 || undefined, { everyMs: 100 });
    t.true(
      lines.some((l) => l.msg?.startsWith('ledger notifications interrupted')),
      'the gap was seen',
    );
    for (const d of during) t.false(notified(t, b, d.signature), 'not from a notification: the socket was down');

    node.ws.refuse(false);
    await until('notifications back', () => backs() > backBefore, { everyMs: 100 });
    const after = await sendSol(connection, from, treasury, 9_000_000);
    await until('the deposit after', async () => (await fundSol(after.signature)).length > 0 || undefined, { everyMs: 100 });

    for (const d of [first, ...during, after]) {
      t.is((await fundSol(d.signature)).length, 1, `one fund_sol for ${d.signature}`);
      t.is(await b.database.store.indexer.countSeen(NET, d.signature), 1);
    }
  },
);

test('a rescan and two runners at once write each event once', async (t) => {
  const { a } = t.context;
  const key = await issueKey(a);
  const { mint } = await recordAgent(a, key);
  const treasury = treasuryOf(mint);
  const from = await donor(t);
  const connection = rpc(t);
  const { blockhash } = await connection.getLatestBlockhash();
  const treasuryUsdc = getAssociatedTokenAddressSync(new PublicKey(USDC.mint), new PublicKey(treasury), true, TOKEN_PROGRAM_ID);
  await until('treasury USDC account', async () => (await connection.getAccountInfo(treasuryUsdc)) ?? undefined);
  const tx = new Transaction({ feePayer: from.publicKey, recentBlockhash: blockhash }).add(
    createTransferCheckedInstruction(
      getAssociatedTokenAddressSync(new PublicKey(USDC.mint), from.publicKey),
      new PublicKey(USDC.mint),
      treasuryUsdc,
      from.publicKey,
      1_000_000n,
      USDC.decimals,
    ),
    SystemProgram.transfer({ fromPubkey: from.publicKey, toPubkey: new PublicKey(treasury), lamports: 2_000_000 }),
  );
  tx.sign(from);
  const sent = await send(connection, tx.serialize());
  await until('both events', async () => (await eventsOf(a, key, mint)).filter((e) => e.signature === sent.signature).length === 2 || undefined);

  // forget every cursor, then two runs at once (besides the job runner's own) rescan the same history
  t.true((await a.database.store.indexer.resetCursors(NET)) > 0);
  const runs = await Promise.all([a.services.indexer.run(NET), a.services.indexer.run(NET)]);
  t.true(
    runs.every((r) => r.signatures > 0),
    'both runs read the history again',
  );
  await a.services.indexer.run(NET);
  const events = (await eventsOf(a, key, mint)).filter((e) => e.signature === sent.signature);
  t.deepEqual(events.map((e) => e.kind).sort(), ['agent.treasury.fund', 'agent.treasury.fund_sol']);
  t.is(await a.database.store.indexer.countSeen(NET, sent.signature), 2);
});

test('a failed transaction writes nothing', async (t) => {
  const { a } = t.context;
  const key = await issueKey(a);
  const { mint } = await recordAgent(a, key);
  const treasury = treasuryOf(mint);
  const from = await donor(t, '1');
  const connection = rpc(t);
  const treasuryUsdc = getAssociatedTokenAddressSync(new PublicKey(USDC.mint), new PublicKey(treasury), true, TOKEN_PROGRAM_ID);
  await until('treasury USDC account', async () => (await connection.getAccountInfo(treasuryUsdc)) ?? undefined);
  const { blockhash } = await connection.getLatestBlockhash();
  // 0.5 SOL in, then 5 USDC the donor does not have: the whole transaction fails (and pays its fee)
  const tx = new Transaction({ feePayer: from.publicKey, recentBlockhash: blockhash }).add(
    SystemProgram.transfer({ fromPubkey: from.publicKey, toPubkey: new PublicKey(treasury), lamports: 500_000_000 }),
    createTransferCheckedInstruction(
      getAssociatedTokenAddressSync(new PublicKey(USDC.mint), from.publicKey),
      new PublicKey(USDC.mint),
      treasuryUsdc,
      from.publicKey,
      5_000_000n,
      USDC.decimals,
    ),
  );
  tx.sign(from);
  const failed = await send(connection, tx.serialize(), true);
  t.not(failed.err, null, 'the transaction landed failed');
  await indexedPast(a, failed.slot);
  t.is(await a.database.store.indexer.countSeen(NET, failed.signature), 0);
  t.deepEqual(
    (await eventsOf(a, key, mint)).filter((e) => e.signature === failed.signature),
    [],
  );
});

test('a transfer into a fee authority token account is protocol.fee.collected with source on_chain', async (t) => {
  const { a } = t.context;
  const admin = await issueKey(a, NET, 'admin');
  const seen = await watch(t, a, admin);
  const authority = a.services.settings.fee.authorities[NET]!;
  const from = await donor(t);
  const connection = rpc(t);
  const feeAccount = getAssociatedTokenAddressSync(new PublicKey(USDC.mint), new PublicKey(authority), true, TOKEN_PROGRAM_ID);
  const { blockhash } = await connection.getLatestBlockhash();
  const tx = new Transaction({ feePayer: from.publicKey, recentBlockhash: blockhash }).add(
    createAssociatedTokenAccountIdempotentInstruction(from.publicKey, feeAccount, new PublicKey(authority), new PublicKey(USDC.mint)),
    createTransferCheckedInstruction(
      getAssociatedTokenAddressSync(new PublicKey(USDC.mint), from.publicKey),
      new PublicKey(USDC.mint),
      feeAccount,
      from.publicKey,
      300_000n,
      USDC.decimals,
    ),
  );
  tx.sign(from);
  const sent = await send(connection, tx.serialize());
  t.is(sent.err, null);
  const fee = await until('protocol.fee.collected', () => seen.find((e) => e.kind === 'protocol.fee.collected' && e.signature === sent.signature));
  t.like(fee, { phase: 'CONFIRMED', agentAsset: null });
  t.deepEqual(fee.metadata, {
    source: 'on_chain',
    tx_sig: sent.signature,
    mint: USDC.mint,
    currency: 'USDC',
    fee_atomic: '300000',
    fee_authority: authority,
    token_account: feeAccount.toBase58(),
  });
});

test.serial('GET /v1/indexer/status on REST, tRPC and GraphQL; a user key reads its network too', async (t) => {
  const { a } = t.context;
  const user = await issueKey(a);
  const admin = await issueKey(a, NET, 'admin');
  await recordAgent(a, user);
  const rest = await until('a first run', async () => {
    const res = await http(a, 'GET', '/v1/indexer/status', { key: user });
    return res.body?.data?.[0]?.last_run_at ? res : undefined;
  });
  t.is(rest.status, 200);
  const [s] = rest.body.data;
  t.is(rest.body.data.length, 1);
  t.is(s.network, NET);
  t.true(s.watched_addresses >= 4, `the agent's asset, treasury and USDC account and the fee authority's: ${JSON.stringify(s)}`);
  t.true(Number.isInteger(s.ledger_slot) && Number.isInteger(s.cursor_slot));
  t.true(s.lag_slots >= 0);
  t.is(s.last_error, null);

  const viaTrpc = await createClient({ url: a.url, apiKey: admin }).indexer.status.query();
  t.is(viaTrpc.data[0]!.network, NET);
  t.true(viaTrpc.data[0]!.watched_addresses >= s.watched_addresses);

  const gql = await http(a, 'POST', '/graphql', {
    key: user,
    body: { query: '{ indexerStatus { network watchedAddresses cursorSlot lagSlots lastRunAt lastError } }' },
  });
  t.is(gql.status, 200, JSON.stringify(gql.body));
  t.like(gql.body.data.indexerStatus[0], { network: 'CHAIN_DEVNET', lastError: null });
  t.true(gql.body.data.indexerStatus[0].watchedAddresses >= s.watched_addresses);

  const live = await issueKey(a, 'chain-mainnet');
  const mainnet = await http(a, 'GET', '/v1/indexer/status', { key: live });
  t.is(mainnet.body.data[0].network, 'chain-mainnet', 'a key reads its own network');
  t.is((await http(a, 'GET', '/v1/indexer/status')).status, 401);
});

/** prepare (REST) → sign; the signed bytes as base64 */
async function prepareSigned(
  t: ExecutionContext,
  door: { app: TestApp; key: string },
  request: { path: string; body: Record<string, unknown> },
  signer: Keypair,
): Promise<{ envelope: PreparedEnvelope; signed: Buffer }> {
  const { app, key } = door;
  const { path, body } = request;
  const prepared = await http<PreparedEnvelope>(app, 'POST', path, { key, body });
  t.is(prepared.status, 200, `${path}: ${JSON.stringify(prepared.body)}`);
  const tx = Transaction.from(Buffer.from(prepared.body.transaction!.base64, 'base64'));
  tx.partialSign(signer);
  return { envelope: prepared.body, signed: tx.serialize({ requireAllSignatures: true }) };
}

async function submitted(t: ExecutionContext, door: { app: TestApp; key: string }, prepared: { envelope: PreparedEnvelope; signed: Buffer }): Promise<string> {
  const { app, key } = door;
  const { envelope, signed } = prepared;
  const res = await http(app, 'POST', '/v1/submit', { key, body: { event_id: envelope.event_id, transaction_base64: signed.toString('base64') } });
  t.is(res.status, 202, JSON.stringify(res.body));
  await until(`${envelope.event_id} confirmed`, async () => {
    const e = await http(app, 'GET', `/v1/events/${envelope.event_id}`, { key });
    if (e.body.phase === 'failed') throw new Error(JSON.stringify(e.body));
    return e.body.phase === 'confirmed' || undefined;
  });
  return res.body.signature;
}

metaplexTest(
  test,
  'a withdraw through /v1/submit is not reported again; the same actions signed and sent outside the gateway are (withdraw_sol and withdraw through Execute, provision)',
  async (t) => {
    const { a } = t.context;
    const key = await issueKey(a);
    const seen = await watch(t, a, key);
    const owner = Keypair.generate();
    await a.services.dev.fund(NET, { address: owner.publicKey.toBase58(), sol: '2' });
    const connection = rpc(t);

    const minted = await prepareSigned(
      t,
      { app: a, key },
      { path: '/v1/agents/prepare', body: { owner: owner.publicKey.toBase58(), name: 'Indexed agent', uri: 'https://example.com/agent.json' } },
      owner,
    );
    await submitted(t, { app: a, key }, minted);
    const mint = String(minted.envelope.echo.asset);
    const treasury = treasuryOf(mint);
    const wallet = Keypair.generate().publicKey.toBase58();

    // 0.5 SOL into the treasury with plain web3.js
    const from = await donor(t);
    const { blockhash } = await connection.getLatestBlockhash();
    const fund = new Transaction({ feePayer: from.publicKey, recentBlockhash: blockhash }).add(
      SystemProgram.transfer({ fromPubkey: from.publicKey, toPubkey: new PublicKey(treasury), lamports: 500_000_000 }),
    );
    fund.sign(from);
    const funded = await send(connection, fund.serialize());
    await until('fund_sol', () => seen.find((e) => e.kind === 'agent.treasury.fund_sol' && e.signature === funded.signature));

    // 0.1 SOL out through /v1/submit: its prepared event records it
    const viaGateway = await prepareSigned(
      t,
      { app: a, key },
      {
        path: `/v1/agents/${mint}/treasury/withdraw-sol/prepare`,
        body: { payer: owner.publicKey.toBase58(), authority: owner.publicKey.toBase58(), destination: wallet, lamports: '100000000' },
      },
      owner,
    );
    const submittedSig = await submitted(t, { app: a, key }, viaGateway);

    // 0.05 SOL out, and the USDC account provisioned, each signed and sent straight to the ledger
    const direct = await prepareSigned(
      t,
      { app: a, key },
      {
        path: `/v1/agents/${mint}/treasury/withdraw-sol/prepare`,
        body: { payer: owner.publicKey.toBase58(), authority: owner.publicKey.toBase58(), destination: wallet, lamports: '50000000' },
      },
      owner,
    );
    const out = await send(connection, direct.signed);
    t.is(out.err, null);
    const provision = await prepareSigned(
      t,
      { app: a, key },
      { path: `/v1/agents/${mint}/treasury/provision/prepare`, body: { payer: owner.publicKey.toBase58() } },
      owner,
    );
    const provisioned = await send(connection, provision.signed);
    t.is(provisioned.err, null);

    const withdrawn = await until('indexer withdraw_sol', () => seen.find((e) => e.kind === 'agent.treasury.withdraw_sol' && e.signature === out.signature));
    t.like(withdrawn, { phase: 'CONFIRMED', agentAsset: mint });
    t.deepEqual(withdrawn.metadata, { source: 'indexer', treasury, lamports: '50000000', destination: wallet });
    const created = await until('indexer provision', () => seen.find((e) => e.kind === 'agent.treasury.provision' && e.signature === provisioned.signature));
    const treasuryUsdc = getAssociatedTokenAddressSync(new PublicKey(USDC.mint), new PublicKey(treasury), true);
    t.like(created.metadata, { source: 'indexer', mint: USDC.mint, currency: 'USDC', token_account: treasuryUsdc.toBase58() });

    // 3 USDC in by plain transfer, then 1 USDC out through Execute, signed and sent outside the gateway
    const usdcIn = new Transaction({ feePayer: from.publicKey, recentBlockhash: (await connection.getLatestBlockhash()).blockhash }).add(
      createTransferCheckedInstruction(
        getAssociatedTokenAddressSync(new PublicKey(USDC.mint), from.publicKey),
        new PublicKey(USDC.mint),
        treasuryUsdc,
        from.publicKey,
        3_000_000n,
        USDC.decimals,
      ),
    );
    usdcIn.sign(from);
    const usdcFunded = await send(connection, usdcIn.serialize());
    t.is(usdcFunded.err, null);
    const tokenOut = await prepareSigned(
      t,
      { app: a, key },
      {
        path: `/v1/agents/${mint}/treasury/withdraw/prepare`,
        body: { payer: owner.publicKey.toBase58(), authority: owner.publicKey.toBase58(), spl_mint: USDC.mint, destination: wallet, amount: '1000000' },
      },
      owner,
    );
    const tokenSent = await send(connection, tokenOut.signed);
    t.is(tokenSent.err, null);
    const withdrawnUsdc = await until('indexer withdraw', () => seen.find((e) => e.kind === 'agent.treasury.withdraw' && e.signature === tokenSent.signature));
    t.deepEqual(withdrawnUsdc.metadata, {
      source: 'indexer',
      token_account: treasuryUsdc.toBase58(),
      mint: USDC.mint,
      currency: 'USDC',
      amount_atomic: '1000000',
      destination: getAssociatedTokenAddressSync(new PublicKey(USDC.mint), new PublicKey(wallet)).toBase58(),
    });
    t.truthy(seen.find((e) => e.kind === 'agent.treasury.fund' && e.signature === usdcFunded.signature));

    await indexedPast(a, tokenSent.slot);
    const ofSubmitted = (await eventsOf(a, key, mint)).filter((e) => e.signature === submittedSig);
    t.deepEqual(
      ofSubmitted.map((e) => [e.id, e.kind, e.phase]),
      [[viaGateway.envelope.event_id, 'agent.treasury.withdraw_sol', 'confirmed']],
      'only the prepared event',
    );
    t.is(await a.database.store.indexer.countSeen(NET, submittedSig), 0);
  },
);

// The rules alone (domain/indexer/rules.ts): boundaries that a ledger flow cannot pin down cheaply.

function landed(over: Partial<LedgerTransaction>): LedgerTransaction {
  return {
    signature: 'sig',
    slot: 10,
    blockTime: null,
    version: 'legacy',
    err: null,
    fee: 5_000n,
    accountKeys: [],
    signers: [],
    recentBlockhash: '11111111111111111111111111111111',
    wire: new Uint8Array(0),
    preBalances: [],
    postBalances: [],
    preTokenBalances: [],
    postTokenBalances: [],
    instructions: [],
    innerInstructions: [],
    logs: [],
    unitsConsumed: null,
    ...over,
  };
}

const AGENT = Keypair.generate().publicKey.toBase58();
const PAYER = Keypair.generate().publicKey.toBase58();
const watchedTreasury: WatchedAddress = {
  network: NET,
  address: treasuryOf(AGENT),
  role: 'treasury',
  agent: AGENT,
  ownerPrincipal: 'key:x',
  mint: null,
  cursorSignature: null,
  cursorSlot: null,
  addedAt: new Date(0),
};

test('rules: 5000 lamports into a treasury is fund_sol, 4999 is noise; a failed transaction is nothing', (t) => {
  const into = (lamports: bigint) =>
    landed({
      accountKeys: [PAYER, treasuryOf(AGENT)],
      preBalances: [10_000_000n, 1_000_000n],
      postBalances: [10_000_000n - lamports - 5_000n, 1_000_000n + lamports],
    });
  const ctx = { network: NET, feeAuthority: null, watched: [watchedTreasury] };
  t.deepEqual(
    findingsOf(into(5_000n), ctx).map((f) => [f.kind, f.key, f.agent]),
    [['agent.treasury.fund_sol', `fund_sol:${treasuryOf(AGENT)}`, AGENT]],
  );
  t.deepEqual(findingsOf(into(4_999n), ctx), []);
  t.deepEqual(findingsOf({ ...into(5_000n), err: { InstructionError: [0, { Custom: 1 }] } }, ctx), []);
});

test('rules: lamports leaving a treasury are withdraw_sol only through a Core instruction naming it (inner ones count)', (t) => {
  const treasury = treasuryOf(AGENT);
  const out = (over: Partial<LedgerTransaction>) =>
    landed({ accountKeys: [PAYER, treasury, AGENT], preBalances: [1_000_000n, 50_000_000n, 0n], postBalances: [981_000n, 30_000_000n, 20_000_000n], ...over });
  const ctx = { network: NET, feeAuthority: null, watched: [watchedTreasury] };
  t.deepEqual(findingsOf(out({}), ctx), [], 'no Core instruction');
  const core = { programId: MPL_CORE_PROGRAM_ID, accounts: [AGENT, treasury, PAYER], data: new Uint8Array([31]) };
  const top = findingsOf(out({ instructions: [core] }), ctx);
  t.deepEqual(
    top.map((f) => f.kind),
    ['agent.treasury.withdraw_sol'],
  );
  t.like(top[0]!.event({ id: 'e', phase: 'confirmed', network: NET, agentAsset: AGENT, owner: null, createdAt: new Date(0) }).metadata, {
    source: 'indexer',
    lamports: '20000000',
    destination: AGENT,
  });
  const inner = findingsOf(
    out({ instructions: [{ programId: PAYER, accounts: [], data: new Uint8Array() }], innerInstructions: [{ index: 0, instructions: [core] }] }),
    ctx,
  );
  t.deepEqual(
    inner.map((f) => f.kind),
    ['agent.treasury.withdraw_sol'],
  );
});

// serial: the injected failure shows on the network's status, which the status test reads
test.serial('a failed run is recorded as the status last_error; the next good run clears it', async (t) => {
  const { a } = t.context;
  const real = a.services.ledgers[NET]!;
  // fault injection: the node answers everything but the signature listing
  const broken = faultyLedger(real, { getSignaturesForAddress: refuses(new Error('node down (injected)')) });
  const faulty = new IndexerService({ store: a.database.store, clock: a.services.clock, ledgers: { [NET]: broken }, settings: a.services.settings });
  await recordAgent(a, await issueKey(a)); // something to follow
  const before = new Date();
  await t.throwsAsync(faulty.run(NET), { message: /injected/ });
  const caller = { network: NET, role: 'user', owner: 'key:status', ownerWallet: null } as const;
  const [failed] = (await a.services.indexer.status(caller)).data;
  t.true(new Date(failed!.last_error_at!) >= new Date(before.getTime() - 1000), JSON.stringify(failed));
  const [recovered] = await until('a good run after the failure', async () => {
    const s = (await a.services.indexer.status(caller)).data;
    return s[0]!.last_error === null && new Date(s[0]!.last_run_at!) > new Date(failed!.last_error_at!) ? s : undefined;
  });
  t.is(recovered!.last_error_at, failed!.last_error_at, 'when it last failed stays');
});

test('GET …/treasury/balances puts every token account the treasury holds on the watchlist: a mint outside the stables is then followed', async (t) => {
  const { a } = t.context;
  const key = await issueKey(a);
  const seen = await watch(t, a, key);
  const { mint: agent } = await recordAgent(a, key);
  const treasury = new PublicKey(treasuryOf(agent));
  const from = await donor(t);
  const connection = rpc(t);
  const other = Keypair.generate();
  const otherAccount = getAssociatedTokenAddressSync(other.publicKey, treasury, true);
  const { blockhash } = await connection.getLatestBlockhash();
  // a new mint and the treasury's account of it (the treasury is among this transaction's keys: followed already)
  const setup = new Transaction({ feePayer: from.publicKey, recentBlockhash: blockhash }).add(
    SystemProgram.createAccount({
      fromPubkey: from.publicKey,
      newAccountPubkey: other.publicKey,
      lamports: await getMinimumBalanceForRentExemptMint(connection),
      space: MINT_SIZE,
      programId: TOKEN_PROGRAM_ID,
    }),
    createInitializeMint2Instruction(other.publicKey, 0, from.publicKey, null),
    createAssociatedTokenAccountIdempotentInstruction(from.publicKey, otherAccount, treasury, other.publicKey),
  );
  setup.sign(from, other);
  const made = await send(connection, setup.serialize());
  t.is(made.err, null);
  await until('provision of the other mint’s account', () => seen.find((e) => e.kind === 'agent.treasury.provision' && e.signature === made.signature));

  // minted straight into that account: the treasury is not among the keys, and the account is not watched yet
  const mintTo = new Transaction({ feePayer: from.publicKey, recentBlockhash: blockhash }).add(
    createMintToInstruction(other.publicKey, otherAccount, from.publicKey, 7),
  );
  mintTo.sign(from);
  const minted = await send(connection, mintTo.serialize());
  t.is(minted.err, null);
  await indexedPast(a, minted.slot);
  t.falsy(
    seen.find((e) => e.signature === minted.signature),
    'not followed before the balances read',
  );

  const balances = await http(a, 'GET', `/v1/agents/${agent}/treasury/balances`, { key });
  t.is(balances.status, 200);
  t.true(balances.body.tokens.some((x: { token_account: string }) => x.token_account === otherAccount.toBase58()));
  const fund = await until('the mint seen after the balances read', () =>
    seen.find((e) => e.kind === 'agent.treasury.fund' && e.signature === minted.signature),
  );
  t.like(fund.metadata, {
    source: 'indexer',
    token_account: otherAccount.toBase58(),
    mint: other.publicKey.toBase58(),
    currency: null,
    amount_atomic: '7',
    from: null,
  });
});

test('signatures since a cursor are read page by page (before/until), newest first, down to the cursor', async (t) => {
  const { a } = t.context;
  const ledger = a.services.ledgers[NET]!;
  const paged = new IndexerService({
    store: a.database.store,
    clock: a.services.clock,
    ledgers: { [NET]: ledger },
    settings: a.services.settings,
    pageSize: 2,
  });
  const target = Keypair.generate().publicKey;
  const from = await donor(t);
  const connection = rpc(t);
  const sigs: string[] = [];
  for (let i = 0; i < 6; i++) {
    const { blockhash } = await connection.getLatestBlockhash();
    const tx = new Transaction({ feePayer: from.publicKey, recentBlockhash: blockhash }).add(
      SystemProgram.transfer({ fromPubkey: from.publicKey, toPubkey: target, lamports: 1_000_000 + i }),
    );
    tx.sign(from);
    sigs.push((await send(connection, tx.serialize())).signature);
  }
  const cursor = await ledger.getSignaturesForAddress(target.toBase58(), { limit: 1000 });
  const first = cursor.find((s) => s.signature === sigs[0])!;
  const since = await paged.signaturesSince(ledger, target.toBase58(), { signature: first.signature, slot: first.slot });
  t.deepEqual(
    since.map((s) => s.signature),
    sigs.slice(1).reverse(),
  );
  t.is((await paged.signaturesSince(ledger, target.toBase58(), null)).length, 2, 'without a cursor: the newest page only');
});
