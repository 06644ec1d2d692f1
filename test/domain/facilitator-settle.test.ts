import anyTest, { type ExecutionContext, type TestFn } from 'ava';
import { Keypair, PublicKey, Transaction } from '@solana/web3.js';
import { createAssociatedTokenAccountIdempotentInstruction, createBurnCheckedInstruction, createCloseAccountInstruction } from '@solana/spl-token';
import { systemClock } from '../../adapters/clock/system.ts';
import { MikroOrmFacilitatorStore } from '../../adapters/store/repositories/facilitator.ts';
import { buildPaymentTransaction, feeLayoutFor } from '../../domain/facilitator/build.ts';
import { feePayerFromSecretKey, type FeePayerSigner } from '../../domain/facilitator/ed25519.ts';
import type { PaymentRequirements } from '../../domain/facilitator/schema.ts';
import { FacilitatorService, type FacilitatorSettings } from '../../domain/facilitator/service.ts';
import type { FacilitatorRequest, SettleResponse } from '../../domain/facilitator/wire.ts';
import type { Ledger } from '../../domain/ports/ledger.ts';
import { encodeBase58 } from '../../domain/shared/base58.ts';
import { findStable } from '../../domain/shared/network.ts';
import { startTestApp, type TestApp } from '../support/app.ts';
import { until } from '../support/until.ts';
import { faultyLedger } from '../support/faulty-ledger.ts';
import { waitForCommitment } from '../support/ledger.ts';
import { TestClock } from '../support/clock.ts';
import { devnetUsdcOffer } from '../support/facilitator.ts';

// The facilitator's stateful rules on a real gateway (DECISIONS "Facilitator"): rent sponsorship (one sponsored
// creation per (owner, mint), a daily lamport budget) and the duplicate guard under concurrency. Each test builds its
// own FacilitatorService over the app's store and ledger, with a fee payer of its own, so it can choose the settings
// (a tiny budget, a slow confirmation poll) and knows the signature the facilitator will give a transaction.

const test = anyTest as TestFn<{ app: TestApp; ledger: Ledger }>;
const NETWORK = 'chain-devnet' as const;
const USDC = findStable(NETWORK, 'USDC')!;
const AMOUNT = 10_000n;
const ATA_RENT = 2_039_280n;

test.before(async (t) => {
  const app = await startTestApp();
  t.context = { app, ledger: app.services.ledgers[NETWORK]! };
});

async function fund(app: TestApp, address: string, funds: { usdc?: string; sol?: string }): Promise<void> {
  if (funds.sol) await app.services.dev.fund(NETWORK, { address, sol: funds.sol });
  if (funds.usdc) await app.services.dev.fund(NETWORK, { address, token: 'USDC', amount: funds.usdc });
}

interface Facilitator {
  service: FacilitatorService;
  signer: FeePayerSigner;
}

/** A facilitator of its own: fresh fee payer funded from the faucet, the app's store and ledger. */
async function facilitator(t: ExecutionContext<{ app: TestApp; ledger: Ledger }>, settings: Partial<FacilitatorSettings> = {}): Promise<Facilitator> {
  const { app } = t.context;
  const signer = feePayerFromSecretKey(Keypair.generate().secretKey);
  await fund(app, signer.address, { sol: '10' });
  const service = new FacilitatorService({
    ledgers: app.services.ledgers,
    store: new MikroOrmFacilitatorStore(app.database.orm),
    signer,
    clock: systemClock,
    settings: {
      networks: [NETWORK],
      fee: app.services.settings.fee,
      rentBudgetLamports: 1_000_000_000n,
      confirmTimeoutMs: 30_000,
      confirmPollMs: 50,
      ...settings,
    },
  });
  return { service, signer };
}

interface Payment {
  request: FacilitatorRequest;
  /** the signature the facilitator gives it (ed25519 is deterministic) */
  signature: string;
  gross: bigint;
  sellerAccount: string;
}

/** A buyer-signed payment of AMOUNT to `seller`: the fee layout (fee leg, in-transaction creations) or the stock one. */
async function payment(
  t: ExecutionContext<{ app: TestApp; ledger: Ledger }>,
  f: Facilitator,
  parties: { buyer: Keypair; seller: string; layout: 'fee' | 'stock' },
): Promise<Payment> {
  const { buyer, seller, layout } = parties;
  const { app, ledger } = t.context;
  const { fee } = app.services.settings;
  const terms = { bps: fee.bps, feeAuthority: fee.authorities[NETWORK] };
  const withFee = layout === 'fee';
  const { offer, requirements } = devnetUsdcOffer({ payTo: seller, feePayer: f.signer.address, amount: AMOUNT, fee: withFee ? terms : undefined });
  const { blockhash } = await ledger.getLatestBlockhash();
  const tx = buildPaymentTransaction({ feePayer: f.signer.address, payer: buyer.publicKey.toBase58(), requirements, blockhash, createAtas: withFee });
  tx.sign([buyer]);
  const transaction = Buffer.from(tx.serialize()).toString('base64');
  const layoutOf = feeLayoutFor(requirements);
  return {
    request: { x402Version: 2, paymentPayload: { x402Version: 2, accepted: offer, payload: { transaction } }, paymentRequirements: offer },
    signature: encodeBase58(f.signer.sign(tx.message.serialize())),
    gross: layoutOf.gross,
    sellerAccount: layoutOf.sellerAccount,
  };
}

async function usdc(ledger: Ledger, owner: string): Promise<bigint> {
  return (await ledger.getTokenBalances(owner, { mint: USDC.mint })).reduce((sum, b) => sum + b.amount, 0n);
}

async function buyer(t: ExecutionContext<{ app: TestApp; ledger: Ledger }>): Promise<Keypair> {
  const kp = Keypair.generate();
  await fund(t.context.app, kp.publicKey.toBase58(), { usdc: '1' });
  return kp;
}

/** Lamports of sponsored rent spent today on the devnet, across every facilitator instance on this database. */
async function budgetUsed(app: TestApp): Promise<bigint> {
  const rows = (await app.database.orm.em
    .fork({ useContext: false })
    .execute(`select lamports_used::text as used from rent_budget where network = ? and day = ?`, [NETWORK, new Date().toISOString().slice(0, 10)])) as {
    used: string;
  }[];
  return BigInt(rows[0]?.used ?? '0');
}

// Serial: it sets the day's budget from what is spent so far, which concurrent tests would change under it.
test.serial('daily rent budget: a creation that fits is sponsored, the next is ata_creation_not_sponsored; a refusal reserves nothing', async (t) => {
  const { app, ledger } = t.context;
  const main = await facilitator(t);
  // Warm-up: the fee vault exists before the budget is measured (its creation is sponsored once too).
  t.like(
    await main.service.settle((await payment(t, main, { buyer: await buyer(t), seller: Keypair.generate().publicKey.toBase58(), layout: 'fee' })).request),
    { success: true },
  );

  const tight = await facilitator(t, { rentBudgetLamports: (await budgetUsed(app)) + ATA_RENT });
  const payer = await buyer(t);
  const [first, second] = [Keypair.generate().publicKey.toBase58(), Keypair.generate().publicKey.toBase58()];

  // The last account the budget covers: created before the stock transfer lands.
  const fits = await payment(t, tight, { buyer: payer, seller: first, layout: 'stock' });
  t.like(await tight.service.verify(fits.request), { isValid: true });
  t.like(await tight.service.settle(fits.request), { success: true, transaction: fits.signature });
  t.is(await usdc(ledger, first), AMOUNT);

  // Spent: neither layout gets a new account, and nothing moves.
  const before = await usdc(ledger, payer.publicKey.toBase58());
  for (const layout of ['stock', 'fee'] as const) {
    const refused = await payment(t, tight, { buyer: payer, seller: second, layout });
    t.like(await tight.service.verify(refused.request), { isValid: false, invalidReason: 'ata_creation_not_sponsored' }, layout);
    t.like(await tight.service.settle(refused.request), { success: false, errorReason: 'ata_creation_not_sponsored', transaction: '' }, layout);
  }
  t.is(await usdc(ledger, payer.publicKey.toBase58()), before);
  t.is(await ledger.getAccount(sellerAccountOf(second)), null);

  // An existing account needs no rent: the tight facilitator still settles to it.
  const existing = await payment(t, tight, { buyer: payer, seller: first, layout: 'fee' });
  t.like(await tight.service.settle(existing.request), { success: true });
  t.is(await usdc(ledger, first), 2n * AMOUNT);

  // The refusals left no sponsorship behind: with budget to spare, the same seller is sponsored.
  const later = await payment(t, main, { buyer: payer, seller: second, layout: 'stock' });
  t.like(await main.service.settle(later.request), { success: true });
  t.is(await usdc(ledger, second), AMOUNT);
});

function sellerAccountOf(owner: string): string {
  return feeLayoutFor({
    scheme: 'exact',
    network: NETWORK,
    payTo: owner,
    asset: USDC.mint,
    amount: AMOUNT,
    tokenProgram: USDC.tokenProgramId as PaymentRequirements['tokenProgram'],
    decimals: USDC.decimals,
  }).sellerAccount;
}

test('one sponsored creation per (owner, mint): after the owner closes the account and takes the rent, a payment needing it again is refused', async (t) => {
  const { app, ledger } = t.context;
  const f = await facilitator(t);
  const payer = await buyer(t);
  const seller = Keypair.generate();
  const owner = seller.publicKey.toBase58();
  await fund(app, owner, { sol: '1' });

  const first = await payment(t, f, { buyer: payer, seller: owner, layout: 'fee' });
  t.like(await f.service.settle(first.request), { success: true });
  const account = await ledger.getAccount(first.sellerAccount);
  t.is(account?.lamports, ATA_RENT, 'the facilitator paid the rent');

  // The owner empties and closes it: the rent goes to the owner.
  const lamportsBefore = await ledger.getBalance(owner);
  const mint = new PublicKey(USDC.mint);
  const program = new PublicKey(USDC.tokenProgramId);
  const accountKey = new PublicKey(first.sellerAccount);
  const close = new Transaction({ feePayer: seller.publicKey, recentBlockhash: (await ledger.getLatestBlockhash()).blockhash }).add(
    createBurnCheckedInstruction(accountKey, mint, seller.publicKey, AMOUNT, USDC.decimals, [], program),
    createCloseAccountInstruction(accountKey, seller.publicKey, seller.publicKey, [], program),
  );
  close.sign(seller);
  const sent = await ledger.sendTransaction(close.serialize());
  t.true(sent.ok, JSON.stringify(sent));
  if (!sent.ok) return;
  t.is((await waitForCommitment(ledger, sent.signature, 'confirmed')).err, null);
  t.is(await ledger.getAccount(first.sellerAccount), null);
  t.is(await ledger.getBalance(owner), lamportsBefore + ATA_RENT - 5_000n, 'rent reclaimed, one signature fee paid');

  // Paying again needs the account again: not a second time at the facilitator's expense, in either layout.
  const before = await usdc(ledger, payer.publicKey.toBase58());
  for (const layout of ['stock', 'fee'] as const) {
    const again = await payment(t, f, { buyer: payer, seller: owner, layout });
    const verdict = await f.service.verify(again.request);
    t.like(verdict, { isValid: false, invalidReason: 'ata_creation_not_sponsored' }, layout);
    t.regex(verdict.invalidMessage ?? '', /already paid once/);
    t.like(await f.service.settle(again.request), { success: false, errorReason: 'ata_creation_not_sponsored', transaction: '' }, layout);
  }
  t.is(await usdc(ledger, payer.publicKey.toBase58()), before, 'nothing moved');
  t.is(await ledger.getAccount(first.sellerAccount), null);

  // The owner creates it at their own expense: payments settle again.
  const recreate = new Transaction({ feePayer: seller.publicKey, recentBlockhash: (await ledger.getLatestBlockhash()).blockhash }).add(
    createAssociatedTokenAccountIdempotentInstruction(seller.publicKey, accountKey, seller.publicKey, mint, program),
  );
  recreate.sign(seller);
  const recreated = await ledger.sendTransaction(recreate.serialize());
  t.true(recreated.ok);
  if (recreated.ok) await waitForCommitment(ledger, recreated.signature, 'confirmed');
  const paid = await payment(t, f, { buyer: payer, seller: owner, layout: 'stock' });
  t.like(await f.service.settle(paid.request), { success: true });
  t.is(await usdc(ledger, owner), AMOUNT);
});

const outcome = (r: SettleResponse) => (r.success ? 'success' : (r.errorReason ?? 'unknown'));

test('five concurrent settles of one transaction: exactly one success, the rest duplicate or pending, the money moves once', async (t) => {
  const { ledger } = t.context;
  const f = await facilitator(t);
  const payer = await buyer(t);
  const seller = Keypair.generate().publicKey.toBase58();
  const p = await payment(t, f, { buyer: payer, seller, layout: 'fee' });
  const before = await usdc(ledger, payer.publicKey.toBase58());

  const results = await Promise.all(Array.from({ length: 5 }, () => f.service.settle(p.request)));
  const outcomes = results.map(outcome);
  t.is(outcomes.filter((o) => o === 'success').length, 1, outcomes.join(', '));
  t.true(
    outcomes.every((o) => ['success', 'duplicate_settlement', 'settlement_pending'].includes(o)),
    outcomes.join(', '),
  );
  for (const r of results) if (r.success || r.errorReason === 'settlement_pending') t.is(r.transaction, p.signature);

  t.is(await usdc(ledger, payer.publicKey.toBase58()), before - p.gross);
  t.is(await usdc(ledger, seller), AMOUNT);
  t.like(await f.service.settle(p.request), { success: false, errorReason: 'duplicate_settlement' });
  t.is(await usdc(ledger, payer.publicKey.toBase58()), before - p.gross, 'moved once');
});

test('five concurrent stock-layout settles to a seller without an account: the account is created once, the money moves once', async (t) => {
  const { ledger } = t.context;
  const f = await facilitator(t);
  const payer = await buyer(t);
  const seller = Keypair.generate().publicKey.toBase58();
  const p = await payment(t, f, { buyer: payer, seller, layout: 'stock' });
  const before = await usdc(ledger, payer.publicKey.toBase58());
  const outcomes = (await Promise.all(Array.from({ length: 5 }, () => f.service.settle(p.request)))).map(outcome);
  t.is(outcomes.filter((o) => o === 'success').length, 1, outcomes.join(', '));
  t.true(
    outcomes.every((o) => ['success', 'duplicate_settlement', 'settlement_pending'].includes(o)),
    outcomes.join(', '),
  );
  t.is(await usdc(ledger, payer.publicKey.toBase58()), before - AMOUNT);
  t.is(await usdc(ledger, seller), AMOUNT);
});

// A settle that finds the claim pending while its first settle still waits for confirmation answers
// settlement_pending: the first one reports the success, so one payment is one success.
test('a second settle of a transaction whose first settle is still confirming is not a second success', async (t) => {
  const { ledger } = t.context;
  const f = await facilitator(t, { confirmPollMs: 1_500 });
  const payer = await buyer(t);
  const p = await payment(t, f, { buyer: payer, seller: Keypair.generate().publicKey.toBase58(), layout: 'fee' });
  const first = f.service.settle(p.request);
  while (!(await ledger.getSignatureStatuses([p.signature]))[0]) await new Promise((r) => setTimeout(r, 5));
  const second = outcome(await f.service.settle(p.request));
  t.is(outcome(await first), 'success');
  t.true(['duplicate_settlement', 'settlement_pending'].includes(second), `second settle: ${second}`);
});

test('a settle that answered settlement_pending is resolved by settling again: success once, then duplicate', async (t) => {
  const { app, ledger } = t.context;
  // Fault injection: the node does not report the transaction until `hidden` is cleared.
  let hidden = true;
  const slow = faultyLedger(ledger, {
    getSignatureStatuses: async (signatures) => (hidden ? signatures.map(() => null) : ledger.getSignatureStatuses(signatures)),
    waitForSignature: async (...args) => (hidden ? null : ledger.waitForSignature(...args)),
  });
  const signer = feePayerFromSecretKey(Keypair.generate().secretKey);
  await fund(app, signer.address, { sol: '1' });
  const service = new FacilitatorService({
    ledgers: { [NETWORK]: slow },
    store: new MikroOrmFacilitatorStore(app.database.orm),
    signer,
    clock: systemClock,
    settings: { networks: [NETWORK], fee: app.services.settings.fee, rentBudgetLamports: 1_000_000_000n, confirmTimeoutMs: 300, confirmPollMs: 50 },
  });
  const f = { service, signer };
  const payer = await buyer(t);
  const seller = Keypair.generate().publicKey.toBase58();
  const p = await payment(t, f, { buyer: payer, seller, layout: 'fee' });
  const before = await usdc(ledger, payer.publicKey.toBase58());

  t.like(await service.settle(p.request), { success: false, errorReason: 'settlement_pending', transaction: p.signature });
  t.is(await usdc(ledger, seller), AMOUNT, 'it landed all the same');
  hidden = false;
  t.like(await service.settle(p.request), { success: true, transaction: p.signature });
  t.like(await service.settle(p.request), { success: false, errorReason: 'duplicate_settlement' });
  t.is(await usdc(ledger, payer.publicKey.toBase58()), before - p.gross, 'moved once');
});

// x402 settlement_pending across instances (DECISIONS "Facilitator"): the instance that stopped waiting leaves the row
// for the next settle, whichever instance gets it; that settle reconciles from PostgreSQL and the ledger, sending
// nothing; GET /status answers by signature, message hash or payment id all along.
test('a payment answered settlement_pending on one instance is reconciled by a settle on another: never sent twice, one success', async (t) => {
  const { app, ledger } = t.context;
  const signer = feePayerFromSecretKey(Keypair.generate().secretKey);
  await fund(app, signer.address, { sol: '1' });
  let sends = 0;
  const late = faultyLedger(ledger, {
    getSignatureStatuses: async (signatures) => signatures.map(() => null),
    waitForSignature: async () => null,
    sendTransaction: async (wire) => {
      sends++;
      return ledger.sendTransaction(wire);
    },
  });
  const counted = faultyLedger(ledger, {
    sendTransaction: async (wire) => {
      sends++;
      return ledger.sendTransaction(wire);
    },
  });
  const node = (l: Ledger) =>
    new FacilitatorService({
      ledgers: { [NETWORK]: l },
      store: new MikroOrmFacilitatorStore(app.database.orm),
      signer,
      clock: systemClock,
      settings: { networks: [NETWORK], fee: app.services.settings.fee, rentBudgetLamports: 1_000_000_000n, confirmTimeoutMs: 200, confirmPollMs: 20 },
    });
  const [a, b] = [node(late), node(counted)];
  const payer = await buyer(t);
  const seller = Keypair.generate().publicKey.toBase58();
  const p = await payment(t, { service: a, signer }, { buyer: payer, seller, layout: 'fee' });
  const paymentId = `pay_${Keypair.generate().publicKey.toBase58().slice(0, 20)}`;
  const payload = p.request.paymentPayload as Record<string, unknown>;
  const request = {
    ...p.request,
    paymentPayload: { ...payload, extensions: { 'payment-identifier': { info: { required: false, id: paymentId } } } },
  } as unknown as FacilitatorRequest;
  const before = await usdc(ledger, payer.publicKey.toBase58());

  t.like(await a.settle(request), { success: false, errorReason: 'settlement_pending', transaction: p.signature });
  t.is(sends, 1);
  const pending = await a.status({ transaction: p.signature });
  t.like(pending, { status: 'pending', transaction: p.signature, paymentId }, 'the late ledger shows nothing yet');
  t.like(await b.status({ paymentId }), { status: 'settled', transaction: p.signature }, 'the row is pending; the ledger already confirmed it');

  t.like(await b.settle(request), { success: true, transaction: p.signature });
  t.is(sends, 1, 'the reconciling settle sent nothing');
  t.like(await a.settle(request), { success: false, errorReason: 'duplicate_settlement' });
  t.is(await usdc(ledger, payer.publicKey.toBase58()), before - p.gross, 'charged once');

  const hex = Buffer.from(pending.messageHash!, 'base64').toString('hex');
  for (const q of [{ transaction: p.signature }, { messageHash: pending.messageHash! }, { messageHash: hex }, { paymentId, network: 'solana-devnet' }]) {
    t.like(
      await a.status(q),
      { status: 'settled', transaction: p.signature, network: 'solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1', paymentId },
      JSON.stringify(q),
    );
  }
  t.like(await a.status({ paymentId, network: 'solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp' }), { status: 'unknown' }, 'not a network it settled on');
  t.like(await a.status({ transaction: encodeBase58(new Uint8Array(64).fill(7)) }), {
    status: 'unknown',
    transaction: encodeBase58(new Uint8Array(64).fill(7)),
  });
  await t.throwsAsync(a.status({ transaction: p.signature, paymentId }), { message: /exactly one of transaction, messageHash or paymentId/ });
});

// The confirmation wait goes through the Clock port — with a test clock that stands still the settle
// waits however long real time runs, and it gives up exactly when the clock passes confirmTimeoutMs.
test('settle waits for confirmation on the Clock: a standing test clock holds it; moved past confirmTimeoutMs it answers settlement_pending', async (t) => {
  const { app, ledger } = t.context;
  const unconfirmed = faultyLedger(ledger, { getSignatureStatuses: async (signatures) => signatures.map(() => null), waitForSignature: async () => null });
  const clock = new TestClock();
  const signer = feePayerFromSecretKey(Keypair.generate().secretKey);
  await fund(app, signer.address, { sol: '1' });
  const service = new FacilitatorService({
    ledgers: { [NETWORK]: unconfirmed },
    store: new MikroOrmFacilitatorStore(app.database.orm),
    signer,
    clock,
    settings: { networks: [NETWORK], fee: app.services.settings.fee, rentBudgetLamports: 1_000_000_000n, confirmTimeoutMs: 30_000, confirmPollMs: 50 },
  });
  const p = await payment(t, { service, signer }, { buyer: await buyer(t), seller: Keypair.generate().publicKey.toBase58(), layout: 'fee' });
  let answered = false;
  const settling = service.settle(p.request).finally(() => (answered = true));
  const sleeping = async () => {
    await until('the settle sleeps on the clock or answers', () => clock.waiting > 0 || answered, { everyMs: 5 });
    return clock.waiting > 0;
  };
  t.true(await sleeping(), 'the confirmation poll sleeps on the clock');
  clock.advance(29_950);
  t.true(await sleeping(), 'still waiting: the clock has not passed confirmTimeoutMs');
  t.false(answered);
  clock.advance(100);
  t.like(await settling, { success: false, errorReason: 'settlement_pending', transaction: p.signature });
});

// Confirmation comes from the ledger's notification (waitForSignature), not from a poll that sleeps on the
// clock. The node's status reads lag here (always "processed"), and the test clock stands still: only the notification
// can end the wait.
test('settle learns the confirmation from the ledger notification: a standing clock and lagging status reads do not hold it', async (t) => {
  const { app, ledger } = t.context;
  const lagging = faultyLedger(ledger, {
    getSignatureStatuses: async (signatures) =>
      (await ledger.getSignatureStatuses(signatures)).map((s) => s && { ...s, confirmationStatus: 'processed' as const }),
  });
  const clock = new TestClock();
  const signer = feePayerFromSecretKey(Keypair.generate().secretKey);
  await fund(app, signer.address, { sol: '1' });
  const service = new FacilitatorService({
    ledgers: { [NETWORK]: lagging },
    store: new MikroOrmFacilitatorStore(app.database.orm),
    signer,
    clock,
    settings: { networks: [NETWORK], fee: app.services.settings.fee, rentBudgetLamports: 1_000_000_000n, confirmTimeoutMs: 30_000, confirmPollMs: 50 },
  });
  const payer = await buyer(t);
  const seller = Keypair.generate().publicKey.toBase58();
  // The seller's account exists, so the settle sends one transaction (no creation first).
  await fund(app, seller, { usdc: '0.01' });
  const p = await payment(t, { service, signer }, { buyer: payer, seller, layout: 'fee' });
  t.like(await service.settle(p.request), { success: true, transaction: p.signature });
  t.is(clock.waiting, 0, 'nothing slept on the clock');
});

// Two buyers paying one new seller at the same time both need the seller's token account: the first settlement
// reserves its (owner, mint) sponsorship; the second shares that in-flight reservation (its creation is a no-op once
// the first lands, one rent paid) instead of being refused as a create-close-reclaim.
for (const layout of ['fee', 'stock'] as const) {
  test(`two buyers paying one new seller at the same time both settle (${layout} layout)`, async (t) => {
    const { ledger } = t.context;
    const f = await facilitator(t);
    const seller = Keypair.generate().publicKey.toBase58();
    const [a, b] = await Promise.all([payment(t, f, { buyer: await buyer(t), seller, layout }), payment(t, f, { buyer: await buyer(t), seller, layout })]);
    const outcomes = await Promise.all([f.service.settle(a.request), f.service.settle(b.request)]);
    t.deepEqual(outcomes.map(outcome), ['success', 'success'], outcomes.map((o) => o.errorMessage ?? '').join(' | '));
    t.is(await usdc(ledger, seller), 2n * AMOUNT);
  });
}

test('an unfunded buyer cannot make the facilitator create a seller account: insufficient_funds, no account, no rent spent', async (t) => {
  const { app, ledger } = t.context;
  const f = await facilitator(t);
  const seller = Keypair.generate().publicKey.toBase58();
  const poor = Keypair.generate();
  await fund(app, poor.publicKey.toBase58(), { usdc: '0.000001' }); // a token account holding 1 atom
  const pay = await payment(t, f, { buyer: poor, seller, layout: 'stock' });
  const verdict = await f.service.verify(pay.request);
  t.like(verdict, { isValid: false, invalidReason: 'insufficient_funds' });
  const settled = await f.service.settle(pay.request);
  t.like(settled, { success: false, errorReason: 'insufficient_funds' });
  t.is(await ledger.getAccount(pay.sellerAccount), null, 'the seller account was not created');
  const sponsored = (await app.database.orm.em
    .fork({ useContext: false })
    .execute(`select count(*)::int as n from rent_sponsorships where network = ? and owner = ?`, [NETWORK, seller])) as { n: number }[];
  t.is(sponsored[0]!.n, 0, 'no rent sponsored (other tests spend the shared budget concurrently, so the row is what is checked)');

  // Without any token account at all: the same refusal.
  const none = await payment(t, f, { buyer: Keypair.generate(), seller: Keypair.generate().publicKey.toBase58(), layout: 'stock' });
  t.like(await f.service.settle(none.request), { success: false, errorReason: 'insufficient_funds' });
});
