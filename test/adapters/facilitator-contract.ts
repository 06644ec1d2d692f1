import type { ExecutionContext, TestFn } from 'ava';
import { ComputeBudgetProgram, Keypair, PublicKey, TransactionInstruction, TransactionMessage, VersionedTransaction } from '@solana/web3.js';
import { createCloseAccountInstruction, createTransferCheckedInstruction } from '@solana/spl-token';
import { ataOf } from '../../domain/facilitator/ata.ts';
import { buildPaymentTransaction, feeLayoutFor, type FeeLayout } from '../../domain/facilitator/build.ts';
import { MEMO_PROGRAM_ID, type FeeEnforcement, type PaymentRequirements } from '../../domain/facilitator/schema.ts';
import type { FacilitatorRequest, X402RequirementsV2 } from '../../domain/facilitator/wire.ts';
import type { Facilitator } from '../../domain/ports/facilitator.ts';
import type { Ledger } from '../../domain/ports/ledger.ts';
import { DomainError } from '../../domain/shared/errors.ts';
import { CAIP2, findStable, X402_V1_NETWORK, type Stable } from '../../domain/shared/network.ts';
import { randomHash, waitForCommitment } from '../support/ledger.ts';
import { devnetUsdcOffer } from '../support/facilitator.ts';
import { issueChallenges } from '../../domain/paywall/mpp.ts';

// The Facilitator port's contract (fee-facilitator-mpp-tools §2.3, §4.1; DECISIONS "Facilitator"): the in-process
// adapter and the HTTP adapter pass the same tests against the same embedded devnet, so the paywall can use either.
// Every case pays a fresh buyer to a fresh seller, so the cases run concurrently and stay independent; balances are
// read from the ledger, the fee leg from the settled transaction itself (the fee account is shared by all cases).

export interface FacilitatorHarness {
  facilitator: Facilitator;
  /** the chain-devnet ledger the facilitator settles on: blockhashes and balances */
  ledger: Ledger;
  /** faucet: whole-unit decimal strings, e.g. { usdc: "1" } */
  fund(owner: string, funds: { usdc?: string; sol?: string }): Promise<void>;
  /** the terms the facilitator runs with (the gateway's settings); bps > 0 */
  fee: { bps: number; enforcement: FeeEnforcement; authority: string };
  /**
   * What a body that is not a verify/settle request gives: the service answers it as a refused payment
   * ('result': invalid_payload); over HTTP the routes refuse it with 400, which the adapter throws as
   * facilitator_unavailable ('throws').
   */
  malformed: 'result' | 'throws';
}

export interface FacilitatorSetup {
  /** prefixes every title: two adapters run in one file */
  name: string;
  harness(t: ExecutionContext): FacilitatorHarness | Promise<FacilitatorHarness>;
}

const NETWORK = 'chain-devnet' as const;
const USDC: Stable = findStable(NETWORK, 'USDC')!;
const AMOUNT = 10_000n; // $0.01
const CAIP2_DEVNET = 'solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1';
const V1_DEVNET = 'solana-devnet';

/** One payment's cast: a funded buyer, a seller owner whose token account does not exist yet, the offer. */
interface Scene {
  h: FacilitatorHarness;
  feePayer: string;
  buyer: Keypair;
  seller: string;
  /** the offer as the paywall states it (x402 v2 accepts entry) */
  offer: X402RequirementsV2;
  /** the same offer in domain form, for the builder */
  requirements: PaymentRequirements;
  layout: FeeLayout;
}

export function facilitatorContract(test: TestFn<any>, setup: FacilitatorSetup): void {
  const { name } = setup;

  const scene = async (t: ExecutionContext, options: { fee?: boolean } = {}): Promise<Scene> => {
    const h = await setup.harness(t);
    t.true(h.fee.bps > 0, 'the contract runs with the fee leg on');
    const feePayer = (await h.facilitator.health()).fee_payer;
    const buyer = Keypair.generate();
    await h.fund(buyer.publicKey.toBase58(), { usdc: '1' });
    const seller = Keypair.generate().publicKey.toBase58();
    const withFee = options.fee ?? true;
    const terms = { bps: h.fee.bps, feeAuthority: h.fee.authority };
    const { offer, requirements } = devnetUsdcOffer({ payTo: seller, feePayer, amount: AMOUNT, fee: withFee ? terms : undefined });
    return { h, feePayer, buyer, seller, offer, requirements, layout: feeLayoutFor(requirements) };
  };

  /** The buyer-signed payment as base64; `over` changes what is built (never what is offered). */
  const pay = async (
    s: Scene,
    over: { requirements?: Partial<PaymentRequirements>; createAtas?: boolean; blockhash?: string; sign?: boolean; memo?: string } = {},
  ): Promise<string> => {
    const blockhash = over.blockhash ?? (await s.h.ledger.getLatestBlockhash()).blockhash;
    const requirements = { ...s.requirements, ...over.requirements };
    if (over.requirements && 'fee' in over.requirements && over.requirements.fee === undefined) delete requirements.fee;
    const tx = buildPaymentTransaction({
      feePayer: s.feePayer,
      payer: s.buyer.publicKey.toBase58(),
      requirements,
      blockhash,
      createAtas: over.createAtas,
      ...(over.memo ? { memo: over.memo } : {}),
    });
    if (over.sign ?? true) tx.sign([s.buyer]);
    return Buffer.from(tx.serialize()).toString('base64');
  };

  const v2 = (s: Scene, transaction: string): FacilitatorRequest => ({
    x402Version: 2,
    paymentPayload: { x402Version: 2, accepted: s.offer, payload: { transaction } },
    paymentRequirements: s.offer,
  });

  const v1 = (s: Scene, transaction: string): FacilitatorRequest => {
    const requirements = {
      scheme: 'exact',
      network: V1_DEVNET,
      maxAmountRequired: s.offer.amount,
      resource: 'http://127.0.0.1/x/weather',
      description: 'Weather report',
      mimeType: 'application/json',
      payTo: s.offer.payTo,
      maxTimeoutSeconds: s.offer.maxTimeoutSeconds,
      asset: s.offer.asset,
      extra: s.offer.extra,
    };
    return {
      x402Version: 1,
      paymentPayload: { x402Version: 1, scheme: 'exact', network: V1_DEVNET, payload: { transaction } },
      paymentRequirements: requirements,
    };
  };

  const usdc = async (h: FacilitatorHarness, owner: string): Promise<bigint> =>
    (await h.ledger.getTokenBalances(owner, { mint: USDC.mint })).reduce((sum, b) => sum + b.amount, 0n);

  /** What the buyer and the seller hold: the accounts a refused payment must leave alone. */
  const holdings = async (s: Scene) => ({ buyer: await usdc(s.h, s.buyer.publicKey.toBase58()), seller: await usdc(s.h, s.seller) });

  /** ceil(amount × bps / 10000), written out here rather than taken from the code under test (§2.2). */
  const expectedFee = (amount: bigint, bps: number) => (amount * BigInt(bps) + 9_999n) / 10_000n;

  /** The fee leg as the ledger recorded it in the settled transaction. */
  const feeMoved = async (h: FacilitatorHarness, signature: string, feeAccount: string): Promise<bigint> => {
    const tx = await h.ledger.getTransaction(signature);
    if (!tx) throw new Error(`transaction ${signature} is unknown to the ledger`);
    const pre = tx.preTokenBalances.find((b) => b.account === feeAccount)?.amount ?? 0n;
    const post = tx.postTokenBalances.find((b) => b.account === feeAccount)?.amount ?? 0n;
    return post - pre;
  };

  // Serial, so it runs before the concurrent cases: the first payment of the file creates the fee vault, and two
  // first payments racing for that one sponsored creation is not what these cases are about.
  test.serial(`${name}: a fee-layout payment verifies, settles, lands confirmed and moves exactly amount and fee`, async (t) => {
    const s = await scene(t);
    const buyer = s.buyer.publicKey.toBase58();
    const before = await holdings(s);
    t.is(before.buyer, 1_000_000n);
    const request = v2(s, await pay(s));

    t.deepEqual(await s.h.facilitator.verify(request), { isValid: true, payer: buyer });
    const settled = await s.h.facilitator.settle(request);
    t.like(settled, { success: true, network: CAIP2_DEVNET, payer: buyer });
    t.is(settled.errorReason, undefined);
    t.regex(settled.transaction, /^[1-9A-HJ-NP-Za-km-z]{64,88}$/);

    const status = await waitForCommitment(s.h.ledger, settled.transaction, 'confirmed');
    t.is(status.err, null);
    const fee = expectedFee(AMOUNT, s.h.fee.bps);
    t.is(s.layout.fee, fee);
    t.deepEqual(await holdings(s), { buyer: before.buyer - AMOUNT - fee, seller: AMOUNT });
    t.is(await feeMoved(s.h, settled.transaction, ataOf(s.h.fee.authority, USDC.mint, USDC.tokenProgramId)), fee);
    const tx = await s.h.ledger.getTransaction(settled.transaction);
    t.is(tx?.accountKeys[0], s.feePayer, 'the facilitator paid the transaction fee');
    t.deepEqual(tx?.signers, [s.feePayer, buyer]);
  });

  test(`${name}: cosign signs a buyer-unsigned settlement and sends nothing; the wallet sends it; creations and buyer-signed ones are refused`, async (t) => {
    const s = await scene(t);
    const buyer = s.buyer.publicKey.toBase58();
    // the seller's token account is missing: a wallet payment creates none
    t.like(await s.h.facilitator.cosign(v2(s, await pay(s, { createAtas: false, sign: false }))), {
      success: false,
      errorReason: 'ata_creation_not_sponsored',
    });
    t.like((await s.h.facilitator.prepareAccounts({ network: CAIP2_DEVNET, owner: s.seller, assets: [USDC.mint] })).accounts[0], { ready: true });
    const before = await holdings(s);
    const cosigned = await s.h.facilitator.cosign(v2(s, await pay(s, { createAtas: false, sign: false })));
    t.like(cosigned, { success: true, network: CAIP2_DEVNET, payer: buyer });
    t.deepEqual(await holdings(s), before, 'nothing was sent');
    const tx = VersionedTransaction.deserialize(Buffer.from(cosigned.transaction, 'base64'));
    tx.sign([s.buyer]);
    const sent = await s.h.ledger.sendTransaction(tx.serialize());
    t.like(sent, { ok: true, signature: cosigned.signature });
    t.is((await waitForCommitment(s.h.ledger, cosigned.signature, 'confirmed')).err, null);
    t.is((await holdings(s)).seller, AMOUNT);
    // a buyer who signed first is not a wallet co-sign
    t.like(await s.h.facilitator.cosign(v2(s, await pay(s, { createAtas: false }))), { success: false, errorReason: 'invalid_signature' });
  });

  test(`${name}: settling the same payment again is a duplicate and moves nothing; verify then says so too`, async (t) => {
    const s = await scene(t);
    const request = v2(s, await pay(s));
    const first = await s.h.facilitator.settle(request);
    t.like(first, { success: true });
    const after = await holdings(s);

    const again = await s.h.facilitator.settle(request);
    t.like(again, { success: false, errorReason: 'duplicate_settlement', network: CAIP2_DEVNET });
    t.deepEqual(await holdings(s), after, 'nothing moved a second time');
    t.like(await s.h.facilitator.verify(request), { isValid: false, invalidReason: 'duplicate_settlement', payer: s.buyer.publicKey.toBase58() });
    t.deepEqual(await holdings(s), after);
  });

  test(`${name}: an MPP charge bound to its challenge settles once (signature and slot); unbound it is challenge_mismatch; again a duplicate`, async (t) => {
    const s = await scene(t);
    const [issued] = issueChallenges({
      secret: new Uint8Array(32).fill(7),
      realm: 'contract.test',
      network: NETWORK,
      accepts: [s.offer],
      resource: { url: 'http://127.0.0.1/x/mpp-contract', description: 'contract' },
      digest: 'c'.repeat(64),
      now: new Date(),
    });
    const challenge = { ...issued! }; // the wire form: a plain object
    const before = await holdings(s);

    const unbound = await s.h.facilitator.mppSettle({ challenge, transaction: await pay(s, { memo: 'another-challenge' }) });
    t.like(unbound, { success: false, errorReason: 'challenge_mismatch', network: CAIP2_DEVNET });
    t.deepEqual(await holdings(s), before, 'an unbound transaction moves nothing');

    const transaction = await pay(s, { memo: challenge.id });
    const settled = await s.h.facilitator.mppSettle({ challenge, transaction });
    t.like(settled, { success: true, network: CAIP2_DEVNET, payer: s.buyer.publicKey.toBase58() });
    t.regex(settled.signature, /^[1-9A-HJ-NP-Za-km-z]{64,88}$/);
    t.is(typeof settled.slot, 'number');
    const fee = expectedFee(AMOUNT, s.h.fee.bps);
    t.deepEqual(await holdings(s), { buyer: before.buyer - AMOUNT - fee, seller: AMOUNT });

    const again = await s.h.facilitator.mppSettle({ challenge, transaction });
    t.like(again, { success: false, errorReason: 'duplicate_settlement' });
    t.deepEqual(await holdings(s), { buyer: before.buyer - AMOUNT - fee, seller: AMOUNT }, 'nothing moved a second time');
  });

  test(`${name}: the v1 body form (maxAmountRequired, resource, solana-devnet) verifies and settles`, async (t) => {
    const s = await scene(t);
    const before = await holdings(s);
    const request = v1(s, await pay(s));
    t.like(await s.h.facilitator.verify(request), { isValid: true, payer: s.buyer.publicKey.toBase58() });
    const settled = await s.h.facilitator.settle(request);
    t.like(settled, { success: true, network: V1_DEVNET, payer: s.buyer.publicKey.toBase58() });
    t.deepEqual(await holdings(s), { buyer: before.buyer - s.layout.gross, seller: AMOUNT });
  });

  /** A refused payment: the same reason from verify and settle, no transaction, nothing moved. */
  const refused = (title: string, reason: string, make: (s: Scene) => Promise<FacilitatorRequest>) =>
    test(`${name}: refused with ${reason}: ${title}`, async (t) => {
      const s = await scene(t);
      const before = await holdings(s);
      const request = await make(s);
      const verdict = await s.h.facilitator.verify(request);
      t.like(verdict, { isValid: false, invalidReason: reason });
      t.is(typeof verdict.invalidMessage, 'string');
      const settled = await s.h.facilitator.settle(request);
      t.like(settled, { success: false, errorReason: reason, transaction: '' });
      t.is(typeof settled.errorMessage, 'string');
      t.deepEqual(await holdings(s), before, 'nothing moved');
      t.is(await s.h.ledger.getAccount(s.layout.sellerAccount), null, "the seller's token account was not created");
    });

  refused('the transfer moves less than the offer', 'wrong_amount', async (s) => v2(s, await pay(s, { requirements: { amount: AMOUNT - 1n } })));
  refused('the transfer moves another mint', 'wrong_mint', async (s) =>
    v2(s, await pay(s, { requirements: { asset: Keypair.generate().publicKey.toBase58() }, createAtas: false })),
  );
  refused('the transfer credits someone other than payTo', 'wrong_destination', async (s) =>
    v2(s, await pay(s, { requirements: { payTo: Keypair.generate().publicKey.toBase58() }, createAtas: false })),
  );
  refused('the offer carries fee terms, the transaction no fee leg (enforce)', 'fee_leg_missing', async (s) => {
    if (s.h.fee.enforcement !== 'enforce') throw new Error('this case needs SVC_FEE_ENFORCE=enforce');
    return v2(s, await pay(s, { requirements: { fee: undefined } }));
  });
  refused('the fee payer is the transfer authority (draining its own token account)', 'fee_payer_is_authority', async (s) => {
    const key = (a: string) => new PublicKey(a);
    const program = key(USDC.tokenProgramId);
    const mint = key(USDC.mint);
    const source = key(ataOf(s.feePayer, USDC.mint, USDC.tokenProgramId));
    const { blockhash } = await s.h.ledger.getLatestBlockhash();
    const message = new TransactionMessage({
      payerKey: key(s.feePayer),
      recentBlockhash: blockhash,
      instructions: [
        ComputeBudgetProgram.setComputeUnitLimit({ units: 40_000 }),
        ComputeBudgetProgram.setComputeUnitPrice({ microLamports: 1 }),
        createTransferCheckedInstruction(source, mint, key(s.layout.sellerAccount), key(s.feePayer), AMOUNT, USDC.decimals, [], program),
        createTransferCheckedInstruction(source, mint, key(s.layout.feeAccount!), key(s.feePayer), s.layout.fee, USDC.decimals, [], program),
        new TransactionInstruction({ programId: key(MEMO_PROGRAM_ID), keys: [], data: Buffer.from('drain') }),
      ],
    }).compileToV0Message();
    return v2(s, Buffer.from(new VersionedTransaction(message).serialize()).toString('base64'));
  });
  refused('a blockhash the ledger never issued (simulation: BlockhashNotFound)', 'transaction_expired', async (s) =>
    v2(s, await pay(s, { blockhash: randomHash() })),
  );
  refused('the buyer has not signed', 'missing_signature', async (s) => v2(s, await pay(s, { sign: false })));

  test(`${name}: a stock-layout payment (no account creation, no fee terms) to a seller without a token account settles: the facilitator creates it first`, async (t) => {
    const s = await scene(t, { fee: false });
    const second = { ...s, seller: Keypair.generate().publicKey.toBase58() };
    second.offer = { ...s.offer, payTo: second.seller };
    second.requirements = { ...s.requirements, payTo: second.seller };
    second.layout = feeLayoutFor(second.requirements);

    for (const each of [s, second]) {
      t.is(await s.h.ledger.getAccount(each.layout.sellerAccount), null);
      const before = await usdc(s.h, s.buyer.publicKey.toBase58());
      const request = v2(each, await pay(each, { createAtas: false }));
      t.like(await s.h.facilitator.verify(request), { isValid: true, payer: s.buyer.publicKey.toBase58() });
      const settled = await s.h.facilitator.settle(request);
      t.like(settled, { success: true, network: CAIP2_DEVNET });
      t.is(await usdc(s.h, each.seller), AMOUNT);
      t.is(await usdc(s.h, s.buyer.publicKey.toBase58()), before - AMOUNT, 'no fee leg without fee terms');
      const created = await s.h.ledger.getAccount(each.layout.sellerAccount);
      t.is(created?.owner, USDC.tokenProgramId);
    }
  });

  test(`${name}: prepareAccounts creates a missing token account once, at the facilitator's expense; an existing one is ready`, async (t) => {
    const h = await setup.harness(t);
    const owner = Keypair.generate().publicKey.toBase58(); // holds no SOL: the fee payer pays the rent
    const account = ataOf(owner, USDC.mint, USDC.tokenProgramId);
    t.is(await h.ledger.getAccount(account), null);

    const first = await h.facilitator.prepareAccounts({ network: CAIP2_DEVNET, owner, assets: [USDC.mint] });
    t.deepEqual(first, { network: CAIP2_DEVNET, owner, accounts: [{ asset: USDC.mint, account, ready: true, created: true }] });
    const created = await h.ledger.getAccount(account);
    t.is(created?.owner, USDC.tokenProgramId, 'a token account of the stable, on the ledger');

    const again = await h.facilitator.prepareAccounts({ network: V1_DEVNET, owner, assets: [USDC.mint] });
    t.deepEqual(again.accounts, [{ asset: USDC.mint, account, ready: true, created: false }], 'the v1 network name works too; nothing created twice');
  });

  test(`${name}: prepareAccounts refuses per account, never throws: another network, an asset that is not a mint`, async (t) => {
    const h = await setup.harness(t);
    const owner = Keypair.generate().publicKey.toBase58();
    const unknown = await h.facilitator.prepareAccounts({ network: 'eip155:1', owner, assets: [USDC.mint] });
    t.like(unknown.accounts[0], { asset: USDC.mint, account: null, ready: false, reason: 'unsupported_network' });
    const notMint = Keypair.generate().publicKey.toBase58();
    const mixed = await h.facilitator.prepareAccounts({ network: CAIP2_DEVNET, owner, assets: [notMint, USDC.mint] });
    t.like(mixed.accounts[0], { asset: notMint, account: null, ready: false, reason: 'unsupported_asset' });
    t.is(typeof (mixed.accounts[0] as { message?: unknown }).message, 'string');
    t.like(mixed.accounts[1], { asset: USDC.mint, ready: true, created: true });
  });

  test(`${name}: prepareAccounts stays within rent sponsorship: an account closed after its sponsored creation is not paid for again`, async (t) => {
    const h = await setup.harness(t);
    const owner = Keypair.generate();
    const ownerAddress = owner.publicKey.toBase58();
    const account = ataOf(ownerAddress, USDC.mint, USDC.tokenProgramId);
    t.like((await h.facilitator.prepareAccounts({ network: CAIP2_DEVNET, owner: ownerAddress, assets: [USDC.mint] })).accounts[0], {
      ready: true,
      created: true,
    });
    // The owner closes it and takes the rent (the create-close-reclaim drain), then asks again.
    await h.fund(ownerAddress, { sol: '0.01' });
    const { blockhash } = await h.ledger.getLatestBlockhash();
    const close = new VersionedTransaction(
      new TransactionMessage({
        payerKey: owner.publicKey,
        recentBlockhash: blockhash,
        instructions: [createCloseAccountInstruction(new PublicKey(account), owner.publicKey, owner.publicKey, [], new PublicKey(USDC.tokenProgramId))],
      }).compileToV0Message(),
    );
    close.sign([owner]);
    const sent = await h.ledger.sendTransaction(close.serialize());
    t.true(sent.ok, JSON.stringify(sent));
    if (sent.ok) await waitForCommitment(h.ledger, sent.signature);
    t.is(await h.ledger.getAccount(account), null);

    const refused = await h.facilitator.prepareAccounts({ network: CAIP2_DEVNET, owner: ownerAddress, assets: [USDC.mint] });
    t.like(refused.accounts[0], { asset: USDC.mint, account, ready: false, reason: 'ata_creation_not_sponsored' });
    t.regex((refused.accounts[0] as { message: string }).message, /already paid once/);
    t.is(await h.ledger.getAccount(account), null, 'not created again');
  });

  test(`${name}: a body that is not a verify/settle request`, async (t) => {
    const h = await setup.harness(t);
    const malformed = { x402Version: 2, paymentRequirements: {} } as unknown as FacilitatorRequest;
    if (h.malformed === 'result') {
      t.like(await h.facilitator.verify(malformed), { isValid: false, invalidReason: 'invalid_payload' });
      t.like(await h.facilitator.settle(malformed), { success: false, errorReason: 'invalid_payload', transaction: '' });
    } else {
      for (const call of [() => h.facilitator.verify(malformed), () => h.facilitator.settle(malformed)]) {
        const error = await t.throwsAsync(call, { instanceOf: DomainError });
        t.is(error?.code, 'facilitator_unavailable');
        t.regex(error?.message ?? '', /400/);
        t.regex(error?.message ?? '', /invalid_request/);
      }
    }
  });

  test(`${name}: supported lists exact for v1 and v2 on chain-devnet with the fee payer as signer; health has the fee block`, async (t) => {
    const h = await setup.harness(t);
    const health = await h.facilitator.health();
    t.like(health, { ok: true, protocol_fee: { bps: h.fee.bps, enforcement: h.fee.enforcement, authority: h.fee.authority } });
    t.true(health.networks.includes(NETWORK));
    t.is(health.protocol_fee.authorities[NETWORK], h.fee.authority);
    t.regex(health.fee_payer, /^[1-9A-HJ-NP-Za-km-z]{32,44}$/);
    t.not(health.fee_payer, h.fee.authority);

    const supported = await h.facilitator.supported();
    const kinds = supported.kinds.map((k) => `${k.x402Version} ${k.scheme} ${k.network}`);
    t.true(kinds.includes(`2 exact ${CAIP2[NETWORK]}`), kinds.join(', '));
    t.true(kinds.includes(`1 exact ${X402_V1_NETWORK[NETWORK]}`), kinds.join(', '));
    t.is(CAIP2[NETWORK], CAIP2_DEVNET);
    t.is(new Set(kinds).size, kinds.length, 'one entry per tuple');
    // the fee extension and its terms, for a seller to copy into its offers (fee-facilitator-mpp-tools §2.1)
    t.deepEqual(supported.extensions, h.fee.bps > 0 ? ['svc.fee'] : []);
    const devnetKind = supported.kinds.find((k) => k.network === CAIP2[NETWORK]);
    t.deepEqual(devnetKind?.extra?.['svc.fee'], h.fee.bps > 0 ? { v: '1', bps: h.fee.bps, feeAuthority: h.fee.authority } : undefined);
    t.deepEqual(supported.signers, { 'solana:*': [health.fee_payer] });
  });
}
