import anyTest, { type ExecutionContext, type TestFn } from 'ava';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Keypair } from '@solana/web3.js';
import { address, createKeyPairSignerFromBytes } from '@solana/kit';
import { decodePaymentResponseHeader, wrapFetchWithPayment, x402Client } from '@x402/fetch';
import { ExactSvmScheme } from '@x402/svm/exact/client';
import { ExactSvmSchemeV1 } from '@x402/svm/exact/v1/client';
import { createSigner as createLegacySigner, decodeXPaymentResponse, wrapFetchWithPayment as wrapFetchWithPaymentV1 } from 'x402-fetch';
import { createPayingFetch, decodePaymentResponse, PaymentError } from '../../interfaces/client/paying-fetch.ts';
import { createSvcFeePaymentHandler, ExactSvmFeeScheme, registerSvcFeeScheme } from 'svc-gateway/x402'; // the published entry (package.json exports)
import axios, { isAxiosError } from 'axios';
import { wrapAxiosWithPayment, x402Client as AxiosX402Client } from '@x402/axios';
import { x402Client as PayaiX402Client, x402HTTPClient as PayaiHttpClient } from '@payai/x402/client';
import { createX402Client as createX402SolanaClient } from 'x402-solana/client';
import type { VersionedTransaction } from '@solana/web3.js';
import { encodeBase58 } from '../../domain/shared/base58.ts';
import { decodeTransaction } from '../../domain/facilitator/decode.ts';
import { MEMO_PROGRAM_ID } from '../../domain/facilitator/schema.ts';
import { REQUEST_BINDING_EXTENSION, REQUEST_BINDING_PREFIX } from '../../domain/shared/request-binding.ts';
import { ataOf } from '../../domain/facilitator/ata.ts';
import { feeFor } from '../../domain/shared/money.ts';
import { CAIP2, findStable, X402_V1_NETWORK } from '../../domain/shared/network.ts';
import { treasuryOf } from '../../domain/treasury/derive.ts';
import { http, issueKey, linkBody, recordAgent, startTestApp, type TestApp } from '../support/app.ts';
import { waitForCommitment } from '../support/ledger.ts';
import { paidCallsOf, receiptsOf } from '../support/paywall.ts';
import { compactVerify, createLocalJWKSet, decodeProtectedHeader, type JSONWebKeySet } from 'jose';
import { appendPaymentIdentifierToExtensions, generatePaymentId, PAYMENT_IDENTIFIER } from '@x402/extensions/payment-identifier';
import {
  decodeSignedOffers,
  extractOffersFromPaymentRequired,
  extractReceiptFromResponse,
  findAcceptsObjectFromSignedOffer,
  OFFER_RECEIPT,
  type JWSSignedReceipt,
} from '@x402/extensions/offer-receipt';

// DECISIONS "x402 on the paywall" and fee-facilitator-mpp-tools §2.1–2.4: the paywall /x/{id} is paid by the official
// x402 client (@x402/fetch + @x402/svm, unmodified, pointed at the embedded devnet JSON-RPC) and by our buyer kit
// (fee leg, one transaction); the kit refuses fee terms its facilitator does not publish. Real app, real ledger.

interface World {
  app: TestApp;
  key: string;
  rpcUrl: string;
}
const test = anyTest as TestFn<{ free: World; fee: World }>;
const USDC = findStable('chain-devnet', 'USDC')!;
const PRICE = 10_000n; // linkBody's $0.01

async function world(env: Record<string, string> = {}): Promise<World> {
  const app = await startTestApp({ env });
  const rpcUrl = app.ledgers.rpcUrls['chain-devnet'];
  if (!rpcUrl) throw new Error('the test app runs no devnet JSON-RPC server');
  return { app, key: await issueKey(app), rpcUrl };
}

test.before(async (t) => {
  const [free, fee] = await Promise.all([world({ SVC_FEE_BPS: '0' }), world()]);
  t.context = { free, fee };
});

/** A seller agent with one link; its treasury's token account does not exist yet (the facilitator creates it). */
async function sellerLink(t: ExecutionContext, w: World, overrides: Record<string, unknown> = {}) {
  const { mint: agent } = await recordAgent(w.app, w.key);
  const res = await http(w.app, 'POST', '/v1/payment-links', { key: w.key, body: linkBody(agent, overrides) });
  t.is(res.status, 201, JSON.stringify(res.body));
  const link = res.body as {
    id: string;
    accepts: { amount: string; asset: string; pay_to: string; pay_to_token_account: string; pay_to_ready: boolean | null }[];
  };
  t.is(link.accepts[0]?.amount, PRICE.toString());
  t.is(link.accepts[0]?.asset, USDC.mint);
  const treasury = treasuryOf(agent);
  return { agent, link, treasury, url: `${w.app.url}/x/${link.id}?network=chain-devnet` };
}

/** A buyer holding USDC on the embedded devnet, and no SOL: the facilitator pays every native fee and rent. */
async function buyer(w: World, usdc = '1'): Promise<Keypair> {
  const kp = Keypair.generate();
  await w.app.services.dev.fund('chain-devnet', { address: kp.publicKey.toBase58(), token: 'USDC', amount: usdc });
  return kp;
}

/** USDC atoms held by `owner` (all its token accounts of the mint; 0n when it has none). */
async function usdcOf(w: World, owner: string): Promise<bigint> {
  const balances = await w.app.services.ledgers['chain-devnet']!.getTokenBalances(owner, { mint: USDC.mint });
  return balances.reduce((sum, b) => sum + b.amount, 0n);
}

function decodeBase64Json(value: string | null): any {
  return value ? JSON.parse(Buffer.from(value, 'base64').toString('utf8')) : null;
}

test('(a) the official @x402/fetch + @x402/svm client pays a fee-free link; the treasury grows by the price', async (t) => {
  const w = t.context.free;
  const { treasury, url } = await sellerLink(t, w, { response: { status: 201, body: { forecast: 'sunny', via: 'x402' } } });
  const payer = await buyer(w);

  // The unpaid offer, as the official client reads it: v2 in PAYMENT-REQUIRED, v1 in the body; no fee extension.
  const unpaid = await fetch(url);
  t.is(unpaid.status, 402);
  const required = decodeBase64Json(unpaid.headers.get('PAYMENT-REQUIRED'));
  t.is(required?.x402Version, 2);
  const accept = required.accepts[0];
  t.like(accept, { scheme: 'exact', network: CAIP2['chain-devnet'], asset: USDC.mint, amount: PRICE.toString(), payTo: treasury, maxTimeoutSeconds: 60 });
  t.is(typeof accept.extra?.feePayer, 'string');
  t.false('svc.fee' in accept.extra, 'SVC_FEE_BPS=0: no fee extension');
  const v1 = (await unpaid.json()) as any;
  t.is(v1.x402Version, 1);
  t.like(v1.accepts[0], { scheme: 'exact', network: X402_V1_NETWORK['chain-devnet'], maxAmountRequired: PRICE.toString(), payTo: treasury, asset: USDC.mint });

  t.is(await usdcOf(w, treasury), 0n, 'no treasury token account before the first payment');
  const before = await usdcOf(w, payer.publicKey.toBase58());

  // registerExactSvmScheme() has no rpcUrl option (it would dial api.devnet.solana.com): the schemes' own config does.
  const signer = await createKeyPairSignerFromBytes(payer.secretKey);
  const client = new x402Client()
    .register('solana:*', new ExactSvmScheme(signer, { rpcUrl: w.rpcUrl }))
    .registerV1(X402_V1_NETWORK['chain-devnet'], new ExactSvmSchemeV1(signer, { rpcUrl: w.rpcUrl }));
  const payFetch = wrapFetchWithPayment(fetch, client);

  const res = await payFetch(url);
  const text = await res.text();
  t.is(res.status, 201, text);
  t.deepEqual(JSON.parse(text), { forecast: 'sunny', via: 'x402' });
  const header = res.headers.get('PAYMENT-RESPONSE');
  t.truthy(header, 'PAYMENT-RESPONSE on the paid response');
  const settled = decodePaymentResponseHeader(header!);
  t.like(settled, { success: true, network: CAIP2['chain-devnet'], payer: payer.publicKey.toBase58() });
  t.regex(settled.transaction, /^[1-9A-HJ-NP-Za-km-z]{64,88}$/);

  t.is(await usdcOf(w, treasury), PRICE, 'the treasury token account was created and credited with exactly the price');
  t.is(await usdcOf(w, payer.publicKey.toBase58()), before - PRICE);
});

// Serial: (b) and (e) read the fee authority's balance, which every fee-on payment of this world credits.
test.serial('(b) our kit pays a fee-bearing link: seller and fee legs in one transaction', async (t) => {
  const w = t.context.fee;
  // A POST link: the kit must send the same body again on the paid retry.
  const { treasury, url } = await sellerLink(t, w, { method: 'POST', response: { body: { forecast: 'rain' } } });
  const payer = await buyer(w);
  const health = await http(w.app, 'GET', '/v1/health', { key: w.key });
  t.is(health.status, 200, JSON.stringify(health.body));
  const feeAuthority = health.body.protocol_fee.authorities['chain-devnet'] as string;
  t.is(feeAuthority, w.app.services.settings.fee.authorities['chain-devnet']);
  t.is(health.body.protocol_fee.bps, 100);
  const fee = feeFor(PRICE, 100);
  t.is(fee, 100n, 'ceil(10000 × 100 / 10000)');

  const buyerAddress = payer.publicKey.toBase58();
  const sellerAccount = ataOf(treasury, USDC.mint, USDC.tokenProgramId);
  const feeAccount = ataOf(feeAuthority, USDC.mint, USDC.tokenProgramId);
  const buyerBefore = await usdcOf(w, buyerAddress);
  const feeBefore = await usdcOf(w, feeAuthority);
  t.is(await usdcOf(w, treasury), 0n);

  // Facilitator URL by default: `${origin}/facilitator` of the paywall (no SVC_FACILITATOR_URL in the test env).
  const pay = createPayingFetch({ signer: payer, rpcUrl: w.rpcUrl, network: 'chain-devnet' });
  const res = await pay(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ city: 'Lisbon' }) });
  const text = await res.text();
  t.is(res.status, 200, text);
  t.deepEqual(JSON.parse(text), { forecast: 'rain' });
  const header = res.headers.get('PAYMENT-RESPONSE');
  t.truthy(header);
  const settled = decodePaymentResponse(header!);
  t.like(settled, { success: true, network: CAIP2['chain-devnet'], payer: buyerAddress });

  t.is(await usdcOf(w, treasury), PRICE, 'seller leg');
  t.is((await usdcOf(w, feeAuthority)) - feeBefore, fee, 'fee leg');
  t.is(buyerBefore - (await usdcOf(w, buyerAddress)), PRICE + fee, 'the buyer paid the gross');

  // One transaction: both legs (and the buyer's debit) are in the balances of the signature PAYMENT-RESPONSE names.
  const ledger = w.app.services.ledgers['chain-devnet']!;
  await waitForCommitment(ledger, settled.transaction);
  const tx = await ledger.getTransaction(settled.transaction);
  t.truthy(tx);
  t.is(tx!.err, null);
  const delta = (account: string) => {
    const pre = tx!.preTokenBalances.find((b) => b.account === account)?.amount ?? 0n;
    const post = tx!.postTokenBalances.find((b) => b.account === account)?.amount ?? 0n;
    return post - pre;
  };
  t.is(delta(sellerAccount), PRICE);
  t.is(delta(feeAccount), fee);
  t.is(delta(ataOf(buyerAddress, USDC.mint, USDC.tokenProgramId)), -(PRICE + fee));
});

/** A stand-in facilitator whose GET /health publishes other fee terms than the paywall's offer. */
async function lyingFacilitator(protocolFee: { bps: number; authority: string }): Promise<{ url: string; hits: () => number; server: Server }> {
  let hits = 0;
  const server = createServer((req, res) => {
    hits++;
    if (req.url !== '/health') return void res.writeHead(404).end();
    const body = {
      ok: true,
      fee_payer: Keypair.generate().publicKey.toBase58(),
      networks: ['chain-devnet'],
      protocol_fee: { bps: protocolFee.bps, enforcement: 'enforce', authority: protocolFee.authority, authorities: { 'chain-devnet': protocolFee.authority } },
    };
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, hits: () => hits, server };
}

test('(c) our kit refuses a fee authority or rate its facilitator does not publish; nothing moves', async (t) => {
  const w = t.context.fee;
  const { treasury, url } = await sellerLink(t, w);
  const payer = await buyer(w);
  const buyerBefore = await usdcOf(w, payer.publicKey.toBase58());
  const real = w.app.services.settings.fee.authorities['chain-devnet'];

  for (const published of [
    { bps: 100, authority: Keypair.generate().publicKey.toBase58() }, // another authority
    { bps: 50, authority: real }, // the same authority at another rate
  ]) {
    const facilitator = await lyingFacilitator(published);
    t.teardown(() => new Promise<void>((resolve) => facilitator.server.close(() => resolve())));
    const pay = createPayingFetch({ signer: payer, rpcUrl: w.rpcUrl, network: 'chain-devnet', facilitatorUrl: facilitator.url });
    const err = await t.throwsAsync(pay(url), { instanceOf: PaymentError });
    t.is((err as PaymentError | undefined)?.code, 'fee_authority_mismatch', err?.message);
    t.is(facilitator.hits(), 1, 'the kit read the published terms once');
  }

  t.is(await usdcOf(w, payer.publicKey.toBase58()), buyerBefore, 'the buyer signed nothing');
  t.is(await usdcOf(w, treasury), 0n);
});

test('(d) our kit refuses an offer whose gross exceeds maxAmountAtomic; nothing moves', async (t) => {
  const w = t.context.fee;
  const { treasury, url } = await sellerLink(t, w);
  const payer = await buyer(w);
  const buyerBefore = await usdcOf(w, payer.publicKey.toBase58());
  const gross = PRICE + feeFor(PRICE, 100);

  const pay = createPayingFetch({ signer: payer, rpcUrl: w.rpcUrl, network: 'chain-devnet', maxAmountAtomic: gross - 1n });
  const err = await t.throwsAsync(pay(url), { instanceOf: PaymentError });
  t.is((err as PaymentError | undefined)?.code, 'amount_too_high', err?.message);
  t.is(await usdcOf(w, payer.publicKey.toBase58()), buyerBefore);
  t.is(await usdcOf(w, treasury), 0n);
});

test.serial('(e) the official @x402/fetch client plus one registration of svc-gateway/x402 pays a fee-on link: both legs in one transaction', async (t) => {
  const w = t.context.fee;
  const { treasury, url } = await sellerLink(t, w, { response: { body: { forecast: 'fog' } } });
  const payer = await buyer(w);
  const buyerAddress = payer.publicKey.toBase58();
  const feeAuthority = w.app.services.settings.fee.authorities['chain-devnet'];
  const fee = feeFor(PRICE, 100);
  const buyerBefore = await usdcOf(w, buyerAddress);
  const feeBefore = await usdcOf(w, feeAuthority);

  const signer = await createKeyPairSignerFromBytes(payer.secretKey);
  // The buyer's existing setup (the official SVM scheme) …
  const client = new x402Client().register('solana:*', new ExactSvmScheme(signer, { rpcUrl: w.rpcUrl }));
  // … without the fee scheme: the stock transaction lacks the fee leg, and the 402 says what to add.
  const stock = await wrapFetchWithPayment(fetch, client)(url);
  t.is(stock.status, 402);
  const refusal = (await stock.json()) as { error: string; message: string };
  t.is(refusal.error, 'fee_leg_missing');
  t.regex(refusal.message, /svc-gateway\/x402/);
  t.regex(refusal.message, /ExactSvmFeeScheme/);
  t.regex(refusal.message, /[^.]\. This link charges a protocol fee/, "the verifier's part and the hint are two sentences");
  t.is(decodeBase64Json(stock.headers.get('PAYMENT-REQUIRED'))?.error, 'fee_leg_missing');
  t.is(await usdcOf(w, buyerAddress), buyerBefore, 'the refused payment moved nothing');

  // … plus the one registration line.
  client.register('solana:*', new ExactSvmFeeScheme(signer, { rpcUrl: w.rpcUrl }));
  const res = await wrapFetchWithPayment(fetch, client)(url);
  const text = await res.text();
  t.is(res.status, 200, text);
  t.deepEqual(JSON.parse(text), { forecast: 'fog' });
  const settled = decodePaymentResponseHeader(res.headers.get('PAYMENT-RESPONSE')!);
  t.like(settled, { success: true, network: CAIP2['chain-devnet'], payer: buyerAddress });

  t.is(await usdcOf(w, treasury), PRICE, 'seller leg');
  t.is((await usdcOf(w, feeAuthority)) - feeBefore, fee, 'fee leg');
  t.is(buyerBefore - (await usdcOf(w, buyerAddress)), PRICE + fee, 'the buyer paid the gross');
  const ledger = w.app.services.ledgers['chain-devnet']!;
  await waitForCommitment(ledger, settled.transaction);
  const tx = await ledger.getTransaction(settled.transaction);
  const delta = (account: string) =>
    (tx!.postTokenBalances.find((b) => b.account === account)?.amount ?? 0n) - (tx!.preTokenBalances.find((b) => b.account === account)?.amount ?? 0n);
  t.is(delta(ataOf(treasury, USDC.mint, USDC.tokenProgramId)), PRICE, 'both legs in the transaction PAYMENT-RESPONSE names');
  t.is(delta(ataOf(feeAuthority, USDC.mint, USDC.tokenProgramId)), fee);
  // request-bound: the scheme sees no request, so it binds to the digest the 402 stated (docs/paywall.md)
  const stated = decodeBase64Json((await fetch(url)).headers.get('PAYMENT-REQUIRED'))?.extensions?.[REQUEST_BINDING_EXTENSION]?.info?.digest;
  const memos = decodeTransaction(tx!.wire)
    .instructions.filter((ix) => ix.programId === MEMO_PROGRAM_ID)
    .map((ix) => new TextDecoder().decode(ix.data));
  t.true(
    memos.some((m) => m.startsWith(`${REQUEST_BINDING_PREFIX}${stated}:`)),
    `the memo binds the request (${memos.join(', ')})`,
  );
});

test('(f) the scheme refuses fee terms the facilitator does not publish, and holds the official spend cap to amount + fee', async (t) => {
  const w = t.context.fee;
  const { url } = await sellerLink(t, w);
  const payer = await buyer(w);
  const before = await usdcOf(w, payer.publicKey.toBase58());
  const signer = await createKeyPairSignerFromBytes(payer.secretKey);

  const liar = await lyingFacilitator({ bps: 100, authority: Keypair.generate().publicKey.toBase58() });
  t.teardown(() => new Promise<void>((resolve) => liar.server.close(() => resolve())));
  // registerSvcFeeScheme: the same scheme for v2 (CAIP-2) and v1 names of both networks.
  const lied = registerSvcFeeScheme(new x402Client(), { signer, rpcUrl: w.rpcUrl, facilitatorUrl: liar.url });
  const mismatch = await t.throwsAsync(wrapFetchWithPayment(fetch, lied)(url));
  t.regex(mismatch?.message ?? '', /fee authority/);

  // The official cap covers the offer's amount (10 000 atoms); the fee scheme holds it to the gross (10 100).
  const capped = new x402Client().register('solana:*', new ExactSvmFeeScheme(signer, { rpcUrl: w.rpcUrl }));
  capped.setSpendControls({ allowedAssets: [{ network: CAIP2['chain-devnet'], asset: USDC.mint, maxAmountPerPayment: PRICE.toString() }] } as never);
  const tooHigh = await t.throwsAsync(wrapFetchWithPayment(fetch, capped)(url));
  t.regex(tooHigh?.message ?? '', /10100 atomic units/);
  t.is(await usdcOf(w, payer.publicKey.toBase58()), before, 'nothing signed, nothing moved');
});

test('(g) the legacy x402-fetch 1.x client pays a fee-free link of a brand-new seller: the treasury token account was made ready when the agent was recorded', async (t) => {
  const w = t.context.free;
  const { link, treasury, url } = await sellerLink(t, w, { response: { status: 200, body: { forecast: 'hail', via: 'x402 v1' } } });
  // hosted-api §2.3: pay_to is the offer's payTo; the account the seller leg credits is beside it, ready.
  const account = ataOf(treasury, USDC.mint, USDC.tokenProgramId);
  t.like(link.accepts[0], { pay_to: treasury, pay_to_token_account: account, pay_to_ready: true });
  const offer = decodeBase64Json((await fetch(url)).headers.get('PAYMENT-REQUIRED'));
  t.is(offer.accepts[0].payTo, link.accepts[0]!.pay_to, 'one value in two spellings');
  t.truthy(await w.app.services.ledgers['chain-devnet']!.getAccount(account), 'the facilitator created it before any payment');

  const payer = await buyer(w);
  const before = await usdcOf(w, payer.publicKey.toBase58());
  const signer = await createLegacySigner('solana-devnet', encodeBase58(payer.secretKey));
  const pay = wrapFetchWithPaymentV1(fetch, signer, undefined, undefined, { svmConfig: { rpcUrl: w.rpcUrl } });
  const res = await pay(url);
  const text = await res.text();
  t.is(res.status, 200, text);
  t.deepEqual(JSON.parse(text), { forecast: 'hail', via: 'x402 v1' });
  const settled = decodeXPaymentResponse(res.headers.get('X-PAYMENT-RESPONSE') ?? res.headers.get('PAYMENT-RESPONSE')!);
  t.like(settled, { success: true, payer: payer.publicKey.toBase58() });
  t.is(await usdcOf(w, treasury), PRICE);
  t.is(await usdcOf(w, payer.publicKey.toBase58()), before - PRICE);
});

test.serial('(h) svc-gateway/x402 answers an x402 v1 offer too (registerV1): the v1 body offer, paid with X-PAYMENT, settles both legs', async (t) => {
  const w = t.context.fee;
  const { treasury, url } = await sellerLink(t, w);
  const payer = await buyer(w);
  const buyerBefore = await usdcOf(w, payer.publicKey.toBase58());
  const v1 = (await (await fetch(url)).json()) as { x402Version: number; accepts: any[] };
  t.is(v1.x402Version, 1);
  const scheme = new ExactSvmFeeScheme(payer, { rpcUrl: w.rpcUrl }); // a web3.js Keypair works as the signer too
  const payload = await scheme.createPaymentPayload(1, v1.accepts[0]);
  t.like(payload, { x402Version: 1, scheme: 'exact', network: X402_V1_NETWORK['chain-devnet'] });
  const res = await fetch(url, { headers: { 'X-PAYMENT': Buffer.from(JSON.stringify(payload)).toString('base64') } });
  t.is(res.status, 200, await res.clone().text());
  t.truthy(res.headers.get('X-PAYMENT-RESPONSE'));
  t.is(await usdcOf(w, treasury), PRICE);
  t.is(buyerBefore - (await usdcOf(w, payer.publicKey.toBase58())), PRICE + feeFor(PRICE, 100));
});

/** Pays a link with a stock client; its answer as status + parsed JSON (a refused retry is a 402, not a throw). */
type Payer = (url: string) => Promise<{ status: number; body: any; paymentResponse: string | null }>;

/** @x402/axios 2.11 (its own @x402/core 2.11) with the given schemes registered for solana:*. */
function axiosPayer(...schemes: unknown[]): Payer {
  const client = new AxiosX402Client();
  for (const scheme of schemes) client.register('solana:*', scheme as never);
  const api = wrapAxiosWithPayment(axios.create(), client);
  return async (url) => {
    try {
      const res = await api.get(url);
      return { status: res.status, body: res.data, paymentResponse: (res.headers['payment-response'] as string | undefined) ?? null };
    } catch (e) {
      if (isAxiosError(e) && e.response) return { status: e.response.status, body: e.response.data, paymentResponse: null };
      throw e;
    }
  };
}

/** @payai/x402 2.4's client core (no fetch wrapper): read the 402, create the payload, send it once. */
function payaiPayer(...schemes: unknown[]): Payer {
  const client = new PayaiX402Client();
  for (const scheme of schemes) client.register('solana:*', scheme as never);
  const http = new PayaiHttpClient(client);
  return async (url) => {
    const unpaid = await fetch(url);
    const required = http.getPaymentRequiredResponse((name) => unpaid.headers.get(name), await unpaid.json());
    const payload = await http.createPaymentPayload(required);
    const res = await fetch(url, { headers: http.encodePaymentSignatureHeader(payload) });
    return { status: res.status, body: await res.json(), paymentResponse: res.headers.get('PAYMENT-RESPONSE') };
  };
}

for (const [name, payer] of [
  ['@x402/axios 2.11', axiosPayer],
  ['@payai/x402 2.4 client core', payaiPayer],
] as const) {
  test(`(i) ${name} + @x402/svm pays a fee-off link`, async (t) => {
    const w = t.context.free;
    const { treasury, url } = await sellerLink(t, w, { response: { body: { via: name } } });
    const kp = await buyer(w);
    const signer = await createKeyPairSignerFromBytes(kp.secretKey);
    const res = await payer(new ExactSvmScheme(signer, { rpcUrl: w.rpcUrl }))(url);
    t.is(res.status, 200, JSON.stringify(res.body));
    t.deepEqual(res.body, { via: name });
    t.like(decodeBase64Json(res.paymentResponse), { success: true, payer: kp.publicKey.toBase58() });
    t.is(await usdcOf(w, treasury), PRICE);
  });

  test.serial(
    `(j) ${name}: the stock scheme is refused on a fee-on link with fee_leg_missing naming the fix; svc-gateway/x402 registered with no facilitatorUrl pays both legs`,
    async (t) => {
      const w = t.context.fee;
      const { treasury, url } = await sellerLink(t, w, { response: { body: { via: name } } });
      const kp = await buyer(w);
      const buyerAddress = kp.publicKey.toBase58();
      const feeAuthority = w.app.services.settings.fee.authorities['chain-devnet'];
      const fee = feeFor(PRICE, 100);
      const signer = await createKeyPairSignerFromBytes(kp.secretKey);
      const buyerBefore = await usdcOf(w, buyerAddress);
      const feeBefore = await usdcOf(w, feeAuthority);

      const stock = await payer(new ExactSvmScheme(signer, { rpcUrl: w.rpcUrl }))(url);
      t.is(stock.status, 402);
      t.is(stock.body.error, 'fee_leg_missing');
      t.regex(stock.body.message, /ExactSvmFeeScheme/);
      t.regex(stock.body.message, /extra\.splits/);
      t.is(await usdcOf(w, buyerAddress), buyerBefore, 'the refused payment moved nothing');

      // No facilitatorUrl, no SVC_FACILITATOR_URL: the scheme reads the facilitator from the offer (extra["svc.facilitator"]).
      const paid = await payer(new ExactSvmFeeScheme(signer, { rpcUrl: w.rpcUrl }))(url);
      t.is(paid.status, 200, JSON.stringify(paid.body));
      t.deepEqual(paid.body, { via: name });
      const settled = decodeBase64Json(paid.paymentResponse);
      t.like(settled, { success: true, payer: buyerAddress });
      t.is(settled.extensions?.facilitatorFees?.info?.facilitatorFeePaid?.facilitatorFeePaid, fee.toString());
      t.is(await usdcOf(w, treasury), PRICE, 'seller leg');
      t.is((await usdcOf(w, feeAuthority)) - feeBefore, fee, 'fee leg');
      t.is(buyerBefore - (await usdcOf(w, buyerAddress)), PRICE + fee, 'the buyer paid the gross');
    },
  );
}

test('(k) x402-solana 2.0.4 refuses before paying: it derives the payTo token account without allowing an off-curve owner, and every treasury is a PDA (its defect; docs list it)', async (t) => {
  const w = t.context.free;
  const { treasury, url } = await sellerLink(t, w);
  const kp = await buyer(w);
  const before = await usdcOf(w, kp.publicKey.toBase58());
  const client = createX402SolanaClient({
    wallet: {
      address: kp.publicKey.toBase58(),
      signTransaction: async (tx: VersionedTransaction) => {
        tx.sign([kp]);
        return tx;
      },
    },
    network: 'solana-devnet',
    rpcUrl: w.rpcUrl,
  });
  const err = await t.throwsAsync(client.fetch(url));
  t.is(err?.name, 'TokenOwnerOffCurveError', err?.message);
  t.is(await usdcOf(w, kp.publicKey.toBase58()), before, 'nothing signed, nothing moved');
  t.is(await usdcOf(w, treasury), 0n);
});

/**
 * @faremeter/fetch 0.22's `wrap` with @faremeter/payment-solana's exact handler and a @faremeter/wallet-solana wallet,
 * on its default retries; `sent` the payment headers it sent. It speaks x402 v2 when the 402 carries PAYMENT-REQUIRED
 * and reads the v1 offer in the body otherwise: `version: 1` drops that header from the unpaid 402 (as a proxy that
 * forwards only standard headers would), so the body's v1 offer is what it pays.
 */
async function faremeterPayer(w: World, kp: Keypair, version: 1 | 2, options: { ours?: boolean } = {}) {
  // faremeter's packages are loaded where they are used: their loggers are module-level `await`s, and a test file that
  // imported them statically would declare its tests a tick after the shared teardown's hook (test/support/teardown.ts)
  const [{ wrap }, { exact }, { createLocalWallet }] = await Promise.all([
    import('@faremeter/fetch'),
    import('@faremeter/payment-solana'),
    import('@faremeter/wallet-solana'),
  ]);
  const wallet = await createLocalWallet('devnet', kp.secretKey);
  const sent: string[] = [];
  const unpaid: typeof fetch = async (input, init) => {
    const res = await fetch(input, init);
    if (version === 2) return res;
    const headers = new Headers(res.headers);
    headers.delete('PAYMENT-REQUIRED');
    return new Response(res.body, { status: res.status, headers });
  };
  const paying: typeof fetch = (input, init) => {
    const headers = new Headers(init?.headers);
    const payment = headers.get('PAYMENT-SIGNATURE') ?? headers.get('X-PAYMENT');
    if (payment) sent.push(payment);
    return fetch(input, init);
  };
  const handler = options.ours
    ? createSvcFeePaymentHandler({ signer: kp, rpcUrl: w.rpcUrl, networks: ['chain-devnet'] })
    : exact.createPaymentHandler(wallet, address(USDC.mint), w.rpcUrl);
  return { pay: wrap(paying, { phase1Fetch: unpaid, handlers: [handler] }), sent };
}

for (const version of [2, 1] as const) {
  const responseHeader = version === 2 ? 'PAYMENT-RESPONSE' : 'X-PAYMENT-RESPONSE';

  test(`(l) @faremeter/fetch 0.22 + payment-solana exact + wallet-solana pays a fee-off link over x402 v${version}: charged once, one paid call, the receipt written`, async (t) => {
    const w = t.context.free;
    const via = `@faremeter/fetch x402 v${version}`;
    const { agent, link, treasury, url } = await sellerLink(t, w, { response: { body: { via } } });
    const kp = await buyer(w);
    const payer = kp.publicKey.toBase58();
    const before = await usdcOf(w, payer);

    const { pay, sent } = await faremeterPayer(w, kp, version);
    const res = await pay(url);
    const text = await res.text();
    t.is(res.status, 200, text);
    t.deepEqual(JSON.parse(text), { via });
    t.is(sent.length, 1, 'one payment sent: its retries were never needed');
    const payment = decodeBase64Json(sent[0]!);
    if (version === 2) t.like(payment, { x402Version: 2, accepted: { scheme: 'exact', network: CAIP2['chain-devnet'], amount: PRICE.toString() } });
    else t.like(payment, { x402Version: 1, scheme: 'exact', network: X402_V1_NETWORK['chain-devnet'] });
    const settled = decodeBase64Json(res.headers.get(responseHeader));
    t.like(settled, { success: true, payer });

    t.is(await usdcOf(w, treasury), PRICE, 'the seller leg');
    t.is(await usdcOf(w, payer), before - PRICE, 'the buyer charged once, the price');
    t.deepEqual(await paidCallsOf(w, link.id), [{ status: 'done', signature: settled.transaction }], 'one paid call');
    const receipts = await receiptsOf(w, agent);
    t.is(receipts.length, 1, 'one receipt');
    t.like(receipts[0], { kind: 'earn', decision: 'allow', tx_sig: settled.transaction, response: { status: 200 } });
  });

  test(`(m) @faremeter/fetch 0.22 on a fee-on link over x402 v${version}: its exact handler ignores extra.splits, so every attempt is refused with fee_leg_missing naming the fix, and it throws "failed to complete payment after retries"; nothing moves`, async (t) => {
    const w = t.context.fee;
    const { agent, link, treasury, url } = await sellerLink(t, w);
    const kp = await buyer(w);
    const payer = kp.publicKey.toBase58();
    const before = await usdcOf(w, payer);

    const { pay, sent } = await faremeterPayer(w, kp, version);
    const err = await t.throwsAsync(pay(url), { message: 'failed to complete payment after retries' });
    // Its WrappedFetchError keeps the last answer: our 402, the reason and the fix in the envelope.
    const last = (err as (Error & { response?: Response }) | undefined)?.response;
    t.is(last?.status, 402);
    const refusal = (await last!.json()) as { x402Version: number; error: string; message: string };
    t.is(refusal.error, 'fee_leg_missing');
    t.regex(refusal.message, /extra\.splits/);
    t.regex(refusal.message, /svc-gateway\/client\/pay/);
    if (version === 2) t.is(decodeBase64Json(last!.headers.get('PAYMENT-REQUIRED'))?.error, 'fee_leg_missing');
    t.is(sent.length, 3, 'its default: three attempts, each a fresh transaction, each refused');

    t.is(await usdcOf(w, payer), before, 'nothing moved');
    t.is(await usdcOf(w, treasury), 0n);
    t.deepEqual(await paidCallsOf(w, link.id), [], 'no paid call kept');
    t.deepEqual(await receiptsOf(w, agent), []);
  });
  test(`(o) @faremeter/fetch 0.22 with svc-gateway/x402's handler pays a fee-on link over x402 v${version}: both legs in one transaction, charged once`, async (t) => {
    const w = t.context.fee;
    const { agent, link, treasury, url } = await sellerLink(t, w, { response: { body: { via: 'faremeter + svc handler' } } });
    const kp = await buyer(w);
    const payer = kp.publicKey.toBase58();
    const before = await usdcOf(w, payer);
    const feeAuthority = w.app.services.settings.fee.authorities['chain-devnet']!;
    const fee = feeFor(PRICE, 100);

    const { pay, sent } = await faremeterPayer(w, kp, version, { ours: true });
    const res = await pay(url);
    const text = await res.text();
    t.is(res.status, 200, text);
    t.is(sent.length, 1, 'one payment sent');
    const settled = decodeBase64Json(res.headers.get(responseHeader));
    t.like(settled, { success: true, payer });
    t.is(await usdcOf(w, treasury), PRICE, 'the seller leg');
    t.is(await usdcOf(w, payer), before - PRICE - fee, 'the buyer charged once: price and fee');
    // the fee leg, in the transaction PAYMENT-RESPONSE names (other tests of this app pay the same fee authority)
    const ledger = w.app.services.ledgers['chain-devnet']!;
    await waitForCommitment(ledger, settled.transaction);
    const tx = await ledger.getTransaction(settled.transaction);
    const feeAccount = ataOf(feeAuthority, USDC.mint, USDC.tokenProgramId);
    const balance = (list: { account: string; amount: bigint }[] | undefined) => list?.find((b) => b.account === feeAccount)?.amount ?? 0n;
    t.is(balance(tx?.postTokenBalances) - balance(tx?.preTokenBalances), fee, 'the fee leg');
    t.deepEqual(await paidCallsOf(w, link.id), [{ status: 'done', signature: settled.transaction }]);
    t.is((await receiptsOf(w, agent)).length, 1);
  });
}
/** The published keys, read as any verifier would: GET /.well-known/jwks.json, nothing else. */
async function publishedKeys(w: World) {
  const res = await fetch(`${w.app.url}/.well-known/jwks.json`);
  const jwks = (await res.json()) as JSONWebKeySet;
  return { jwks, verify: (jws: string) => compactVerify(jws, createLocalJWKSet(jwks)) };
}

const payloadOf = async (verified: Promise<{ payload: Uint8Array }>) => JSON.parse(new TextDecoder().decode((await verified).payload)) as Record<string, any>;

// x402 offer-receipt (extension-offer-and-receipt.md, JWS) and payment-identifier (payment_identifier.md), with the
// official @x402/fetch client, the fee scheme and the @x402/extensions helpers; verified with jose from the JWKS alone.
test.serial(
  '(n) signed offers and receipts verify from the published JWKS; a payment id answers its stored response and refuses another payment; a rotation keeps old receipts verifiable',
  async (t) => {
    const w = t.context.fee;
    const { link, treasury, url } = await sellerLink(t, w, { response: { body: { forecast: 'mist' } } });
    const payer = await buyer(w);
    const buyerAddress = payer.publicKey.toBase58();
    const fee = feeFor(PRICE, 100);
    const keys = await publishedKeys(w);
    t.is(keys.jwks.keys.length, 1);
    t.like(keys.jwks.keys[0], { kty: 'OKP', crv: 'Ed25519', alg: 'EdDSA', use: 'sig' });
    t.false('d' in keys.jwks.keys[0]!, 'no private half published');

    // The 402: every accept's offer signed; payment-identifier declared, optional.
    const unpaid = await fetch(url);
    t.is(unpaid.status, 402);
    const required = decodeBase64Json(unpaid.headers.get('PAYMENT-REQUIRED'));
    t.deepEqual(required.extensions[PAYMENT_IDENTIFIER].info, { required: false });
    const offers = extractOffersFromPaymentRequired(required);
    t.is(offers.length, required.accepts.length);
    const [decoded] = decodeSignedOffers(offers);
    t.is(findAcceptsObjectFromSignedOffer(decoded!, required.accepts), required.accepts[0], 'the reference client matches the offer to its accept');
    const offer = await payloadOf(keys.verify(offers[0]!.signature));
    t.like(offer, {
      version: 1,
      resourceUrl: required.resource.url,
      scheme: 'exact',
      network: CAIP2['chain-devnet'],
      asset: USDC.mint,
      payTo: treasury,
      amount: PRICE.toString(),
    });
    t.true(offer.validUntil > Date.now() / 1000 + 60, 'the offer outlives maxTimeoutSeconds');

    // Paid with a payment id by the official client (its documented way: the id appended before the payload is made).
    const id = generatePaymentId();
    const signer = await createKeyPairSignerFromBytes(payer.secretKey);
    const client = new x402Client().register('solana:*', new ExactSvmFeeScheme(signer, { rpcUrl: w.rpcUrl }));
    client.onBeforePaymentCreation(async ({ paymentRequired }) => {
      paymentRequired.extensions ??= {};
      appendPaymentIdentifierToExtensions(paymentRequired.extensions, id);
    });
    const sent: string[] = [];
    const recording: typeof fetch = async (input, init) => {
      const header = new Headers(init?.headers ?? (input instanceof Request ? input.headers : undefined)).get('PAYMENT-SIGNATURE');
      if (header) sent.push(header);
      return fetch(input, init);
    };
    const buyerBefore = await usdcOf(w, buyerAddress);
    const res = await wrapFetchWithPayment(recording, client)(url);
    const text = await res.text();
    t.is(res.status, 200, text);
    t.is(sent.length, 1);
    t.is(decodeBase64Json(sent[0]!).extensions[PAYMENT_IDENTIFIER].info.id, id);
    const settled = decodePaymentResponseHeader(res.headers.get('PAYMENT-RESPONSE')!);

    // The signed receipt: verified from the JWKS alone; it names the transaction, amount, fee and the earn receipt's hash.
    const receipt = extractReceiptFromResponse(res) as JWSSignedReceipt | undefined;
    t.is(receipt?.format, 'jws');
    const claims = await payloadOf(keys.verify(receipt!.signature));
    const earn = await http(w.app, 'GET', `/v1/receipts/${(link as unknown as { owner_agent: string }).owner_agent}?limit=1`, { key: w.key });
    const earned = earn.body.data[0];
    t.like(claims, {
      version: 1,
      network: CAIP2['chain-devnet'],
      resourceUrl: required.resource.url,
      payer: buyerAddress,
      transaction: settled.transaction,
      amount: PRICE.toString(),
      fee: fee.toString(),
      asset: USDC.mint,
      payTo: treasury,
      agent: (link as unknown as { owner_agent: string }).owner_agent,
      receiptHash: earned.receipt_hash,
      receiptNonce: earned.nonce,
    });
    t.is(earned.tx_sig, settled.transaction, 'the hash chain, the ledger and the answer: one signed object');
    t.is(decodeProtectedHeader(receipt!.signature).kid, keys.jwks.keys[0]!.kid);

    // The same id with the same payment: the stored response, no second charge.
    const again = await fetch(url, { headers: { 'PAYMENT-SIGNATURE': sent[0]! } });
    t.is(again.status, 200);
    t.is(await again.text(), text);
    t.is(again.headers.get('x-svc-replayed'), 'true');
    t.is(again.headers.get('PAYMENT-RESPONSE'), res.headers.get('PAYMENT-RESPONSE'), 'the same signed receipt');
    // The same id with another payment: refused before anything settles.
    const other = await client.createPaymentPayload(required);
    t.not(other.payload.transaction, decodeBase64Json(sent[0]!).payload.transaction, 'another transaction');
    t.is(other.extensions?.[PAYMENT_IDENTIFIER] && (other.extensions[PAYMENT_IDENTIFIER] as any).info.id, id);
    const conflict = await fetch(url, { headers: { 'PAYMENT-SIGNATURE': Buffer.from(JSON.stringify(other)).toString('base64') } });
    t.is(conflict.status, 409);
    const envelope = (await conflict.json()) as any;
    t.like(envelope, { error: 'payment_id_conflict', details: { payment_id: id } });
    t.is(typeof envelope.request_id, 'string');
    t.is(buyerBefore - (await usdcOf(w, buyerAddress)), PRICE + fee, 'charged once');

    // Rotation: a new key signs; the old one stays published, and the receipt it signed still verifies from the JWKS alone.
    const kid = await w.app.services.signer!.rotate(new Date());
    const rotated = await publishedKeys(w);
    t.deepEqual(rotated.jwks.keys.map((k) => k.kid).sort(), [keys.jwks.keys[0]!.kid, kid].sort());
    t.like(await payloadOf(rotated.verify(receipt!.signature)), { receiptHash: earned.receipt_hash });
    const fresh = await sellerLink(t, w);
    const next = extractOffersFromPaymentRequired(decodeBase64Json((await fetch(fresh.url)).headers.get('PAYMENT-REQUIRED')));
    t.is(decodeProtectedHeader(next[0]!.signature).kid, kid, 'the new key signs');
    t.like(await payloadOf(rotated.verify(next[0]!.signature)), { payTo: fresh.treasury });
    t.is(OFFER_RECEIPT, 'offer-receipt');
  },
);

test("a payment id a retry of the same payment bound again is not freed by the earlier attempt's refusal (one id never pays twice)", async (t) => {
  const { store } = t.context.fee.app.database;
  const [link] = (await t.context.fee.app.database.orm.em.fork().execute(`select pk from payment_links where network = 'chain-devnet' limit 1`)) as {
    pk: string;
  }[];
  const at = new Date();
  const base = {
    network: 'chain-devnet' as const,
    linkPk: link!.pk,
    paymentId: `pay_${at.getTime()}_race`,
    at,
    expiresAt: new Date(at.getTime() + 86_400_000),
  };
  // request A binds the id to payment T; a retry B of T binds it again before A, refused, releases it
  const a = await store.paymentIds.bind({ ...base, paymentKey: 'T' });
  const b = await store.paymentIds.bind({ ...base, paymentKey: 'T' });
  t.is(a.paymentKey, 'T');
  t.is(b.paymentKey, 'T');
  t.truthy(a.generation);
  t.truthy(b.generation);
  t.not(a.generation, b.generation, 'each binding of the same payment is its own generation');
  await store.paymentIds.unbind({ ...base, paymentKey: 'T', generation: a.generation! });
  // B goes on paying T: the id stays T's, so another payment with it is refused
  t.like(await store.paymentIds.bind({ ...base, paymentKey: 'T2' }), { paymentKey: 'T', generation: null });
  // B's own release (its attempt refused too) frees it for the buyer's next payment
  await store.paymentIds.unbind({ ...base, paymentKey: 'T', generation: b.generation! });
  t.is((await store.paymentIds.bind({ ...base, paymentKey: 'T2' })).paymentKey, 'T2');
});
