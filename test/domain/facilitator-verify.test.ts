import test from 'ava';
import {
  AddressLookupTableAccount,
  ComputeBudgetProgram,
  Keypair,
  MessageV0,
  PublicKey,
  SystemProgram,
  TransactionInstruction,
  TransactionMessage,
  VersionedTransaction,
} from '@solana/web3.js';
import {
  createAssociatedTokenAccountIdempotentInstruction,
  createAssociatedTokenAccountInstruction,
  createTransferCheckedInstruction,
  createTransferInstruction,
  getAssociatedTokenAddressSync,
} from '@solana/spl-token';
import { buildPaymentTransaction, DEFAULT_SETTLEMENT_COMPUTE_UNITS, feeLayoutFor } from '../../domain/facilitator/build.ts';
import {
  FeeExtension,
  LIGHTHOUSE_PROGRAM_ID,
  MEMO_PROGRAM_ID,
  type FacilitatorPolicy,
  type PaymentRequirements,
  type VerifyReason,
  type VerifyResult,
} from '../../domain/facilitator/schema.ts';
import { verifyPayment } from '../../domain/facilitator/verify.ts';
import { DomainError } from '../../domain/shared/errors.ts';
import { findStable, type Stable } from '../../domain/shared/network.ts';
import { treasuryOf } from '../../domain/treasury/derive.ts';

// fee-facilitator-mpp-tools §2.3/§4.1 and DECISIONS "Facilitator": real keypairs, real web3.js/spl-token
// instruction builders, real ed25519 signatures; no ledger, no database.

const USDC = findStable('chain-mainnet', 'USDC')!;
const USDG = findStable('chain-mainnet', 'USDG')!;
const MEMO = new PublicKey(MEMO_PROGRAM_ID);
const LIGHTHOUSE = new PublicKey(LIGHTHOUSE_PROGRAM_ID);

/** One settlement's cast: facilitator, buyer, seller (an agent treasury PDA: off-curve) and fee authority. */
function world(stable: Stable = USDC) {
  const feePayer = Keypair.generate();
  const buyer = Keypair.generate();
  const payTo = treasuryOf(Keypair.generate().publicKey.toBase58());
  const feeAuthority = Keypair.generate().publicKey.toBase58();
  const blockhash = Keypair.generate().publicKey.toBase58();
  const mint = new PublicKey(stable.mint);
  const program = new PublicKey(stable.tokenProgramId);
  const ata = (owner: PublicKey | string) => getAssociatedTokenAddressSync(mint, new PublicKey(owner), true, program);

  const requirements = (over: Partial<PaymentRequirements> = {}): PaymentRequirements => ({
    scheme: 'exact',
    network: 'chain-mainnet',
    payTo,
    asset: stable.mint,
    amount: 1_000_000n,
    tokenProgram: stable.tokenProgramId as PaymentRequirements['tokenProgram'],
    decimals: stable.decimals,
    ...over,
  });
  const withFee = (over: Partial<PaymentRequirements> = {}, bps = 100) => requirements({ fee: { bps, feeAuthority }, ...over });
  const policy = (over: Partial<FacilitatorPolicy> = {}): FacilitatorPolicy => ({ feePayer: feePayer.publicKey.toBase58(), enforcement: 'enforce', ...over });

  const ix = {
    limit: (units = 20_000) => ComputeBudgetProgram.setComputeUnitLimit({ units }),
    price: (microLamports: number | bigint = 1) => ComputeBudgetProgram.setComputeUnitPrice({ microLamports }),
    create: (owner: PublicKey | string, o: { payer?: PublicKey; mint?: PublicKey; program?: PublicKey } = {}) =>
      createAssociatedTokenAccountIdempotentInstruction(
        o.payer ?? feePayer.publicKey,
        getAssociatedTokenAddressSync(o.mint ?? mint, new PublicKey(owner), true, o.program ?? program),
        new PublicKey(owner),
        o.mint ?? mint,
        o.program ?? program,
      ),
    transfer: (
      o: {
        amount?: bigint;
        to?: PublicKey;
        from?: PublicKey;
        authority?: PublicKey;
        mint?: PublicKey;
        decimals?: number;
        program?: PublicKey;
        multisig?: PublicKey[];
      } = {},
    ) =>
      createTransferCheckedInstruction(
        o.from ?? ata(buyer.publicKey),
        o.mint ?? mint,
        o.to ?? ata(payTo),
        o.authority ?? buyer.publicKey,
        o.amount ?? 1_000_000n,
        o.decimals ?? stable.decimals,
        o.multisig ?? [],
        o.program ?? program,
      ),
    feeLeg: (o: { amount?: bigint; to?: PublicKey; from?: PublicKey; authority?: PublicKey; mint?: PublicKey; decimals?: number } = {}) =>
      ix.transfer({ amount: 10_000n, to: ata(feeAuthority), ...o }),
    memo: (text = 'a1b2c3d4e5f60718293a4b5c6d7e8f90', signers: PublicKey[] = []) =>
      new TransactionInstruction({ programId: MEMO, keys: signers.map((pubkey) => ({ pubkey, isSigner: true, isWritable: false })), data: Buffer.from(text) }),
    lighthouse: (accounts: PublicKey[] = []) =>
      new TransactionInstruction({
        programId: LIGHTHOUSE,
        keys: accounts.map((pubkey) => ({ pubkey, isSigner: false, isWritable: false })),
        data: Buffer.from([0, 1, 2]),
      }),
  };

  /** The stock x402 client's layout (@x402/svm 2.27 ExactSvmScheme): limit 20k, price 1, TransferChecked, Memo nonce. */
  const stock = () => [ix.limit(), ix.price(), ix.transfer(), ix.memo()];
  /** §2.3 with every optional part: limit, price, 2 creations, seller leg, fee leg, memo. */
  const full = () => [ix.limit(), ix.price(), ix.create(payTo), ix.create(feeAuthority), ix.transfer(), ix.feeLeg(), ix.memo()];

  const assemble = (
    instructions: TransactionInstruction[],
    o: { payerKey?: PublicKey; signers?: Keypair[]; version?: 'legacy' | 0; lookups?: AddressLookupTableAccount[] } = {},
  ): Uint8Array => {
    const message = new TransactionMessage({ payerKey: o.payerKey ?? feePayer.publicKey, recentBlockhash: blockhash, instructions });
    const compiled = o.version === 'legacy' ? message.compileToLegacyMessage() : message.compileToV0Message(o.lookups);
    const tx = new VersionedTransaction(compiled);
    const signers = o.signers ?? [buyer];
    if (signers.length > 0) tx.sign(signers);
    return tx.serialize();
  };

  const verify = (transaction: Uint8Array, req: PaymentRequirements = requirements(), pol: FacilitatorPolicy = policy()) =>
    verifyPayment({ transaction, requirements: req, facilitator: pol });

  return { stable, feePayer, buyer, payTo, feeAuthority, blockhash, mint, program, ata, requirements, withFee, policy, ix, stock, full, assemble, verify };
}

const rejected = (t: import('ava').ExecutionContext, result: VerifyResult, reason: VerifyReason) => {
  t.false(result.isValid, `expected ${reason}, got a valid result`);
  if (!result.isValid) {
    t.is(result.invalidReason, reason, result.message);
    t.true(result.message.length > 0);
  }
};

// ---------------------------------------------------------------------------------------------------------------
// Accepted layouts

test('a stock x402 transaction (limit, price, TransferChecked, Memo) verifies without fee terms', (t) => {
  const w = world();
  const result = w.verify(w.assemble(w.stock()));
  t.deepEqual(result, {
    isValid: true,
    payer: w.buyer.publicKey.toBase58(),
    source: w.ata(w.buyer.publicKey).toBase58(),
    destination: w.ata(w.payTo).toBase58(),
    amount: 1_000_000n,
    fee: 0n,
    feeDestination: null,
    createsAccounts: [],
    warnings: [],
  });
});

test('stock variants: no memo (x402 1.x client), trailing Lighthouse assertions, a legacy message', (t) => {
  const w = world();
  t.true(w.verify(w.assemble([w.ix.limit(), w.ix.price(), w.ix.transfer()])).isValid);
  t.true(w.verify(w.assemble([...w.stock(), w.ix.lighthouse([w.buyer.publicKey]), w.ix.lighthouse()])).isValid);
  t.true(w.verify(w.assemble([w.ix.limit(), w.ix.price(), w.ix.transfer(), w.ix.lighthouse(), w.ix.memo()])).isValid);
  t.true(w.verify(w.assemble(w.stock(), { version: 'legacy' })).isValid);
});

test('the full fee layout (two creations, seller leg, fee leg, memo) verifies under SPL Token', (t) => {
  const w = world();
  const result = w.verify(w.assemble(w.full()), w.withFee());
  t.deepEqual(result, {
    isValid: true,
    payer: w.buyer.publicKey.toBase58(),
    source: w.ata(w.buyer.publicKey).toBase58(),
    destination: w.ata(w.payTo).toBase58(),
    amount: 1_000_000n,
    fee: 10_000n,
    feeDestination: w.ata(w.feeAuthority).toBase58(),
    createsAccounts: [w.ata(w.payTo).toBase58(), w.ata(w.feeAuthority).toBase58()],
    warnings: [],
  });
});

test('the fee layout verifies under Token-2022 (USDG), with and without creations, and with one creation', (t) => {
  const w = world(USDG);
  t.is(w.stable.tokenProgramId, 'TokenzQdBNbLqP5VEhdkAS6EPFLC1PHnBqCXEpPxuEb');
  const full = w.verify(w.assemble(w.full()), w.withFee());
  t.true(full.isValid);
  if (full.isValid) t.is(full.destination, getAssociatedTokenAddressSync(w.mint, new PublicKey(w.payTo), true, w.program).toBase58());
  const bare = w.verify(w.assemble([w.ix.limit(), w.ix.price(), w.ix.transfer(), w.ix.feeLeg(), w.ix.memo()]), w.withFee());
  t.like(bare, { isValid: true, fee: 10_000n, createsAccounts: [] });
  const one = w.verify(w.assemble([w.ix.limit(), w.ix.price(), w.ix.create(w.feeAuthority), w.ix.transfer(), w.ix.feeLeg(), w.ix.memo()]), w.withFee());
  t.like(one, { isValid: true, createsAccounts: [w.ata(w.feeAuthority).toBase58()] });
  // Lighthouse is also allowed after the fee layout's memo.
  t.true(w.verify(w.assemble([...w.full(), w.ix.lighthouse()]), w.withFee()).isValid);
});

test('the splits shape (x402 exact/svm extra.splits: seller leg, memo, fee account creation, fee leg, memo) verifies', (t) => {
  const w = world();
  const { ix } = w;
  const split = w.verify(
    w.assemble([ix.limit(), ix.price(), ix.transfer(), ix.memo('order-1'), ix.create(w.feeAuthority), ix.feeLeg(), ix.memo('fee')]),
    w.withFee(),
  );
  t.like(split, { isValid: true, amount: 1_000_000n, fee: 10_000n, createsAccounts: [w.ata(w.feeAuthority).toBase58()] });
  // Without the split's creation or memos, and with the seller's account created up front.
  t.like(w.verify(w.assemble([ix.limit(), ix.price(), ix.transfer(), ix.memo(), ix.feeLeg()]), w.withFee()), { isValid: true, createsAccounts: [] });
  const both = w.verify(
    w.assemble([ix.limit(), ix.price(), ix.create(w.payTo), ix.transfer(), ix.create(w.feeAuthority), ix.feeLeg(), ix.memo()]),
    w.withFee(),
  );
  t.like(both, { isValid: true, createsAccounts: [w.ata(w.payTo).toBase58(), w.ata(w.feeAuthority).toBase58()] });
});

test('the splits shape keeps every rule: only the fee account is created between the legs, once, and only before a fee leg', (t) => {
  const w = world();
  const { ix } = w;
  const between = (create: TransactionInstruction) => w.assemble([ix.limit(), ix.price(), ix.transfer(), create, ix.feeLeg(), ix.memo()]);
  rejected(t, w.verify(between(ix.create(w.payTo)), w.withFee()), 'ata_creation_not_allowed');
  rejected(t, w.verify(between(ix.create(Keypair.generate().publicKey)), w.withFee()), 'ata_creation_not_allowed');
  rejected(t, w.verify(between(ix.create(w.feeAuthority, { payer: w.buyer.publicKey })), w.withFee()), 'ata_creation_not_allowed');
  const twice = w.assemble([ix.limit(), ix.price(), ix.create(w.feeAuthority), ix.transfer(), ix.create(w.feeAuthority), ix.feeLeg()]);
  rejected(t, w.verify(twice, w.withFee()), 'ata_creation_not_allowed');
  rejected(t, w.verify(w.assemble([ix.limit(), ix.price(), ix.transfer(), ix.create(w.feeAuthority), ix.memo()]), w.withFee()), 'ata_creation_not_allowed');
  // The fee leg after memos is still held to its amount and account; without fee terms a leg after a memo is refused.
  rejected(t, w.verify(w.assemble([ix.limit(), ix.price(), ix.transfer(), ix.memo(), ix.feeLeg({ amount: 9_999n })]), w.withFee()), 'fee_leg_wrong_amount');
  rejected(
    t,
    w.verify(w.assemble([ix.limit(), ix.price(), ix.transfer(), ix.memo(), ix.feeLeg({ to: w.ata(w.payTo) })]), w.withFee()),
    'fee_leg_wrong_destination',
  );
  rejected(t, w.verify(w.assemble([ix.limit(), ix.price(), ix.transfer(), ix.memo(), ix.feeLeg()])), 'unexpected_fee_leg');
  rejected(t, w.verify(w.assemble([ix.limit(), ix.price(), ix.transfer(), ix.memo(), ix.feeLeg(), ix.feeLeg()]), w.withFee()), 'unexpected_instruction');
});

test('a delegate spending from a treasury token account (source is not the authority ATA) verifies', (t) => {
  const w = world();
  const treasuryAccount = w.ata(treasuryOf(Keypair.generate().publicKey.toBase58()));
  const result = w.verify(
    w.assemble([w.ix.limit(), w.ix.price(), w.ix.transfer({ from: treasuryAccount }), w.ix.feeLeg({ from: treasuryAccount }), w.ix.memo()]),
    w.withFee(),
  );
  t.like(result, { isValid: true, source: treasuryAccount.toBase58(), payer: w.buyer.publicKey.toBase58() });
});

// ---------------------------------------------------------------------------------------------------------------
// Decoding

test('bytes that are not one legacy or v0 transaction are invalid_transaction', (t) => {
  const w = world();
  const good = w.assemble(w.stock());
  rejected(t, w.verify(new Uint8Array()), 'invalid_transaction');
  rejected(t, w.verify(Uint8Array.from([1, 2, 3])), 'invalid_transaction');
  rejected(t, w.verify(good.slice(0, good.length - 5)), 'invalid_transaction');
  rejected(t, w.verify(Uint8Array.from([...good, 0])), 'invalid_transaction');
  rejected(t, w.verify(new Uint8Array(1300)), 'invalid_transaction');
  // A v0 message relabelled as version 5.
  const other = Uint8Array.from(good);
  other[1 + 2 * 64] = 0x85;
  rejected(t, w.verify(other), 'invalid_transaction');
  // One signature slot for two required signers.
  const short = Uint8Array.from([1, ...good.slice(1 + 64)]);
  rejected(t, w.verify(short), 'invalid_transaction');
});

test('requirements that do not parse are invalid_requirements', (t) => {
  const w = world();
  const tx = w.assemble(w.stock());
  rejected(t, w.verify(tx, w.requirements({ payTo: 'not-an-address' })), 'invalid_requirements');
  rejected(t, w.verify(tx, w.requirements({ amount: 0n })), 'invalid_requirements');
  rejected(
    t,
    w.verify(tx, w.requirements({ tokenProgram: '11111111111111111111111111111111' as PaymentRequirements['tokenProgram'] })),
    'invalid_requirements',
  );
  rejected(t, w.verify(tx, w.requirements(), w.policy({ feePayer: 'x' })), 'invalid_requirements');
});

test('address lookup tables are refused', (t) => {
  const w = world();
  const table = new AddressLookupTableAccount({
    key: Keypair.generate().publicKey,
    state: { deactivationSlot: 2n ** 64n - 1n, lastExtendedSlot: 0, lastExtendedSlotStartIndex: 0, authority: undefined, addresses: [w.ata(w.payTo)] },
  });
  const tx = w.assemble(w.stock(), { lookups: [table] });
  t.is(VersionedTransaction.deserialize(tx).message.addressTableLookups.length, 1);
  rejected(t, w.verify(tx), 'address_lookup_tables_unsupported');
});

// ---------------------------------------------------------------------------------------------------------------
// Fee payer safety

test('a transaction paid by anyone but the facilitator is fee_payer_mismatch', (t) => {
  const w = world();
  rejected(t, w.verify(w.assemble(w.stock(), { payerKey: w.buyer.publicKey })), 'fee_payer_mismatch');
});

test('the fee payer as transfer authority is fee_payer_is_authority (seller or fee leg)', (t) => {
  const w = world();
  const fp = w.feePayer.publicKey;
  const seller = w.assemble([w.ix.limit(), w.ix.price(), w.ix.transfer({ authority: fp, from: w.ata(fp) }), w.ix.memo()], { signers: [] });
  const result = w.verify(seller);
  rejected(t, result, 'fee_payer_is_authority');
  t.is((result as { payer: string | null }).payer, fp.toBase58());
  const feeLeg = w.assemble([w.ix.limit(), w.ix.price(), w.ix.transfer(), w.ix.feeLeg({ authority: fp }), w.ix.memo()]);
  rejected(t, w.verify(feeLeg, w.withFee()), 'fee_payer_is_authority');
});

test('the fee payer or its token account as source is fee_payer_is_source', (t) => {
  const w = world();
  const fp = w.feePayer.publicKey;
  rejected(t, w.verify(w.assemble([w.ix.limit(), w.ix.price(), w.ix.transfer({ from: fp }), w.ix.memo()])), 'fee_payer_is_source');
  rejected(t, w.verify(w.assemble([w.ix.limit(), w.ix.price(), w.ix.transfer({ from: w.ata(fp) }), w.ix.memo()])), 'fee_payer_is_source');
});

test('the fee payer in any other instruction is fee_payer_in_instruction', (t) => {
  const w = world();
  const fp = w.feePayer.publicKey;
  // A memo "signed" by the fee payer, a Lighthouse assertion on it, a destination owned by it, an ATA created for it.
  rejected(t, w.verify(w.assemble([w.ix.limit(), w.ix.price(), w.ix.transfer(), w.ix.memo('x', [fp])])), 'fee_payer_in_instruction');
  rejected(t, w.verify(w.assemble([...w.stock(), w.ix.lighthouse([fp])])), 'fee_payer_in_instruction');
  rejected(t, w.verify(w.assemble([w.ix.limit(), w.ix.price(), w.ix.transfer({ to: fp }), w.ix.memo()])), 'fee_payer_in_instruction');
  rejected(t, w.verify(w.assemble([w.ix.limit(), w.ix.price(), w.ix.create(fp), w.ix.transfer(), w.ix.memo()])), 'fee_payer_in_instruction');
  // A system transfer out of the fee payer's lamports.
  const drain = SystemProgram.transfer({ fromPubkey: fp, toPubkey: w.buyer.publicKey, lamports: 1_000_000 });
  rejected(t, w.verify(w.assemble([w.ix.limit(), w.ix.price(), w.ix.transfer(), drain])), 'fee_payer_in_instruction');
});

test('a fee payer signature already in its slot is fee_payer_signed', (t) => {
  const w = world();
  rejected(t, w.verify(w.assemble(w.stock(), { signers: [w.buyer, w.feePayer] })), 'fee_payer_signed');
});

// ---------------------------------------------------------------------------------------------------------------
// Layout and compute budget

test('more than seven instructions before trailing Lighthouse ones is too_many_instructions', (t) => {
  const w = world();
  rejected(t, w.verify(w.assemble([...w.full(), w.ix.memo('second')]), w.withFee()), 'too_many_instructions');
  rejected(t, w.verify(w.assemble([...w.stock(), w.ix.memo(), w.ix.memo(), w.ix.memo(), w.ix.memo()])), 'too_many_instructions');
  // Seven plus trailing Lighthouse assertions is fine.
  t.true(w.verify(w.assemble([...w.full(), w.ix.lighthouse(), w.ix.lighthouse()]), w.withFee()).isValid);
  // A Lighthouse assertion in the middle counts.
  rejected(t, w.verify(w.assemble([...w.full().slice(0, 6), w.ix.lighthouse(), w.ix.memo()]), w.withFee()), 'too_many_instructions');
});

test('compute budget instructions are required in place: limit at 0, price at 1', (t) => {
  const w = world();
  rejected(t, w.verify(w.assemble([w.ix.transfer(), w.ix.memo()])), 'compute_budget_missing');
  rejected(t, w.verify(w.assemble([w.ix.limit(), w.ix.transfer(), w.ix.memo()])), 'compute_budget_missing');
  rejected(t, w.verify(w.assemble([w.ix.price(), w.ix.limit(), w.ix.transfer(), w.ix.memo()])), 'compute_budget_missing');
});

test('compute unit limit and price above the caps are rejected; at the caps they pass', (t) => {
  const w = world();
  const tx = (units: number, price: number | bigint) => w.assemble([w.ix.limit(units), w.ix.price(price), w.ix.transfer(), w.ix.memo()]);
  t.true(w.verify(tx(400_000, 5_000_000)).isValid);
  rejected(t, w.verify(tx(400_001, 1)), 'compute_limit_too_high');
  rejected(t, w.verify(tx(20_000, 5_000_001)), 'compute_price_too_high');
  rejected(t, w.verify(tx(20_000, 2n ** 64n - 1n)), 'compute_price_too_high');
  // Caps come from the facilitator policy.
  rejected(t, w.verify(tx(20_000, 1), w.requirements(), w.policy({ computeUnitLimitMax: 10_000 })), 'compute_limit_too_high');
  rejected(t, w.verify(tx(20_000, 2), w.requirements(), w.policy({ computeUnitPriceMax: 1 })), 'compute_price_too_high');
});

test('an unknown program where the transfer belongs or after it is unexpected_instruction', (t) => {
  const w = world();
  const system = SystemProgram.transfer({ fromPubkey: w.buyer.publicKey, toPubkey: Keypair.generate().publicKey, lamports: 1 });
  rejected(t, w.verify(w.assemble([w.ix.limit(), w.ix.price(), system, w.ix.transfer(), w.ix.memo()])), 'unexpected_instruction');
  rejected(t, w.verify(w.assemble([w.ix.limit(), w.ix.price(), w.ix.transfer(), system, w.ix.memo()])), 'unexpected_instruction');
  rejected(t, w.verify(w.assemble([w.ix.limit(), w.ix.price(), w.ix.transfer(), w.ix.memo(), system])), 'unexpected_instruction');
  // Memo v1 is not the allowed memo program; a third compute budget instruction is not allowed either.
  const memoV1 = new TransactionInstruction({ programId: new PublicKey('Memo1UhkJRfHyvLMcVucJwxXeuD728EqVDDwQDxFMNo'), keys: [], data: Buffer.from('x') });
  rejected(t, w.verify(w.assemble([w.ix.limit(), w.ix.price(), w.ix.transfer(), memoV1])), 'unexpected_instruction');
  rejected(
    t,
    w.verify(w.assemble([w.ix.limit(), w.ix.price(), w.ix.transfer(), ComputeBudgetProgram.requestHeapFrame({ bytes: 65_536 })])),
    'unexpected_instruction',
  );
  // With fee terms, a third transfer after the fee leg.
  rejected(
    t,
    w.verify(w.assemble([w.ix.limit(), w.ix.price(), w.ix.transfer(), w.ix.feeLeg(), w.ix.memo(), w.ix.feeLeg()]), w.withFee()),
    'unexpected_instruction',
  );
});

test('no TransferChecked where the seller leg belongs is transfer_missing', (t) => {
  const w = world();
  rejected(t, w.verify(w.assemble([w.ix.limit(), w.ix.price(), w.ix.memo()], { signers: [] })), 'transfer_missing');
  rejected(t, w.verify(w.assemble([w.ix.limit(), w.ix.price()], { signers: [] })), 'transfer_missing');
  const unchecked = createTransferInstruction(w.ata(w.buyer.publicKey), w.ata(w.payTo), w.buyer.publicKey, 1_000_000n, [], w.program);
  rejected(t, w.verify(w.assemble([w.ix.limit(), w.ix.price(), unchecked, w.ix.memo()])), 'transfer_missing');
});

test('a multisig transfer authority is transfer_multisig_unsupported', (t) => {
  const w = world();
  const cosigner = Keypair.generate();
  const tx = w.assemble([w.ix.limit(), w.ix.price(), w.ix.transfer({ multisig: [cosigner.publicKey] }), w.ix.memo()], { signers: [cosigner] });
  rejected(t, w.verify(tx), 'transfer_multisig_unsupported');
});

test('Solana Pay references (read-only non-signers after the authority) are accepted; writable or signing extras are not', (t) => {
  const w = world();
  const reference = Keypair.generate().publicKey;
  const withReference = (writable: boolean) => {
    const seller = w.ix.transfer();
    seller.keys.push({ pubkey: reference, isSigner: false, isWritable: writable });
    return w.assemble([w.ix.limit(), w.ix.price(), seller, w.ix.memo()]);
  };
  t.like(w.verify(withReference(false)), { isValid: true, payer: w.buyer.publicKey.toBase58() });
  rejected(t, w.verify(withReference(true)), 'transfer_multisig_unsupported');
});

test('a wallet co-sign (buyerSignsLater) wants the buyer slot empty: a signed one is refused, an empty one verifies', (t) => {
  const w = world();
  const unsigned = w.assemble(w.stock(), { signers: [] });
  const pol = w.policy();
  t.like(verifyPayment({ transaction: unsigned, requirements: w.requirements(), facilitator: pol, buyerSignsLater: true }), { isValid: true });
  rejected(t, verifyPayment({ transaction: unsigned, requirements: w.requirements(), facilitator: pol }), 'missing_signature');
  rejected(
    t,
    verifyPayment({ transaction: w.assemble(w.stock()), requirements: w.requirements(), facilitator: pol, buyerSignsLater: true }),
    'invalid_signature',
  );
});

// ---------------------------------------------------------------------------------------------------------------
// Token-account creations (§4.1.1)

test('a non-idempotent Create is ata_creation_not_allowed', (t) => {
  const w = world();
  const create = createAssociatedTokenAccountInstruction(w.feePayer.publicKey, w.ata(w.payTo), new PublicKey(w.payTo), w.mint, w.program);
  rejected(t, w.verify(w.assemble([w.ix.limit(), w.ix.price(), create, w.ix.transfer(), w.ix.memo()])), 'ata_creation_not_allowed');
});

test('creations for a third party, with another payer, mint or program, or misplaced are ata_creation_not_allowed', (t) => {
  const w = world();
  const body = (...creates: TransactionInstruction[]) => w.assemble([w.ix.limit(), w.ix.price(), ...creates, w.ix.transfer(), w.ix.feeLeg(), w.ix.memo()]);
  const stranger = Keypair.generate().publicKey;
  rejected(t, w.verify(body(w.ix.create(stranger)), w.withFee()), 'ata_creation_not_allowed');
  // The buyer funding the creation is not the §2.3 layout either.
  rejected(t, w.verify(body(w.ix.create(w.payTo, { payer: w.buyer.publicKey })), w.withFee()), 'ata_creation_not_allowed');
  rejected(t, w.verify(body(w.ix.create(w.payTo, { mint: new PublicKey(USDG.mint) })), w.withFee()), 'ata_creation_not_allowed');
  rejected(t, w.verify(body(w.ix.create(w.payTo, { program: new PublicKey(USDG.tokenProgramId) })), w.withFee()), 'ata_creation_not_allowed');
  // Three creations, a duplicate, and the fee account when the offer has no fee.
  const three = [w.ix.limit(), w.ix.price(), w.ix.create(w.payTo), w.ix.create(w.feeAuthority), w.ix.create(w.payTo), w.ix.transfer(), w.ix.feeLeg()];
  rejected(t, w.verify(w.assemble(three), w.withFee()), 'ata_creation_not_allowed');
  rejected(t, w.verify(body(w.ix.create(w.payTo), w.ix.create(w.payTo)), w.withFee()), 'ata_creation_not_allowed');
  rejected(t, w.verify(w.assemble([w.ix.limit(), w.ix.price(), w.ix.create(w.feeAuthority), w.ix.transfer(), w.ix.memo()])), 'ata_creation_not_allowed');
  // A creation after the transfer.
  rejected(t, w.verify(w.assemble([w.ix.limit(), w.ix.price(), w.ix.transfer(), w.ix.create(w.payTo), w.ix.memo()])), 'ata_creation_not_allowed');
});

// ---------------------------------------------------------------------------------------------------------------
// Seller leg (§4.1.2)

test('the seller leg must match the offer exactly: amount, mint, decimals, destination, token program', (t) => {
  const w = world();
  const with_ = (transfer: TransactionInstruction) => w.assemble([w.ix.limit(), w.ix.price(), transfer, w.ix.memo()]);
  rejected(t, w.verify(with_(w.ix.transfer({ amount: 999_999n }))), 'wrong_amount');
  rejected(t, w.verify(with_(w.ix.transfer({ amount: 1_000_001n }))), 'wrong_amount');
  const otherMint = new PublicKey(findStable('chain-mainnet', 'USDT')!.mint);
  rejected(
    t,
    w.verify(with_(w.ix.transfer({ mint: otherMint, to: getAssociatedTokenAddressSync(otherMint, new PublicKey(w.payTo), true, w.program) }))),
    'wrong_mint',
  );
  rejected(t, w.verify(with_(w.ix.transfer({ decimals: 9 }))), 'wrong_decimals');
  // Paying a different payTo, or payTo itself rather than its token account.
  rejected(t, w.verify(with_(w.ix.transfer({ to: w.ata(Keypair.generate().publicKey) }))), 'wrong_destination');
  rejected(t, w.verify(with_(w.ix.transfer({ to: new PublicKey(w.payTo) }))), 'wrong_destination');
  // The same transaction against an offer with another payTo.
  rejected(t, w.verify(with_(w.ix.transfer()), w.requirements({ payTo: Keypair.generate().publicKey.toBase58() })), 'wrong_destination');
  // The offer is under Token-2022, the transfer under SPL Token.
  rejected(
    t,
    w.verify(with_(w.ix.transfer()), w.requirements({ tokenProgram: USDG.tokenProgramId as PaymentRequirements['tokenProgram'] })),
    'wrong_token_program',
  );
});

// ---------------------------------------------------------------------------------------------------------------
// Fee leg (§4.1.3–4) under each enforcement

test('a stock transaction against fee terms: enforce rejects fee_leg_missing, warn accepts with a warning, off accepts', (t) => {
  const w = world();
  const tx = w.assemble(w.stock());
  rejected(t, w.verify(tx, w.withFee()), 'fee_leg_missing');
  t.like(w.verify(tx, w.withFee(), w.policy({ enforcement: 'warn' })), { isValid: true, fee: 0n, feeDestination: null, warnings: ['fee_leg_missing'] });
  t.like(w.verify(tx, w.withFee(), w.policy({ enforcement: 'off' })), { isValid: true, fee: 0n, feeDestination: null, warnings: [] });
});

test('fee is the ceiling: amount 1 at 100 bps owes 1, and a floored fee leg is fee_leg_wrong_amount', (t) => {
  const w = world();
  const one = w.withFee({ amount: 1n });
  const tx = (fee: bigint) => w.assemble([w.ix.limit(), w.ix.price(), w.ix.transfer({ amount: 1n }), w.ix.feeLeg({ amount: fee }), w.ix.memo()]);
  t.like(w.verify(tx(1n), one), { isValid: true, amount: 1n, fee: 1n });
  rejected(t, w.verify(tx(0n), one), 'fee_leg_wrong_amount');
  rejected(t, w.verify(tx(2n), one), 'fee_leg_wrong_amount');
  t.like(w.verify(tx(0n), one, w.policy({ enforcement: 'warn' })), { isValid: true, fee: 0n, warnings: ['fee_leg_wrong_amount'] });
  t.like(w.verify(tx(0n), one, w.policy({ enforcement: 'off' })), { isValid: true, fee: 0n, warnings: [] });
  // 199_999 × 100 / 10000 = 1999.99 → 2000; the floor 1999 is short by one atom.
  const odd = w.withFee({ amount: 199_999n });
  const oddTx = (fee: bigint) => w.assemble([w.ix.limit(), w.ix.price(), w.ix.transfer({ amount: 199_999n }), w.ix.feeLeg({ amount: fee }), w.ix.memo()]);
  t.like(w.verify(oddTx(2000n), odd), { isValid: true, fee: 2000n });
  rejected(t, w.verify(oddTx(1999n), odd), 'fee_leg_wrong_amount');
});

test('a fee leg to anywhere but the fee account is rejected under every enforcement', (t) => {
  const w = world();
  const elsewhere = w.ata(Keypair.generate().publicKey);
  const tx = w.assemble([w.ix.limit(), w.ix.price(), w.ix.transfer(), w.ix.feeLeg({ to: elsewhere }), w.ix.memo()]);
  for (const enforcement of ['enforce', 'warn', 'off'] as const) {
    rejected(t, w.verify(tx, w.withFee(), w.policy({ enforcement })), 'fee_leg_wrong_destination');
  }
  // The fee authority's wallet rather than its token account.
  const wallet = w.assemble([w.ix.limit(), w.ix.price(), w.ix.transfer(), w.ix.feeLeg({ to: new PublicKey(w.feeAuthority) }), w.ix.memo()]);
  rejected(t, w.verify(wallet, w.withFee()), 'fee_leg_wrong_destination');
});

test('a fee leg with another source, authority or mint is rejected under every enforcement', (t) => {
  const w = world();
  const other = Keypair.generate();
  const body = (leg: TransactionInstruction, signers: Keypair[] = [w.buyer]) =>
    w.assemble([w.ix.limit(), w.ix.price(), w.ix.transfer(), leg, w.ix.memo()], { signers });
  for (const enforcement of ['enforce', 'warn', 'off'] as const) {
    const pol = w.policy({ enforcement });
    rejected(t, w.verify(body(w.ix.feeLeg({ from: w.ata(other.publicKey) })), w.withFee(), pol), 'fee_leg_wrong_source');
    rejected(t, w.verify(body(w.ix.feeLeg({ authority: other.publicKey }), [w.buyer, other]), w.withFee(), pol), 'fee_leg_wrong_authority');
    rejected(t, w.verify(body(w.ix.feeLeg({ decimals: 2 })), w.withFee(), pol), 'fee_leg_wrong_mint');
  }
});

test('a second transfer without fee terms (or at 0 bps) is unexpected_fee_leg', (t) => {
  const w = world();
  const tx = w.assemble([w.ix.limit(), w.ix.price(), w.ix.transfer(), w.ix.feeLeg(), w.ix.memo()]);
  rejected(t, w.verify(tx), 'unexpected_fee_leg');
  rejected(t, w.verify(tx, w.requirements(), w.policy({ enforcement: 'off' })), 'unexpected_fee_leg');
  rejected(t, w.verify(tx, w.withFee({}, 0)), 'unexpected_fee_leg');
  // After the memo too.
  rejected(t, w.verify(w.assemble([...w.stock(), w.ix.feeLeg()])), 'unexpected_fee_leg');
  // 0 bps disables the fee leg: the stock layout is then complete.
  t.like(w.verify(w.assemble(w.stock()), w.withFee({}, 0)), { isValid: true, fee: 0n, warnings: [] });
});

// ---------------------------------------------------------------------------------------------------------------
// Signatures

test('an unsigned buyer is missing_signature', (t) => {
  const w = world();
  const result = w.verify(w.assemble(w.stock(), { signers: [] }));
  rejected(t, result, 'missing_signature');
  t.is((result as { payer: string | null }).payer, w.buyer.publicKey.toBase58());
});

test('a transfer authority that is not a signer of the message is missing_signature', (t) => {
  const w = world();
  const compiled = new TransactionMessage({ payerKey: w.feePayer.publicKey, recentBlockhash: w.blockhash, instructions: w.stock() }).compileToV0Message();
  // Demote the buyer from signer: two signers become one, the buyer moves to the writable non-signers.
  t.true(compiled.staticAccountKeys[1]!.equals(w.buyer.publicKey));
  // One required signature: the buyer at index 1 becomes a writable non-signer.
  const header = { ...compiled.header, numRequiredSignatures: 1, numReadonlySignedAccounts: 0 };
  const message = new MessageV0({
    header,
    staticAccountKeys: compiled.staticAccountKeys,
    recentBlockhash: compiled.recentBlockhash,
    compiledInstructions: compiled.compiledInstructions,
    addressTableLookups: [],
  });
  const tx = new VersionedTransaction(message);
  t.is(tx.signatures.length, 1);
  rejected(t, w.verify(tx.serialize()), 'missing_signature');
});

test('a tampered or foreign signature is invalid_signature', (t) => {
  const w = world();
  const good = w.assemble(w.stock());
  const flipped = Uint8Array.from(good);
  flipped[1 + 64 + 10]! ^= 0x01;
  rejected(t, w.verify(flipped), 'invalid_signature');
  // A signature the buyer made over another message (other amount) pasted onto this one.
  const other = VersionedTransaction.deserialize(w.assemble([w.ix.limit(), w.ix.price(), w.ix.transfer({ amount: 1n }), w.ix.memo()]));
  const pasted = VersionedTransaction.deserialize(good);
  pasted.signatures[1] = other.signatures[1]!;
  rejected(t, w.verify(pasted.serialize()), 'invalid_signature');
  // A changed message under the original signature (the buyer signed 1 USDC, the bytes now say 2).
  const tx = VersionedTransaction.deserialize(good);
  const bumped = w.assemble([w.ix.limit(), w.ix.price(), w.ix.transfer({ amount: 2_000_000n }), w.ix.memo()], { signers: [] });
  const forged = VersionedTransaction.deserialize(bumped);
  forged.signatures[1] = tx.signatures[1]!;
  rejected(t, w.verify(forged.serialize(), w.requirements({ amount: 2_000_000n })), 'invalid_signature');
});

// ---------------------------------------------------------------------------------------------------------------
// Fee math and builders

test('feeLayoutFor: ceiling fee, gross, accounts; no fee leg without terms or at 0 bps', (t) => {
  const w = world();
  const cases: [bigint, number, bigint][] = [
    [1n, 100, 1n],
    [1n, 1, 1n],
    [99n, 100, 1n],
    [100n, 100, 1n],
    [101n, 100, 2n],
    [10_000n, 100, 100n],
    [10_001n, 100, 101n],
    [1_000_000n, 100, 10_000n],
    [1_000_000n, 10_000, 1_000_000n],
    [199_999n, 100, 2_000n],
    // Far above 2^53: exact in bigint.
    [18_446_744_073_709_551_615n, 100, 184_467_440_737_095_517n],
  ];
  for (const [amount, bps, fee] of cases) {
    const layout = feeLayoutFor(w.withFee({ amount }, bps));
    t.is(layout.fee, fee, `${amount} at ${bps} bps`);
    t.is(layout.gross, amount + fee);
  }
  const layout = feeLayoutFor(w.withFee());
  t.is(layout.sellerAccount, w.ata(w.payTo).toBase58());
  t.is(layout.feeAccount, w.ata(w.feeAuthority).toBase58());
  t.is(layout.feeAuthority, w.feeAuthority);
  t.like(feeLayoutFor(w.requirements()), { fee: 0n, gross: 1_000_000n, bps: 0, feeAccount: null, feeAuthority: null });
  t.like(feeLayoutFor(w.withFee({}, 0)), { fee: 0n, gross: 1_000_000n, feeAccount: null });
});

test('buildPaymentTransaction produces the §2.3 layout, which verifies once the buyer signs', (t) => {
  for (const stable of [USDC, USDG]) {
    const w = world(stable);
    const tx = buildPaymentTransaction({
      feePayer: w.feePayer.publicKey.toBase58(),
      payer: w.buyer.publicKey.toBase58(),
      requirements: w.withFee(),
      blockhash: w.blockhash,
    });
    t.is(tx.version, 0);
    const programs = tx.message.compiledInstructions.map((i) => tx.message.staticAccountKeys[i.programIdIndex]!.toBase58());
    t.deepEqual(programs, [
      'ComputeBudget111111111111111111111111111111',
      'ComputeBudget111111111111111111111111111111',
      'ATokenGPvbdGVxr1b2hvZbsiqW5xWH25efTNsLJA8knL',
      'ATokenGPvbdGVxr1b2hvZbsiqW5xWH25efTNsLJA8knL',
      stable.tokenProgramId,
      stable.tokenProgramId,
      MEMO_PROGRAM_ID,
    ]);
    t.true(
      tx.signatures.every((s) => s.every((b) => b === 0)),
      'unsigned',
    );
    rejected(t, w.verify(tx.serialize(), w.withFee()), 'missing_signature');
    tx.sign([w.buyer]);
    t.like(w.verify(tx.serialize(), w.withFee()), {
      isValid: true,
      fee: 10_000n,
      createsAccounts: [w.ata(w.payTo).toBase58(), w.ata(w.feeAuthority).toBase58()],
    });
  }
});

test('buildPaymentTransaction options: no creations, no fee, source, memo, compute budget', (t) => {
  const w = world();
  const base = { feePayer: w.feePayer.publicKey.toBase58(), payer: w.buyer.publicKey.toBase58(), blockhash: w.blockhash };
  const plain = buildPaymentTransaction({ ...base, requirements: w.requirements(), createAtas: false, memo: 'order-1' });
  t.is(plain.message.compiledInstructions.length, 4);
  plain.sign([w.buyer]);
  t.like(w.verify(plain.serialize()), { isValid: true, fee: 0n, createsAccounts: [] });
  const memo = plain.message.compiledInstructions[3]!;
  t.is(Buffer.from(memo.data).toString(), 'order-1');

  const noFee = buildPaymentTransaction({ ...base, requirements: w.requirements() });
  t.is(noFee.message.compiledInstructions.length, 5, 'limit, price, seller creation, transfer, memo');

  const source = w.ata(Keypair.generate().publicKey).toBase58();
  const custom = buildPaymentTransaction({ ...base, source, requirements: w.withFee(), computeUnitLimit: 60_000, computeUnitPrice: 7n });
  custom.sign([w.buyer]);
  t.like(w.verify(custom.serialize(), w.withFee()), { isValid: true, source });
  const [limit, price] = custom.message.compiledInstructions;
  t.is(Buffer.from(limit!.data).readUInt32LE(1), 60_000);
  t.is(Buffer.from(price!.data).readBigUInt64LE(1), 7n);

  const defaults = buildPaymentTransaction({ ...base, requirements: w.withFee() });
  t.is(Buffer.from(defaults.message.compiledInstructions[0]!.data).readUInt32LE(1), DEFAULT_SETTLEMENT_COMPUTE_UNITS.withCreations);
  // Two builds differ by their random memo nonce: two equal payments are distinct transactions.
  const again = buildPaymentTransaction({ ...base, requirements: w.withFee() });
  t.notDeepEqual(defaults.message.serialize(), again.message.serialize());
});

test('buildPaymentTransaction refuses a fee payer as authority and invalid requirements', (t) => {
  const w = world();
  const fp = w.feePayer.publicKey.toBase58();
  const e1 = t.throws(() => buildPaymentTransaction({ feePayer: fp, payer: fp, requirements: w.requirements(), blockhash: w.blockhash }));
  t.true(e1 instanceof DomainError && e1.code === 'invalid_request');
  const e2 = t.throws(() =>
    buildPaymentTransaction({ feePayer: fp, payer: w.buyer.publicKey.toBase58(), requirements: w.requirements({ amount: -1n }), blockhash: w.blockhash }),
  );
  t.true(e2 instanceof DomainError && e2.code === 'invalid_request');
});

test('FeeExtension parses extra["svc.fee"]', (t) => {
  const w = world();
  t.deepEqual(FeeExtension.parse({ v: '1', bps: 100, feeAuthority: w.feeAuthority }), { v: '1', bps: 100, feeAuthority: w.feeAuthority });
  t.false(FeeExtension.safeParse({ v: '2', bps: 100, feeAuthority: w.feeAuthority }).success);
  t.false(FeeExtension.safeParse({ v: '1', bps: 1.5, feeAuthority: w.feeAuthority }).success);
  t.false(FeeExtension.safeParse({ v: '1', bps: 100, feeAuthority: 'nope' }).success);
});

test('a signer key is parsed once; its signatures verify again without parsing it, a forged one still fails, an off-curve key never verifies', async (t) => {
  const { verifyEd25519, ed25519KeysParsed } = await import('../../domain/facilitator/ed25519.ts');
  const { sign: signDetached, createPrivateKey } = await import('node:crypto');
  const kp = Keypair.generate();
  const der = Buffer.concat([Buffer.from('302e020100300506032b657004220420', 'hex'), Buffer.from(kp.secretKey.subarray(0, 32))]);
  const secret = createPrivateKey({ key: der, format: 'der', type: 'pkcs8' });
  const messages = [1, 2, 3].map((n) => Buffer.from(`message ${n}`));
  const signatures = messages.map((m) => new Uint8Array(signDetached(null, m, secret)));
  const parsed = ed25519KeysParsed();
  for (const [i, m] of messages.entries()) t.true(verifyEd25519(kp.publicKey.toBytes(), m, signatures[i]!));
  t.is(ed25519KeysParsed() - parsed, 1, 'three signatures of one key: one parse');
  t.false(verifyEd25519(kp.publicKey.toBytes(), messages[0]!, signatures[1]!), 'a signature over another message');
  const forged = Uint8Array.from(signatures[0]!);
  forged[5]! ^= 1;
  t.false(verifyEd25519(kp.publicKey.toBytes(), messages[0]!, forged));
  // a program-derived address is no curve point: refused, and refused again from the cache
  const [pda] = PublicKey.findProgramAddressSync([Buffer.from('seed')], SystemProgram.programId);
  t.false(verifyEd25519(pda.toBytes(), messages[0]!, signatures[0]!));
  t.false(verifyEd25519(pda.toBytes(), messages[0]!, signatures[0]!));
});
