import test from 'ava';
import { ComputeBudgetProgram, Keypair, PublicKey, TransactionInstruction, TransactionMessage, VersionedTransaction } from '@solana/web3.js';
import { createTransferCheckedInstruction } from '@solana/spl-token';
import { Challenge, Credential } from 'mppx';
import { buildPaymentTransaction } from '../../domain/facilitator/build.ts';
import {
  acceptOfCharge,
  bindingOf,
  chargeRequestFor,
  encodeCredential,
  isBoundTo,
  memosOf,
  parseChallenges,
  SolanaChargeRequest,
} from '../../domain/facilitator/mpp.ts';
import { ataOf } from '../../domain/facilitator/ata.ts';
import { MEMO_PROGRAM_ID } from '../../domain/facilitator/schema.ts';
import { verifyPayment } from '../../domain/facilitator/verify.ts';
import { challengeId, issueChallenges, paymentCredentialOf, readCredential, wwwAuthenticate } from '../../domain/paywall/mpp.ts';
import { callFromKept, pendingRequest, type Call } from '../../domain/paywall/call.ts';
import { CAIP2, STABLES } from '../../domain/shared/network.ts';
import type { PaymentLinkRecord } from '../../domain/payment-links/schema.ts';

// DECISIONS "MPP rail": the pure parts — challenge ids (HMAC over mppx's canonical fields), the WWW-Authenticate
// rendering and its parsing (ours and mppx's agree), credential reading, the memo binding, and a paid call's kept
// request carrying its challenge (so the reconciliation job settles an MPP call through /mpp/settle again).

const secret = new TextEncoder().encode('k'.repeat(40));
const USDC = STABLES['chain-devnet'][0]!;
const payTo = Keypair.generate().publicKey.toBase58();
const feePayer = Keypair.generate().publicKey.toBase58();
const accept = { scheme: 'exact', network: CAIP2['chain-devnet'], asset: USDC.mint, amount: '10000', payTo, maxTimeoutSeconds: 60, extra: { feePayer } };
const now = new Date('2026-11-24T04:00:00.000Z');
const issue = () =>
  issueChallenges({
    secret,
    realm: 'gw.example',
    network: 'chain-devnet',
    accepts: [accept],
    resource: { url: 'https://gw.example/x/w?network=chain-devnet', description: 'Weather "now" — ü' },
    digest: 'd'.repeat(64),
    now,
  });

function boundTransaction(id: string): string {
  const buyer = Keypair.generate();
  const tx = buildPaymentTransaction({
    feePayer,
    payer: buyer.publicKey.toBase58(),
    requirements: {
      scheme: 'exact',
      network: 'chain-devnet',
      payTo,
      asset: USDC.mint,
      amount: 10_000n,
      tokenProgram: USDC.tokenProgramId as never,
      decimals: 6,
    },
    blockhash: Keypair.generate().publicKey.toBase58(),
    memo: id,
  });
  tx.sign([buyer]);
  return Buffer.from(tx.serialize()).toString('base64');
}

test('a challenge renders as mppx parses it, our parser reads the same, and mppx verifies the id under the same key', (t) => {
  const [c] = issue();
  const header = wwwAuthenticate([c!, c!]);
  const theirs = Challenge.deserializeList(header);
  t.is(theirs.length, 2);
  t.like(theirs[0], { id: c!.id, realm: 'gw.example', method: 'solana', intent: 'charge', expires: '2026-11-24T04:05:00.000Z' });
  t.deepEqual(theirs[0]!.request, c!.request);
  t.true(Challenge.verify(theirs[0]!, { secretKey: 'k'.repeat(40) }));
  const ours = parseChallenges(header);
  t.is(ours.length, 2);
  t.deepEqual(ours[0], { id: c!.id, realm: c!.realm, method: 'solana', intent: 'charge', request: c!.request, expires: c!.expires });
  t.deepEqual(parseChallenges('Bearer realm="x", Payment id="a"'), [], 'a challenge without request is skipped');
});

test('readCredential: mppx’s encoding and DECISIONS’ (request as an object) both read; tampering, foreign realms and bad encodings are named', (t) => {
  const [c] = issue();
  const transaction = boundTransaction(c!.id);
  const viaMppx = Credential.serialize({ challenge: Challenge.deserialize(wwwAuthenticate([c!])), payload: { type: 'transaction', transaction } });
  const read = readCredential(paymentCredentialOf(viaMppx)!, { secret, realm: 'gw.example', now });
  t.true(read.ok);
  if (read.ok) {
    t.is(read.network, 'chain-devnet');
    t.false(read.expired);
    t.true(isBoundTo(read.transactionBytes, c!.id));
  }
  const ours = readCredential(paymentCredentialOf(encodeCredential(c!, transaction))!, { secret, realm: 'gw.example', now });
  t.true(ours.ok);
  const asObject = Buffer.from(JSON.stringify({ challenge: c, payload: { transaction } })).toString('base64');
  t.true(readCredential(asObject, { secret, realm: 'gw.example', now }).ok, 'padded standard base64 of the object form');
  const later = readCredential(paymentCredentialOf(viaMppx)!, { secret, realm: 'gw.example', now: new Date(now.getTime() + 300_001) });
  t.true(later.ok && later.expired);

  const tampered = Buffer.from(JSON.stringify({ challenge: { ...c, request: { ...c!.request, recipient: feePayer } }, payload: { transaction } })).toString(
    'base64url',
  );
  t.like(readCredential(tampered, { secret, realm: 'gw.example', now }), { ok: false, reason: 'mpp_challenge_invalid' });
  t.like(readCredential(paymentCredentialOf(viaMppx)!, { secret: new TextEncoder().encode('other'.repeat(8)), realm: 'gw.example', now }), {
    ok: false,
    reason: 'mpp_challenge_invalid',
  });
  const otherRealm = { ...c!, realm: 'evil.example' };
  const forgedRealm = { ...otherRealm, id: challengeId(secret, otherRealm) };
  t.like(readCredential(paymentCredentialOf(encodeCredential(forgedRealm, transaction))!, { secret, realm: 'gw.example', now }), {
    ok: false,
    reason: 'mpp_challenge_invalid',
  });
  t.like(readCredential('%%%', { secret, realm: 'gw.example', now }), { ok: false, reason: 'mpp_credential_invalid' });
  const noTx = Buffer.from(JSON.stringify({ challenge: c, payload: {} })).toString('base64url');
  t.like(readCredential(noTx, { secret, realm: 'gw.example', now }), { ok: false, reason: 'mpp_credential_invalid' });
  t.is(paymentCredentialOf('Bearer abc'), null);
  t.is(paymentCredentialOf('Bearer abc, Payment xyz'), 'xyz');
});

test('the memo binds a transaction to one challenge id', (t) => {
  const [a] = issue();
  const tx = Uint8Array.from(Buffer.from(boundTransaction(a!.id), 'base64'));
  t.deepEqual(memosOf(tx), [a!.id]);
  t.true(isBoundTo(tx, a!.id));
  t.false(isBoundTo(tx, `${a!.id}x`));
  t.false(isBoundTo(new Uint8Array([1, 2, 3]), a!.id), 'undecodable bytes bind to nothing');
});

test('a paid call’s kept request carries its MPP challenge, so reconciliation settles it on the MPP rail again', (t) => {
  const [c] = issue();
  const link = {
    id: 'w',
    network: 'chain-devnet',
    method: 'GET',
    label: 'W',
    response: { status: 200, mimeType: 'application/json', body: {} },
  } as unknown as PaymentLinkRecord;
  const call: Call = {
    link,
    request: { id: 'w', network: 'chain-devnet', method: 'GET', forwardQuery: '', headers: {}, body: undefined },
    resource: { url: 'https://gw.example/x/w' },
    accepts: [accept],
    accept,
    version: 2,
    transaction: 'AAAA',
    paymentKey: 'k',
    mpp: { challenge: { ...c!, request: c!.request } },
  };
  const kept = JSON.parse(JSON.stringify(pendingRequest(call)));
  t.is(kept.mpp.challenge.id, c!.id);
  t.deepEqual(callFromKept('https://gw.example', link, 'k', kept).mpp, { challenge: kept.mpp.challenge });
  t.is(callFromKept('https://gw.example', link, 'k', { ...kept, mpp: undefined }).mpp, undefined, 'an x402 call stays x402');
});

const feeAuthority = Keypair.generate().publicKey.toBase58();
const feeTerms = { v: '1', bps: 100, feeAuthority };
const feeAccept = { ...accept, extra: { feePayer, 'svc.fee': feeTerms } };
const details = { decimals: 6, tokenProgram: USDC.tokenProgramId, symbol: 'USDC', resource: 'https://gw.example/x/w', reference: 'ref-1' };

test('a fee-on charge is draft-solana-charge-00’s: the gross as amount, the fee as the one split; acceptOfCharge gives back the x402 terms', (t) => {
  const request = chargeRequestFor(feeAccept, details);
  t.like(request, { amount: '10100', externalId: 'ref-1', methodDetails: { network: 'devnet', feePayer: true, feePayerKey: feePayer } });
  t.deepEqual(request.methodDetails.splits, [{ recipient: feeAuthority, amount: '100' }]);
  t.true(SolanaChargeRequest.safeParse(request).success);
  t.deepEqual(acceptOfCharge(request), feeAccept, 'the seller leg, the CAIP-2 network, the fee terms');
  const off = chargeRequestFor(accept, details);
  t.is(off.amount, '10000');
  t.is(off.methodDetails.splits, undefined);
  t.deepEqual(acceptOfCharge(off), accept);
  // Older wires still read: feePayer as the address, CAIP-2, "svc.fee" without splits (amount = seller leg).
  const legacy = { ...off, methodDetails: { ...off.methodDetails, feePayer, feePayerKey: undefined, network: CAIP2['chain-devnet'], 'svc.fee': feeTerms } };
  t.deepEqual(acceptOfCharge(SolanaChargeRequest.parse(legacy)), feeAccept);
  // Splits this gateway cannot settle are malformed: to anyone but the fee authority, a fee off the terms, a second one.
  const md = request.methodDetails;
  const bad = (splits: unknown, extra: Record<string, unknown> = {}) =>
    SolanaChargeRequest.safeParse({ ...request, ...extra, methodDetails: { ...md, splits } }).success;
  t.false(bad([{ recipient: feePayer, amount: '100' }]));
  t.false(bad([{ recipient: feeAuthority, amount: '99' }]));
  t.false(bad([md.splits![0], { recipient: feeAuthority, amount: '1' }]));
  t.false(bad([{ recipient: feeAuthority, amount: '100' }], { amount: '100' }), 'the splits consume the whole amount');
  t.false(SolanaChargeRequest.safeParse({ ...request, methodDetails: { ...md, feePayerKey: undefined } }).success, 'feePayer true needs feePayerKey');
});

/** A v0 transaction of the given instructions, fee payer the facilitator, signed by the buyer. */
function assembled(buyer: Keypair, instructions: TransactionInstruction[]): Uint8Array {
  const message = new TransactionMessage({ payerKey: new PublicKey(feePayer), recentBlockhash: Keypair.generate().publicKey.toBase58(), instructions });
  const tx = new VersionedTransaction(message.compileToV0Message());
  tx.sign([buyer]);
  return tx.serialize();
}

test('the MPP layout (@solana/mpp’s order: price, limit, seller leg, externalId memo, fee leg) verifies; x402’s stays strict; the binding reads the memos', (t) => {
  const buyer = Keypair.generate();
  const mint = new PublicKey(USDC.mint);
  const program = new PublicKey(USDC.tokenProgramId);
  const source = new PublicKey(ataOf(buyer.publicKey.toBase58(), USDC.mint, USDC.tokenProgramId));
  const leg = (owner: string, amount: bigint) =>
    createTransferCheckedInstruction(source, mint, new PublicKey(ataOf(owner, USDC.mint, USDC.tokenProgramId)), buyer.publicKey, amount, 6, [], program);
  const memo = (text: string) => new TransactionInstruction({ programId: new PublicKey(MEMO_PROGRAM_ID), keys: [], data: Buffer.from(text) });
  const price = ComputeBudgetProgram.setComputeUnitPrice({ microLamports: 1 });
  const limit = ComputeBudgetProgram.setComputeUnitLimit({ units: 200_000 });
  const requirements = {
    scheme: 'exact' as const,
    network: 'chain-devnet' as const,
    payTo,
    asset: USDC.mint,
    amount: 10_000n,
    tokenProgram: USDC.tokenProgramId as never,
    decimals: 6,
    fee: { bps: 100, feeAuthority },
  };
  const verify = (tx: Uint8Array, layout: 'x402' | 'mpp') =>
    verifyPayment({ transaction: tx, requirements, facilitator: { feePayer, enforcement: 'enforce' }, layout });
  const stock = assembled(buyer, [price, limit, leg(payTo, 10_000n), memo('ref-1'), leg(feeAuthority, 100n)]);
  t.like(verify(stock, 'mpp'), { isValid: true, fee: 100n });
  t.like(verify(stock, 'x402'), { isValid: false, invalidReason: 'compute_budget_missing' });
  t.like(verify(assembled(buyer, [leg(payTo, 10_000n), leg(feeAuthority, 100n)]), 'mpp'), { isValid: true }, 'no compute budget: base fee only');
  t.like(verify(assembled(buyer, [price, leg(payTo, 10_000n), leg(feeAuthority, 100n)]), 'mpp'), { isValid: false, invalidReason: 'compute_budget_missing' });
  t.like(verify(assembled(buyer, [limit, limit, leg(payTo, 10_000n), leg(feeAuthority, 100n)]), 'mpp'), {
    isValid: false,
    invalidReason: 'unexpected_instruction',
  });
  // A forged split: the fee leg to someone else, or short.
  t.like(verify(assembled(buyer, [price, limit, leg(payTo, 10_000n), leg(payTo, 100n)]), 'mpp'), {
    isValid: false,
    invalidReason: 'fee_leg_wrong_destination',
  });
  t.like(verify(assembled(buyer, [price, limit, leg(payTo, 10_000n), leg(feeAuthority, 99n)]), 'mpp'), {
    isValid: false,
    invalidReason: 'fee_leg_wrong_amount',
  });
  t.like(verify(assembled(buyer, [price, limit, leg(payTo, 10_000n)]), 'mpp'), { isValid: false, invalidReason: 'fee_leg_missing' });

  const challenge = { id: 'challenge-a', request: chargeRequestFor(feeAccept, details) };
  t.is(bindingOf(stock, challenge), 'bound', 'the externalId memo');
  t.is(bindingOf(assembled(buyer, [leg(payTo, 10_000n), memo('challenge-a')]), challenge), 'bound', 'the challenge id memo');
  t.is(bindingOf(assembled(buyer, [leg(payTo, 10_000n)]), challenge), 'unbound', 'no memo (faremeter): held to the terms');
  t.is(bindingOf(assembled(buyer, [leg(payTo, 10_000n), memo('ref-2')]), challenge), 'foreign', 'another challenge’s reference');
});
