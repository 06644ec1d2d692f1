import test from 'ava';
import { Keypair } from '@solana/web3.js';
import { Challenge, Credential } from 'mppx';
import { buildPaymentTransaction } from '../../domain/facilitator/build.ts';
import { encodeCredential, isBoundTo, memosOf, parseChallenges } from '../../domain/facilitator/mpp.ts';
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
