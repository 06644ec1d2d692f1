import anyTest, { type TestFn } from 'ava';
import { Keypair, PublicKey, VersionedTransaction } from '@solana/web3.js';
import { createAssociatedTokenAccountIdempotentInstruction } from '@solana/spl-token';
import { createKeyPairSignerFromBytes, type KeyPairSigner } from '@solana/kit';
import { x402Client } from '@x402/core/client';
import type { PaymentRequired, PaymentRequirements as X402Requirements } from '@x402/core/types';
import { ExactSvmScheme } from '@x402/svm/exact/client';
import { ExactSvmSchemeV1 } from '@x402/svm/exact/v1/client';
import { decodeTransaction } from '../../domain/facilitator/decode.ts';
import { ataOf } from '../../domain/facilitator/ata.ts';
import { readComputeUnitLimit, readComputeUnitPrice, readTransferChecked } from '../../domain/facilitator/instructions.ts';
import { COMPUTE_BUDGET_PROGRAM_ID, MEMO_PROGRAM_ID, type PaymentRequirements, type VerifyResult } from '../../domain/facilitator/schema.ts';
import { verifyPayment } from '../../domain/facilitator/verify.ts';
import { CAIP2, findStable, X402_V1_NETWORK } from '../../domain/shared/network.ts';
import { treasuryOf } from '../../domain/treasury/derive.ts';
import { randomAddress, startTestApp, type TestApp } from '../support/app.ts';

// DECISIONS "Facilitator": verify accepts the stock x402 layout. Here the official client (@x402/svm, unmodified)
// builds a real payment against the embedded devnet JSON-RPC, and our pure verify judges the bytes it produced.

const test = anyTest as TestFn<{ app: TestApp; rpcUrl: string; buyer: Keypair; signer: KeyPairSigner }>;
const USDC = findStable('chain-devnet', 'USDC')!;
const PRICE = 10_000n; // $0.01

test.before(async (t) => {
  const app = await startTestApp();
  const rpcUrl = app.ledgers.rpcUrls['chain-devnet'];
  if (!rpcUrl) throw new Error('the test app runs no devnet JSON-RPC server');
  const buyer = Keypair.generate();
  await app.services.dev.fund('chain-devnet', { address: buyer.publicKey.toBase58(), token: 'USDC', amount: '5' });
  t.context = { app, rpcUrl, buyer, signer: await createKeyPairSignerFromBytes(buyer.secretKey) };
});

/** A seller like an agent: payTo is a treasury PDA (off-curve), whose token account does not exist yet. */
async function offer() {
  const feePayer = Keypair.generate().publicKey.toBase58();
  const payTo = treasuryOf(await randomAddress());
  const feeAuthority = await randomAddress();
  const x402: X402Requirements = {
    scheme: 'exact',
    network: CAIP2['chain-devnet'] as X402Requirements['network'],
    asset: USDC.mint,
    amount: PRICE.toString(),
    payTo,
    maxTimeoutSeconds: 60,
    extra: { feePayer },
  };
  const domain = (fee?: PaymentRequirements['fee']): PaymentRequirements => ({
    scheme: 'exact',
    network: 'chain-devnet',
    payTo,
    asset: USDC.mint,
    amount: PRICE,
    tokenProgram: USDC.tokenProgramId as PaymentRequirements['tokenProgram'],
    decimals: USDC.decimals,
    ...(fee ? { fee } : {}),
  });
  return { feePayer, payTo, feeAuthority, x402, domain };
}

const wire = (base64: string) => new Uint8Array(Buffer.from(base64, 'base64'));
/** The refusal, for an assertion message (a valid result holds bigints, which JSON cannot show). */
const why = (r: VerifyResult) => (r.isValid ? 'valid' : `${r.invalidReason}: ${r.message}`);

test('the stock client builds limit, price, TransferChecked, memo: fee payer slot empty, buyer signed', async (t) => {
  const { rpcUrl, signer, buyer } = t.context;
  const { feePayer, payTo, x402 } = await offer();
  const created = await new ExactSvmScheme(signer, { rpcUrl }).createPaymentPayload(2, x402);
  t.is(created.x402Version, 2);
  const tx = decodeTransaction(wire((created.payload as { transaction: string }).transaction));

  t.is(tx.version, 0);
  t.is(tx.addressTableLookups, 0);
  t.is(tx.numRequiredSignatures, 2, 'fee payer and buyer');
  t.deepEqual(tx.accountKeys.slice(0, 2), [feePayer, buyer.publicKey.toBase58()]);
  t.true(
    tx.signatures[0]!.every((b) => b === 0),
    "the fee payer's slot is left for the facilitator",
  );
  t.false(tx.signatures[1]!.every((b) => b === 0));

  t.deepEqual(
    tx.instructions.map((ix) => ix.programId),
    [COMPUTE_BUDGET_PROGRAM_ID, COMPUTE_BUDGET_PROGRAM_ID, USDC.tokenProgramId, MEMO_PROGRAM_ID],
    'no token-account creation: the stock client assumes the seller account exists',
  );
  t.is(readComputeUnitLimit(tx.instructions[0]), 20_000);
  t.is(readComputeUnitPrice(tx.instructions[1]), 1n);
  const transfer = readTransferChecked(tx.instructions[2])!;
  t.like(transfer, {
    source: ataOf(buyer.publicKey.toBase58(), USDC.mint, USDC.tokenProgramId),
    mint: USDC.mint,
    destination: ataOf(payTo, USDC.mint, USDC.tokenProgramId),
    authority: buyer.publicKey.toBase58(),
    amount: PRICE,
    decimals: 6,
  });
  const memo = tx.instructions[3]!;
  t.deepEqual(memo.accounts, []);
  t.regex(Buffer.from(memo.data).toString('utf8'), /^[0-9a-f]{32}$/, 'a random 16-byte hex nonce');
});

test('our verify accepts the stock transaction without fee terms and refuses it with fee terms (fee_leg_missing)', async (t) => {
  const { rpcUrl, signer, buyer } = t.context;
  const { feePayer, payTo, feeAuthority, x402, domain } = await offer();
  const created = await new ExactSvmScheme(signer, { rpcUrl }).createPaymentPayload(2, x402);
  const transaction = wire((created.payload as { transaction: string }).transaction);
  const facilitator = { feePayer, enforcement: 'enforce' as const };

  const plain = verifyPayment({ transaction, requirements: domain(), facilitator });
  t.true(plain.isValid, why(plain));
  if (plain.isValid) {
    t.is(plain.payer, buyer.publicKey.toBase58());
    t.is(plain.destination, ataOf(payTo, USDC.mint, USDC.tokenProgramId));
    t.is(plain.amount, PRICE);
    t.is(plain.fee, 0n);
    t.deepEqual(plain.createsAccounts, []);
    t.deepEqual(plain.warnings, []);
  }

  const withFee = verifyPayment({ transaction, requirements: domain({ bps: 100, feeAuthority }), facilitator });
  t.like(withFee, { isValid: false, invalidReason: 'fee_leg_missing', payer: buyer.publicKey.toBase58() });

  const warned = verifyPayment({ transaction, requirements: domain({ bps: 100, feeAuthority }), facilitator: { feePayer, enforcement: 'warn' } });
  t.like(warned, { isValid: true, warnings: ['fee_leg_missing'] });
  // bps 0 is "fee off" (§2.2.3): the stock layout is the whole settlement
  t.like(verifyPayment({ transaction, requirements: domain({ bps: 0, feeAuthority }), facilitator }), { isValid: true });
});

test('the full v2 payload from x402Client, and the v1 scheme, carry the same accepted layout', async (t) => {
  const { rpcUrl, signer } = t.context;
  const { feePayer, x402, domain } = await offer();
  const client = new x402Client().register('solana:*', new ExactSvmScheme(signer, { rpcUrl }));
  const paymentRequired: PaymentRequired = {
    x402Version: 2,
    error: 'payment required',
    resource: { url: 'http://127.0.0.1/x/weather', description: 'Weather report', mimeType: 'application/json' },
    accepts: [x402],
  };
  const payload = await client.createPaymentPayload(paymentRequired);
  t.is(payload.x402Version, 2);
  t.deepEqual(payload.accepted, x402, '`accepted` is the chosen accept as received');
  t.deepEqual(payload.resource, paymentRequired.resource);
  const v2 = verifyPayment({
    transaction: wire(payload.payload.transaction as string),
    requirements: domain(),
    facilitator: { feePayer, enforcement: 'enforce' },
  });
  t.true(v2.isValid, why(v2));

  const v1Requirements = {
    scheme: 'exact',
    network: X402_V1_NETWORK['chain-devnet'],
    maxAmountRequired: PRICE.toString(),
    resource: 'http://127.0.0.1/x/weather',
    description: 'Weather report',
    mimeType: 'application/json',
    payTo: x402.payTo,
    maxTimeoutSeconds: 60,
    asset: USDC.mint,
    extra: { feePayer },
  };
  const v1 = await new ExactSvmSchemeV1(signer, { rpcUrl }).createPaymentPayload(1, v1Requirements as unknown as X402Requirements);
  t.like(v1, { x402Version: 1, scheme: 'exact', network: 'solana-devnet' } as object);
  const verdict = verifyPayment({
    transaction: wire((v1.payload as { transaction: string }).transaction),
    requirements: domain(),
    facilitator: { feePayer, enforcement: 'enforce' },
  });
  t.true(verdict.isValid, why(verdict));
});

test('on the ledger the stock transaction needs the seller account to exist: the facilitator must create it first', async (t) => {
  const { app, rpcUrl, signer } = t.context;
  const ledger = app.services.ledgers['chain-devnet']!;
  const facilitator = Keypair.generate();
  await app.services.dev.fund('chain-devnet', { address: facilitator.publicKey.toBase58(), sol: '1' });
  const { payTo } = await offer();
  const x402: X402Requirements = {
    scheme: 'exact',
    network: CAIP2['chain-devnet'] as X402Requirements['network'],
    asset: USDC.mint,
    amount: PRICE.toString(),
    payTo,
    maxTimeoutSeconds: 60,
    extra: { feePayer: facilitator.publicKey.toBase58() },
  };
  const created = await new ExactSvmScheme(signer, { rpcUrl }).createPaymentPayload(2, x402);
  const tx = VersionedTransaction.deserialize(wire((created.payload as { transaction: string }).transaction));
  tx.sign([facilitator]);

  const before = await ledger.simulateTransaction(tx.serialize(), { sigVerify: true });
  t.not(before.err, null, 'TransferChecked into a missing token account fails');
  t.log('without the seller account:', JSON.stringify(before.err));

  // What the facilitator does for the stock layout: create ATA(payTo) in a transaction of its own, then settle.
  const mint = new PublicKey(USDC.mint);
  const program = new PublicKey(USDC.tokenProgramId);
  const { blockhash } = await ledger.getLatestBlockhash();
  const { Transaction } = await import('@solana/web3.js');
  const create = new Transaction({ feePayer: facilitator.publicKey, recentBlockhash: blockhash }).add(
    createAssociatedTokenAccountIdempotentInstruction(
      facilitator.publicKey,
      new PublicKey(ataOf(payTo, USDC.mint, USDC.tokenProgramId)),
      new PublicKey(payTo),
      mint,
      program,
    ),
  );
  create.sign(facilitator);
  const sent = await ledger.sendTransaction(create.serialize());
  t.true(sent.ok, JSON.stringify(sent));

  const after = await ledger.simulateTransaction(tx.serialize(), { sigVerify: true });
  t.is(after.err, null, after.logs.join('\n'));
  t.log('units consumed:', after.unitsConsumed);
  t.true(after.unitsConsumed <= 20_000, `the stock limit of 20k units covers it (${after.unitsConsumed} used)`);
});
