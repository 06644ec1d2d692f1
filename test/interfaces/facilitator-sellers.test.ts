import anyTest, { type TestFn } from 'ava';
import { createRequire } from 'node:module';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Keypair } from '@solana/web3.js';
import { address, createKeyPairSignerFromBytes } from '@solana/kit';
import { HTTPFacilitatorClient } from '@x402/core/server';
import { paymentMiddleware, x402ResourceServer } from '@x402/express';
import { decodePaymentResponseHeader, wrapFetchWithPayment, x402Client } from '@x402/fetch';
import { ExactSvmScheme } from '@x402/svm/exact/client';
import { ExactSvmScheme as ExactSvmServerScheme } from '@x402/svm/exact/server';
import Fastify from 'fastify';
import { ataOf } from '../../domain/facilitator/ata.ts';
import { feePayerFromSecretKey } from '../../domain/facilitator/ed25519.ts';
import { FacilitatorService } from '../../domain/facilitator/service.ts';
import { MikroOrmFacilitatorStore } from '../../adapters/store/repositories/facilitator.ts';
import { systemClock } from '../../adapters/clock/system.ts';
import { registerFacilitatorRoutes } from '../../interfaces/facilitator/routes.ts';
import { faultyLedger } from '../support/faulty-ledger.ts';
import { CAIP2, findStable, X402_V1_NETWORK } from '../../domain/shared/network.ts';
import { http, issueKey, startTestApp, type TestApp } from '../support/app.ts';
import { afterAll } from '../support/teardown.ts';

// A facilitator any x402 seller can use (fee-facilitator-mpp-tools §4.1, DECISIONS "Facilitator"): sellers built
// from stock npm middleware — @x402/express 2.27 and @faremeter/middleware 0.22 — point at the gateway's
// /facilitator, unmodified, and stock buyers (@x402/fetch + @x402/svm, @faremeter/fetch + payment-solana) pay them on
// the embedded devnet. The gateway runs with its default protocol fee: a seller's offer that names no fee terms
// settles as plain x402, one leg (§2.1). Sellers listen on port 0 on 127.0.0.1.

// No @types/express here: the two calls these sellers need, typed locally.
type Handler = (req: IncomingMessage, res: ServerResponse, next: (err?: unknown) => void) => unknown;
interface ExpressApp {
  use(handler: Handler): void;
  get(path: string, handler: (req: unknown, res: { json(body: unknown): void }) => void): void;
  listen(port: number, host: string, ready: () => void): Server;
}
const express = createRequire(import.meta.url)('express') as () => ExpressApp;

interface Context {
  app: TestApp;
  facilitatorUrl: string;
  rpcUrl: string;
  servers: Server[];
}
const test = anyTest as TestFn<Context>;
const USDC = findStable('chain-devnet', 'USDC')!;
const NETWORK = CAIP2['chain-devnet'] as `solana:${string}`;
const PRICE = 10_000n; // $0.01

test.before(async (t) => {
  const app = await startTestApp();
  const rpcUrl = app.ledgers.rpcUrls['chain-devnet'];
  if (!rpcUrl) throw new Error('the test app runs no devnet JSON-RPC server');
  t.context = { app, facilitatorUrl: `${app.url}/facilitator`, rpcUrl, servers: [] };
});

async function listen(t: { context: Context }, app: ExpressApp): Promise<string> {
  const server = await new Promise<Server>((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s));
  });
  t.context.servers.push(server);
  afterAll(() => new Promise((resolve) => server.close(resolve))); // the sellers stop before the app they settle through
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** A wallet holding `usdc` on the embedded devnet (its token account created by the faucet), and no SOL. */
async function funded(t: { context: Context }, usdc = '1'): Promise<Keypair> {
  const kp = Keypair.generate();
  await t.context.app.services.dev.fund('chain-devnet', { address: kp.publicKey.toBase58(), token: 'USDC', amount: usdc });
  return kp;
}

async function usdcOf(t: { context: Context }, owner: string): Promise<bigint> {
  const balances = await t.context.app.services.ledgers['chain-devnet']!.getTokenBalances(owner, { mint: USDC.mint });
  return balances.reduce((sum, b) => sum + b.amount, 0n);
}

const decodeBase64Json = (value: string | null): any => (value ? JSON.parse(Buffer.from(value, 'base64').toString('utf8')) : null);

/** An @x402/express seller: x402ResourceServer on the gateway's facilitator through the official HTTPFacilitatorClient. */
async function x402Seller(t: { context: Context }, payTo: string, facilitatorUrl = t.context.facilitatorUrl): Promise<string> {
  const resourceServer = new x402ResourceServer(new HTTPFacilitatorClient({ url: facilitatorUrl })).register(NETWORK, new ExactSvmServerScheme());
  const app = express();
  const routes = {
    'GET /weather': {
      accepts: { scheme: 'exact', network: NETWORK, payTo, price: { amount: PRICE.toString(), asset: USDC.mint }, maxTimeoutSeconds: 60 },
      description: 'the weather',
      mimeType: 'application/json',
    },
  };
  app.use(paymentMiddleware(routes, resourceServer) as Handler);
  app.get('/weather', (_req, res) => res.json({ forecast: 'sunny', via: '@x402/express' }));
  return `${await listen(t, app)}/weather`;
}

/** An @x402/fetch + @x402/svm buyer (the scheme's own rpcUrl: the embedded devnet's JSON-RPC). */
async function x402Buyer(t: { context: Context }, kp: Keypair): Promise<typeof fetch> {
  const signer = await createKeyPairSignerFromBytes(kp.secretKey);
  return wrapFetchWithPayment(fetch, new x402Client().register('solana:*', new ExactSvmScheme(signer, { rpcUrl: t.context.rpcUrl })));
}

/**
 * An @faremeter/middleware seller on the gateway's facilitator (`facilitatorURL`): x402 v1 and v2, or with `v1Only`
 * the middleware's default (v1 to the buyer; the middleware speaks v2 to the facilitator either way).
 */
async function faremeterSeller(t: { context: Context }, payTo: string, options: { v1Only?: boolean } = {}): Promise<string> {
  const app = express();
  const accepts = [
    {
      scheme: 'exact',
      network: X402_V1_NETWORK['chain-devnet'],
      maxAmountRequired: PRICE.toString(),
      asset: USDC.mint,
      payTo,
      resource: 'http://127.0.0.1/forecast',
      description: 'the forecast',
      mimeType: 'application/json',
    },
  ];
  const versions = options.v1Only ? {} : { supportedVersions: { x402v1: true, x402v2: true } };
  // faremeter's packages are loaded where they are used: their loggers are module-level `await`s, and a test file that
  // imported them statically would declare its tests a tick after the shared teardown's hook (test/support/teardown.ts)
  const { createMiddleware: faremeterMiddleware } = await import('@faremeter/middleware/express');
  const middleware = await faremeterMiddleware({ facilitatorURL: t.context.facilitatorUrl, accepts, ...versions });
  app.use(middleware as Handler);
  app.get('/forecast', (_req, res) => res.json({ forecast: 'rain', via: '@faremeter/middleware' }));
  return `${await listen(t, app)}/forecast`;
}

/** An @faremeter/fetch buyer: payment-solana's exact handler with a local wallet on devnet. */
async function faremeterBuyer(t: { context: Context }, kp: Keypair): Promise<typeof fetch> {
  const [{ wrap: faremeterFetch }, { exact: faremeterExact }, { createLocalWallet }] = await Promise.all([
    import('@faremeter/fetch'),
    import('@faremeter/payment-solana'),
    import('@faremeter/wallet-solana'),
  ]); // loaded here for the reason given in faremeterSeller
  const wallet = await createLocalWallet('devnet', kp.secretKey);
  return faremeterFetch(fetch, { handlers: [faremeterExact.createPaymentHandler(wallet, address(USDC.mint), t.context.rpcUrl)] }) as typeof fetch;
}

test('an @x402/express seller on the gateway facilitator is paid by @x402/fetch + @x402/svm; /supported carries the fee terms', async (t) => {
  const supported = await http(t.context.app, 'GET', '/facilitator/supported');
  t.is(supported.status, 200);
  const feeAuthority = t.context.app.services.settings.fee.authorities['chain-devnet'];
  t.deepEqual(supported.body.extensions, ['svc.fee']);
  const kind = supported.body.kinds.find((k: any) => k.x402Version === 2 && k.network === NETWORK);
  t.deepEqual(kind?.extra?.['svc.fee'], { v: '1', bps: 100, feeAuthority });
  // what settling may cost the fee payer, as verify enforces it (DECISIONS "Facilitator")
  t.like(supported.body.costs, {
    computeUnitLimitMax: 400_000,
    computeUnitPriceMaxMicroLamports: 5_000_000,
    priorityFeeMaxLamports: '2000000',
    rent: {
      sponsorsTokenAccounts: true,
      perOwnerAndMint: 1,
      dailyBudgetLamports: t.context.app.config.facilitator.rentBudgetLamports.toString(),
      tokenAccountLamports: { [USDC.tokenProgramId]: '2039280' },
    },
  });

  const seller = await funded(t, '0.01'); // its token account exists
  const payTo = seller.publicKey.toBase58();
  const url = await x402Seller(t, payTo);
  const unpaid = await fetch(url);
  t.is(unpaid.status, 402);
  const offer = decodeBase64Json(unpaid.headers.get('PAYMENT-REQUIRED')).accepts[0];
  t.like(offer, {
    scheme: 'exact',
    network: NETWORK,
    amount: PRICE.toString(),
    asset: USDC.mint,
    payTo,
    extra: { feePayer: t.context.app.services.facilitator!.feePayer },
  });
  t.false('svc.fee' in offer.extra, 'the seller named no fee terms: a plain offer');

  const buyer = await funded(t);
  const [sellerBefore, buyerBefore] = [await usdcOf(t, payTo), await usdcOf(t, buyer.publicKey.toBase58())];
  const res = await (await x402Buyer(t, buyer))(url);
  const text = await res.text();
  t.is(res.status, 200, text);
  t.deepEqual(JSON.parse(text), { forecast: 'sunny', via: '@x402/express' });
  const settled = decodePaymentResponseHeader(res.headers.get('PAYMENT-RESPONSE')!);
  t.like(settled, { success: true, network: NETWORK, payer: buyer.publicKey.toBase58() });
  t.is((await usdcOf(t, payTo)) - sellerBefore, PRICE);
  t.is(buyerBefore - (await usdcOf(t, buyer.publicKey.toBase58())), PRICE, 'one leg: no fee on an offer without fee terms');
});

test('an @faremeter/middleware seller on the gateway facilitator (/accepts, then /settle without a top-level x402Version) is paid by @faremeter/fetch', async (t) => {
  const seller = await funded(t, '0.01');
  const payTo = seller.publicKey.toBase58();
  const url = await faremeterSeller(t, payTo);

  const unpaid = await fetch(url);
  t.is(unpaid.status, 402);
  const offer = decodeBase64Json(unpaid.headers.get('PAYMENT-REQUIRED')).accepts[0];
  // completed by the gateway's POST /accepts: what a buyer builds the transaction from
  t.like(offer, {
    scheme: 'exact',
    network: NETWORK,
    amount: PRICE.toString(),
    asset: USDC.mint,
    payTo,
    maxTimeoutSeconds: 60,
    extra: { feePayer: t.context.app.services.facilitator!.feePayer, decimals: USDC.decimals, tokenProgram: USDC.tokenProgramId },
  });
  t.is(typeof offer.extra.recentBlockhash, 'string');

  const buyer = await funded(t);
  const [sellerBefore, buyerBefore] = [await usdcOf(t, payTo), await usdcOf(t, buyer.publicKey.toBase58())];
  const res = await (await faremeterBuyer(t, buyer))(url);
  const text = await res.text();
  t.is(res.status, 200, text);
  t.deepEqual(JSON.parse(text), { forecast: 'rain', via: '@faremeter/middleware' });
  const settled = decodeBase64Json(res.headers.get('PAYMENT-RESPONSE'));
  t.like(settled, { success: true, network: NETWORK, payer: buyer.publicKey.toBase58() }, 'paid over x402 v2');
  t.is((await usdcOf(t, payTo)) - sellerBefore, PRICE);
  t.is(buyerBefore - (await usdcOf(t, buyer.publicKey.toBase58())), PRICE);
});

test('a fresh seller with no token account yet: the settlement creates it at the facilitator’s expense, for either middleware', async (t) => {
  const ledger = t.context.app.services.ledgers['chain-devnet']!;
  const sellers = [
    { seller: x402Seller, buyerFetch: x402Buyer, response: 'PAYMENT-RESPONSE' },
    // the middleware's defaults: x402 v1 to the buyer
    {
      seller: (c: { context: Context }, payTo: string) => faremeterSeller(c, payTo, { v1Only: true }),
      buyerFetch: faremeterBuyer,
      response: 'X-PAYMENT-RESPONSE',
    },
  ];
  for (const { seller, buyerFetch, response } of sellers) {
    const payTo = Keypair.generate().publicKey.toBase58();
    t.is(await ledger.getAccount(ataOf(payTo, USDC.mint, USDC.tokenProgramId)), null, 'no token account before the first payment');
    const url = await seller(t, payTo);
    const buyer = await funded(t);
    const res = await (await buyerFetch(t, buyer))(url);
    t.is(res.status, 200, await res.text());
    t.like(decodeBase64Json(res.headers.get(response)), { success: true });
    t.is(await usdcOf(t, payTo), PRICE, 'the token account was created and credited with the price');
  }
});

test('the wire: a v2 body without x402Version verifies; a top-level version the payload contradicts is a 400; /accepts leaves out what it cannot settle', async (t) => {
  const { app } = t.context;
  const payTo = Keypair.generate().publicKey.toBase58();
  const accept = { scheme: 'exact', network: NETWORK, amount: '1000', asset: USDC.mint, payTo, maxTimeoutSeconds: 60, extra: {} };
  const body = { paymentPayload: { x402Version: 2, accepted: accept, payload: { transaction: 'AAAA' } }, paymentRequirements: accept };
  const verified = await http(app, 'POST', '/facilitator/verify', { body });
  t.is(verified.status, 200, JSON.stringify(verified.body));
  t.like(verified.body, { isValid: false, invalidReason: 'invalid_transaction' }, 'parsed as v2: only the transaction is wrong');

  const contradicted = await http(app, 'POST', '/facilitator/settle', { body: { x402Version: 1, ...body } });
  t.is(contradicted.status, 400);
  t.is(contradicted.body.error, 'invalid_request');
  const none = await http(app, 'POST', '/facilitator/verify', { body: { paymentPayload: { payload: {} }, paymentRequirements: accept } });
  t.is(none.status, 400);
  t.regex(none.body.message, /paymentPayload\.x402Version/);

  const completed = await http(app, 'POST', '/facilitator/accepts', {
    body: {
      x402Version: 2,
      resource: { url: 'https://seller.example/r' },
      accepts: [
        { scheme: 'exact', network: NETWORK, amount: '1000', asset: USDC.mint, payTo, maxTimeoutSeconds: 0, extra: { memo: 'order-7' } },
        { scheme: 'exact', network: 'eip155:8453', amount: '1000', asset: USDC.mint, payTo },
        { scheme: 'exact', network: NETWORK, amount: '1000', asset: USDC.mint, payTo, extra: { 'svc.fee': { v: '1', bps: 5, feeAuthority: payTo } } },
      ],
    },
  });
  t.is(completed.status, 200, JSON.stringify(completed.body));
  t.like(completed.body, { x402Version: 2, resource: { url: 'https://seller.example/r' } });
  t.is(completed.body.accepts.length, 1);
  t.like(completed.body.accepts[0], {
    maxTimeoutSeconds: 60,
    extra: { memo: 'order-7', feePayer: app.services.facilitator!.feePayer, decimals: USDC.decimals },
  });
  t.regex(completed.body.error, /accepts\[1\]: network eip155:8453 is not served/);
  t.regex(completed.body.error, /accepts\[2\]: the offer's fee terms/);
  const refused = await http(app, 'POST', '/facilitator/accepts', { body: { x402Version: 2, accepts: [{ scheme: 'exact' }] } });
  t.is(refused.status, 400);
  t.is(refused.body.error, 'invalid_request');
});

// x402 settlement_pending (@x402/core 2.27): a facilitator instance whose ledger confirms late — the gateway's own
// facilitator service on the gateway's database, over a fault-injecting ledger that shows nothing until that instance
// has answered once — answers the seller's settle `settlement_pending` with the signature; @x402/express retries once
// and the retry reconciles the broadcast transaction. The buyer is charged once, and the gateway's own /facilitator
// (another instance on the same database) answers GET /status for the payment.
test('an @x402/express seller on a facilitator whose ledger confirms late gets settlement_pending, and its one retry settles once', async (t) => {
  const { app } = t.context;
  const ledger = app.services.ledgers['chain-devnet']!;
  let late = true;
  const slow = faultyLedger(ledger, {
    getSignatureStatuses: async (signatures) => (late ? signatures.map(() => null) : ledger.getSignatureStatuses(signatures)),
    waitForSignature: async (...args) => (late ? null : ledger.waitForSignature(...args)),
  });
  const signer = feePayerFromSecretKey(Keypair.generate().secretKey);
  await app.services.dev.fund('chain-devnet', { address: signer.address, sol: '1' });
  const service = new FacilitatorService({
    ledgers: { 'chain-devnet': slow },
    store: new MikroOrmFacilitatorStore(app.database.orm, app.database.owner),
    signer,
    clock: systemClock,
    settings: { networks: ['chain-devnet'], fee: app.services.settings.fee, rentBudgetLamports: 1_000_000_000n, confirmTimeoutMs: 200, confirmPollMs: 20 },
  });
  const answers: { reason: string; transaction: string }[] = [];
  const fastify = Fastify();
  fastify.addHook('onSend', async (req, _reply, payload) => {
    if (req.url !== '/settle' || typeof payload !== 'string') return payload;
    const body = JSON.parse(payload) as { success: boolean; errorReason?: string; transaction: string };
    answers.push({ reason: body.success ? 'success' : (body.errorReason ?? ''), transaction: body.transaction });
    late = false; // the confirmation arrives after the first answer: the retry finds it
    return payload;
  });
  registerFacilitatorRoutes(fastify, { facilitator: service, prefix: '' });
  await fastify.listen({ port: 0, host: '127.0.0.1' });
  afterAll(() => fastify.close());
  const url = await x402Seller(t, (await funded(t, '0.01')).publicKey.toBase58(), `http://127.0.0.1:${(fastify.server.address() as AddressInfo).port}`);

  const buyer = await funded(t);
  const before = await usdcOf(t, buyer.publicKey.toBase58());
  const res = await (await x402Buyer(t, buyer))(url);
  t.is(res.status, 200, await res.text());
  const settled = decodePaymentResponseHeader(res.headers.get('PAYMENT-RESPONSE')!);
  t.like(settled, { success: true, network: NETWORK, payer: buyer.publicKey.toBase58() });
  t.deepEqual(
    answers.map((a) => a.reason),
    ['settlement_pending', 'success'],
  );
  t.true(
    answers.every((a) => a.transaction === settled.transaction),
    'the pending answer carries the signature the retry settles',
  );
  t.is(before - (await usdcOf(t, buyer.publicKey.toBase58())), PRICE, 'charged once');

  const status = await http(app, 'GET', `/facilitator/status?transaction=${settled.transaction}`);
  t.is(status.status, 200);
  t.like(status.body, { status: 'settled', transaction: settled.transaction, network: NETWORK, payer: buyer.publicKey.toBase58() });
  const byHash = await http(app, 'GET', `/facilitator/status?messageHash=${encodeURIComponent(status.body.messageHash)}`);
  t.like(byHash.body, { status: 'settled', transaction: settled.transaction });
  const bad = await http(app, 'GET', '/facilitator/status?paymentId=short');
  t.is(bad.status, 400);
  t.is(bad.body.error, 'invalid_request');

  // the settlement counts in the network's latency figures (GET /v1/metrics/settlement)
  const metrics = await http(app, 'GET', '/v1/metrics/settlement', { key: await issueKey(app) });
  t.is(metrics.status, 200, JSON.stringify(metrics.body));
  t.like(metrics.body, { network: 'chain-devnet', sample_limit: 1000 });
  t.true(metrics.body.settlements >= 1);
  t.true(metrics.body.p50_ms >= 0 && metrics.body.p50_ms <= metrics.body.p95_ms, JSON.stringify(metrics.body));
});
