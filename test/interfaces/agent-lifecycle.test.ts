import anyTest, { type ExecutionContext, type TestFn } from 'ava';
import { Keypair, PublicKey, SystemProgram, Transaction } from '@solana/web3.js';
import { createTransferCheckedInstruction, getAssociatedTokenAddressSync, TOKEN_PROGRAM_ID } from '@solana/spl-token';
import { http, linkBody, recordAgent, startTestApp, type TestApp } from '../support/app.ts';
import { until } from '../support/until.ts';
import { watchEvents, type WatchedEvent } from '../support/graphql.ts';
import { metaplexTest } from '../support/programs.ts';
import { STABLES } from '../../domain/shared/network.ts';
import { treasuryOf } from '../../domain/treasury/derive.ts';
import { feeFor } from '../../domain/shared/money.ts';
import { createPayingFetch } from '../../interfaces/client/paying-fetch.ts';
import type { PreparedEnvelope } from '../../domain/transactions/schema.ts';

// On the embedded devnet running the deployed Metaplex Core program, the whole lifecycle of an
// agent through REST with real signers held by the test — mint, provision, fund by a plain transfer, delegate, pay a
// payment link from the treasury as delegate, withdraw a stable and SOL, revoke — each submit confirmed by the
// confirmations job, balances read back exactly, and every event's phases seen on a GraphQL subscription. Then the
// same flows through a gateway whose devnet is the rpc ledger adapter (the first gateway's JSON-RPC as the node).

const test = anyTest as TestFn<{ a: TestApp; b: TestApp }>;
const USDC = STABLES['chain-devnet'][0]!;

test.before(async (t) => {
  const a = await startTestApp();
  // b: every ledger read and send goes over JSON-RPC to a's embedded devnet (SVC_DEVNET_LEDGER = a URL → rpc adapter).
  const b = await startTestApp({ env: { SVC_DEVNET_LEDGER: a.ledgers.rpcUrls['chain-devnet']!, SVC_MAINNET_LEDGER: 'embedded' } });
  t.context = { a, b };
});

async function fundSol(funder: TestApp, address: string, sol = '2'): Promise<void> {
  await funder.services.dev.fund('chain-devnet', { address, sol });
}

function sign(envelope: PreparedEnvelope, ...signers: Keypair[]): string {
  const tx = Transaction.from(Buffer.from(envelope.transaction!.base64, 'base64'));
  tx.partialSign(...signers);
  return tx.serialize({ requireAllSignatures: true }).toString('base64');
}

/** prepare (REST) → sign → submit (REST) → confirmed by the job; returns the envelope and the confirmed event. */
async function run(t: ExecutionContext, as: { app: TestApp; key: string }, request: { path: string; body: Record<string, unknown> }, signers: Keypair[]) {
  const { app, key } = as;
  const { path, body } = request;
  const prepared = await http<PreparedEnvelope>(app, 'POST', path, { key, body });
  t.is(prepared.status, 200, `${path}: ${JSON.stringify(prepared.body)}`);
  const envelope = prepared.body;
  t.truthy(envelope.event_id, path);
  const signerKeys = signers.map((s) => s.publicKey.toBase58());
  for (const s of envelope.transaction!.signers) t.true(signerKeys.includes(s) || s === envelope.echo.asset, `${path}: signer ${s} is held by the test`);
  const submitted = await http(app, 'POST', '/v1/submit', { key, body: { event_id: envelope.event_id, transaction_base64: sign(envelope, ...signers) } });
  t.is(submitted.status, 202, `${path}: ${JSON.stringify(submitted.body)}`);
  const event = await until(
    `${path} confirmed`,
    async () => {
      const e = await http(app, 'GET', `/v1/events/${envelope.event_id}`, { key });
      if (e.body.phase === 'failed') throw new Error(`${path} failed: ${JSON.stringify(e.body)}`);
      return e.body.phase === 'confirmed' ? e.body : undefined;
    },
    { everyMs: 250 },
  ); // events.read allows 600 a minute per key
  t.is(event.signature, submitted.body.signature);
  return { envelope, event };
}

async function balances(app: TestApp, key: string, mint: string) {
  const res = await http(app, 'GET', `/v1/agents/${mint}/treasury/balances`, { key });
  if (res.status !== 200) throw new Error(`balances: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body as { lamports: string; tokens: { mint: string; amount_atomic: string; token_account: string }[] };
}

const usdcOf = (b: { tokens: { mint: string; amount_atomic: string }[] }) => BigInt(b.tokens.find((x) => x.mint === USDC.mint)?.amount_atomic ?? '0');

async function lifecycle(t: ExecutionContext, gateway: TestApp, funder: TestApp): Promise<void> {
  const ledger = funder.services.ledgers['chain-devnet']!;
  const created = await gateway.services.access.issueKey({ network: 'chain-devnet', role: 'user' });
  const key = created.key;
  const events = await watchEvents(gateway, key);
  t.teardown(events.close);

  const owner = Keypair.generate();
  const executive = Keypair.generate();
  const wallet = Keypair.generate().publicKey.toBase58();
  await fundSol(funder, owner.publicKey.toBase58());
  await fundSol(funder, executive.publicKey.toBase58());

  // 1. Mint the agent: a Core asset owned by `owner`; the gateway signs only the fresh asset's slot.
  const minted = await run(
    t,
    { app: gateway, key },
    { path: '/v1/agents/prepare', body: { owner: owner.publicKey.toBase58(), name: 'Lifecycle agent', uri: 'https://example.com/agent.json' } },
    [owner],
  );
  const mint = String(minted.envelope.echo.asset);
  const treasury = treasuryOf(mint);
  t.is(minted.envelope.identity, 'not_registered', 'the embedded devnet has no agent registry program');
  const asset = await ledger.getAccount(mint);
  t.is(asset?.owner, 'CoREENxT6tW1HoK8ypY1SxRMZTcVPm7R94rH4PZNhX7d');
  const agent = await http(gateway, 'GET', `/v1/agents/${mint}`, { key });
  t.like(agent.body, { mint, owner: owner.publicKey.toBase58(), treasury, source: 'prepared', name: 'Lifecycle agent' });

  // 2. Provision the treasury's USDC account; a second provision is a no-op.
  await run(t, { app: gateway, key }, { path: `/v1/agents/${mint}/treasury/provision/prepare`, body: { payer: owner.publicKey.toBase58() } }, [owner]);
  const again = await http<PreparedEnvelope>(gateway, 'POST', `/v1/agents/${mint}/treasury/provision/prepare`, {
    key,
    body: { payer: owner.publicKey.toBase58() },
  });
  t.like(again.body, { event_id: null, transaction: null, no_op: true });

  // 3. Fund by plain transfers (no prepare route exists for deposits): 20 USDC and 1 SOL into the treasury.
  const donor = Keypair.generate();
  await funder.services.dev.fund('chain-devnet', { address: donor.publicKey.toBase58(), sol: '1', token: 'USDC', amount: '20' });
  const treasuryUsdc = getAssociatedTokenAddressSync(new PublicKey(USDC.mint), new PublicKey(treasury), true, TOKEN_PROGRAM_ID);
  const donorUsdc = getAssociatedTokenAddressSync(new PublicKey(USDC.mint), donor.publicKey, false, TOKEN_PROGRAM_ID);
  const { blockhash } = await ledger.getLatestBlockhash();
  const deposit = new Transaction({ feePayer: donor.publicKey, recentBlockhash: blockhash }).add(
    createTransferCheckedInstruction(donorUsdc, new PublicKey(USDC.mint), treasuryUsdc, donor.publicKey, 20_000_000n, USDC.decimals),
    SystemProgram.transfer({ fromPubkey: donor.publicKey, toPubkey: new PublicKey(treasury), lamports: 500_000_000n }),
  );
  deposit.sign(donor);
  const sent = await ledger.sendTransaction(deposit.serialize());
  t.true(sent.ok, JSON.stringify(sent));
  await until(
    'deposit',
    async () => (await ledger.getSignatureStatuses([(sent as { signature: string }).signature]))[0]?.confirmationStatus !== undefined || undefined,
  );
  const funded = await balances(gateway, key, mint);
  t.is(usdcOf(funded), 20_000_000n);
  const lamports0 = BigInt(funded.lamports);

  // 4. Delegate 5 USDC (grossed up by the fee) to the executive.
  const delegation = await run(
    t,
    { app: gateway, key },
    {
      path: `/v1/agents/${mint}/delegation/prepare`,
      body: { executive: executive.publicKey.toBase58(), stable_symbol: 'USDC', allowance: '5', pad_for_protocol_fee: true, payer: owner.publicKey.toBase58() },
    },
    [owner],
  );
  const bps = gateway.services.settings.fee.bps;
  t.is(delegation.envelope.fee_padding_atoms, feeFor(5_000_000n, bps).toString());
  const delegated = await http(gateway, 'GET', `/v1/agents/${mint}`, { key });
  t.is(delegated.body.executive, executive.publicKey.toBase58(), 'the confirmed delegation names the executive');
  t.deepEqual(delegated.body.delegations, [
    { stable_symbol: 'USDC', delegate: executive.publicKey.toBase58(), allowance_atomic: (5_000_000n + feeFor(5_000_000n, bps)).toString() },
  ]);

  // 5. Pay a seller's payment link from the treasury, the executive signing as delegate.
  const seller = await recordAgent(gateway, key);
  const link = await http(gateway, 'POST', '/v1/payment-links', { key, body: linkBody(seller.mint, { price: '$1.50' }) });
  t.is(link.status, 201, JSON.stringify(link.body));
  const sellerBefore = await ledger.getTokenBalances(treasuryOf(seller.mint), { mint: USDC.mint });
  await run(
    t,
    { app: gateway, key },
    { path: '/v1/buyer/payment/prepare', body: { payment_link: link.body.id, buyer_agent: mint, executive: executive.publicKey.toBase58() } },
    [executive],
  );
  const sellerAfter = await ledger.getTokenBalances(treasuryOf(seller.mint), { mint: USDC.mint });
  const sum = (xs: { amount: bigint }[]) => xs.reduce((s, x) => s + x.amount, 0n);
  t.is(sum(sellerAfter) - sum(sellerBefore), 1_500_000n, 'the seller received the price');
  const gross = 1_500_000n + feeFor(1_500_000n, bps);
  t.is(usdcOf(await balances(gateway, key, mint)), 20_000_000n - gross, 'the treasury paid the gross');
  // The buyer agent's spend receipt, on its chain, checked against the landed transaction.
  const receipts = await http(gateway, 'GET', `/v1/receipts/${mint}`, { key });
  t.is(receipts.status, 200, JSON.stringify(receipts.body));
  t.is(receipts.body.data.length, 1);
  const spend = receipts.body.data[0];
  t.like(spend, { source: 'buyer', verification: { status: 'verified' } });
  t.like(spend, { kind: 'spend', agent: mint, nonce: 0, prev_receipt_hash: null, decision: 'allow' });
  t.like(spend.price, { amount_atomic: '1500000', gross: gross.toString(), asset: USDC.mint, feeBps: bps });
  // the paid request is the link's own method and share URL, as the seller's earn receipt would record it
  t.deepEqual(spend.request, { method: link.body.method, url: link.body.share_url });
  let spent = gross;

  // 5b. The same link through its paywall with the buyer kit paying from the treasury (createPayingFetch({ agent })):
  // the paywall records the seller's earn receipt and the buyer agent's spend receipt. (Only where the gateway's own
  // facilitator has a funded fee payer: the embedded devnet.)
  if (gateway === funder) {
    const pay = createPayingFetch({ signer: executive, rpcUrl: gateway.ledgers.rpcUrls['chain-devnet']!, agent: mint });
    const paid = await pay(`${gateway.url}/x/${link.body.id}?network=chain-devnet`);
    t.is(paid.status, 200, await paid.clone().text());
    spent += gross;
    t.is(usdcOf(await balances(gateway, key, mint)), 20_000_000n - spent, 'the treasury paid the gross again');
    // Recorded pending; the verification job's check (run here rather than awaited on its minute tick) verifies it.
    await gateway.services.receipts.verifyDue();
    const listed = await http(gateway, 'GET', `/v1/receipts/${mint}`, { key });
    t.is(listed.status, 200, JSON.stringify(listed.body));
    const chain = listed.body.data;
    t.is(chain.length, 2);
    t.like(chain[0], { verification: { status: 'verified' } });
    t.like(chain[0], { source: 'buyer', kind: 'spend', agent: mint, nonce: 1, prev_receipt_hash: spend.receipt_hash });
    const chainCheck = await http(gateway, 'GET', `/v1/receipts/${mint}/verify-chain`, { key });
    t.like(chainCheck.body, { ok: true });
  }

  // 6. Withdraw 2 USDC and 0.1 SOL to a wallet.
  const withdraw = await run(
    t,
    { app: gateway, key },
    {
      path: `/v1/agents/${mint}/treasury/withdraw/prepare`,
      body: { payer: owner.publicKey.toBase58(), authority: owner.publicKey.toBase58(), spl_mint: USDC.mint, destination: wallet, amount: '2000000' },
    },
    [owner],
  );
  t.is(withdraw.envelope.will_create_destination_ata, true);
  await run(
    t,
    { app: gateway, key },
    {
      path: `/v1/agents/${mint}/treasury/withdraw-sol/prepare`,
      body: { payer: owner.publicKey.toBase58(), authority: owner.publicKey.toBase58(), destination: wallet, lamports: '100000000' },
    },
    [owner],
  );
  const after = await balances(gateway, key, mint);
  t.is(usdcOf(after), 20_000_000n - spent - 2_000_000n);
  t.is(BigInt(after.lamports), lamports0 - 100_000_000n, 'the owner paid the fees; the treasury only the withdrawal');
  t.is(sum(await ledger.getTokenBalances(wallet, { mint: USDC.mint })), 2_000_000n);
  t.is(await ledger.getBalance(wallet), 100_000_000n);

  // 7. Revoke the delegation.
  await run(
    t,
    { app: gateway, key },
    { path: `/v1/agents/${mint}/delegation/revoke/prepare`, body: { stable_symbol: 'USDC', payer: owner.publicKey.toBase58() } },
    [owner],
  );
  t.deepEqual((await http(gateway, 'GET', `/v1/agents/${mint}`, { key })).body.delegations, []);

  // Every prepared event went prepared → submitted → confirmed: its confirmed delivery carries that history, in order,
  // with the signature from submission on (a subscriber may see any subset of the deliveries; the history is whole).
  // Any delivery of an event names it (its history starts at PREPARED), so the ids are read once the seven prepared
  // events have each been delivered confirmed, whichever deliveries before that the subscriber saw.
  const confirmed = await until('the seven prepared events confirmed on the subscription', () => {
    const ids = [...new Set(events.seen.filter((e) => e.phases[0]?.phase === 'PREPARED').map((e) => e.id))];
    const last = ids.map((id) => events.seen.find((e) => e.id === id && e.phase === 'CONFIRMED'));
    return ids.length >= 7 && last.every(Boolean) ? (last as WatchedEvent[]) : undefined;
  });
  t.is(confirmed.length, 7, JSON.stringify(events.seen.map((e) => [e.kind, e.phase])));
  for (const e of confirmed) {
    t.deepEqual(
      e.phases.map((p) => p.phase),
      ['PREPARED', 'SUBMITTED', 'CONFIRMED'],
      `${e.kind} ${e.id}`,
    );
    const [prepared, submitted, done] = e.phases as [WatchedEvent['phases'][number], WatchedEvent['phases'][number], WatchedEvent['phases'][number]];
    t.true(Date.parse(prepared.at) <= Date.parse(submitted.at) && Date.parse(submitted.at) <= Date.parse(done.at), JSON.stringify(e.phases));
    t.is(prepared.signature, null, 'nothing was submitted when it was prepared');
    t.is(submitted.signature, e.signature);
    t.is(done.signature, e.signature);
  }
  t.deepEqual([...new Set(confirmed.map((e) => e.kind))].sort(), [
    'agent.create',
    'agent.delegation.revoke',
    'agent.delegation.set',
    'agent.treasury.provision',
    'agent.treasury.withdraw',
    'agent.treasury.withdraw_sol',
    'buyer.payment',
  ]);
}

metaplexTest(
  test,
  'lifecycle on the embedded devnet with Metaplex Core: mint, provision, fund, delegate, pay a link as delegate, withdraw, revoke',
  async (t) => {
    await lifecycle(t, t.context.a, t.context.a);
  },
);

metaplexTest(test, 'the same lifecycle through the rpc ledger adapter (the embedded JSON-RPC as the node)', async (t) => {
  await lifecycle(t, t.context.b, t.context.a);
});
