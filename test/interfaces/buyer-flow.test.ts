import anyTest, { type ExecutionContext, type TestFn } from 'ava';
import { Keypair, PublicKey, Transaction } from '@solana/web3.js';
import {
  createAssociatedTokenAccountIdempotentInstruction,
  createTransferCheckedInstruction,
  getAssociatedTokenAddressSync,
  TOKEN_PROGRAM_ID,
} from '@solana/spl-token';
import { createClient, errorCode } from '../../interfaces/client/index.ts';
import { STABLES } from '../../domain/shared/network.ts';
import { feeFor } from '../../domain/shared/money.ts';
import { treasuryOf } from '../../domain/treasury/derive.ts';
import type { PreparedEnvelope } from '../../domain/transactions/schema.ts';
import { receiptOf } from '../../domain/receipts/schema.ts';
import { http, linkBody, recordAgent, startTestApp, type TestApp } from '../support/app.ts';
import { until } from '../support/until.ts';
import { metaplexTest } from '../support/programs.ts';
import { createPayingFetch } from '../../interfaces/client/paying-fetch.ts';

// A real paid flow of a buyer agent on the embedded devnet running the Metaplex Core program — the agent
// minted, its treasury funded and an executive delegated, then the buyer routes: execute refused by the spend policy
// (REST, tRPC, GraphQL), execute allowed → signed client-side → /v1/submit → confirmed, which is the link's sale too
// (counters, earn receipt, events: once, whatever replays); finalize of that settlement (already recorded at
// confirmation: nothing twice), finalize of a payment made client-side to another seller (recorded once, from the
// landed transaction), verify of both receipts, and the daily spend they add up to.

const test = anyTest as TestFn<{ app: TestApp }>;
const USDC = STABLES['chain-devnet'][0]!;

test.before(async (t) => {
  t.context = { app: await startTestApp() };
});

function sign(envelope: PreparedEnvelope, ...signers: Keypair[]): string {
  const tx = Transaction.from(Buffer.from(envelope.transaction!.base64, 'base64'));
  tx.partialSign(...signers);
  return tx.serialize({ requireAllSignatures: true }).toString('base64');
}

/** signed → /v1/submit → confirmed by the confirmations job; the confirmed event */
async function submit(t: ExecutionContext, as: { app: TestApp; key: string }, envelope: PreparedEnvelope, signers: Keypair[]) {
  const { app, key } = as;
  const submitted = await http(app, 'POST', '/v1/submit', { key, body: { event_id: envelope.event_id, transaction_base64: sign(envelope, ...signers) } });
  t.is(submitted.status, 202, JSON.stringify(submitted.body));
  return until(
    `${envelope.event_id} confirmed`,
    async () => {
      const e = await http(app, 'GET', `/v1/events/${envelope.event_id}`, { key });
      if (e.body.phase === 'failed') throw new Error(`failed: ${JSON.stringify(e.body)}`);
      return e.body.phase === 'confirmed' ? e.body : undefined;
    },
    { everyMs: 250 },
  );
}

async function prepareAndSubmit(
  t: ExecutionContext,
  as: { app: TestApp; key: string },
  request: { path: string; body: Record<string, unknown> },
  signers: Keypair[],
) {
  const { app, key } = as;
  const { path, body } = request;
  const prepared = await http<PreparedEnvelope>(app, 'POST', path, { key, body });
  t.is(prepared.status, 200, `${path}: ${JSON.stringify(prepared.body)}`);
  if (prepared.body.no_op) return prepared.body;
  await submit(t, { app, key }, prepared.body, signers);
  return prepared.body;
}

/**
 * DECISIONS buyer/payment: a confirmed buyer/payment of a link is its sale — the link's counters, the seller's earn
 * receipt and the sale events, each exactly once (no payment_link.served: nothing was served).
 */
async function theSaleOnce(
  t: ExecutionContext,
  app: TestApp,
  key: string,
  s: { linkId: string; shareUrl: string; seller: string; settlement: string; executive: string; bps: number },
) {
  const read = await http(app, 'GET', `/v1/payment-links/${s.linkId}`, { key });
  t.like(read.body.counters, { call_count: 1, settled_count: 1, last_tx_sig: s.settlement });
  const earned = await app.database.store.receipts.listByAgent('chain-devnet', s.seller, { limit: 10 });
  t.is(earned.length, 1, 'one earn receipt');
  t.like(earned[0], {
    source: 'paywall',
    receipt: {
      kind: 'earn',
      agent: s.seller,
      nonce: 0,
      tx_sig: s.settlement,
      decision: 'allow',
      request: { method: 'GET', url: s.shareUrl },
      price: { amount_atomic: '1500000', fee: feeFor(1_500_000n, s.bps).toString(), feeBps: s.bps },
    },
  });
  t.is(earned[0]!.receipt.response, undefined, 'no response was served');
  const events = await http(app, 'GET', `/v1/events?agent=${s.seller}&limit=50`, { key });
  const kinds = (events.body.data as { kind: string; signature: string | null }[])
    .filter((e) => e.signature === s.settlement && /^(payment_link\.|receipt\.published|protocol\.fee)/.test(e.kind))
    .map((e) => e.kind)
    .sort();
  t.deepEqual(
    kinds,
    ['payment_link.settled', 'protocol.fee.collected', 'receipt.published'].filter((k) => k !== 'protocol.fee.collected' || s.bps > 0),
  );
  const settled = (events.body.data as { kind: string; metadata: Record<string, unknown> }[]).find((e) => e.kind === 'payment_link.settled')!;
  t.like(settled.metadata, { payment_link_id: s.linkId, agent: s.seller, tx_sig: s.settlement, payer: s.executive, amount_atomic: '1500000' });
  // checked against the ledger as the paywall's receipts are, once published
  const verified = await until(
    'the earn receipt verified',
    async () => {
      const [r] = await app.database.store.receipts.listByAgent('chain-devnet', s.seller, { limit: 1 });
      return r?.verification.status === 'pending' ? undefined : r;
    },
    { everyMs: 100 },
  );
  t.is(verified.verification.status, 'verified', JSON.stringify(verified.verification));
}

metaplexTest(test, 'execute (policy first) → submit → finalize (once) → verify on the embedded ledger, on REST, tRPC and GraphQL', async (t) => {
  const { app } = t.context;
  const ledger = app.services.ledgers['chain-devnet']!;
  const key = (await app.services.access.issueKey({ network: 'chain-devnet', role: 'user' })).key;
  const rest = (method: string, path: string, body?: unknown) => http(app, method, path, { key, ...(body === undefined ? {} : { body }) });
  const gql = (query: string, variables?: Record<string, unknown>) => http(app, 'POST', '/graphql', { key, body: { query, variables } });
  const trpc = createClient({ url: app.url, apiKey: key });
  const bps = app.services.settings.fee.bps;

  // The buyer agent: minted (Core), its USDC account provisioned, 20 USDC in, 10 USDC delegated to the executive.
  const owner = Keypair.generate();
  const executive = Keypair.generate();
  await app.services.dev.fund('chain-devnet', { address: owner.publicKey.toBase58(), sol: '2' });
  await app.services.dev.fund('chain-devnet', { address: executive.publicKey.toBase58(), sol: '2' });
  const minted = await prepareAndSubmit(
    t,
    { app, key },
    { path: '/v1/agents/prepare', body: { owner: owner.publicKey.toBase58(), name: 'Buyer agent', uri: 'https://example.com/buyer.json' } },
    [owner],
  );
  const mint = String(minted.echo.asset);
  const treasury = treasuryOf(mint);
  await prepareAndSubmit(t, { app, key }, { path: `/v1/agents/${mint}/treasury/provision/prepare`, body: { payer: owner.publicKey.toBase58() } }, [owner]);
  await app.services.dev.fund('chain-devnet', { address: treasury, token: 'USDC', amount: '20' });
  await prepareAndSubmit(
    t,
    { app, key },
    {
      path: `/v1/agents/${mint}/delegation/prepare`,
      body: {
        executive: executive.publicKey.toBase58(),
        stable_symbol: 'USDC',
        allowance: '10',
        pad_for_protocol_fee: true,
        payer: owner.publicKey.toBase58(),
      },
    },
    [owner],
  );

  const seller = await recordAgent(app, key);
  const link = await http(app, 'POST', '/v1/payment-links', { key, body: linkBody(seller.mint, { price: '$1.50' }) });
  t.is(link.status, 201, JSON.stringify(link.body));
  const body = { payment_link: link.body.id, buyer_agent: mint, executive: executive.publicKey.toBase58() };
  const gross = 1_500_000n + feeFor(1_500_000n, bps);

  // 1. Denied by the policy: 403 spend_denied with the reasons, on the three doors; nothing prepared.
  await rest('PUT', '/v1/buyer/policy', { agent: mint, limits: [{ currency: 'USDC', per_call: '1' }] });
  const denied = await rest('POST', '/v1/buyer/payment/execute', body);
  t.is(denied.status, 403, JSON.stringify(denied.body));
  t.is(denied.body.error, 'spend_denied');
  t.is(denied.body.details.reasons.length, 1);
  t.regex(denied.body.details.reasons[0], /above the per-call maximum of 1 USDC/);
  t.deepEqual(
    denied.body.details.checks.filter((c: { ok: boolean }) => !c.ok).map((c: { rule: string }) => c.rule),
    ['per_call_max'],
  );
  t.is(errorCode(await trpc.buyer.execute.mutate(body).catch((e: unknown) => e)), 'spend_denied');
  const gDenied = await gql('mutation($i: JSON!) { executeBuyerPayment(input: $i) { decision } }', { i: body });
  t.is(gDenied.body.errors?.[0]?.extensions?.code, 'spend_denied');
  const prepared = await rest('GET', `/v1/events?kind=buyer.payment&agent=${mint}`);
  t.is(prepared.body.data.length, 0, 'a denied execute prepares nothing');

  // 1b. fee-facilitator-mpp-tools §2.2.6, §7: a price whose gross is above the executive's remaining allowance (10 USDC
  // padded) is insufficient_allowance with the numbers — on buyer/payment/prepare (REST, tRPC) and on the paywall,
  // paid from the treasury by the executive as delegate; nothing is prepared or charged.
  const allowance = (10_000_000n + feeFor(10_000_000n, bps)).toString();
  const required = (11_000_000n + feeFor(11_000_000n, bps)).toString();
  const big = { buyer_agent: mint, executive: executive.publicKey.toBase58(), pay_to: treasuryOf(seller.mint), amount: '11', currency: 'USDC' as const };
  const short = await rest('POST', '/v1/buyer/payment/prepare', big);
  t.is(short.status, 422, JSON.stringify(short.body));
  t.is(short.body.error, 'insufficient_allowance');
  t.like(short.body.details, { allowance_atomic: allowance, required_atomic: required });
  t.is(errorCode(await trpc.prepare.buyerPayment.mutate(big).catch((e: unknown) => e)), 'insufficient_allowance');
  const pricey = await http(app, 'POST', '/v1/payment-links', { key, body: linkBody(seller.mint, { price: '$11' }) });
  t.is(pricey.status, 201, JSON.stringify(pricey.body));
  const payAsDelegate = createPayingFetch({ signer: executive, rpcUrl: app.ledgers.rpcUrls['chain-devnet']!, agent: mint });
  const refused = await payAsDelegate(`${app.url}/x/${pricey.body.id}?network=chain-devnet`);
  const refusal = (await refused.json()) as { error: string; details?: Record<string, string> };
  t.is(refused.status, 402, JSON.stringify(refusal));
  t.is(refusal.error, 'insufficient_allowance');
  t.like(refusal.details, { allowance_atomic: allowance, required_atomic: required });

  // 2. Allowed: the prepared buyer payment, signed by the executive client-side, submitted and confirmed.
  await rest('PUT', '/v1/buyer/policy', { agent: mint, limits: [{ currency: 'USDC', per_call: '2', daily: '5' }], allowed_sellers: [seller.mint] });
  const executed = await rest('POST', '/v1/buyer/payment/execute', body);
  t.is(executed.status, 200, JSON.stringify(executed.body));
  t.is(executed.body.decision, 'allow');
  t.like(executed.body.prepared.echo, { buyer_agent: mint, gross_atomic: gross.toString(), payment_link: link.body.id });
  const confirmed = await submit(t, { app, key }, executed.body.prepared, [executive]);
  const settlement = String(confirmed.signature);
  await theSaleOnce(t, app, key, {
    linkId: link.body.id,
    shareUrl: link.body.share_url,
    seller: seller.mint,
    settlement,
    executive: executive.publicKey.toBase58(),
    bps,
  });
  // replays write nothing twice: the same transaction submitted again, the confirmations job run again
  const replayed = await http(app, 'POST', '/v1/submit', {
    key,
    body: { event_id: executed.body.prepared.event_id, transaction_base64: sign(executed.body.prepared, executive) },
  });
  t.is(replayed.status, 200, JSON.stringify(replayed.body));
  t.true(replayed.body.replayed);
  await app.services.transactions.checkDue();
  // the paywall's path for the same signature (the recorder's idempotency key): a sale recorded once stays once
  const sales = app.services.transactions as unknown as { saleOf(row: unknown): Promise<any> };
  const call = await sales.saleOf(await app.database.store.preparedTransactions.get('chain-devnet', executed.body.prepared.event_id));
  const recordedAgain = await app.database.store.transaction((tx) =>
    app.services.paywall!.recorder.recordSale(tx, { call, signature: settlement, payer: call.payer, now: new Date() }),
  );
  t.false(recordedAgain, 'the recorder writes a recorded sale once');
  await theSaleOnce(t, app, key, {
    linkId: link.body.id,
    shareUrl: link.body.share_url,
    seller: seller.mint,
    settlement,
    executive: executive.publicKey.toBase58(),
    bps,
  });

  // tRPC and GraphQL execute answer the same envelope shape (not submitted: the prepared event expires unused)
  const viaTrpc = await trpc.buyer.execute.mutate({ ...body, payment_link: undefined, pay_to: treasuryOf(seller.mint), amount: '0.5', currency: 'USDC' });
  t.like(viaTrpc, { decision: 'allow', prepared: { echo: { amount_atomic: '500000', pay_to: treasuryOf(seller.mint) } } });
  const gAllowed = await gql('mutation($i: JSON!) { executeBuyerPayment(input: $i) { decision checks { rule ok } prepared { eventId } } }', { i: body });
  t.falsy(gAllowed.body.errors, JSON.stringify(gAllowed.body.errors));
  t.is(gAllowed.body.data.executeBuyerPayment.decision, 'ALLOW');

  // Those two are prepared, not landed: the daily cap (5 USDC) counts them, so payments prepared side by side cannot
  // each pass it alone — 1.515 spent + 2.02 in flight + 1.515 > 5.
  const directGross = 500_000n + feeFor(500_000n, bps);
  const overCap = await rest('POST', '/v1/buyer/payment/execute', body);
  t.is(overCap.status, 403, JSON.stringify(overCap.body));
  t.deepEqual(
    overCap.body.details.checks.filter((c: { ok: boolean }) => !c.ok).map((c: { rule: string }) => c.rule),
    ['daily_cap'],
  );
  t.regex(overCap.body.details.reasons[0], /not landed yet/);
  const flying = await rest('POST', '/v1/buyer/policy/evaluate', { agent: mint, payment_link: link.body.id });
  t.like(flying.body, {
    decision: 'deny',
    spent_today: [{ currency: 'USDC', gross_atomic: gross.toString() }],
    in_flight: [{ currency: 'USDC', gross_atomic: (gross + directGross).toString() }],
  });

  // Two executes at once where one fits the cap and two do not: exactly one is prepared (the agent's payments are
  // prepared one at a time; the other is refused — 409 while the first holds the agent, or 403 once it sees it).
  await rest('PUT', '/v1/buyer/policy', { agent: mint, limits: [{ currency: 'USDC', per_call: '2', daily: '6.1' }], allowed_sellers: [seller.mint] });
  const both = await Promise.all([rest('POST', '/v1/buyer/payment/execute', body), rest('POST', '/v1/buyer/payment/execute', body)]);
  const statuses = both.map((r) => r.status).sort();
  t.is(statuses[0], 200, JSON.stringify(both.map((r) => r.body)));
  t.true(statuses[1] === 403 || statuses[1] === 409, JSON.stringify(both.map((r) => r.body)));
  const retried = await rest('POST', '/v1/buyer/payment/execute', body);
  t.is(retried.status, 403, 'a retry sees the first in flight');
  t.is(retried.body.error, 'spend_denied');

  // 3. finalize of that settlement: the confirmation already recorded the spend receipt — nothing twice.
  const fin = await rest('POST', '/v1/buyer/receipt/finalize', { agent: mint, signature: settlement });
  t.is(fin.status, 200, JSON.stringify(fin.body));
  t.like(fin.body, { recorded: false, receipt: { source: 'buyer', kind: 'spend', nonce: 0, tx_sig: settlement, price: { gross: gross.toString() } } });

  // 4. A payment made client-side to another seller (any x402 seller: the executive signs as delegate), finalized
  // from its PAYMENT-RESPONSE header: the price is read from the landed transaction.
  const other = Keypair.generate().publicKey;
  const feeAuthority = new PublicKey(app.services.settings.fee.authorities['chain-devnet']);
  const mintKey = new PublicKey(USDC.mint);
  const source = getAssociatedTokenAddressSync(mintKey, new PublicKey(treasury), true, TOKEN_PROGRAM_ID);
  const sellerAta = getAssociatedTokenAddressSync(mintKey, other, false, TOKEN_PROGRAM_ID);
  const feeAta = getAssociatedTokenAddressSync(mintKey, feeAuthority, true, TOKEN_PROGRAM_ID);
  const amount = 250_000n;
  const fee = feeFor(amount, bps);
  const { blockhash } = await ledger.getLatestBlockhash();
  const pay = new Transaction({ feePayer: executive.publicKey, recentBlockhash: blockhash }).add(
    createAssociatedTokenAccountIdempotentInstruction(executive.publicKey, sellerAta, other, mintKey),
    createAssociatedTokenAccountIdempotentInstruction(executive.publicKey, feeAta, feeAuthority, mintKey),
    createTransferCheckedInstruction(source, mintKey, sellerAta, executive.publicKey, amount, USDC.decimals),
    createTransferCheckedInstruction(source, mintKey, feeAta, executive.publicKey, fee, USDC.decimals),
  );
  pay.sign(executive);
  const sent = await ledger.sendTransaction(pay.serialize());
  t.true(sent.ok, JSON.stringify(sent));
  const direct = (sent as { signature: string }).signature;
  await until('client-side payment landed', async () => (await ledger.getTransaction(direct)) ?? undefined, { everyMs: 100 });
  const paymentResponse = Buffer.from(JSON.stringify({ success: true, transaction: direct, network: 'solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1' })).toString(
    'base64',
  );
  // two finalize calls at once (tRPC and REST): exactly one records, both answer the same receipt
  const [viaTrpcFin, viaRestFin] = await Promise.all([
    trpc.buyer.finalize.mutate({
      agent: mint,
      payment_response: paymentResponse,
      request: { method: 'GET', url: 'https://seller.example/data' },
      response: { status: 200 },
    }),
    rest('POST', '/v1/buyer/receipt/finalize', {
      agent: mint,
      payment_response: paymentResponse,
      request: { method: 'GET', url: 'https://seller.example/data' },
      response: { status: 200 },
    }),
  ]);
  t.is(viaRestFin.status, 200, JSON.stringify(viaRestFin.body));
  t.deepEqual([viaTrpcFin.recorded, viaRestFin.body.recorded].sort(), [false, true]);
  t.is(viaRestFin.body.receipt.receipt_hash, viaTrpcFin.receipt.receipt_hash);
  const first = viaTrpcFin.recorded ? viaTrpcFin : (viaRestFin.body as typeof viaTrpcFin);
  t.like(first.receipt, { source: 'buyer', verification: { status: 'verified' } });
  t.like(first.receipt, {
    kind: 'spend',
    agent: mint,
    nonce: 1,
    prev_receipt_hash: fin.body.receipt.receipt_hash,
    tx_sig: direct,
    request: { method: 'GET', url: 'https://seller.example/data' },
    response: { status: 200 },
    price: {
      amount: '0.25',
      currency: 'USDC',
      amount_atomic: '250000',
      fee: fee.toString(),
      gross: (amount + fee).toString(),
      feeBps: bps,
      feeAuthority: feeAuthority.toBase58(),
    },
  });
  const again = await gql('mutation($i: BuyerFinalizeInput!) { finalizeBuyerReceipt(input: $i) { recorded receipt { receipt } } }', {
    i: { agent: mint, signature: direct },
  });
  t.falsy(again.body.errors, JSON.stringify(again.body.errors));
  t.false(again.body.data.finalizeBuyerReceipt.recorded);
  t.is(again.body.data.finalizeBuyerReceipt.receipt.receipt.receipt_hash, first.receipt.receipt_hash);
  const chain = await rest('GET', `/v1/receipts/${mint}`);
  t.is(chain.body.data.length, 2, 'nothing recorded twice');
  const published = await rest('GET', `/v1/events?kind=receipt.published&agent=${mint}`);
  t.is(published.body.data.length, 2);

  // a settlement that is not this agent's payment, a failed settle response, a signature the ledger never saw
  const notMine = await rest('POST', '/v1/buyer/receipt/finalize', { agent: seller.mint, signature: direct });
  t.is(notMine.status, 422, JSON.stringify(notMine.body));
  t.is(notMine.body.error, 'transaction_invalid');
  const failed = await rest('POST', '/v1/buyer/receipt/finalize', {
    agent: mint,
    payment_response: Buffer.from(JSON.stringify({ success: false, errorReason: 'insufficient_funds', transaction: '', network: 'x' })).toString('base64'),
  });
  t.is(failed.status, 400);
  t.is(failed.body.details.issues[0].code, 'invalid_payment_response');

  // 5. verify: hash, chain position and settlement of each, on the three doors; a tampered copy fails.
  const v0 = await rest('POST', '/v1/buyer/receipt/verify', { receipt_hash: fin.body.receipt.receipt_hash });
  t.is(v0.status, 200, JSON.stringify(v0.body));
  t.like(v0.body, { ok: true, nonce: 0, agent: mint, settlement: 'verified' });
  t.deepEqual(
    v0.body.checks.map((c: { name: string; ok: boolean }) => [c.name, c.ok]),
    [
      ['hash', true],
      ['stored', true],
      ['chain_position', true],
      ['settlement', true],
    ],
  );
  const v1 = await trpc.buyer.verifyReceipt.mutate({ receipt: receiptOf(first.receipt) });
  t.like(v1, { ok: true, nonce: 1, settlement: 'verified' });
  const gv = await gql('mutation($h: String) { verifyBuyerReceipt(receiptHash: $h) { ok settlement checks { name ok } } }', { h: first.receipt.receipt_hash });
  t.falsy(gv.body.errors, JSON.stringify(gv.body.errors));
  t.like(gv.body.data.verifyBuyerReceipt, { ok: true, settlement: 'VERIFIED' });
  const tampered = { ...receiptOf(first.receipt), price: { ...first.receipt.price, amount_atomic: '1' } };
  const vt = await rest('POST', '/v1/buyer/receipt/verify', { receipt: tampered });
  t.false(vt.body.ok);
  t.deepEqual(
    vt.body.checks.filter((c: { ok: boolean }) => !c.ok).map((c: { name: string }) => c.name),
    ['hash', 'stored', 'settlement'],
  );

  // 6. The day's spend the daily cap reads: both landed grosses (the client-side payment too, through its receipt).
  const evaluated = await rest('POST', '/v1/buyer/policy/evaluate', { agent: mint, payment_link: link.body.id });
  t.like(evaluated.body, { spent_today: [{ currency: 'USDC', gross_atomic: (gross + amount + fee).toString() }] });
});
