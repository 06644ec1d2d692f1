import anyTest, { type ExecutionContext, type TestFn } from 'ava';
import { Keypair, SystemProgram, Transaction } from '@solana/web3.js';
import { http, recordAgent, removeDataDir, startTestApp, type TestApp } from '../support/app.ts';
import { faultyLedger } from '../support/faulty-ledger.ts';
import { startReceiver, type Receiver } from '../support/receiver.ts';
import { until } from '../support/until.ts';
import { TestClock } from '../support/clock.ts';
import { PREPARED_TTL_MS, TransactionService, type Decision } from '../../domain/transactions/service.ts';
import { DomainError } from '../../domain/shared/errors.ts';
import { encodeBase58 } from '../../domain/shared/base58.ts';
import type { Ledger, SendResult, SignatureStatus } from '../../domain/ports/ledger.ts';
import { RpcLedger } from '../../adapters/ledger/rpc/rpc-ledger.ts';
import { startTcpProxy } from '../support/node-proxy.ts';
import { systemClock } from '../../adapters/clock/system.ts';
import type { Caller } from '../../domain/access/ownership.ts';
import type { PreparedEnvelope } from '../../domain/transactions/schema.ts';

// Prepare → sign → submit → track through the real TransactionService, on a plan whose instructions are a
// plain System transfer (the builders of the 14 routes have their own tests); submit over HTTP, the confirmations
// job of the app's runner, the event's phases.

interface Ctx {
  app: TestApp;
  receiver: Receiver;
  key: string;
  caller: Caller;
  mint: string;
}
const test = anyTest as TestFn<Ctx>;

test.before(async (t) => {
  const receiver = await startReceiver();
  const app = await startTestApp({ env: { SVC_OUTBOUND_ALLOW: receiver.allow } });
  const created = await app.services.access.issueKey({ network: 'chain-devnet', role: 'user' });
  const { mint } = await recordAgent(app, created.key);
  t.context = { app, receiver, key: created.key, caller: { network: 'chain-devnet', role: 'user', owner: `key:${created.id}`, ownerWallet: null }, mint };
});

test.after.always(async (t) => {
  await t.context.receiver?.close();
});

async function funded(app: TestApp, sol = '1'): Promise<Keypair> {
  const kp = Keypair.generate();
  await app.services.dev.fund('chain-devnet', { address: kp.publicKey.toBase58(), sol });
  return kp;
}

/** A prepared System transfer of `lamports` from `from` (fee payer and only signer) to a fresh address. */
async function prepareTransfer(t: { context: Ctx }, from: Keypair, lamports = 1_000_000n): Promise<{ envelope: PreparedEnvelope; to: string }> {
  const { app, caller, mint } = t.context;
  const to = Keypair.generate().publicKey;
  const envelope = await app.services.transactions.prepareForAgent(caller, mint, async () => ({
    kind: 'agent.treasury.withdraw_sol',
    agent: mint,
    feePayer: from.publicKey.toBase58(),
    instructions: [SystemProgram.transfer({ fromPubkey: from.publicKey, toPubkey: to, lamports })],
    echo: { destination: to.toBase58() },
    metadata: { lamports: lamports.toString(), destination: to.toBase58() },
  }));
  return { envelope, to: to.toBase58() };
}

function sign(envelope: PreparedEnvelope, ...signers: Keypair[]): string {
  const tx = Transaction.from(Buffer.from(envelope.transaction!.base64, 'base64'));
  tx.partialSign(...signers);
  return tx.serialize({ requireAllSignatures: false }).toString('base64');
}

test('prepare → sign → submit → confirmed by the job: 202, then the event confirmed with slot and block_time, the money moved', async (t) => {
  const { app, key } = t.context;
  const from = await funded(app);
  const { envelope, to } = await prepareTransfer(t, from);
  t.truthy(envelope.event_id);
  const tx = envelope.transaction!;
  t.deepEqual(tx.signers, [from.publicKey.toBase58()]);
  t.is(tx.fee_payer, tx.signers[0]!);
  t.regex(tx.message_hash, /^[0-9a-f]{64}$/);
  const prepared = await http(app, 'GET', `/v1/events/${envelope.event_id}`, { key });
  t.like(prepared.body, { id: envelope.event_id, kind: 'agent.treasury.withdraw_sol', phase: 'prepared', signature: null });

  const signed = sign(envelope, from);
  const res = await http(app, 'POST', '/v1/submit', { key, body: { event_id: envelope.event_id, transaction_base64: signed, client_reference: 'order-7' } });
  t.is(res.status, 202, JSON.stringify(res.body));
  t.like(res.body, { event_id: envelope.event_id, phase: 'submitted', network: 'chain-devnet', replayed: false });

  const confirmed = await until(
    'confirmed',
    async () => {
      const e = await http(app, 'GET', `/v1/events/${envelope.event_id!}`, { key });
      return e.body.phase === 'confirmed' ? e.body : undefined;
    },
    { everyMs: 250 },
  );
  t.like(confirmed, { signature: res.body.signature, client_reference: 'order-7', error_code: null });
  t.true(Number.isInteger(confirmed.slot) && confirmed.slot > 0);
  t.true(Number.isInteger(confirmed.block_time));
  t.truthy(confirmed.confirmed_at);
  t.is(await app.services.ledgers['chain-devnet']!.getBalance(to), 1_000_000n);

  // The same transaction again: 200, replayed, no second broadcast (the event stays as it is).
  const again = await http(app, 'POST', '/v1/submit', { key, body: { event_id: envelope.event_id, transaction_base64: signed } });
  t.is(again.status, 200);
  t.like(again.body, { signature: res.body.signature, replayed: true });
});

test("the agent record's executive is the delegation the gateway prepared and saw confirmed; a confirmed revoke of it clears it", async (t) => {
  const { app, caller, key } = t.context;
  const { mint } = await recordAgent(app, key);
  t.is((await http(app, 'GET', `/v1/agents/${mint}`, { key })).body.executive, null);
  const from = await funded(app);
  const executive = Keypair.generate().publicKey.toBase58();
  /** a plan of `kind` (a plain transfer stands in for its instructions), submitted and confirmed by the job */
  const confirmed = async (kind: 'agent.delegation.set' | 'agent.executive.revoke', metadata: Record<string, string>) => {
    const envelope = await app.services.transactions.prepareForAgent(caller, mint, async () => ({
      kind,
      agent: mint,
      feePayer: from.publicKey.toBase58(),
      instructions: [SystemProgram.transfer({ fromPubkey: from.publicKey, toPubkey: Keypair.generate().publicKey, lamports: 1_000_000n })],
      echo: {},
      metadata,
    }));
    const res = await http(app, 'POST', '/v1/submit', { key, body: { event_id: envelope.event_id, transaction_base64: sign(envelope, from) } });
    t.is(res.status, 202, JSON.stringify(res.body));
    await until(
      `${kind} confirmed`,
      async () => (await http(app, 'GET', `/v1/events/${envelope.event_id!}`, { key })).body.phase === 'confirmed' || undefined,
      { everyMs: 250 },
    );
  };
  // prepared but not confirmed: nothing changes
  await app.services.transactions.prepareForAgent(caller, mint, async () => ({
    kind: 'agent.delegation.set',
    agent: mint,
    feePayer: from.publicKey.toBase58(),
    instructions: [SystemProgram.transfer({ fromPubkey: from.publicKey, toPubkey: Keypair.generate().publicKey, lamports: 1n })],
    echo: {},
    metadata: { stable_symbol: 'USDC', allowance_atomic: '1', delegate: executive },
  }));
  t.is((await http(app, 'GET', `/v1/agents/${mint}`, { key })).body.executive, null);

  await confirmed('agent.delegation.set', { stable_symbol: 'USDC', allowance_atomic: '5000000', delegate: executive });
  t.is((await http(app, 'GET', `/v1/agents/${mint}`, { key })).body.executive, executive);
  const viaGql = await graphql(app, key, `query($m: String!) { agent(mint: $m) { executive } }`, { m: mint });
  t.is(viaGql.data?.agent?.executive, executive, JSON.stringify(viaGql));
  // a revoke naming another wallet leaves it; its own revoke clears it
  await confirmed('agent.executive.revoke', { executive: Keypair.generate().publicKey.toBase58() });
  t.is((await http(app, 'GET', `/v1/agents/${mint}`, { key })).body.executive, executive);
  await confirmed('agent.executive.revoke', { executive });
  t.is((await http(app, 'GET', `/v1/agents/${mint}`, { key })).body.executive, null);
});

test('submit refuses: another transaction for a submitted event (409), a changed message or a missing signature (422), an unknown or foreign event (404)', async (t) => {
  const { app, key } = t.context;
  const from = await funded(app);
  const { envelope } = await prepareTransfer(t, from);

  const unsigned = envelope.transaction!.base64;
  const missing = await http(app, 'POST', '/v1/submit', { key, body: { event_id: envelope.event_id, transaction_base64: unsigned } });
  t.is(missing.status, 422);
  t.is(missing.body.error, 'transaction_invalid');
  t.deepEqual(missing.body.details.missing_signers, [from.publicKey.toBase58()]);

  // Another message (a different amount) signed by the right key.
  const { envelope: other } = await prepareTransfer(t, from, 2_000_000n);
  const foreignMessage = await http(app, 'POST', '/v1/submit', { key, body: { event_id: envelope.event_id, transaction_base64: sign(other, from) } });
  t.is(foreignMessage.status, 422);
  t.is(foreignMessage.body.error, 'transaction_invalid');

  const garbage = await http(app, 'POST', '/v1/submit', { key, body: { event_id: envelope.event_id, transaction_base64: 'AAAA' } });
  t.is(garbage.status, 422);

  const ok = await http(app, 'POST', '/v1/submit', { key, body: { event_id: envelope.event_id, transaction_base64: sign(envelope, from) } });
  t.is(ok.status, 202);
  // Re-signed bytes of the same message are the same transaction (ed25519 is deterministic): still a replay.
  t.is((await http(app, 'POST', '/v1/submit', { key, body: { event_id: envelope.event_id, transaction_base64: sign(envelope, from) } })).status, 200);
  // hosted-api §4.5.5: once submitted, any other transaction for the event is 409 (a changed message no longer 422).
  for (const transaction_base64 of [sign(other, from), unsigned]) {
    const another = await http(app, 'POST', '/v1/submit', { key, body: { event_id: envelope.event_id, transaction_base64 } });
    t.is(another.status, 409, JSON.stringify(another.body));
    t.is(another.body.error, 'event_already_submitted');
    t.is(another.body.details.signature, ok.body.signature);
  }

  const unknown = await http(app, 'POST', '/v1/submit', { key, body: { event_id: '01JZZZZZZZZZZZZZZZZZZZZZZZ', transaction_base64: unsigned } });
  t.is(unknown.status, 404);
  t.is(unknown.body.error, 'event_not_found');
  const stranger = (await app.services.access.issueKey({ network: 'chain-devnet', role: 'user' })).key;
  const foreign = await http(app, 'POST', '/v1/submit', { key: stranger, body: { event_id: other.event_id!, transaction_base64: sign(other, from) } });
  t.is(foreign.status, 404);
  t.is((await http(app, 'GET', `/v1/events/${other.event_id}`, { key: stranger })).status, 404);
});

test('a transaction the ledger refuses in preflight is 422 transaction_rejected and fails the event; another submit is 409 event_failed', async (t) => {
  const { app, key } = t.context;
  const poor = await funded(app, '0.01');
  const { envelope } = await prepareTransfer(t, poor, 5_000_000_000n);
  const res = await http(app, 'POST', '/v1/submit', { key, body: { event_id: envelope.event_id, transaction_base64: sign(envelope, poor) } });
  t.is(res.status, 422, JSON.stringify(res.body));
  t.is(res.body.error, 'transaction_rejected');
  t.true(Array.isArray(res.body.details.logs));
  t.like((await http(app, 'GET', `/v1/events/${envelope.event_id}`, { key })).body, { phase: 'failed', error_code: 'instruction_error' });
  const again = await http(app, 'POST', '/v1/submit', { key, body: { event_id: envelope.event_id, transaction_base64: sign(envelope, poor) } });
  t.is(again.status, 409);
  t.is(again.body.error, 'event_failed');
});

test('concurrent submits of one event: one broadcast, the others are replays', async (t) => {
  const { app, key } = t.context;
  const from = await funded(app);
  const { envelope } = await prepareTransfer(t, from);
  const signed = sign(envelope, from);
  const results = await Promise.all(
    Array.from({ length: 6 }, () => http(app, 'POST', '/v1/submit', { key, body: { event_id: envelope.event_id, transaction_base64: signed } })),
  );
  t.is(results.filter((r) => r.status === 202).length, 1, JSON.stringify(results.map((r) => [r.status, r.body.error])));
  t.is(results.filter((r) => r.status === 200 && r.body.replayed === true).length, 5);
});

test('the OpenAPI document lists POST /v1/submit with 202 and 200', async (t) => {
  const { app } = t.context;
  const doc = await http(app, 'GET', '/openapi.json');
  const op = doc.body.paths['/v1/submit'].post;
  t.truthy(op.responses['202']);
  t.truthy(op.responses['200']);
});

test('a prepared event not submitted within 24 h is failed "expired" by the job; submitting it then is 409 transaction_expired', async (t) => {
  const clock = new TestClock();
  const app = await startTestApp({ appOptions: { clock } });
  t.teardown(async () => {
    await app.close();
    await removeDataDir(app.dataDir);
  });
  const created = await app.services.access.issueKey({ network: 'chain-devnet', role: 'user' });
  const { mint } = await recordAgent(app, created.key);
  const from = await funded(app);
  const local = {
    context: {
      app,
      receiver: t.context.receiver,
      key: created.key,
      caller: { network: 'chain-devnet', role: 'user', owner: `key:${created.id}`, ownerWallet: null },
      mint,
    } as Ctx,
  };
  const { envelope } = await prepareTransfer(local, from);
  const { envelope: fresh } = await prepareTransfer(local, from, 3_000_000n);

  clock.advance(PREPARED_TTL_MS - 1000);
  t.is(await app.services.transactions.expirePrepared(), 0, 'not yet 24 h old');
  clock.advance(2000);
  t.is(await app.services.transactions.expirePrepared(), 2);
  const expired = await http(app, 'GET', `/v1/events/${envelope.event_id!}`, { key: created.key });
  t.like(expired.body, { phase: 'failed', error_code: 'expired' });
  const res = await http(app, 'POST', '/v1/submit', { key: created.key, body: { event_id: fresh.event_id, transaction_base64: sign(fresh, from) } });
  t.is(res.status, 409);
  t.is(res.body.error, 'transaction_expired');
});

/** The app's devnet ledger with sendTransaction replaced (a fault-injecting adapter). */
const withSend = (ledger: Ledger, send: (wire: Uint8Array) => Promise<SendResult>): Ledger => faultyLedger(ledger, { sendTransaction: send });

for (const fault of ['rpc_unavailable', 'submit_timeout'] as const) {
  test(`a broadcast that fails with ${fault} answers ${fault === 'rpc_unavailable' ? 502 : 504} with the event id; the event stays submitted and the job lands it`, async (t) => {
    const { app, key, caller } = t.context;
    const real = app.services.ledgers['chain-devnet']!;
    // rpc_unavailable: the node never got it; submit_timeout: it got it, the answer was lost.
    const flaky = withSend(real, async (wire) => {
      if (fault === 'submit_timeout') await real.sendTransaction(wire);
      throw new DomainError(fault, `injected ${fault}`, {});
    });
    const service = new TransactionService({
      store: app.database.store,
      clock: systemClock,
      ledgers: { 'chain-devnet': flaky },
      settings: app.services.settings,
    });
    const { from, to, envelope } = await preparedTransfer(t, service, 1_234_567n);
    const error = await t.throwsAsync(service.submit(caller, { event_id: envelope.event_id!, transaction_base64: sign(envelope, from) }), {
      instanceOf: DomainError,
    });
    t.is(error!.code, fault);
    t.like(error!.details, { event_id: envelope.event_id });
    t.is(error!.status, fault === 'rpc_unavailable' ? 502 : 504);
    t.is((await http(app, 'GET', `/v1/events/${envelope.event_id!}`, { key })).body.phase, 'submitted');
    // The app's confirmations job (the real ledger) reads no status, re-broadcasts the stored bytes, then confirms.
    const confirmed = await until(
      'confirmed',
      async () => {
        const e = await http(app, 'GET', `/v1/events/${envelope.event_id!}`, { key });
        return e.body.phase === 'confirmed' ? e.body : undefined;
      },
      { everyMs: 250 },
    );
    t.truthy(confirmed.slot);
    t.is(await real.getBalance(to.toBase58()), 1_234_567n, 'landed once');
  });
}

// Tracking on the ledger's notifications (hosted-api §3.1): the process that broadcast a transaction decides its event
// when the ledger says it is confirmed. Each test runs its own TransactionService whose clock is an hour ahead, so the
// row's first check is an hour away and the app's confirmations job cannot take it: `onDecided` (told only by the wait
// on the notification, and only when that wait moved the event) shows who decided.

/** A TransactionService on `ledger` that the app's confirmations job cannot overtake; its notification decisions. */
function tracker(app: TestApp, ledger: Ledger): { service: TransactionService; decided: Decision[] } {
  const decided: Decision[] = [];
  const service = new TransactionService({
    store: app.database.store,
    clock: new TestClock(Date.now() + 3_600_000),
    ledgers: { 'chain-devnet': ledger },
    settings: app.services.settings,
    onDecided: (d) => decided.push(d),
  });
  return { service, decided };
}

/**
 * Waits for `check` while `service`'s wait on its submitted signature is open. That wait ends by itself (its 60 s
 * deadline, or a decision that failed) and nothing else decides these rows within the hour, so a condition it still
 * owes once it has ended never comes: the test fails then with `what`, instead of hanging until AVA's timeout.
 */
async function whileFollowing(service: TransactionService, what: string, check: () => boolean): Promise<void> {
  let ended = false;
  void service.drain().then(() => {
    ended = true;
  });
  await until(what, () => check() || ended);
  if (!check()) throw new Error(`${what}: the service's wait on the signature ended first (its deadline passed, or its decision failed)`);
}

/** The rpc adapter counting its status reads (each poll is one; the notification path reads once when subscribed). */
class CountingRpcLedger extends RpcLedger {
  statusReads = 0;
  override getSignatureStatuses(signatures: string[]): Promise<(SignatureStatus | null)[]> {
    this.statusReads++;
    return super.getSignatureStatuses(signatures);
  }
}

/**
 * The rpc adapter over the app's embedded JSON-RPC, its PubSub WebSocket through a proxy the test can cut, and its
 * broadcast held back (a fault: the node "accepted" it and lost it) so the test lands the bytes itself once the wait
 * is subscribed: what decides the event is then the notification, or the fallback, never the read at subscribe.
 */
async function rpcTracked(t: ExecutionContext<Ctx>) {
  const { app } = t.context;
  const url = app.ledgers.rpcUrls['chain-devnet']!;
  const proxy = await startTcpProxy({ host: '127.0.0.1', port: Number(new URL(url).port) }); // the server takes upgrades on its HTTP port too
  const rpc = new CountingRpcLedger({ url, wsUrl: `ws://127.0.0.1:${proxy.port}` });
  t.teardown(async () => {
    rpc.close();
    await proxy.close();
  });
  let held: Uint8Array | undefined;
  const ledger = faultyLedger(rpc, {
    sendTransaction: async (wire) => {
      held = wire;
      return { ok: true, signature: encodeBase58(wire.subarray(1, 65)) };
    },
  });
  const land = async () => {
    const sent = await app.services.ledgers['chain-devnet']!.sendTransaction(held!);
    t.true(sent.ok, JSON.stringify(sent));
  };
  return { rpc, proxy, ledger, land };
}

/** A transfer of `lamports` from a funded wallet, prepared through `service` (the agent's withdraw_sol kind). */
async function preparedTransfer(t: ExecutionContext<Ctx>, service: TransactionService, lamports: bigint) {
  const { app, caller, mint } = t.context;
  const from = await funded(app);
  const to = Keypair.generate().publicKey;
  const envelope = await service.prepareForAgent(caller, mint, async () => ({
    kind: 'agent.treasury.withdraw_sol',
    agent: mint,
    feePayer: from.publicKey.toBase58(),
    instructions: [SystemProgram.transfer({ fromPubkey: from.publicKey, toPubkey: to, lamports })],
    echo: {},
    metadata: { lamports: String(lamports), destination: to.toBase58() },
  }));
  return { from, to, envelope };
}

/** A transfer prepared and submitted through `service`; its event id, signature and destination. */
async function submitTransfer(t: ExecutionContext<Ctx>, service: TransactionService): Promise<{ eventId: string; signature: string; to: string }> {
  const { caller } = t.context;
  const { from, to, envelope } = await preparedTransfer(t, service, 1_111_111n);
  const res = await service.submit(caller, { event_id: envelope.event_id!, transaction_base64: sign(envelope, from) });
  t.like(res, { phase: 'submitted', replayed: false });
  return { eventId: envelope.event_id!, signature: res.signature, to: to.toBase58() };
}

/** The event decided once: confirmed with its slot, one history entry per phase, the money moved once. */
async function confirmedOnce(t: ExecutionContext<Ctx>, submitted: { eventId: string; signature: string; to: string }, decided: Decision[]): Promise<void> {
  const { app, key } = t.context;
  t.is(decided.length, 1);
  t.like(decided[0], { event_id: submitted.eventId, phase: 'confirmed', signature: submitted.signature });
  const event = (await http(app, 'GET', `/v1/events/${submitted.eventId}`, { key })).body;
  t.like(event, { phase: 'confirmed', signature: submitted.signature, error_code: null });
  t.deepEqual(
    event.phases.map((p: { phase: string }) => p.phase),
    ['prepared', 'submitted', 'confirmed'],
  );
  t.is(await app.services.ledgers['chain-devnet']!.getBalance(submitted.to), 1_111_111n, 'landed once');
}

test('submit → confirmed on the embedded ledger’s own commit event, with no status read and before the job’s first check', async (t) => {
  const real = t.context.app.services.ledgers['chain-devnet']!;
  let statusReads = 0;
  const counted = faultyLedger(real, {
    getSignatureStatuses: (signatures) => {
      statusReads++;
      return real.getSignatureStatuses(signatures);
    },
  });
  const { service, decided } = tracker(t.context.app, counted);
  const submitted = await submitTransfer(t, service);
  await whileFollowing(service, 'decided on the notification', () => decided.length > 0);
  await confirmedOnce(t, submitted, decided);
  t.is(statusReads, 0, 'nothing polled');
});

test('submit → confirmed through the rpc adapter on signatureSubscribe (the embedded JSON-RPC + WebSocket as the node): one status read at subscribe, no poll', async (t) => {
  const { rpc, ledger, land } = await rpcTracked(t);
  const { service, decided } = tracker(t.context.app, ledger);
  const submitted = await submitTransfer(t, service);
  await whileFollowing(service, 'subscribed (its one status read)', () => rpc.statusReads >= 1);
  t.is(decided.length, 0, 'not landed yet');
  await land();
  await whileFollowing(service, 'decided on the notification', () => decided.length > 0);
  await confirmedOnce(t, submitted, decided);
  t.is(rpc.statusReads, 1, 'the notification decided it, not a poll');
});

// serial: it cuts and refuses a socket and counts the status reads it causes; alone, nothing else in the file competes
// for the ledger's answers while it waits on them
test.serial('the rpc adapter’s WebSocket cut mid-wait and refused: the wait falls back to polling, the event is confirmed once, nothing lost', async (t) => {
  const { rpc, proxy, ledger, land } = await rpcTracked(t);
  const { service, decided } = tracker(t.context.app, ledger);
  const submitted = await submitTransfer(t, service);
  await whileFollowing(service, 'subscribed', () => rpc.statusReads >= 1);
  proxy.refuse(true);
  proxy.cut();
  await whileFollowing(service, 'polling after the drop', () => rpc.statusReads >= 3);
  await land();
  await whileFollowing(service, 'decided by the fallback', () => decided.length > 0);
  await confirmedOnce(t, submitted, decided);
  t.true(rpc.statusReads >= 3, 'decided by a poll');
});

async function graphql(app: TestApp, key: string, query: string, variables: Record<string, unknown>) {
  const res = await fetch(`${app.url}/graphql`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ query, variables }),
  });
  return (await res.json()) as { data?: any; errors?: { message: string; extensions?: { code?: string } }[] };
}

test('the three doors: prepare over tRPC, the same route over GraphQL, submit over GraphQL; errors carry the same codes', async (t) => {
  const { app, key, mint } = t.context;
  const owner = await funded(app);
  // tRPC: agents/prepare (the gateway pre-signs the fresh asset's slot).
  const trpc = await fetch(`${app.url}/trpc/prepare.agentCreate`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ owner: owner.publicKey.toBase58(), name: 'Three doors', uri: 'https://example.com/a.json' }),
  });
  const envelope = ((await trpc.json()) as { result: { data: PreparedEnvelope } }).result.data;
  t.is(envelope.transaction!.signers.length, 2);
  t.is(envelope.transaction!.signers[0], owner.publicKey.toBase58());
  t.is(envelope.transaction!.signers[1], String(envelope.echo.asset));

  const SUBMIT = `mutation($input: SubmitTransactionInput!) { submitTransaction(input: $input) { eventId signature phase replayed } }`;
  const submitted = await graphql(app, key, SUBMIT, { input: { eventId: envelope.event_id, transactionBase64: sign(envelope, owner) } });
  t.like(submitted.data?.submitTransaction, { eventId: envelope.event_id, phase: 'SUBMITTED', replayed: false }, JSON.stringify(submitted));
  // Another transaction for the submitted event: the same 409 code over GraphQL (hosted-api §4.5.5).
  const another = await graphql(app, key, SUBMIT, { input: { eventId: envelope.event_id, transactionBase64: envelope.transaction!.base64 } });
  t.is(another.errors?.[0]?.extensions?.code, 'event_already_submitted', JSON.stringify(another));

  // GraphQL: provision on an agent whose treasury accounts exist already (recording prepared them) is a no-op.
  const PREPARE = `mutation($route: PrepareRoute!, $input: JSON!) { prepareTransaction(route: $route, input: $input) { eventId noOp transaction { signers } echo } }`;
  const noop = await graphql(app, key, PREPARE, { route: 'PROVISION', input: { mint } });
  t.like(noop.data?.prepareTransaction, { eventId: null, noOp: true, transaction: null }, JSON.stringify(noop));
  const rest = await http(app, 'POST', `/v1/agents/${mint}/treasury/provision/prepare`, { key, body: {} });
  t.like(rest.body, { event_id: null, transaction: null, no_op: true });

  // The same refusals: a bad body (400 invalid_request) and another principal's agent (404 agent_not_found).
  const bad = await graphql(app, key, PREPARE, { route: 'WITHDRAW_SOL', input: { mint, lamports: '-1' } });
  t.is(bad.errors?.[0]?.extensions?.code, 'invalid_request');
  t.is((await http(app, 'POST', `/v1/agents/${mint}/treasury/withdraw-sol/prepare`, { key, body: { lamports: '-1' } })).body.error, 'invalid_request');
  const stranger = (await app.services.access.issueKey({ network: 'chain-devnet', role: 'user' })).key;
  const foreign = await graphql(app, stranger, PREPARE, { route: 'PROVISION', input: { mint } });
  t.is(foreign.errors?.[0]?.extensions?.code, 'agent_not_found');
  t.is((await http(app, 'POST', `/v1/agents/${mint}/treasury/provision/prepare`, { key: stranger, body: {} })).status, 404);
});

test('each phase of a prepared event is its own webhook delivery: prepared, submitted, confirmed', async (t) => {
  const { app, key, receiver } = t.context;
  const hook = await http(app, 'POST', '/v1/webhooks', { key, body: { url: `${receiver.url}/phases`, events: ['agent.treasury.withdraw_sol'] } });
  t.is(hook.status, 201, JSON.stringify(hook.body));
  const from = await funded(app);
  const { envelope } = await prepareTransfer(t, from);
  const res = await http(app, 'POST', '/v1/submit', { key, body: { event_id: envelope.event_id, transaction_base64: sign(envelope, from) } });
  t.is(res.status, 202);
  const phases = await until('three deliveries', () => {
    const mine = receiver.received
      .filter((h) => h.url === '/phases')
      .map(
        (h) => JSON.parse(h.body) as { type: string; phase: string; data: { id: string; phases: { phase: string; at: string; signature: string | null }[] } },
      );
    const ofEvent = mine.filter((p) => p.data.id === envelope.event_id);
    return ofEvent.length >= 3 ? ofEvent : undefined;
  });
  t.deepEqual(phases.map((p) => p.phase).sort(), ['confirmed', 'prepared', 'submitted']);
  t.true(phases.every((p) => p.type === 'agent.treasury.withdraw_sol'));
  // Each delivery's data is the event when it was sent, with its history so far: whichever phase it announces, the
  // history begins prepared and holds that phase; the confirmed one holds all three, the signature from submission on.
  for (const p of phases) {
    t.is(p.data.phases[0]?.phase, 'prepared', JSON.stringify(p.data.phases));
    t.true(
      p.data.phases.some((h) => h.phase === p.phase),
      JSON.stringify(p.data.phases),
    );
  }
  const done = phases.find((p) => p.phase === 'confirmed')!.data.phases;
  t.deepEqual(
    done.map((h) => h.phase),
    ['prepared', 'submitted', 'confirmed'],
  );
  t.deepEqual(
    done.map((h) => h.signature),
    [null, res.body.signature, res.body.signature],
  );
  const read = await http(app, 'GET', `/v1/events/${envelope.event_id}`, { key });
  t.deepEqual(read.body.phases, done, 'GET /v1/events/{id} carries the same history');
  await http(app, 'DELETE', `/v1/webhooks/${hook.body.id}`, { key });
});

test('the same Idempotency-Key gives the same event id and the same transaction bytes', async (t) => {
  const { app, key } = t.context;
  // agents/prepare draws a fresh asset key each time: only the stored first answer can make the second one equal.
  const body = { owner: Keypair.generate().publicKey.toBase58(), name: 'Idempotent', uri: 'https://example.com/a.json' };
  const headers = { 'idempotency-key': `prep-${Date.now()}` };
  const first = await http(app, 'POST', '/v1/agents/prepare', { key, headers, body });
  const second = await http(app, 'POST', '/v1/agents/prepare', { key, headers, body });
  t.is(first.status, 200, JSON.stringify(first.body));
  t.is(second.status, 200);
  t.truthy(first.body.event_id);
  t.deepEqual(second.body, first.body);
  const third = await http(app, 'POST', '/v1/agents/prepare', { key, body });
  t.not(third.body.event_id, first.body.event_id, 'without the key it is a new event');
});

test('identity and executive routes on a ledger without the Agent Registry answer 503 program_unavailable naming it; agents/prepare says not_registered', async (t) => {
  const { app, key, mint } = t.context;
  const executive = Keypair.generate().publicKey.toBase58();
  for (const [path, body] of [
    [`/v1/agents/${mint}/identity/prepare`, { uri: 'https://example.com/a.json' }],
    [`/v1/agents/${mint}/executive/register/prepare`, { authority: executive }],
    [`/v1/agents/${mint}/executive/delegate/prepare`, { executive }],
    [`/v1/agents/${mint}/executive/revoke/prepare`, { executive }],
    [`/v1/agents/${mint}/token/set/prepare`, { genesis_account: executive }],
  ] as const) {
    const res = await http(app, 'POST', path, { key, body });
    t.is(res.status, 503, `${path}: ${JSON.stringify(res.body)}`);
    t.is(res.body.error, 'program_unavailable', path);
    t.regex(String(res.body.details?.program), /^(1DREG|TLREG)/, path);
  }
  const owner = Keypair.generate().publicKey.toBase58();
  const created = await http(app, 'POST', '/v1/agents/prepare', { key, body: { owner, name: 'No registry', uri: 'https://example.com/a.json' } });
  t.is(created.status, 200);
  t.is(created.body.identity, 'not_registered');
  t.true(created.body.warnings.some((w: string) => w.includes('1DREG')));
});
