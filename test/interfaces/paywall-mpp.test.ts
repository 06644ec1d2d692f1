import anyTest, { type TestFn } from 'ava';
import type { Keypair } from '@solana/web3.js';
import { Keypair as Web3Keypair } from '@solana/web3.js';
import { address, createKeyPairSignerFromBytes } from '@solana/kit';
import { buildChargeTransaction, charge as solanaMppCharge } from '@solana/mpp/client';
import { Challenge, Credential, Receipt } from 'mppx';
import { Mppx } from 'mppx/client';
import { solanaCharge } from '../../interfaces/mpp/index.ts';
import { buildPaymentTransaction } from '../../domain/facilitator/build.ts';
import type { PaymentRequirements } from '../../domain/facilitator/schema.ts';
import { decodeReceipt, encodeRequest, memosOf } from '../../domain/facilitator/mpp.ts';
import { decodeTransaction } from '../../domain/facilitator/decode.ts';
import { challengeId } from '../../domain/paywall/mpp.ts';
import { feeFor } from '../../domain/shared/money.ts';
import { CAIP2 } from '../../domain/shared/network.ts';
import { REQUEST_BINDING_PREFIX, requestDigest } from '../../domain/shared/request-binding.ts';
import { createClient } from '../../interfaces/client/index.ts';
import { HttpFacilitator } from '../../adapters/facilitator/http.ts';
import { http, issueKey, recordAgent, startTestApp } from '../support/app.ts';
import {
  createLink,
  eventsOf,
  fundBuyer,
  getLink,
  payingFetch,
  receiptsOf,
  startLocalServer,
  fundFeeVault,
  recordingPayingFetch,
  startPaywallApp,
  tokenBalance,
  USDC,
  type PaywallWorld,
} from '../support/paywall.ts';

// The MPP rail (fee-facilitator-mpp-tools §2.6, §4.2; DECISIONS "MPP rail"): an MPP link's 402 carries the
// standard `WWW-Authenticate: Payment …` challenge (HMAC id, 5 min) and the problem+json body; `Authorization: Payment
// <credential>` settles through the facilitator's POST /mpp/settle into the same durable paid-call path as x402. The
// credentials here are built by hand on DECISIONS' wire (request as an object inside the credential); the mppx
// client's own wire is tested in mpp-interop.test.ts. One app, serial tests.

const SECRET = 'mpp-test-secret-0123456789abcdef0123456789';
// `free`: a second app with the fee off (SVC_FEE_BPS=0, a process setting), only for the stock MPP clients' fee-off case.
const test = anyTest as TestFn<PaywallWorld & { feePayer: string; feeAuthority: string; free: PaywallWorld }>;
const PRICE = 10_000n;
const GROSS = PRICE + feeFor(PRICE, 100);

async function freeWorld(): Promise<PaywallWorld> {
  const app = await startTestApp({ env: { SVC_FEE_BPS: '0' } });
  return { app, key: await issueKey(app), rpcUrl: app.ledgers.rpcUrls['chain-devnet']! };
}

test.before(async (t) => {
  const [w, free] = await Promise.all([startPaywallApp({ SVC_MPP_SECRET: SECRET }), freeWorld()]);
  const feeAuthority = await fundFeeVault(w);
  const feePayer = ((await (await fetch(`${w.app.url}/facilitator/health`)).json()) as { fee_payer: string }).fee_payer;
  t.context = { ...w, feePayer, feeAuthority, free };
});

interface Unpaid {
  status: number;
  headers: Headers;
  body: any;
  /** the first challenge as the header carries it (parsed by mppx's own parser) */
  challenge: Challenge.Challenge;
}

async function unpaid(url: string, init: RequestInit = {}): Promise<Unpaid> {
  const res = await fetch(url, init);
  const body = await res.json();
  return { status: res.status, headers: res.headers, body, challenge: Challenge.deserializeList(res.headers.get('www-authenticate') ?? '')[0]! };
}

/** The §2.3 transaction for a challenge's request, bound by `memo` (default: the challenge id), signed by the buyer. */
async function transactionFor(
  t: { context: PaywallWorld },
  challenge: { id: string; request: Record<string, any> },
  buyer: Keypair,
  memo = challenge.id,
): Promise<string> {
  const r = challenge.request;
  const d = r.methodDetails;
  // `amount` is the gross; the fee is the one split (draft-solana-charge-00), so the seller leg is the rest.
  const fee = BigInt(d.splits?.[0]?.amount ?? 0);
  const requirements: PaymentRequirements = {
    scheme: 'exact',
    network: 'chain-devnet',
    payTo: r.recipient,
    asset: r.currency,
    amount: BigInt(r.amount) - fee,
    tokenProgram: d.tokenProgram,
    decimals: d.decimals,
    ...(d['svc.fee'] ? { fee: { bps: d['svc.fee'].bps, feeAuthority: d['svc.fee'].feeAuthority } } : {}),
  };
  const { blockhash } = await t.context.app.services.ledgers['chain-devnet']!.getLatestBlockhash();
  const tx = buildPaymentTransaction({ feePayer: d.feePayerKey, payer: buyer.publicKey.toBase58(), requirements, blockhash, memo });
  tx.sign([buyer]);
  return Buffer.from(tx.serialize()).toString('base64');
}

/** DECISIONS' credential: base64url { challenge (request as an object), payload: { transaction } }. */
function credential(challenge: Record<string, unknown>, transaction: string): string {
  return `Payment ${Buffer.from(JSON.stringify({ challenge, payload: { transaction } })).toString('base64url')}`;
}

const plain = (c: Challenge.Challenge) => ({ id: c.id, realm: c.realm, method: c.method, intent: c.intent, request: c.request, expires: c.expires });

test.serial('unpaid MPP 402: WWW-Authenticate Payment challenge (HMAC id, 5 min, one per currency) and the problem+json body', async (t) => {
  const { url, treasury, link } = await createLink(t.context, { protocol: 'mpp' });
  const before = Date.now();
  const res = await unpaid(url);
  t.is(res.status, 402);
  t.regex(res.headers.get('content-type') ?? '', /^application\/problem\+json/);
  const c = res.challenge;
  t.like(c, { method: 'solana', intent: 'charge', realm: new URL(t.context.app.services.settings.baseUrl).host });
  // mppx's own verifier agrees with our HMAC under the same key: the id binds every field.
  t.true(Challenge.verify(c, { secretKey: SECRET }));
  t.false(Challenge.verify({ ...c, request: { ...c.request, amount: '1' } }, { secretKey: SECRET }));
  const expires = Date.parse(c.expires!);
  t.true(expires >= before + 299_000 && expires <= Date.now() + 301_000, 'valid 5 minutes');
  // draft-solana-charge-00 as @solana/mpp and faremeter read it: the gross as amount, the fee as the one split,
  // feePayer a boolean beside feePayerKey, the cluster name, an externalId for the memo.
  t.like(c.request, {
    amount: GROSS.toString(),
    currency: USDC.mint,
    recipient: treasury,
    methodDetails: {
      network: 'devnet',
      feePayer: true,
      feePayerKey: t.context.feePayer,
      decimals: 6,
      tokenProgram: USDC.tokenProgramId,
      symbol: 'USDC',
      resource: link.share_url,
    },
  });
  // externalId, the memo stock clients write: the request-binding memo of the request this challenge answers
  const digest = await requestDigest({ method: 'GET', path: new URL(url).pathname, query: '', body: undefined });
  t.regex((c.request as any).externalId, new RegExp(`^${REQUEST_BINDING_PREFIX}${digest}:[0-9a-f]{32}$`));
  // the server blockhash, as x402 offers carry it (extra.recentBlockhash), under the draft's methodDetails name
  t.regex((c.request as any).methodDetails.recentBlockhash, /^[1-9A-HJ-NP-Za-km-z]{32,44}$/);
  t.deepEqual((c.request as any).methodDetails.splits, [{ recipient: t.context.feeAuthority, amount: (GROSS - PRICE).toString() }]);
  t.deepEqual((c.request as any).methodDetails['svc.fee'], { v: '1', bps: 100, feeAuthority: t.context.feeAuthority });
  t.like(res.body, {
    type: 'https://paymentauth.org/problems/payment-required',
    title: 'Payment Required',
    status: 402,
    challengeId: c.id,
    error: 'payment_required',
  });
  t.deepEqual(res.body.request, c.request);
  t.is(res.body.challenges.length, 1);
  t.truthy(res.body.request_id);
  t.is(res.headers.get('payment-required'), null, 'no x402 offer on an MPP link');
});

test.serial('a paid call over MPP and one over x402 leave the same counters, receipts (v0.2 with the MPP fields) and events', async (t) => {
  const w = t.context;
  const mpp = await createLink(w, { protocol: 'mpp' });
  const x402 = await createLink(w, {});
  const buyerM = await fundBuyer(w);
  const buyerX = await fundBuyer(w);

  const first = await unpaid(mpp.url);
  const tx = await transactionFor(t, first.challenge, buyerM);
  const paid = await fetch(mpp.url, { headers: { authorization: credential(plain(first.challenge), tx) } });
  t.is(paid.status, 200, await paid.clone().text());
  t.deepEqual(await paid.json(), { forecast: 'sunny' });
  const receiptHeader = paid.headers.get('payment-receipt');
  t.truthy(receiptHeader);
  const mppReceipt = JSON.parse(Buffer.from(receiptHeader!, 'base64url').toString('utf8'));
  t.like(mppReceipt, { method: 'solana', status: 'success', challengeId: first.challenge.id });
  t.regex(mppReceipt.reference, /^[1-9A-HJ-NP-Za-km-z]{64,88}$/);
  t.like(decodeReceipt(receiptHeader), { reference: mppReceipt.reference, challengeId: first.challenge.id }, 'the buyer side reads the same receipt');
  t.is(paid.headers.get('payment-response'), null);

  const xPaid = await payingFetch(w, buyerX)(x402.url);
  t.is(xPaid.status, 200);

  // Same money moved.
  t.is(await tokenBalance(w, buyerM.publicKey.toBase58()), 1_000_000n - GROSS);
  t.is(await tokenBalance(w, buyerX.publicKey.toBase58()), 1_000_000n - GROSS);
  t.is(await tokenBalance(w, mpp.treasury), PRICE);
  t.is(await tokenBalance(w, x402.treasury), PRICE);

  // Same counters.
  const [m, x] = [await getLink(w, mpp.link.id), await getLink(w, x402.link.id)];
  t.like(m.counters, { call_count: 1, settled_count: 1, last_tx_sig: mppReceipt.reference });
  t.is(m.counters.call_count, x.counters.call_count);
  t.is(m.counters.settled_count, x.counters.settled_count);

  // Same receipts but the MPP fields.
  const [[rm], [rx]] = [await receiptsOf(w, mpp.agent), await receiptsOf(w, x402.agent)];
  const mr = rm as any;
  t.like(mr, {
    v: '0.2',
    protocol: 'mpp',
    mpp_challenge_id: first.challenge.id,
    mpp_settlement_tx: mppReceipt.reference,
    tx_sig: mppReceipt.reference,
    kind: 'earn',
    nonce: 0,
  });
  t.is(typeof mr.mpp_settlement_slot, 'number');
  const strip = (r: any) => {
    const {
      v: _v,
      protocol: _p,
      mpp_challenge_id: _c,
      mpp_settlement_tx: _s,
      mpp_settlement_slot: _sl,
      agent: _a,
      ts: _t,
      tx_sig: _x,
      receipt_hash: _h,
      request,
      ...rest
    } = r;
    return { ...rest, request: { ...request, url: undefined } };
  };
  t.deepEqual(strip(rm), strip(rx));
  t.is(rx!.v, '0.1');

  // Same events, same metadata shape.
  for (const kind of ['payment_link.settled', 'payment_link.served', 'receipt.published', 'protocol.fee.collected']) {
    const [em, ex] = [await eventsOf(w, kind, mpp.agent), await eventsOf(w, kind, x402.agent)];
    t.is(em.length, 1, kind);
    t.is(ex.length, 1, kind);
    t.deepEqual(Object.keys(em[0]!.metadata).sort(), Object.keys(ex[0]!.metadata).sort(), kind);
    t.is(em[0]!.signature, mppReceipt.reference, kind);
  }
  const [published] = await eventsOf(w, 'receipt.published', mpp.agent);
  t.is(published!.metadata.receipt.mpp_challenge_id, first.challenge.id);

  // Replay of the same credential: the stored response, nothing settled twice (as on x402).
  const again = await fetch(mpp.url, { headers: { authorization: credential(plain(first.challenge), tx) } });
  t.is(again.status, 200);
  t.is(again.headers.get('x-svc-replayed'), 'true');
  t.is(again.headers.get('payment-receipt'), receiptHeader);
  t.deepEqual(await again.json(), { forecast: 'sunny' });
  t.is((await getLink(w, mpp.link.id)).counters.settled_count, 1);
  t.is(await tokenBalance(w, buyerM.publicKey.toBase58()), 1_000_000n - GROSS);

  // The same transaction presented for another link is refused (as on x402).
  const other = await createLink(w, { protocol: 'mpp' }, mpp.agent);
  const otherChallenge = (await unpaid(other.url)).challenge;
  const reused = await fetch(other.url, { headers: { authorization: credential(plain(otherChallenge), tx) } });
  t.is(reused.status, 402);
  t.like(await reused.json(), { error: 'challenge_mismatch' });
});

test.serial(
  'a transaction bound to another challenge unlocks nothing; a tampered, forged or expired challenge is a 402 with the reason in the envelope',
  async (t) => {
    const w = t.context;
    const { url, link } = await createLink(w, { protocol: 'mpp' });
    const buyer = await fundBuyer(w);
    const a = (await unpaid(url)).challenge;
    const b = (await unpaid(url)).challenge;
    t.not(a.id, b.id);

    const refusedWith = async (authorization: string, error: string) => {
      const res = await fetch(url, { headers: { authorization } });
      t.is(res.status, 402, error);
      t.regex(res.headers.get('www-authenticate') ?? '', /^Payment id="/, 'a fresh challenge to answer');
      const body = (await res.json()) as Record<string, unknown>;
      t.like(body, { error, status: 402, type: 'https://paymentauth.org/problems/payment-required' }, error);
      t.is(typeof body.message, 'string');
      t.truthy(body.request_id);
      // the envelope's fields: details absent or an object, never null (the paywall's reasons are the facilitator's codes)
      t.true(!('details' in body) || (typeof body.details === 'object' && body.details !== null), JSON.stringify(body.details));
      return body;
    };

    // A's transaction under B's challenge (and a transaction with no binding at all).
    const boundToA = await transactionFor(t, a, buyer);
    await refusedWith(credential(plain(b), boundToA), 'challenge_mismatch');
    await refusedWith(credential(plain(b), await transactionFor(t, b, buyer, 'some-other-memo')), 'challenge_mismatch');
    // Tampered: a cheaper amount under A's id; forged: an id not made with our key.
    await refusedWith(credential({ ...plain(a), request: { ...a.request, amount: '1' } }, boundToA), 'mpp_challenge_invalid');
    await refusedWith(credential({ ...plain(a), id: 'x'.repeat(43) }, boundToA), 'mpp_challenge_invalid');
    // Expired: a correctly signed challenge whose 5 minutes are over.
    const expiredFields = {
      realm: a.realm,
      method: a.method,
      intent: a.intent,
      request: a.request as Record<string, unknown>,
      expires: new Date(Date.now() - 1000).toISOString(),
    };
    const expired = { id: challengeId(new TextEncoder().encode(SECRET), expiredFields), ...expiredFields };
    await refusedWith(credential(expired, await transactionFor(t, expired, buyer)), 'mpp_challenge_expired');
    // Garbage credential.
    await refusedWith('Payment !!!notbase64', 'mpp_credential_invalid');
    await refusedWith(credential(plain(a), 'bm90IGEgdHJhbnNhY3Rpb24='), 'invalid_transaction');

    t.is(await tokenBalance(w, buyer.publicKey.toBase58()), 1_000_000n, 'nothing moved');
    t.like((await getLink(w, link.id)).counters, { settled_count: 0 });

    // The request as an mppx client sends it inside the credential (base64url string) is accepted too.
    const paid = await fetch(url, { headers: { authorization: credential({ ...plain(a), request: encodeRequest(a.request) }, boundToA) } });
    t.is(paid.status, 200);
    t.is(await tokenBalance(w, buyer.publicKey.toBase58()), 1_000_000n - GROSS);
  },
);

test.serial('a paid MPP call replays its stored answer after its challenge expired; a fresh payment under that expired challenge is refused', async (t) => {
  const w = t.context;
  const { url, link } = await createLink(w, { protocol: 'mpp' });
  const buyer = await fundBuyer(w);
  const issued = (await unpaid(url)).challenge;
  // Signed first, bound by the request's externalId (the same in the short-lived twin below), so the short window
  // covers one request only.
  const tx = await transactionFor(t, issued, buyer, (issued.request as { externalId: string }).externalId);
  // The same challenge, correctly signed with our key, but valid only 3 s from now.
  const fields = {
    realm: issued.realm,
    method: issued.method,
    intent: issued.intent,
    request: issued.request as Record<string, unknown>,
    expires: new Date(Date.now() + 3000).toISOString(),
  };
  const shortLived = { id: challengeId(new TextEncoder().encode(SECRET), fields), ...fields };
  const paid = await fetch(url, { headers: { authorization: credential(shortLived, tx) } });
  t.is(paid.status, 200, await paid.clone().text());
  const receipt = paid.headers.get('payment-receipt');

  while (Date.now() <= Date.parse(fields.expires)) await new Promise((r) => setTimeout(r, 100));
  const replay = await fetch(url, { headers: { authorization: credential(shortLived, tx) } });
  t.is(replay.status, 200, 'the transaction was paid: its answer is kept past the challenge');
  t.is(replay.headers.get('x-svc-replayed'), 'true');
  t.is(replay.headers.get('payment-receipt'), receipt);
  t.like((await getLink(w, link.id)).counters, { settled_count: 1 });

  const other = await fundBuyer(w);
  const refused = await fetch(url, { headers: { authorization: credential(shortLived, await transactionFor(t, shortLived, other)) } });
  t.is(refused.status, 402);
  t.like(await refused.json(), { error: 'mpp_challenge_expired' });
  t.is(await tokenBalance(w, buyer.publicKey.toBase58()), 1_000_000n - GROSS, 'charged once');
  t.is(await tokenBalance(w, other.publicKey.toBase58()), 1_000_000n, 'nothing moved under the expired challenge');
});

test.serial('facilitator POST /mpp/settle: a malformed body is 400 in the envelope; an unbound transaction is refused with challenge_mismatch', async (t) => {
  const w = t.context;
  const { url } = await createLink(w, { protocol: 'mpp' });
  const buyer = await fundBuyer(w);
  const c = (await unpaid(url)).challenge;
  const bad = await http(w.app, 'POST', '/facilitator/mpp/settle', { body: { challenge: { id: 'x' } } });
  t.is(bad.status, 400);
  t.like(bad.body, { error: 'invalid_request' });
  const unbound = await http(w.app, 'POST', '/facilitator/mpp/settle', {
    body: { challenge: plain(c), transaction: await transactionFor(t, c, buyer, 'not-the-id') },
  });
  t.is(unbound.status, 200);
  t.like(unbound.body, { success: false, errorReason: 'challenge_mismatch', signature: '', slot: null });
  const settled = await http(w.app, 'POST', '/facilitator/mpp/settle', {
    body: { challenge: { ...plain(c), request: encodeRequest(c.request) }, transaction: await transactionFor(t, c, buyer) },
  });
  t.is(settled.status, 200);
  t.like(settled.body, { success: true, network: CAIP2['chain-devnet'] });
  t.regex((settled.body as any).signature, /^[1-9A-HJ-NP-Za-km-z]{64,88}$/);
  t.is(typeof (settled.body as any).slot, 'number');

  // The HTTP adapter (SVC_PAYWALL_FACILITATOR_URL) speaks the same route: a refusal is a result, a malformed body unavailable.
  const remote = new HttpFacilitator({ url: `${w.app.url}/facilitator` });
  t.like(await remote.mppSettle({ challenge: plain(c) as any, transaction: await transactionFor(t, c, buyer, 'nope') }), {
    success: false,
    errorReason: 'challenge_mismatch',
  });
  await t.throwsAsync(remote.mppSettle({ challenge: { id: 'x' } as any, transaction: 'AAAA' }), { message: /answered 400/ });
});

test.serial(
  'mppx interop: mppx’s own client core (challenge parsing, credential encoding, receipt parsing) pays an MPP link with the svc-gateway/mpp Solana charge method',
  async (t) => {
    const w = t.context;
    const { url, link, treasury } = await createLink(w, { protocol: 'mpp' });
    const buyer = await fundBuyer(w);
    const seen: string[] = [];
    const mppx = Mppx.create({ methods: [solanaCharge({ signer: buyer, rpcUrl: w.rpcUrl, network: 'chain-devnet' })], polyfill: false });
    mppx.onChallengeReceived(({ challenge }) => {
      seen.push(challenge.id);
      return undefined;
    });
    const res = await mppx.fetch(url);
    t.is(res.status, 200, await res.clone().text());
    t.deepEqual(await res.json(), { forecast: 'sunny' });
    const receipt = Receipt.fromResponse(res);
    t.like(receipt, { method: 'solana', status: 'success' });
    t.regex(receipt.reference, /^[1-9A-HJ-NP-Za-km-z]{64,88}$/);
    t.is(seen.length, 1);
    t.is(await tokenBalance(w, buyer.publicKey.toBase58()), 1_000_000n - GROSS);
    t.is(await tokenBalance(w, treasury), PRICE);
    t.like((await getLink(w, link.id)).counters, { settled_count: 1, last_tx_sig: receipt.reference });
    const [earn] = await receiptsOf(w, (await getLink(w, link.id)).owner_agent);
    t.like(earn as any, { v: '0.2', protocol: 'mpp', mpp_challenge_id: seen[0], mpp_settlement_tx: receipt.reference });
  },
);

test.serial('createPayingFetch pays an MPP offer (credential in Authorization, Payment-Receipt back) and x402 as before', async (t) => {
  const w = t.context;
  const mpp = await createLink(w, { protocol: 'mpp' });
  const buyer = await fundBuyer(w);
  const { pay, sent } = recordingPayingFetch(w, buyer);
  const res = await pay(mpp.url);
  t.is(res.status, 200);
  t.regex(sent.at(-1)!.get('authorization') ?? '', /^Payment [A-Za-z0-9_-]+$/);
  const receipt = JSON.parse(Buffer.from(res.headers.get('payment-receipt')!, 'base64url').toString('utf8'));
  t.like(receipt, { method: 'solana', status: 'success' });
  t.is(await tokenBalance(w, buyer.publicKey.toBase58()), 1_000_000n - GROSS);
  t.like((await getLink(w, mpp.link.id)).counters, { settled_count: 1, last_tx_sig: receipt.reference });
  // A limit below the gross refuses before anything is signed.
  const capped = payingFetch(w, await fundBuyer(w), { maxAmountAtomic: PRICE });
  await t.throwsAsync(capped(mpp.url), { message: /costs 10100 atomic units/ });
});

test.serial(
  'buyer quote reports MPP options (a link resolved locally, a foreign URL probed) on REST, tRPC and GraphQL; policy evaluate and execute read them',
  async (t) => {
    const w = t.context;
    const { link, treasury, url } = await createLink(w, { protocol: 'mpp' });
    const rest = await http(w.app, 'POST', '/v1/buyer/quote', { key: w.key, body: { payment_link: link.id } });
    t.is(rest.status, 200, JSON.stringify(rest.body));
    t.is(rest.body.options.length, 1);
    t.like(rest.body.options[0], {
      kind: 'mpp',
      x402_version: null,
      network: 'chain-devnet',
      currency: 'USDC',
      pay_to: treasury,
      net_atomic: PRICE.toString(),
      gross_atomic: GROSS.toString(),
      fee_payer: w.feePayer,
      payable: true,
      mpp: { method: 'solana', intent: 'charge', challenge_id: null },
    });
    const client = createClient({ url: w.app.url, apiKey: w.key });
    t.deepEqual((await client.buyer.quote.mutate({ payment_link: link.id })).options, rest.body.options);
    const g = await http(w.app, 'POST', '/graphql', {
      key: w.key,
      body: { query: `mutation { buyerQuote(paymentLink: "${link.id}") { options { kind x402Version payTo grossAtomic mppChallengeId } } }` },
    });
    t.falsy(g.body.errors, JSON.stringify(g.body.errors));
    t.deepEqual(g.body.data.buyerQuote.options, [{ kind: 'MPP', x402Version: null, payTo: treasury, grossAtomic: GROSS.toString(), mppChallengeId: null }]);

    // A foreign URL answering this link's MPP 402 is probed: the option carries the live challenge.
    const real = await fetch(url);
    const header = real.headers.get('www-authenticate')!;
    const problem = await real.text();
    const foreign = await startLocalServer(() => ({
      status: 402,
      headers: { 'www-authenticate': header, 'content-type': 'application/problem+json' },
      body: problem,
    }));
    const probed = await http(w.app, 'POST', '/v1/buyer/quote', { key: w.key, body: { url: `${foreign.url}/paid` } });
    t.is(probed.status, 200, JSON.stringify(probed.body));
    const challenge = Challenge.deserialize(header);
    t.like(probed.body.options[0], {
      kind: 'mpp',
      pay_to: treasury,
      gross_atomic: GROSS.toString(),
      mpp: { challenge_id: challenge.id, realm: challenge.realm, expires: challenge.expires },
    });
    t.is(probed.body.resource.url, link.share_url);
    await foreign.close();

    // The spend policy reads the MPP option like an x402 one; execute is refused by it before anything is prepared.
    const buyer = await recordAgent(w.app, w.key);
    await http(w.app, 'PUT', '/v1/buyer/policy', { key: w.key, body: { agent: buyer.mint, limits: [{ currency: 'USDC', per_call: '0.001' }] } });
    const evaluated = await http(w.app, 'POST', '/v1/buyer/policy/evaluate', { key: w.key, body: { agent: buyer.mint, payment_link: link.id } });
    t.is(evaluated.status, 200, JSON.stringify(evaluated.body));
    t.is(evaluated.body.decision, 'deny');
    t.is(evaluated.body.option.kind, 'mpp');
    const denied = await http(w.app, 'POST', '/v1/buyer/payment/execute', {
      key: w.key,
      body: { payment_link: link.id, buyer_agent: buyer.mint, executive: w.feePayer },
    });
    t.is(denied.status, 403, JSON.stringify(denied.body));
    t.is(denied.body.error, 'spend_denied');
    await http(w.app, 'PUT', '/v1/buyer/policy', { key: w.key, body: { agent: buyer.mint, limits: [{ currency: 'USDC', per_call: '1' }] } });
    const allowed = await http(w.app, 'POST', '/v1/buyer/policy/evaluate', { key: w.key, body: { agent: buyer.mint, quote: rest.body } });
    t.is(allowed.body.decision, 'allow', JSON.stringify(allowed.body));
  },
);

// Stock MPP clients from the npm registry, unmodified, on the embedded devnet (draft-solana-charge-00): @solana/mpp 0.6's
// `solana.charge` on mppx 0.11, and faremeter's MPP client 0.22 (@faremeter/payment-solana/charge) in @faremeter/fetch.

/** @solana/mpp's `solana.charge` in mppx's client; `sent` collects the credentials it made (to replay one). */
async function solanaMppFetch(w: PaywallWorld, buyer: Web3Keypair) {
  const signer = await createKeyPairSignerFromBytes(buyer.secretKey);
  const mppx = Mppx.create({ methods: [solanaMppCharge({ signer, rpcUrl: w.rpcUrl })], polyfill: false });
  const sent: string[] = [];
  mppx.onCredentialCreated(({ credential }) => {
    sent.push(credential);
  });
  return { pay: (url: string) => mppx.fetch(url), sent };
}

/** faremeter's MPP client in @faremeter/fetch: no retries, the 402 returned when refused; `sent` the Authorization headers. */
async function faremeterMppFetch(w: PaywallWorld, buyer: Web3Keypair) {
  // faremeter's packages are loaded where they are used: their loggers are module-level `await`s, and a test file that
  // imported them statically would declare its tests a tick after the shared teardown's hook (test/support/teardown.ts)
  const [{ wrap: faremeterFetch }, { createMPPSolanaChargeClient }, { createLocalWallet }] = await Promise.all([
    import('@faremeter/fetch'),
    import('@faremeter/payment-solana/charge'),
    import('@faremeter/wallet-solana'),
  ]);
  const wallet = await createLocalWallet('devnet', buyer.secretKey);
  const handler = createMPPSolanaChargeClient({ wallet, mint: address(USDC.mint), rpc: w.rpcUrl });
  const sent: string[] = [];
  const recording: typeof fetch = (input, init) => {
    const authorization = new Headers(init?.headers).get('authorization');
    if (authorization) sent.push(authorization);
    return fetch(input, init);
  };
  return { pay: faremeterFetch(recording, { phase1Fetch: fetch, handlers: [], mppHandlers: [handler], retryCount: 0, returnPaymentFailure: true }), sent };
}

const FEE = GROSS - PRICE;

test.serial('@solana/mpp 0.6 solana.charge on mppx 0.11 pays a fee-on link (the fee as its split) and a fee-off link; a retry is charged once', async (t) => {
  const feesBefore = await tokenBalance(t.context, t.context.feeAuthority);
  for (const [w, gross] of [
    [t.context, GROSS],
    [t.context.free, PRICE],
  ] as const) {
    const { url, link, treasury } = await createLink(w, { protocol: 'mpp' });
    const buyer = await fundBuyer(w);
    const { pay, sent } = await solanaMppFetch(w, buyer);
    const res = await pay(url);
    t.is(res.status, 200, await res.clone().text());
    t.deepEqual(await res.json(), { forecast: 'sunny' });
    const receipt = Receipt.fromResponse(res);
    t.like(receipt, { method: 'solana', status: 'success' });
    t.is(await tokenBalance(w, buyer.publicKey.toBase58()), 1_000_000n - gross);
    t.is(await tokenBalance(w, treasury), PRICE);
    t.like((await getLink(w, link.id)).counters, { settled_count: 1, last_tx_sig: receipt.reference });
    // The buyer retries the same credential (a lost answer): the stored response, nothing moves twice.
    t.is(sent.length, 1);
    const again = await fetch(url, { headers: { authorization: sent[0]! } });
    t.is(again.status, 200);
    t.is(again.headers.get('x-svc-replayed'), 'true');
    t.is(await tokenBalance(w, buyer.publicKey.toBase58()), 1_000_000n - gross, 'charged once');
    t.like((await getLink(w, link.id)).counters, { settled_count: 1 });
  }
  t.is(await tokenBalance(t.context, t.context.feeAuthority), feesBefore + FEE, 'the fee split reached the fee authority');
});

test.serial(
  'faremeter’s MPP client 0.22 pays a fee-off link (no memo: held to the terms, charged once); on a fee-on link, which it pays without the split, it is refused naming the fix',
  async (t) => {
    const free = t.context.free;
    const { url, link, treasury } = await createLink(free, { protocol: 'mpp' });
    const buyer = await fundBuyer(free);
    const { pay, sent } = await faremeterMppFetch(free, buyer);
    const res = await pay(url);
    t.is(res.status, 200, await res.clone().text());
    t.deepEqual(await res.json(), { forecast: 'sunny' });
    t.is(await tokenBalance(free, buyer.publicKey.toBase58()), 1_000_000n - PRICE);
    t.is(await tokenBalance(free, treasury), PRICE);
    t.like((await getLink(free, link.id)).counters, { settled_count: 1 });
    t.like(Receipt.fromResponse(res), { method: 'solana', status: 'success' });
    t.is(sent.length, 1);
    const again = await fetch(url, { headers: { authorization: sent[0]! } });
    t.is(again.status, 200, 'the retry gets the stored answer');
    t.is(again.headers.get('x-svc-replayed'), 'true');
    t.is(await tokenBalance(free, buyer.publicKey.toBase58()), 1_000_000n - PRICE, 'charged once');

    // Fee on: faremeter 0.22 ignores methodDetails.splits and sends the whole amount to the recipient — refused before
    // anything settles, the reason naming the split.
    const fee = await createLink(t.context, { protocol: 'mpp' });
    const feeBuyer = await fundBuyer(t.context);
    const refused = await (await faremeterMppFetch(t.context, feeBuyer)).pay(fee.url);
    t.is(refused.status, 402);
    const body = (await refused.json()) as { error: string; message: string };
    t.is(body.error, 'fee_leg_missing');
    t.regex(body.message, /split/);
    t.is(await tokenBalance(t.context, feeBuyer.publicKey.toBase58()), 1_000_000n, 'nothing moved');
  },
);

test.serial('a forged split (fee leg to another account, or short) in a stock-built transaction is refused before anything settles', async (t) => {
  const w = t.context;
  const { url, link } = await createLink(w, { protocol: 'mpp' });
  const buyer = await fundBuyer(w);
  const signer = await createKeyPairSignerFromBytes(buyer.secretKey);
  const challenge = Challenge.deserializeList((await fetch(url)).headers.get('www-authenticate') ?? '')[0]!;
  const request = challenge.request as any;
  const split = request.methodDetails.splits[0];
  const attempt = async (forged: any, error: string) => {
    const transaction = await buildChargeTransaction({ signer, rpcUrl: w.rpcUrl, request: forged });
    const res = await fetch(url, { headers: { authorization: Credential.serialize({ challenge, payload: { type: 'transaction', transaction } }) } });
    t.is(res.status, 402, error);
    t.like(await res.json(), { error }, error);
  };
  const stranger = Web3Keypair.generate().publicKey.toBase58();
  await attempt({ ...request, methodDetails: { ...request.methodDetails, splits: [{ ...split, recipient: stranger }] } }, 'fee_leg_wrong_destination');
  await attempt(
    { ...request, amount: (GROSS - 1n).toString(), methodDetails: { ...request.methodDetails, splits: [{ ...split, amount: (FEE - 1n).toString() }] } },
    'fee_leg_wrong_amount',
  );
  t.is(await tokenBalance(w, buyer.publicKey.toBase58()), 1_000_000n, 'nothing moved');
  t.like((await getLink(w, link.id)).counters, { settled_count: 0 });
});

/** The memos and blockhash of a credential's transaction (as a stock client or our kit built it). */
function transactionOfCredential(authorization: string): { memos: string[]; blockhash: string; challenge: Challenge.Challenge } {
  const cred = Credential.deserialize(authorization);
  const bytes = Buffer.from((cred.payload as { transaction: string }).transaction, 'base64');
  return { memos: memosOf(bytes), blockhash: decodeTransaction(bytes).recentBlockhash, challenge: cred.challenge };
}

test.serial(
  'request-bound MPP: the challenge’s externalId binds to its request; another request’s credential or transaction is payment_bound_elsewhere, an unbound one payment_unbound where required; stock @solana/mpp and our method pay, on the offered blockhash',
  async (t) => {
    const w = t.context;
    const strict = await createLink(w, { protocol: 'mpp', request_binding: 'required' });
    t.is(strict.link.request_binding, 'required');
    const paris = `${strict.url}&city=Paris`;
    const rome = `${strict.url}&city=Rome`;
    const path = new URL(strict.url).pathname;
    const romeDigest = await requestDigest({ method: 'GET', path, query: 'city=Rome', body: undefined });
    const forParis = (await unpaid(paris)).challenge;
    const forRome = (await unpaid(rome)).challenge;
    const parisRef = (forParis.request as { externalId: string }).externalId;
    t.true(parisRef.startsWith(`${REQUEST_BINDING_PREFIX}${await requestDigest({ method: 'GET', path, query: 'city=Paris', body: undefined })}:`));
    const buyer = await fundBuyer(w);

    const refusedWith = async (url: string, authorization: string, error: string) => {
      const res = await fetch(url, { headers: { authorization } });
      t.is(res.status, 402, error);
      const body = (await res.json()) as { error: string; details?: { request_digest?: string } };
      t.is(body.error, error);
      t.is(body.details?.request_digest, romeDigest, 'the digest of the request it came with');
    };
    const parisTx = await transactionFor(t, forParis, buyer, parisRef);
    // Paris's whole credential on Rome: its challenge was issued for another request.
    await refusedWith(rome, credential(plain(forParis), parisTx), 'payment_bound_elsewhere');
    // Paris's transaction under Rome's challenge: its memo names another request.
    await refusedWith(rome, credential(plain(forRome), parisTx), 'payment_bound_elsewhere');
    // A memo that binds nothing (faremeter writes none): refused on a link that requires binding.
    await refusedWith(rome, credential(plain(forRome), await transactionFor(t, forRome, buyer, 'a-stock-nonce')), 'payment_unbound');
    t.is(await tokenBalance(w, buyer.publicKey.toBase58()), 1_000_000n, 'nothing moved for the refused credentials');
    t.like((await getLink(w, strict.link.id)).counters, { settled_count: 0 });
    // On its own request Paris's credential pays; the challenge id as memo binds through the challenge too.
    t.is((await fetch(paris, { headers: { authorization: credential(plain(forParis), parisTx) } })).status, 200);
    const byId = await transactionFor(t, forRome, buyer, forRome.id);
    t.is((await fetch(rome, { headers: { authorization: credential(plain(forRome), byId) } })).status, 200);

    // Stock @solana/mpp on mppx writes the externalId: it pays the required link, signing on the offered blockhash.
    const stock = await solanaMppFetch(w, await fundBuyer(w));
    const res = await stock.pay(rome);
    t.is(res.status, 200, await res.clone().text());
    const built = transactionOfCredential(stock.sent[0]!);
    const offered = built.challenge.request as { externalId: string; methodDetails: { recentBlockhash?: string } };
    t.true(built.memos.includes(offered.externalId) && offered.externalId.startsWith(`${REQUEST_BINDING_PREFIX}${romeDigest}:`));
    t.truthy(offered.methodDetails.recentBlockhash);
    t.is(built.blockhash, offered.methodDetails.recentBlockhash!, 'no blockhash of its own');

    // svc-gateway/mpp's method on mppx: the same memo and blockhash.
    const kitSent: string[] = [];
    const kit = Mppx.create({ methods: [solanaCharge({ signer: await fundBuyer(w), rpcUrl: w.rpcUrl, network: 'chain-devnet' })], polyfill: false });
    kit.onCredentialCreated(({ credential }) => {
      kitSent.push(credential);
    });
    t.is((await kit.fetch(paris)).status, 200);
    const ours = transactionOfCredential(kitSent[0]!);
    const ourOffer = ours.challenge.request as { externalId: string; methodDetails: { recentBlockhash?: string } };
    t.deepEqual(ours.memos, [ourOffer.externalId]);
    t.is(ours.blockhash, ourOffer.methodDetails.recentBlockhash!);
    t.like((await getLink(w, strict.link.id)).counters, { settled_count: 4 });
  },
);
