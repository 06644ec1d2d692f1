import anyTest, { type ExecutionContext, type TestFn } from 'ava';
import { createHash } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Keypair } from '@solana/web3.js';
import { decodePaymentResponse } from '../../interfaces/client/paying-fetch.ts';
import type { FacilitatorRequest } from '../../domain/facilitator/wire.ts';
import { decodeTransaction } from '../../domain/facilitator/decode.ts';
import { MikroOrmStore } from '../../adapters/store/mikro-orm-store.ts';
import { startProcessOwner } from '../../adapters/store/process-owner.ts';
import { startTestApp, type TestApp } from '../support/app.ts';
import { until } from '../support/until.ts';
import {
  buildPayment,
  createLink,
  decodeBase64Json,
  fundBuyer,
  getLink,
  paidCallsOf,
  receiptsOf,
  recordingPayingFetch,
  startLocalServer,
  startPaywallApp,
  tokenBalance,
  type BuiltPayment,
  type PaywallWorld,
  fundFeeVault,
} from '../support/paywall.ts';

// No money lost on a crash, the focused cases: a paid call whose process died after the transaction was
// broadcast is found and finished at once — by the buyer's replay or by the reconciliation job — and a
// duplicate_settlement from the facilitator for a transaction the ledger confirms is a success to resume, whoever
// holds the claim. "Process B dies" is emulated in-process: B's ledger calls go through a JSON-RPC proxy that stops
// answering once B has broadcast (B hangs mid-settle, as a killed process would stop), then B's liveness session —
// the PostgreSQL connection holding its advisory lock — is closed, exactly what the kernel does on kill -9. The tests
// that run the reconciliation job (it sees every test's calls) run serially, before the others.

const test = anyTest as TestFn<PaywallWorld>;
const PRICE = 10_000n; // linkBody's $0.01

test.before(async (t) => {
  const w = await startPaywallApp();
  // Sponsor the fee authority's token account up front (one sponsorship per owner and mint; tests run concurrently).
  await fundFeeVault(w);
  t.context = w;
});

/** A JSON-RPC pass-through to `target` that goes silent (never answers again) right after forwarding a sendTransaction. */
async function silencingProxy(target: string): Promise<{ url: string; sent: Promise<void>; close(): void }> {
  let silent = false;
  let markSent!: () => void;
  const sent = new Promise<void>((resolve) => (markSent = resolve));
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      if (silent) return; // the process is "dead": no answer, ever
      const body = Buffer.concat(chunks);
      const answer = await fetch(target, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
      const text = await answer.text();
      if (body.includes('sendTransaction')) {
        silent = true;
        markSent();
        return;
      }
      res.writeHead(answer.status, { 'content-type': 'application/json' }).end(text);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    sent,
    close: () => {
      server.closeAllConnections();
      server.close();
    },
  };
}

/**
 * Gateway B (same database, A's ledger through the silencing proxy) takes a buyer's payment for a new link of A's,
 * broadcasts it and dies before answering or recording anything. Returns the buyer's PAYMENT-SIGNATURE to replay.
 */
async function paymentLostInACrash(t: ExecutionContext<PaywallWorld>) {
  const w = t.context;
  const created = await createLink(w, { response: { status: 200, body: { survived: true } } });
  const buyer = await fundBuyer(w);
  const proxy = await silencingProxy(w.rpcUrl);
  const b: TestApp = await startTestApp({
    dataDir: w.app.dataDir,
    databaseUrl: w.app.database.url,
    env: { SVC_DEVNET_LEDGER: proxy.url, SVC_MAINNET_LEDGER: w.app.ledgers.rpcUrls['chain-mainnet']!, SVC_JOBS: 'off' },
  });
  t.teardown(async () => {
    proxy.close();
    await b.close().catch(() => {});
  });
  const { pay, sent } = recordingPayingFetch(w, buyer);
  const url = `${b.url}/x/${created.link.id}?network=chain-devnet`;
  void pay(url).catch(() => {}); // never answered: B "dies" mid-settle
  await proxy.sent;
  await until('the payment landed on the ledger', async () => (await tokenBalance(w, created.treasury)) === PRICE);
  await b.database.owner.close(); // B's process is gone, as far as PostgreSQL can tell
  const paymentHeader = sent.map((h) => h.get('PAYMENT-SIGNATURE')).find(Boolean)!;
  t.truthy(paymentHeader);
  const rows = await paidCallsOf(w, created.link.id);
  t.deepEqual(
    rows.map((r) => r.status),
    ['running'],
    'B held the claim when it died',
  );
  return { ...created, buyer, paymentHeader, replayUrl: `${w.app.url}/x/${created.link.id}?network=chain-devnet` };
}

test('a claim whose owner process died is taken over at once: the replay to another instance gets 200, recorded once', async (t) => {
  const w = t.context;
  const lost = await paymentLostInACrash(t);

  const started = Date.now();
  const replay = await fetch(lost.replayUrl, { headers: { 'PAYMENT-SIGNATURE': lost.paymentHeader } });
  const text = await replay.text();
  t.log(`replay answered in ${Date.now() - started} ms`);
  t.is(replay.status, 200, text); // before: 504 payment_pending for the 2-minute lease, then 402 duplicate_settlement
  t.deepEqual(JSON.parse(text), { survived: true });
  const settled = decodePaymentResponse(replay.headers.get('PAYMENT-RESPONSE')!);
  t.is(settled.payer, lost.buyer.publicKey.toBase58());

  t.is(await tokenBalance(w, lost.treasury), PRICE, 'settled once');
  const receipts = await receiptsOf(w, lost.agent);
  t.is(receipts.length, 1);
  t.is(receipts[0]!.tx_sig, settled.transaction);
  t.is((await getLink(w, lost.link.id)).counters.settled_count, 1);
  t.deepEqual(
    (await paidCallsOf(w, lost.link.id)).map((r) => r.status),
    ['done'],
  );

  const again = await fetch(lost.replayUrl, { headers: { 'PAYMENT-SIGNATURE': lost.paymentHeader } });
  t.is(again.status, 200);
  t.is(again.headers.get('X-Svc-Replayed'), 'true');
  t.is((await receiptsOf(w, lost.agent)).length, 1);
});

test.serial('a claim whose owner process died is finished by the reconciliation job; the late replay gets the stored response', async (t) => {
  const w = t.context;
  const lost = await paymentLostInACrash(t);

  // before: the job listed only `pending` calls, so a crashed `running` one was never found
  const tally = await w.app.services.paywall!.resolvePending({ olderThanMs: 0 });
  t.true(tally.resolved >= 1, JSON.stringify(tally));
  t.deepEqual(
    (await paidCallsOf(w, lost.link.id)).map((r) => r.status),
    ['done'],
  );
  t.is((await receiptsOf(w, lost.agent)).length, 1);
  t.is((await getLink(w, lost.link.id)).counters.settled_count, 1);
  t.is(await tokenBalance(w, lost.treasury), PRICE);

  const replay = await fetch(lost.replayUrl, { headers: { 'PAYMENT-SIGNATURE': lost.paymentHeader } });
  t.is(replay.status, 200);
  t.is(replay.headers.get('X-Svc-Replayed'), 'true');
  t.deepEqual(await replay.json(), { survived: true });
});

/** The facilitator request the paywall would send for a hand-built payment of `url`. */
function facilitatorRequest(paymentSignature: string): FacilitatorRequest {
  const payload = decodeBase64Json(paymentSignature);
  return { x402Version: 2, paymentPayload: payload, paymentRequirements: payload.accepted } as FacilitatorRequest;
}

for (const policy of ['before_forward', 'on_success'] as const) {
  test(`a facilitator duplicate_settlement for a transaction the ledger confirms resumes to success for a fresh claimant (${policy})`, async (t) => {
    const w = t.context;
    const upstream = await startLocalServer(() => ({ status: 200, headers: { 'content-type': 'application/json' }, body: '{"resumed":true}' }));
    t.teardown(() => upstream.close());
    const { link, agent, treasury, url } = await createLink(w, { settle_policy: policy, metadata: { upstream_url: `${upstream.url}/data` } });
    const buyer = await fundBuyer(w);
    const payment = await buildPayment(w, url, buyer);
    // The transaction was settled (it landed) but no paid call was recorded: what a process that died between the
    // facilitator's answer and its claim's first write — before this fix, any crash after broadcast — leaves behind.
    const direct = await w.app.services.facilitator!.settle(facilitatorRequest(payment.paymentSignature));
    t.true(direct.success, JSON.stringify(direct));
    t.is(await tokenBalance(w, treasury), PRICE);
    t.deepEqual(await paidCallsOf(w, link.id), []);

    const replay = await fetch(url, { headers: { 'PAYMENT-SIGNATURE': payment.paymentSignature } });
    const text = await replay.text();
    t.is(replay.status, 200, text); // before: 402 duplicate_settlement, the paid call deleted
    t.deepEqual(JSON.parse(text), { resumed: true });
    t.is(decodePaymentResponse(replay.headers.get('PAYMENT-RESPONSE')!).transaction, direct.transaction);
    t.is((await receiptsOf(w, agent)).length, 1);
    t.is((await getLink(w, link.id)).counters.settled_count, 1);
    t.is(await tokenBalance(w, treasury), PRICE, 'nothing settled twice');
  });
}

test('a payment whose record was pruned after its replay window is never recorded twice: 402 payment_already_used', async (t) => {
  const w = t.context;
  const { link, agent, url } = await createLink(w);
  const buyer = await fundBuyer(w);
  const payment = await buildPayment(w, url, buyer);
  const first = await fetch(url, { headers: { 'PAYMENT-SIGNATURE': payment.paymentSignature } });
  t.is(first.status, 200);
  await w.app.database.orm.em.fork().execute(`delete from paid_calls where network = 'chain-devnet' and link_id = ?`, [link.id]); // as prune does after 24 h

  const late = await fetch(url, { headers: { 'PAYMENT-SIGNATURE': payment.paymentSignature } });
  t.is(late.status, 402);
  t.is(decodeBase64Json(late.headers.get('PAYMENT-REQUIRED')).error, 'payment_already_used');
  t.is((await receiptsOf(w, agent)).length, 1);
  t.is((await getLink(w, link.id)).counters.settled_count, 1);
  t.deepEqual(await paidCallsOf(w, link.id), []);
});

test.serial('a claim that never reached settlement and whose owner died is forgotten by the job (nothing moved); the buyer can pay again', async (t) => {
  const w = t.context;
  const { link, url, treasury } = await createLink(w);
  const buyer = await fundBuyer(w);
  const payment = await buildPayment(w, url, buyer);
  // A process claims the payment and dies before asking the facilitator: its liveness session ends with it.
  const owner = await startProcessOwner(w.app.database.url);
  const dying = new MikroOrmStore(w.app.database.orm, owner);
  const now = new Date();
  const paymentKey = createHash('sha256')
    .update(decodeTransaction(Buffer.from(payment.transaction, 'base64')).messageBytes)
    .digest('hex');
  const claim = await dying.paidCalls.claim({
    network: 'chain-devnet',
    paymentKey,
    linkPk: (await w.app.database.store.paymentLinks.get('chain-devnet', link.id))!.pk,
    linkId: link.id,
    lockedUntil: new Date(now.getTime() + 120_000),
    at: now,
    expiresAt: new Date(now.getTime() + 86_400_000),
  });
  t.true(claim.claimed);
  await owner.close();

  const tally = await w.app.services.paywall!.resolvePending({ olderThanMs: 0 });
  t.true(tally.forgotten >= 1, JSON.stringify(tally));
  t.deepEqual(await paidCallsOf(w, link.id), []);
  t.is(await tokenBalance(w, treasury), 0n, 'nothing moved');

  const paid = await fetch(url, { headers: { 'PAYMENT-SIGNATURE': payment.paymentSignature } });
  t.is(paid.status, 200);
  t.is(await tokenBalance(w, treasury), PRICE);
});

test.serial('resuming a kept paid call checks its upstream first: an upstream that cannot be called moves no money, the call stays pending', async (t) => {
  const w = t.context;
  const { link, url, treasury } = await createLink(w, { metadata: { upstream_url: 'http://127.0.0.1:9/data' } });
  // Its upstream turned into one the outbound guard refuses in every configuration (a scheme it never calls), written
  // straight to the store before the paywall first reads the link: the check fails without any network.
  const stored = (await w.app.database.store.paymentLinks.get('chain-devnet', link.id))!;
  await w.app.database.store.paymentLinks.update({ ...stored, metadata: { ...stored.metadata, upstream_url: 'ftp://127.0.0.1/data' } });
  const buyer = await fundBuyer(w);
  const payment = await buildPayment(w, url, buyer);
  // Kept by an earlier attempt whose outcome was never learned (its request is in the claim; nothing was sent).
  await keepPending(t, w, { linkId: link.id, payment });

  const replay = await fetch(url, { headers: { 'PAYMENT-SIGNATURE': payment.paymentSignature } });
  const body = (await replay.json()) as { error: string; message: string };
  t.is(replay.status, 502, JSON.stringify(body));
  t.is(body.error, 'upstream_failed');
  t.regex(body.message, /kept pending/);
  t.is(await tokenBalance(w, treasury), 0n, 'nothing was settled'); // before: resumed without the check, and charged
  t.deepEqual(
    (await paidCallsOf(w, link.id)).map((r) => r.status),
    ['pending'],
  );
});

test.serial('a kept paid call is never dropped by a process whose facilitator has another fee payer: it stays pending for one that has it', async (t) => {
  const w = t.context;
  const { link, agent, url, treasury } = await createLink(w);
  const buyer = await fundBuyer(w);
  const payment = await buildPayment(w, url, buyer);
  // Landed, and its call pending (its outcome never learned).
  const direct = await w.app.services.facilitator!.settle(facilitatorRequest(payment.paymentSignature));
  t.true(direct.success, JSON.stringify(direct));
  await keepPending(t, w, { linkId: link.id, payment });

  // A job runner set up with another fee-payer key (say, another SVC_FACILITATOR_SECRET_KEY) on the same database.
  const other = await startTestApp({
    dataDir: w.app.dataDir,
    databaseUrl: w.app.database.url,
    env: {
      SVC_DEVNET_LEDGER: w.rpcUrl,
      SVC_MAINNET_LEDGER: w.app.ledgers.rpcUrls['chain-mainnet']!,
      SVC_JOBS: 'off',
      SVC_FACILITATOR_SECRET_KEY: JSON.stringify(Array.from(Keypair.generate().secretKey)),
    },
  });
  t.teardown(() => other.close());
  const tally = await other.services.paywall!.resolvePending({ olderThanMs: 0 });
  t.is(tally.refused, 0, JSON.stringify(tally)); // before: its facilitator refused the transaction and the call was dropped
  t.deepEqual(
    (await paidCallsOf(w, link.id)).map((r) => r.status),
    ['pending'],
  );

  const after = await w.app.services.paywall!.resolvePending({ olderThanMs: 0 });
  t.true(after.resolved >= 1, JSON.stringify(after));
  t.is((await receiptsOf(w, agent)).length, 1);
  t.is(await tokenBalance(w, treasury), PRICE);
});

/**
 * The paid call of `payment` kept by an earlier attempt whose outcome was never learned: claimed, attempted and
 * pending, with its request in the claim and nothing sent.
 */
async function keepPending(t: ExecutionContext<PaywallWorld>, w: PaywallWorld, options: { linkId: string; payment: BuiltPayment }): Promise<void> {
  const { linkId, payment } = options;
  const paymentKey = createHash('sha256')
    .update(decodeTransaction(Buffer.from(payment.transaction, 'base64')).messageBytes)
    .digest('hex');
  const now = new Date();
  const paidCalls = w.app.database.store.paidCalls;
  const linkPk = (await w.app.database.store.paymentLinks.get('chain-devnet', linkId))!.pk;
  const claim = await paidCalls.claim({
    network: 'chain-devnet',
    paymentKey,
    linkPk,
    linkId,
    lockedUntil: now,
    at: now,
    expiresAt: new Date(now.getTime() + 86_400_000),
  });
  t.true(claim.claimed);
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
}
