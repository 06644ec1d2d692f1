import anyTest, { type ExecutionContext, type TestFn } from 'ava';
import { createHash, createPrivateKey, sign } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { wrapFetchWithPayment, x402Client } from '@x402/fetch';
import { registerSvcFeeScheme } from '../../interfaces/x402/index.ts';
import { decodeBase58 } from '../../domain/shared/base58.ts';
import { decodePaymentResponse } from '../../interfaces/client/paying-fetch.ts';
import { ReceiptV1, receiptHash } from '../../domain/receipts/schema.ts';
import { verifyWebhookSignature } from '../../domain/webhooks/signature.ts';
import { feeFor } from '../../domain/shared/money.ts';
import { CAIP2, findStable, TOKEN_2022_PROGRAM_ID, X402_V1_NETWORK } from '../../domain/shared/network.ts';
import { Keypair } from '@solana/web3.js';
import { wrapFetchWithSIWx } from '@x402/extensions/sign-in-with-x';
import { decodeTransaction } from '../../domain/facilitator/decode.ts';
import { MEMO_PROGRAM_ID } from '../../domain/facilitator/schema.ts';
import { REQUEST_BINDING_EXTENSION, REQUEST_BINDING_PREFIX, requestDigest } from '../../domain/shared/request-binding.ts';
import { SIGN_IN_WITH_X } from '../../domain/paywall/access.ts';
import { buildPaymentTransaction } from '../../domain/facilitator/build.ts';
import { FEE_EXTENSION_KEY, FeeExtension } from '../../domain/facilitator/schema.ts';
import type { X402RequirementsV2 } from '../../domain/facilitator/wire.ts';
import { associatedTokenAccount, payToFor, treasuryOf } from '../../domain/treasury/derive.ts';
import { http, issueKey, linkBody, recordAgent } from '../support/app.ts';
import { until } from '../support/until.ts';
import { waitForCommitment } from '../support/ledger.ts';
import {
  base64Json,
  buildPayment,
  createLink,
  decodeBase64Json,
  eventsOf,
  fundBuyer,
  getLink,
  paidCallsOf,
  payingFetch,
  receiptsOf,
  recordingPayingFetch,
  startLocalServer,
  fundFeeVault,
  startPaywallApp,
  tokenBalance,
  unpaidOffer,
  USDC,
  type CreatedLink,
  type PaywallWorld,
} from '../support/paywall.ts';

// hosted-api §4.2 (rules 1–9), §2.1–2.4, §3.2, §6 with DECISIONS "Payment links", "x402 on the paywall", "Receipts"
// and "Webhooks": the public /x/{id} end to end — real app, real embedded devnet, real facilitator, payments signed by
// the buyer kit or built by hand. Every test owns its agent(s) and link(s); tests run concurrently on one app.

const test = anyTest as TestFn<PaywallWorld & { feeAuthority: string; feePayer: string }>;
const PRICE = 10_000n; // linkBody's $0.01
const FEE = feeFor(PRICE, 100); // 100 atoms at the default 100 bps
const GROSS = PRICE + FEE;
const SIGNATURE = /^[1-9A-HJ-NP-Za-km-z]{64,88}$/;
const sha256 = (bytes: string | Uint8Array) => createHash('sha256').update(bytes).digest('hex');

test.before(async (t) => {
  const w = await startPaywallApp();
  const feeAuthority = await fundFeeVault(w);
  const health = await fetch(`${w.app.services.settings.facilitatorUrl}/health`);
  const feePayer = ((await health.json()) as { fee_payer: string }).fee_payer;
  t.context = { ...w, feeAuthority, feePayer };
});

/** Token deltas of one confirmed transaction, by owner of the token account. */
async function deltasOf(t: ExecutionContext<PaywallWorld>, signature: string): Promise<Map<string, bigint>> {
  const ledger = t.context.app.services.ledgers['chain-devnet']!;
  await waitForCommitment(ledger, signature);
  const tx = await ledger.getTransaction(signature);
  if (!tx) throw new Error(`transaction ${signature} not found`);
  t.is(tx.err, null);
  const out = new Map<string, bigint>();
  for (const b of tx.postTokenBalances) out.set(b.owner, (out.get(b.owner) ?? 0n) + b.amount);
  for (const b of tx.preTokenBalances) out.set(b.owner, (out.get(b.owner) ?? 0n) - b.amount);
  return out;
}

async function settledCount(t: ExecutionContext<PaywallWorld>, id: string): Promise<number> {
  return (await getLink(t.context, id)).counters.settled_count;
}

// ── Rules 1–3 ────────────────────────────────────────────────────────────────────────────────────────────────────

test('rules 1–3: 404 unknown slug, 405 + Allow, 403 wrong_network naming the URL, 400 bad network, 410 disabled (never a 500)', async (t) => {
  const w = t.context;
  const { link, url } = await createLink(w);
  const base = w.app.services.settings.baseUrl;
  t.is(url, `${base}/x/${link.id}?network=chain-devnet`, 'share_url names the devnet');
  const paywall = (path: string, init: RequestInit = {}) => fetch(`${w.app.url}${path}`, init);
  const envelope = async (res: Response, status: number, error: string) => {
    t.is(res.status, status, `${error}`);
    const body = (await res.json()) as { error: string; message: string; request_id: string; details?: Record<string, unknown> };
    t.is(body.error, error);
    t.is(typeof body.message, 'string');
    t.true(body.message.length > 0);
    t.is(typeof body.request_id, 'string');
    t.is(res.headers.get('x-svc-request-id'), body.request_id, 'X-Svc-Request-Id names the same request');
    return body;
  };

  // Rule 3: unknown slug, on the named network and on the default one.
  await envelope(await paywall('/x/no-such-link-anywhere?network=chain-devnet'), 404, 'payment_link_not_found');
  await envelope(await paywall('/x/no-such-link-anywhere'), 404, 'payment_link_not_found');

  // Rule 1: the link answers GET only.
  const wrongMethod = await paywall(`/x/${link.id}?network=chain-devnet`, { method: 'POST', body: '{}', headers: { 'content-type': 'application/json' } });
  t.is(wrongMethod.headers.get('allow'), 'GET');
  await envelope(wrongMethod, 405, 'method_not_allowed');

  // Rule 2: no ?network means chain-mainnet; the devnet link answers with the hint naming its network and URL.
  const hint = await envelope(await paywall(`/x/${link.id}`), 403, 'wrong_network');
  t.deepEqual(hint.details, { network: 'chain-devnet', url: `${base}/x/${link.id}?network=chain-devnet` });
  t.is(hint.details?.url, link.share_url);
  const explicitMainnet = await envelope(await paywall(`/x/${link.id}?network=chain-mainnet`), 403, 'wrong_network');
  t.is(explicitMainnet.details?.network, 'chain-devnet');

  await envelope(await paywall(`/x/${link.id}?network=bogus`), 400, 'invalid_request');

  // The hint's URL is the one that works: a 402 offer.
  t.is((await fetch(url)).status, 402);

  // §3.2: disabled → 410 on the paywall; GET by id still works with its counters; re-enabled → 402 again.
  const off = await http(w.app, 'PATCH', `/v1/payment-links/${link.id}`, { key: w.key, body: { disabled: true } });
  t.is(off.status, 200, JSON.stringify(off.body));
  await envelope(await fetch(url), 410, 'payment_link_disabled');
  const read = await getLink(w, link.id);
  t.is(read.disabled, true);
  t.is(read.counters.settled_count, 0);
  const on = await http(w.app, 'PATCH', `/v1/payment-links/${link.id}`, { key: w.key, body: { disabled: false } });
  t.is(on.status, 200, JSON.stringify(on.body));
  t.is((await fetch(url)).status, 402);
});

// ── Rule 4: the unpaid 402 ───────────────────────────────────────────────────────────────────────────────────────

test('unpaid 402: PAYMENT-REQUIRED holds the x402 v2 offer (payTo = treasury, feePayer, svc.fee), the body its v1 form', async (t) => {
  const w = t.context;
  const { link, agent, url } = await createLink(w, { label: 'Forecast API', response: { mimeType: 'text/plain', body: 'sunny' } });
  const health = (await (await fetch(`${w.app.services.settings.facilitatorUrl}/health`)).json()) as { fee_payer: string; protocol_fee: { bps: number } };
  t.is(health.protocol_fee.bps, 100, 'the fee is on by default');

  const offer = await unpaidOffer(url);
  t.is(offer.status, 402);
  t.is(offer.headers.get('content-type')?.split(';')[0], 'application/json');
  t.truthy(offer.headers.get('x-svc-request-id'));
  t.is(offer.headers.get('access-control-expose-headers')?.includes('PAYMENT-REQUIRED'), true);

  // v2, in the header.
  const v2 = offer.v2;
  t.is(v2.x402Version, 2);
  t.is(v2.error, 'payment_required');
  t.deepEqual(v2.resource, { url: link.share_url, description: 'Forecast API', mimeType: 'text/plain' });
  t.is(v2.accepts.length, 1, 'one accept per currency (devnet lists USDC only)');
  t.is(v2.accepts.length, link.accepts.length);
  const accept = v2.accepts[0];
  const payTo = treasuryOf(agent);
  // x402 PR #2693: the devnet's current blockhash, so a buyer needs no RPC round trip (its own test below)
  const { recentBlockhash, lastValidBlockHeight } = accept.extra;
  t.regex(recentBlockhash, /^[1-9A-HJ-NP-Za-km-z]{32,44}$/);
  t.regex(lastValidBlockHeight, /^\d+$/);
  t.deepEqual(accept, {
    scheme: 'exact',
    network: CAIP2['chain-devnet'],
    asset: USDC.mint,
    amount: PRICE.toString(),
    payTo,
    maxTimeoutSeconds: 60,
    extra: {
      feePayer: health.fee_payer,
      'svc.fee': { v: '1', bps: 100, feeAuthority: w.feeAuthority },
      // the facilitator publishing those terms, and the same fee leg as x402's splits proposal states it
      'svc.facilitator': w.app.services.settings.facilitatorUrl,
      splits: [{ payTo: w.feeAuthority, amount: FEE.toString(), ataCreationRequired: true }],
      recentBlockhash,
      lastValidBlockHeight,
    },
  });
  // x402's facilitatorFees disclosure: the facilitator and the most its fee comes to; beside it the offer-receipt and
  // payment-identifier extensions (paywall-interop.test.ts verifies them).
  t.deepEqual(Object.keys(v2.extensions).sort(), ['facilitatorFees', 'offer-receipt', 'payment-identifier', REQUEST_BINDING_EXTENSION].sort());
  t.deepEqual(
    { facilitatorFees: v2.extensions.facilitatorFees },
    {
      facilitatorFees: {
        info: {
          version: '1',
          options: [
            {
              facilitatorId: w.app.services.settings.facilitatorUrl,
              facilitatorFeeQuoteRef: `${w.app.services.settings.facilitatorUrl}/health`,
              maxFacilitatorFee: FEE.toString(),
            },
          ],
        },
      },
    },
  );
  // request-bound payments: the digest of the request this 402 answered (docs/paywall.md)
  t.deepEqual(v2.extensions[REQUEST_BINDING_EXTENSION], {
    info: {
      version: '1',
      digest: await requestDigest({ method: 'GET', path: `/x/${link.id}`, query: '', body: undefined }),
      memoPrefix: REQUEST_BINDING_PREFIX,
      required: false,
    },
  });
  t.is(typeof accept.amount, 'string');
  // §2.3 an accept's pay_to is the offer's payTo in the other spelling (the treasury); pay_to_token_account is the
  // destination, ATA(treasury); the link's own pay_to is the same payTo, its pay_to_token_account that destination (§2.2).
  const destination = payToFor(agent, USDC);
  t.is(destination, associatedTokenAccount(payTo, USDC.mint, USDC.tokenProgramId));
  t.like(link.accepts[0], {
    network: CAIP2['chain-devnet'],
    asset: USDC.mint,
    amount: PRICE.toString(),
    pay_to: payTo,
    pay_to_token_account: destination,
    currency: 'USDC',
  });
  t.is(link.pay_to, payTo);
  t.is(link.pay_to_token_account, destination);

  // v1, in the body.
  const v1 = offer.v1;
  t.is(v1.x402Version, 1);
  t.is(v1.error, 'payment_required');
  t.is(v1.accepts.length, 1);
  t.deepEqual(v1.accepts[0], {
    scheme: 'exact',
    network: X402_V1_NETWORK['chain-devnet'],
    maxAmountRequired: PRICE.toString(),
    resource: link.share_url,
    description: 'Forecast API',
    mimeType: 'text/plain',
    payTo,
    maxTimeoutSeconds: 60,
    asset: USDC.mint,
    extra: accept.extra,
  });
  t.is(v1.accepts[0].network, 'solana-devnet');

  // Nothing happened: no call counted.
  t.is((await getLink(w, link.id)).counters.call_count, 0);
});

/**
 * A JSON-RPC node in front of the embedded devnet's that counts the methods it is asked (batches too): what a buyer's
 * rpcUrl saw.
 */
async function countingRpc(upstream: string): Promise<{ url: string; calls: Map<string, number>; close: () => Promise<void> }> {
  const calls = new Map<string, number>();
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      const body = Buffer.concat(chunks);
      try {
        const parsed = JSON.parse(body.toString('utf8')) as { method?: string } | { method?: string }[];
        for (const call of Array.isArray(parsed) ? parsed : [parsed]) calls.set(String(call.method), (calls.get(String(call.method)) ?? 0) + 1);
      } catch {
        calls.set('(unparsed)', (calls.get('(unparsed)') ?? 0) + 1);
      }
      const answer = await fetch(upstream, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
      res.writeHead(answer.status, { 'content-type': 'application/json' }).end(Buffer.from(await answer.arrayBuffer()));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, calls, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

test('server-provided blockhash: offers carry one devnet blockhash at a time; the kit and the x402 scheme pay with no getLatestBlockhash', async (t) => {
  const w = t.context;
  const { link, url } = await createLink(w);
  const first = await unpaidOffer(url);
  const second = await unpaidOffer(url);
  const extra = first.v2.accepts[0].extra;
  t.is(decodeBase58(extra.recentBlockhash)?.length, 32, 'extra.recentBlockhash is a blockhash');
  t.regex(extra.lastValidBlockHeight, /^\d+$/, 'extra.lastValidBlockHeight is a decimal string, as x402 sends it');
  t.true(await w.app.services.ledgers['chain-devnet']!.isBlockhashValid(extra.recentBlockhash), 'one the ledger accepts');
  t.is(second.v2.accepts[0].extra.recentBlockhash, extra.recentBlockhash, 'one value per network, not one read per 402');
  t.deepEqual(first.v1.accepts[0].extra, extra, 'the v1 body states the same');

  const rpc = await countingRpc(w.rpcUrl);
  t.teardown(rpc.close);
  const buyer = await fundBuyer(w);
  const paid = await payingFetch(w, buyer, { rpcUrl: rpc.url })(url);
  t.is(paid.status, 200, await paid.clone().text());
  const scheme = wrapFetchWithPayment(fetch, registerSvcFeeScheme(new x402Client(), { signer: buyer, rpcUrl: rpc.url, networks: ['chain-devnet'] }));
  const again = await scheme(url);
  t.is(again.status, 200, await again.clone().text());
  t.is(rpc.calls.get('getLatestBlockhash') ?? 0, 0, `the buyer's node was asked ${JSON.stringify([...rpc.calls])}`);
  t.is((await getLink(w, link.id)).counters.settled_count, 2);
});

// ── Rules 6, 7, 9: a paid call ───────────────────────────────────────────────────────────────────────────────────

test('a paid call through the kit: the link response, PAYMENT-RESPONSE, counters, events, an earn receipt, the fee collected', async (t) => {
  const w = t.context;
  const body = { forecast: 'sunny', days: [1, 2, 3] };
  const { link, agent, treasury, url } = await createLink(w, { response: { status: 203, mimeType: 'application/vnd.forecast+json', body } });
  const buyer = await fundBuyer(w);
  const buyerAddress = buyer.publicKey.toBase58();
  const before = await tokenBalance(w, buyerAddress);

  const res = await payingFetch(w, buyer)(url);
  const text = await res.text();
  t.is(res.status, 203, text);
  t.is(res.headers.get('content-type'), 'application/vnd.forecast+json');
  t.deepEqual(JSON.parse(text), body);
  t.is(res.headers.get('x-svc-replayed'), null, 'the first paid call is not a replay');
  t.is(res.headers.get('x-payment-response'), null, 'v2 payment: no v1 response header');
  const settled = decodePaymentResponse(res.headers.get('payment-response')!) as any;
  // the signed receipt beside the fee receipt (offer-receipt; paywall-interop.test.ts verifies it)
  t.is(settled.extensions['offer-receipt'].info.receipt.format, 'jws');
  delete settled.extensions['offer-receipt'];
  t.deepEqual(settled, {
    success: true,
    transaction: settled.transaction,
    network: CAIP2['chain-devnet'],
    payer: buyerAddress,
    // x402's facilitatorFees receipt: the fee leg this settlement paid
    extensions: {
      facilitatorFees: {
        info: {
          version: '1',
          facilitatorFeePaid: { facilitatorFeePaid: FEE.toString(), asset: USDC.mint, model: 'bps', facilitatorId: w.app.services.settings.facilitatorUrl },
        },
      },
    },
  });
  t.regex(settled.transaction, SIGNATURE);
  const sig = settled.transaction;

  // The money: seller leg, fee leg, buyer debited the gross, all in the one transaction PAYMENT-RESPONSE names.
  const deltas = await deltasOf(t, sig);
  t.is(deltas.get(treasury), PRICE);
  t.is(deltas.get(w.feeAuthority), FEE);
  t.is(deltas.get(buyerAddress), -GROSS);
  t.is(await tokenBalance(w, treasury), PRICE);
  t.is(await tokenBalance(w, buyerAddress), before - GROSS);

  // §2.4 counters.
  const read = await getLink(w, link.id);
  t.like(read.counters, { call_count: 1, settled_count: 1, last_tx_sig: sig });
  t.truthy(read.counters.last_called_at);
  t.truthy(read.counters.last_settled_at);

  // §6 events.
  const settledEvents = await eventsOf(w, 'payment_link.settled', agent);
  t.is(settledEvents.length, 1);
  t.like(settledEvents[0], { signature: sig, agent_asset: agent, phase: 'confirmed' });
  t.like(settledEvents[0]!.metadata, {
    tx_sig: sig,
    agent,
    payment_link_id: link.id,
    payer: buyerAddress,
    amount_atomic: '10000',
    fee_atomic: '100',
    gross_atomic: '10100',
  });

  const served = await eventsOf(w, 'payment_link.served', agent);
  t.is(served.length, 1);
  t.like(served[0]!.metadata, { payment_link_id: link.id, status: 203, tx_sig: sig });

  const published = await eventsOf(w, 'receipt.published', agent);
  t.is(published.length, 1);
  const receipt = published[0]!.metadata.receipt as ReceiptV1;
  t.true(ReceiptV1.safeParse(receipt).success, 'a valid ReceiptV1');
  t.like(receipt, { v: '0.1', kind: 'earn', decision: 'allow', agent, nonce: 0, prev_receipt_hash: null, tx_sig: sig });
  const { receipt_hash, ...unhashed } = receipt;
  t.is(receipt_hash, receiptHash(unhashed), 'receipt_hash recomputed over the canonical JSON');
  t.is(published[0]!.metadata.receipt_hash, receipt_hash);
  t.deepEqual(receipt.price, {
    amount: '0.01',
    currency: 'USDC',
    asset: USDC.mint,
    network: CAIP2['chain-devnet'],
    amount_atomic: '10000',
    fee: FEE.toString(),
    gross: GROSS.toString(),
    feeBps: 100,
    feeAuthority: w.feeAuthority,
  });
  t.is(FEE, 100n, 'ceil(10000 × 1%)');
  t.like(receipt.request, { method: 'GET', url: link.share_url });
  t.deepEqual(receipt.response, { status: 203, body_hash: sha256(text) });
  t.deepEqual(await receiptsOf(w, agent), [receipt], 'the event carries the stored receipt');

  const fees = (await eventsOf(w, 'protocol.fee.collected', agent)).filter((e) => e.metadata.payment_link_id === link.id);
  t.is(fees.length, 1);
  t.like(fees[0]!.metadata, { receipt_hash, tx_sig: sig, fee_atomic: '100', fee_authority: w.feeAuthority, mint: USDC.mint });
});

// ── Exactly once ─────────────────────────────────────────────────────────────────────────────────────────────────

test('exactly once: replaying the PAYMENT-SIGNATURE returns the stored response with X-Svc-Replayed, nothing settles twice', async (t) => {
  const w = t.context;
  const { link, agent, treasury, url } = await createLink(w, { response: { body: { n: 1 } } });
  const buyer = await fundBuyer(w);
  const { pay, sent } = recordingPayingFetch(w, buyer);

  const first = await pay(url);
  const firstText = await first.text();
  t.is(first.status, 200, firstText);
  const paidRetries = sent.filter((h) => h.has('payment-signature'));
  t.is(paidRetries.length, 1, 'one paid retry');
  const header = paidRetries[0]!.get('payment-signature');
  t.truthy(header, 'the kit paid with PAYMENT-SIGNATURE');
  const sig = decodePaymentResponse(first.headers.get('payment-response')!).transaction;
  // Server-Timing: the steps this request ran (settle before the response, then the record); a replay ran none
  t.regex(first.headers.get('server-timing') ?? '', /^settle;dur=\d+\.\d, upstream;dur=\d+\.\d, record;dur=\d+\.\d$/);
  // a browser-based client may read it (CORS)
  t.true((first.headers.get('access-control-expose-headers') ?? '').split(/,\s*/).includes('Server-Timing'));
  const sellerAfter = await tokenBalance(w, treasury);
  const buyerAfter = await tokenBalance(w, buyer.publicKey.toBase58());
  t.is(sellerAfter, PRICE);

  const replay = await fetch(url, { headers: { 'PAYMENT-SIGNATURE': header! } });
  t.is(replay.status, 200);
  t.is(await replay.text(), firstText);
  t.is(replay.headers.get('x-svc-replayed'), 'true');
  t.is(replay.headers.get('server-timing'), null);
  t.is(replay.headers.get('content-type'), first.headers.get('content-type'));
  t.is(decodePaymentResponse(replay.headers.get('payment-response')!).transaction, sig, 'the replay names the same settlement');

  t.is(await tokenBalance(w, treasury), sellerAfter, 'the seller was not paid twice');
  t.is(await tokenBalance(w, buyer.publicKey.toBase58()), buyerAfter, 'the buyer was not charged twice');
  const read = await getLink(w, link.id);
  t.is(read.counters.settled_count, 1);
  t.is(read.counters.last_tx_sig, sig);
  t.is((await eventsOf(w, 'payment_link.settled', agent)).length, 1);
  t.is((await receiptsOf(w, agent)).length, 1);
  t.deepEqual(await paidCallsOf(w, link.id), [{ status: 'done', signature: sig }]);
});

test('exactly once: 5 concurrent identical paid requests all get the same 200, one settlement, one receipt, ≥ 4 replays', async (t) => {
  const w = t.context;
  const { link, agent, treasury, url } = await createLink(w, { response: { body: { concurrent: true } } });
  const buyer = await fundBuyer(w);
  const buyerAddress = buyer.publicKey.toBase58();
  const before = await tokenBalance(w, buyerAddress);
  const payment = await buildPayment(w, url, buyer);

  const answers = await Promise.all(
    Array.from({ length: 5 }, async () => {
      const res = await fetch(url, { headers: { 'PAYMENT-SIGNATURE': payment.paymentSignature } });
      return { status: res.status, body: await res.text(), replayed: res.headers.get('x-svc-replayed'), paid: res.headers.get('payment-response') };
    }),
  );
  for (const a of answers) {
    t.is(a.status, 200, a.body);
    t.deepEqual(JSON.parse(a.body), { concurrent: true });
    t.is(a.body, answers[0]!.body);
    t.is(a.paid, answers[0]!.paid, 'every answer names the same settlement');
  }
  t.true(answers.filter((a) => a.replayed === 'true').length >= 4, JSON.stringify(answers.map((a) => a.replayed)));
  t.true(answers.filter((a) => a.replayed === null).length <= 1);

  const sig = decodePaymentResponse(answers[0]!.paid!).transaction;
  t.is(await tokenBalance(w, treasury), PRICE, 'the seller was paid once');
  t.is(before - (await tokenBalance(w, buyerAddress)), payment.gross, 'the buyer paid once');
  t.is(payment.gross, GROSS);
  t.like((await getLink(w, link.id)).counters, { settled_count: 1, last_tx_sig: sig });
  t.is((await eventsOf(w, 'payment_link.settled', agent)).length, 1);
  t.is((await eventsOf(w, 'receipt.published', agent)).length, 1);
  t.is((await receiptsOf(w, agent)).length, 1);
});

test('a payment used on one link is refused on another: 402 payment_already_used (same offer) or requirements_mismatch; nothing moves', async (t) => {
  const w = t.context;
  const first = await createLink(w, { response: { body: { link: 'a' } } });
  // Same owner, same price: the offer is identical, only the link differs.
  const sibling = await createLink(w, { response: { body: { link: 'b' } } }, first.agent);
  // Another owner: another payTo.
  const stranger = await createLink(w, { response: { body: { link: 'c' } } });
  const buyer = await fundBuyer(w);
  const buyerAddress = buyer.publicKey.toBase58();
  const payment = await buildPayment(w, first.url, buyer);

  const paid = await fetch(first.url, { headers: { 'PAYMENT-SIGNATURE': payment.paymentSignature } });
  t.is(paid.status, 200, await paid.text());
  const buyerAfter = await tokenBalance(w, buyerAddress);
  const sellerAfter = await tokenBalance(w, first.treasury);

  const reused = await fetch(sibling.url, { headers: { 'PAYMENT-SIGNATURE': payment.paymentSignature } });
  t.is(reused.status, 402);
  t.is(reused.headers.get('x-svc-replayed'), null);
  const reusedBody = (await reused.json()) as { error: string; x402Version: number };
  t.is(reusedBody.error, 'payment_already_used');
  t.is(reusedBody.x402Version, 1);
  t.is(decodeBase64Json(reused.headers.get('payment-required'))?.error, 'payment_already_used');

  const elsewhere = await fetch(stranger.url, { headers: { 'PAYMENT-SIGNATURE': payment.paymentSignature } });
  t.is(elsewhere.status, 402);
  t.is(((await elsewhere.json()) as { error: string }).error, 'requirements_mismatch');

  t.is(await tokenBalance(w, buyerAddress), buyerAfter, 'the buyer was not charged again');
  t.is(await tokenBalance(w, first.treasury), sellerAfter);
  t.is(await tokenBalance(w, stranger.treasury), 0n);
  t.is(await settledCount(t, sibling.link.id), 0);
  t.is(await settledCount(t, stranger.link.id), 0);
  t.is(await settledCount(t, first.link.id), 1);
  t.is((await eventsOf(w, 'payment_link.settled', first.agent)).length, 1, 'one settlement for the owner of both links');
  t.is((await receiptsOf(w, first.agent)).length, 1);
});

// ── Receipts chain ───────────────────────────────────────────────────────────────────────────────────────────────

test('receipt chain: 3 sequential then 4 concurrent payments to one agent give gapless nonces 0..6, each linked to the previous', async (t) => {
  const w = t.context;
  const a = await createLink(w, { response: { body: { n: 'a' } } });
  const links: CreatedLink[] = [
    a,
    await createLink(w, { response: { body: { n: 'b' } } }, a.agent),
    await createLink(w, { response: { body: { n: 'c' } } }, a.agent),
  ];
  const sigs: string[] = [];

  const buyer = await fundBuyer(w);
  const pay = payingFetch(w, buyer);
  for (const l of links) {
    const res = await pay(l.url);
    t.is(res.status, 200, await res.text());
    sigs.push(decodePaymentResponse(res.headers.get('payment-response')!).transaction);
  }

  // Four buyers at once (four distinct transactions) to the same agent, over its three links.
  const buyers = await Promise.all(Array.from({ length: 4 }, () => fundBuyer(w)));
  const concurrent = await Promise.all(
    buyers.map(async (b, i) => {
      const res = await payingFetch(w, b)(links[i % links.length]!.url);
      const text = await res.text();
      return { status: res.status, text, sig: res.status === 200 ? decodePaymentResponse(res.headers.get('payment-response')!).transaction : null };
    }),
  );
  for (const c of concurrent) t.is(c.status, 200, c.text);

  const receipts = await receiptsOf(w, a.agent);
  t.deepEqual(
    receipts.map((r) => r.nonce),
    [0, 1, 2, 3, 4, 5, 6],
  );
  t.deepEqual(
    receipts.slice(0, 3).map((r) => r.tx_sig),
    sigs,
    'the sequential payments hold nonces 0..2 in order',
  );
  t.deepEqual(
    receipts
      .slice(3)
      .map((r) => r.tx_sig)
      .sort(),
    concurrent.map((c) => c.sig).sort(),
    'the concurrent ones hold 3..6',
  );
  receipts.forEach((r, i) => {
    t.is(r.agent, a.agent);
    t.is(r.kind, 'earn');
    const { receipt_hash, ...unhashed } = r;
    t.is(receipt_hash, receiptHash(unhashed), `receipt ${i}: hash`);
    t.is(r.prev_receipt_hash, i === 0 ? null : receipts[i - 1]!.receipt_hash, `receipt ${i}: linked to its predecessor`);
  });
  t.is(new Set(receipts.map((r) => r.prev_receipt_hash)).size, 7, 'no fork: every prev hash distinct');
  t.is(new Set(receipts.map((r) => r.receipt_hash)).size, 7);

  const published = await eventsOf(w, 'receipt.published', a.agent);
  t.deepEqual(
    published.map((e) => e.metadata.nonce as number).sort((x, y) => x - y),
    [0, 1, 2, 3, 4, 5, 6],
  );
  t.is(await tokenBalance(w, a.treasury), 7n * PRICE);
});

// ── Bad payments ─────────────────────────────────────────────────────────────────────────────────────────────────

/** Sends `headers` to a fresh link and expects a 402 naming `reason` in the v1 body and the v2 header; nothing moves. */
async function refused(
  t: ExecutionContext<PaywallWorld>,
  make: (l: CreatedLink, buyer: import('@solana/web3.js').Keypair) => Promise<Record<string, string>>,
  reason: string,
) {
  const w = t.context;
  const l = await createLink(w);
  const buyer = await fundBuyer(w);
  const buyerAddress = buyer.publicKey.toBase58();
  const before = await tokenBalance(w, buyerAddress);
  const res = await fetch(l.url, { headers: await make(l, buyer) });
  const body = (await res.json()) as { x402Version: number; error: string; message: string; accepts: unknown[] };
  t.is(res.status, 402, JSON.stringify(body));
  t.is(body.error, reason, body.message);
  t.is(body.x402Version, 1);
  t.is(body.accepts.length, 1, 'the refusal carries the offer again');
  t.is(decodeBase64Json(res.headers.get('payment-required'))?.error, reason);
  t.is(res.headers.get('payment-response'), null);
  t.is(await tokenBalance(w, buyerAddress), before, 'the buyer was not charged');
  t.is(await tokenBalance(w, l.treasury), 0n);
  const read = await getLink(w, l.link.id);
  t.is(read.counters.settled_count, 0);
  t.is(read.counters.last_tx_sig, null);
  t.is((await eventsOf(w, 'payment_link.settled', l.agent)).length, 0);
  t.is((await receiptsOf(w, l.agent)).length, 0);
  t.deepEqual(await paidCallsOf(w, l.link.id), [], 'the refused payment is not held');
  return { link: l, buyer };
}

test('bad payment: a transfer of price − 1 is refused with wrong_amount', async (t) => {
  await refused(
    t,
    async (l, buyer) => ({ 'PAYMENT-SIGNATURE': (await buildPayment(t.context, l.url, buyer, { amount: PRICE - 1n })).paymentSignature }),
    'wrong_amount',
  );
});

test('bad payment: an unsigned transaction is refused with missing_signature', async (t) => {
  await refused(
    t,
    async (l, buyer) => ({ 'PAYMENT-SIGNATURE': (await buildPayment(t.context, l.url, buyer, { sign: false })).paymentSignature }),
    'missing_signature',
  );
});

test('bad payment: a PAYMENT-SIGNATURE that is base64 JSON but no x402 payload is refused with invalid_payload', async (t) => {
  await refused(t, async () => ({ 'PAYMENT-SIGNATURE': base64Json({ hello: 'world' }) }), 'invalid_payload');
});

test('bad payment: a garbage PAYMENT-SIGNATURE (not base64 JSON) is refused with invalid_payload', async (t) => {
  await refused(t, async () => ({ 'PAYMENT-SIGNATURE': 'this is %%% not a payment' }), 'invalid_payload');
});

test('bad payment: a refused payment can still be fixed — the same buyer then pays the link with a good one', async (t) => {
  const { link, buyer } = await refused(
    t,
    async (l, b) => ({ 'PAYMENT-SIGNATURE': (await buildPayment(t.context, l.url, b, { sign: false })).paymentSignature }),
    'missing_signature',
  );
  const res = await payingFetch(t.context, buyer)(link.url);
  t.is(res.status, 200, await res.text());
  t.is(await tokenBalance(t.context, link.treasury), PRICE);
});

test('X-PAYMENT with a bare base64 signed transaction (v1 path) is accepted and settled, with X-PAYMENT-RESPONSE', async (t) => {
  const w = t.context;
  const { link, agent, treasury, url } = await createLink(w, { response: { body: { v1: true } } });
  const buyer = await fundBuyer(w);
  const buyerAddress = buyer.publicKey.toBase58();
  const before = await tokenBalance(w, buyerAddress);
  const payment = await buildPayment(w, url, buyer);

  const res = await fetch(url, { headers: { 'X-PAYMENT': payment.transaction } });
  const text = await res.text();
  t.is(res.status, 200, text);
  t.deepEqual(JSON.parse(text), { v1: true });
  const v2 = decodePaymentResponse(res.headers.get('payment-response')!);
  const v1 = decodePaymentResponse(res.headers.get('x-payment-response')!);
  t.like(v2, { success: true, transaction: v2.transaction, network: CAIP2['chain-devnet'], payer: buyerAddress });
  t.is((v2 as { extensions?: any }).extensions?.facilitatorFees?.info?.facilitatorFeePaid?.facilitatorFeePaid, FEE.toString());
  t.deepEqual(v1, { ...v2, network: 'solana-devnet' });
  t.regex(v2.transaction, SIGNATURE);

  t.is(await tokenBalance(w, treasury), PRICE);
  t.is(before - (await tokenBalance(w, buyerAddress)), GROSS);
  t.like((await getLink(w, link.id)).counters, { settled_count: 1, last_tx_sig: v2.transaction });
  t.is((await eventsOf(w, 'payment_link.settled', agent))[0]?.signature, v2.transaction);

  // The same bare transaction again: the stored answer, replayed.
  const again = await fetch(url, { headers: { 'X-PAYMENT': payment.transaction } });
  t.is(again.status, 200);
  t.is(again.headers.get('x-svc-replayed'), 'true');
  t.is(await again.text(), text);
  t.is(await tokenBalance(w, treasury), PRICE);
});

// ── Rule 7/8: upstream forwarding and settle_policy ──────────────────────────────────────────────────────────────

test('upstream: a paid POST forwards the buyer body, content type and query; the buyer gets the upstream status, body and type', async (t) => {
  const w = t.context;
  const upstream = await startLocalServer(() => ({ status: 201, headers: { 'content-type': 'text/csv' }, body: 'city,temp\nParis,21\n' }));
  t.teardown(() => upstream.close());
  const { link, agent, treasury } = await createLink(w, {
    method: 'POST',
    response: { body: { fallback: true } },
    metadata: { upstream_url: `${upstream.url}/weather`, expected_request_body: { city: 'string' } },
  });
  const buyer = await fundBuyer(w);
  const requestBody = JSON.stringify({ city: 'Paris', units: 'metric' });

  const res = await payingFetch(w, buyer)(`${link.share_url}&detail=full`, {
    method: 'POST',
    headers: { 'content-type': 'application/json; charset=utf-8' },
    body: requestBody,
  });
  const text = await res.text();
  t.is(res.status, 201, text);
  t.is(text, 'city,temp\nParis,21\n');
  t.is(res.headers.get('content-type'), 'text/csv');
  const sig = decodePaymentResponse(res.headers.get('payment-response')!).transaction;

  t.is(upstream.received.length, 1, 'forwarded once: only the paid request');
  const got = upstream.received[0]!;
  t.is(got.method, 'POST');
  t.is(got.url, '/weather?detail=full', 'the query without network');
  t.is(got.headers['content-type'], 'application/json; charset=utf-8');
  t.is(got.body.toString('utf8'), requestBody);
  t.is(got.headers['payment-signature'], undefined, 'the payment is not forwarded');

  t.is(await tokenBalance(w, treasury), PRICE);
  const [receipt] = await receiptsOf(w, agent);
  t.is(receipt?.tx_sig, sig);
  t.deepEqual(receipt?.request, { method: 'POST', url: link.share_url, body_hash: sha256(requestBody) });
  t.deepEqual(receipt?.response, { status: 201, body_hash: sha256(text) });
});

test('upstream: settle_policy before_forward + upstream 500 → the buyer is charged and gets the upstream answer', async (t) => {
  const w = t.context;
  const upstream = await startLocalServer(() => ({ status: 500, headers: { 'content-type': 'application/json' }, body: '{"oops":"upstream down"}' }));
  t.teardown(() => upstream.close());
  const { link, agent, treasury, url } = await createLink(w, { settle_policy: 'before_forward', metadata: { upstream_url: upstream.url } });
  t.is(link.settle_policy, 'before_forward');
  const buyer = await fundBuyer(w);
  const before = await tokenBalance(w, buyer.publicKey.toBase58());

  const res = await payingFetch(w, buyer)(url);
  const text = await res.text();
  t.is(res.status, 500);
  t.deepEqual(JSON.parse(text), { oops: 'upstream down' });
  const sig = decodePaymentResponse(res.headers.get('payment-response')!).transaction;
  t.regex(sig, SIGNATURE);

  t.is(upstream.received.length, 1);
  t.is(await tokenBalance(w, treasury), PRICE, 'settled before forwarding');
  t.is(before - (await tokenBalance(w, buyer.publicKey.toBase58())), GROSS);
  t.like((await getLink(w, link.id)).counters, { settled_count: 1, last_tx_sig: sig });
  t.is((await eventsOf(w, 'payment_link.settled', agent)).length, 1);
  t.like((await eventsOf(w, 'payment_link.served', agent))[0]?.metadata, { status: 500 });
  t.is((await receiptsOf(w, agent))[0]?.response?.status, 500);
});

test('upstream: settle_policy on_success + upstream 500 → 502 upstream_failed, the buyer is NOT charged', async (t) => {
  const w = t.context;
  const upstream = await startLocalServer(() => ({ status: 500, body: 'no' }));
  t.teardown(() => upstream.close());
  const { link, agent, treasury, url } = await createLink(w, { settle_policy: 'on_success', metadata: { upstream_url: upstream.url } });
  t.is(link.settle_policy, 'on_success');
  const buyer = await fundBuyer(w);
  const buyerAddress = buyer.publicKey.toBase58();
  const before = await tokenBalance(w, buyerAddress);

  const res = await payingFetch(w, buyer)(url);
  const body = (await res.json()) as { error: string; message: string; request_id: string; details?: Record<string, unknown> };
  t.is(res.status, 502, JSON.stringify(body));
  t.is(body.error, 'upstream_failed');
  t.is(body.details?.upstream_status, 500);
  t.is(typeof body.request_id, 'string');
  t.is(res.headers.get('payment-response'), null);

  t.is(upstream.received.length, 1, 'the upstream was asked');
  t.is(await tokenBalance(w, buyerAddress), before, 'the buyer was not charged');
  t.is(await tokenBalance(w, treasury), 0n);
  const read = await getLink(w, link.id);
  t.is(read.counters.settled_count, 0);
  t.is(read.counters.last_tx_sig, null);
  t.is((await eventsOf(w, 'payment_link.settled', agent)).length, 0);
  t.is((await receiptsOf(w, agent)).length, 0);
});

test('upstream: settle_policy on_success + upstream 200 → charged and served', async (t) => {
  const w = t.context;
  const upstream = await startLocalServer(() => ({ status: 200, headers: { 'content-type': 'application/json' }, body: '{"temp":21}' }));
  t.teardown(() => upstream.close());
  const { link, agent, treasury, url } = await createLink(w, { settle_policy: 'on_success', metadata: { upstream_url: upstream.url } });
  const buyer = await fundBuyer(w);
  const before = await tokenBalance(w, buyer.publicKey.toBase58());

  const res = await payingFetch(w, buyer)(url);
  const text = await res.text();
  t.is(res.status, 200, text);
  t.deepEqual(JSON.parse(text), { temp: 21 });
  // on_success: verify, the upstream, then settle and record
  t.regex(res.headers.get('server-timing') ?? '', /^verify;dur=[\d.]+, settle;dur=[\d.]+, upstream;dur=[\d.]+, record;dur=[\d.]+$/);
  const sig = decodePaymentResponse(res.headers.get('payment-response')!).transaction;
  t.is(upstream.received.length, 1);
  t.is(await tokenBalance(w, treasury), PRICE);
  t.is(before - (await tokenBalance(w, buyer.publicKey.toBase58())), GROSS);
  t.like((await getLink(w, link.id)).counters, { settled_count: 1, last_tx_sig: sig });
  t.is((await eventsOf(w, 'payment_link.settled', agent))[0]?.signature, sig);
});

test('wrap_receipt: the body is { data: <upstream JSON>, receipt } and { data: <template>, receipt }, the receipt as stored', async (t) => {
  const w = t.context;
  const upstream = await startLocalServer(() => ({ status: 200, headers: { 'content-type': 'application/json' }, body: '{"temp":19,"city":"Oslo"}' }));
  t.teardown(() => upstream.close());
  const forwarded = await createLink(w, { wrap_receipt: true, metadata: { upstream_url: upstream.url } });
  const templated = await createLink(w, { wrap_receipt: true, response: { body: { forecast: 'fog' } } });
  const buyer = await fundBuyer(w);
  const pay = payingFetch(w, buyer);

  for (const [l, data] of [
    [forwarded, { temp: 19, city: 'Oslo' }],
    [templated, { forecast: 'fog' }],
  ] as const) {
    const res = await pay(l.url);
    const text = await res.text();
    t.is(res.status, 200, text);
    t.is(res.headers.get('content-type'), 'application/json');
    const body = JSON.parse(text) as { data: unknown; receipt: ReceiptV1 };
    t.deepEqual(Object.keys(body).sort(), ['data', 'receipt']);
    t.deepEqual(body.data, data);
    t.true(ReceiptV1.safeParse(body.receipt).success);
    const sig = decodePaymentResponse(res.headers.get('payment-response')!).transaction;
    t.like(body.receipt, { kind: 'earn', agent: l.agent, nonce: 0, tx_sig: sig });
    t.deepEqual((await receiptsOf(w, l.agent))[0], body.receipt, 'the wrapped receipt is the stored one');
  }
});

// ── Per-link webhook ─────────────────────────────────────────────────────────────────────────────────────────────

test('per-link webhook: a signed POST reaches webhook_url after a paid call; X-Svc-Signature verifies over the raw body', async (t) => {
  const w = t.context;
  const receiver = await startLocalServer(() => ({ status: 204 }));
  t.teardown(() => receiver.close());
  const { link, url } = await createLink(w, { webhook_url: `${receiver.url}/hook`, response: { body: { hooked: true } } });
  const secret = link.webhook_secret;
  t.regex(secret ?? '', /^whsec_[0-9A-Za-z]{32}$/, 'the create response carries the secret');
  const buyer = await fundBuyer(w);
  const { pay, sent } = recordingPayingFetch(w, buyer);

  const res = await pay(url);
  t.is(res.status, 200, await res.clone().text());
  const sig = decodePaymentResponse(res.headers.get('payment-response')!).transaction;

  const hook = await receiver.waitFor(1);
  t.is(hook.method, 'POST');
  t.is(hook.url, '/hook');
  t.is(hook.headers['content-type'], 'application/json');
  t.is(hook.headers['x-svc-event'], 'payment_link.settled');
  const raw = hook.body.toString('utf8');
  const now = Math.floor(Date.now() / 1000);
  t.true(verifyWebhookSignature({ secret: secret!, body: raw, header: hook.headers['x-svc-signature'] as string, now }), 'X-Svc-Signature verifies');
  t.false(verifyWebhookSignature({ secret: secret!, body: `${raw} `, header: hook.headers['x-svc-signature'] as string, now }), 'over these exact bytes');
  t.truthy(hook.headers['webhook-signature']);
  const payload = JSON.parse(raw) as {
    type: string;
    data: { payment_link_id: string; payment: { transaction: string; success: boolean }; response: { status: number; body: string }; receipt: ReceiptV1 };
  };
  t.is(payload.type, 'payment_link.settled');
  t.is(payload.data.payment_link_id, link.id);
  t.is(payload.data.payment.transaction, sig);
  t.is(payload.data.payment.success, true);
  t.is(payload.data.response.status, 200);
  t.deepEqual(JSON.parse(Buffer.from(payload.data.response.body, 'base64').toString('utf8')), { hooked: true });
  t.is(payload.data.receipt.tx_sig, sig);

  // A replay of the paid call sends no second webhook.
  const replay = await fetch(url, { headers: { 'PAYMENT-SIGNATURE': sent.find((h) => h.has('payment-signature'))!.get('payment-signature')! } });
  t.is(replay.headers.get('x-svc-replayed'), 'true');
  // A link's webhook is sent only from its outbox row, written in the transaction that records the call (before the
  // answer): after the replay's answer, one delivered row means no second webhook can ever arrive.
  const deliveries = async () =>
    (await w.app.database.orm.em
      .fork()
      .execute('select d.status from webhook_deliveries d join payment_links l on l.pk = d.link_pk where l.id = ?', [link.id])) as { status: string }[];
  // the one delivery is recorded once the receiver's 204 is back (awaited: the job records it after the POST)
  await until('the delivery recorded', async () => (await deliveries()).every((d) => d.status === 'delivered'));
  t.deepEqual(await deliveries(), [{ status: 'delivered' }]);
  t.is(receiver.received.length, 1);
});

// ── Several currencies (chain-mainnet): one accept each; a Token-2022 stable settles with both legs ─────────────────

test('a mainnet link accepting USDC, USDT and USDG offers three accepts; paying the USDG one (Token-2022) settles both legs in USDG', async (t) => {
  const { app } = t.context;
  const key = await issueKey(app, 'chain-mainnet');
  const { mint: agent } = await recordAgent(app, key);
  const res = await http(app, 'POST', '/v1/payment-links', { key, body: linkBody(agent, { accepts_currencies: ['usdt', 'USDG'] }) });
  t.is(res.status, 201, JSON.stringify(res.body));
  const url = (res.body as { share_url: string }).share_url;
  t.false(url.includes('network='), 'a mainnet link needs no ?network');

  const offer = await unpaidOffer(url);
  t.is(offer.status, 402);
  const accepts = offer.v2!.accepts as X402RequirementsV2[];
  t.deepEqual(
    accepts.map((a) => a.asset),
    ['USDC', 'USDT', 'USDG'].map((s) => findStable('chain-mainnet', s)!.mint),
  );
  for (const a of accepts) t.like(a, { network: CAIP2['chain-mainnet'], amount: PRICE.toString(), payTo: treasuryOf(agent) });

  const usdg = findStable('chain-mainnet', 'USDG')!;
  const accepted = accepts[2]!;
  const ext = FeeExtension.parse(accepted.extra[FEE_EXTENSION_KEY]);
  t.is(ext.feeAuthority, app.services.settings.fee.authorities['chain-mainnet']);
  const buyer = Keypair.generate();
  await app.services.dev.fund('chain-mainnet', { address: buyer.publicKey.toBase58(), token: 'USDG', amount: '1' });
  const ledger = app.services.ledgers['chain-mainnet']!;
  const { blockhash } = await ledger.getLatestBlockhash();
  const tx = buildPaymentTransaction({
    feePayer: accepted.extra.feePayer as string,
    payer: buyer.publicKey.toBase58(),
    blockhash,
    requirements: {
      scheme: 'exact',
      network: 'chain-mainnet',
      payTo: accepted.payTo,
      asset: usdg.mint,
      amount: PRICE,
      tokenProgram: TOKEN_2022_PROGRAM_ID,
      decimals: usdg.decimals,
      fee: { bps: ext.bps, feeAuthority: ext.feeAuthority },
    },
  });
  tx.sign([buyer]);
  const payload = { x402Version: 2, accepted, payload: { transaction: Buffer.from(tx.serialize()).toString('base64') } };
  const paid = await fetch(url, { headers: { 'PAYMENT-SIGNATURE': base64Json(payload) } });
  t.is(paid.status, 200, await paid.clone().text());
  const { transaction } = decodePaymentResponse(paid.headers.get('PAYMENT-RESPONSE')!);
  const landed = await ledger.getTransaction(transaction);
  t.is(landed?.err, null);
  const delta = (owner: string) =>
    landed!.postTokenBalances.filter((b) => b.owner === owner && b.mint === usdg.mint).reduce((s, b) => s + b.amount, 0n) -
    landed!.preTokenBalances.filter((b) => b.owner === owner && b.mint === usdg.mint).reduce((s, b) => s + b.amount, 0n);
  t.is(delta(treasuryOf(agent)), PRICE);
  t.is(delta(ext.feeAuthority), feeFor(PRICE, ext.bps));
  t.is(delta(buyer.publicKey.toBase58()), -(PRICE + feeFor(PRICE, ext.bps)));
  const [receipt] = (await app.database.store.transaction(async (r) => r.receipts.listByAgent('chain-mainnet', agent, { limit: 5 }))).map((x) => x.receipt);
  t.like(receipt?.price, { currency: 'USDG', asset: usdg.mint, network: CAIP2['chain-mainnet'] });
});

test('CORS: a browser preflight (OPTIONS) is answered 204 allowing the payment headers; answers expose PAYMENT-* headers', async (t) => {
  const { link } = await createLink(t.context);
  const preflight = await fetch(link.share_url, {
    method: 'OPTIONS',
    headers: { Origin: 'https://buyer.example', 'Access-Control-Request-Headers': 'payment-signature' },
  });
  t.is(preflight.status, 204);
  t.regex(preflight.headers.get('access-control-allow-headers') ?? '', /PAYMENT-SIGNATURE/);
  const unpaid = await fetch(link.share_url);
  t.is(unpaid.status, 402);
  t.regex(unpaid.headers.get('access-control-expose-headers') ?? '', /PAYMENT-REQUIRED/);
});

// ── Request-bound payments and returning payers ──────────────────────────────────────────────────────────────────

/** The memos of a settled transaction's message, as text. */
async function memosOf(t: ExecutionContext<PaywallWorld>, signature: string): Promise<string[]> {
  const ledger = t.context.app.services.ledgers['chain-devnet']!;
  await waitForCommitment(ledger, signature);
  const tx = await ledger.getTransaction(signature);
  if (!tx) throw new Error(`transaction ${signature} not found`);
  return decodeTransaction(tx.wire)
    .instructions.filter((ix) => ix.programId === MEMO_PROGRAM_ID)
    .map((ix) => new TextDecoder().decode(ix.data));
}

test('request-bound: the kit binds its payment to the request; refused on another link or query; unbound refused only where the link requires binding', async (t) => {
  const w = t.context;
  const a = await createLink(w, { response: { body: { link: 'a' } } });
  const sibling = await createLink(w, { response: { body: { link: 'b' } } }, a.agent);
  const strict = await createLink(w, { request_binding: 'required', response: { body: { link: 'strict' } } });
  t.is(a.link.request_binding, 'optional', 'default: stock clients keep paying');
  t.is(strict.link.request_binding, 'required');
  const buyer = await fundBuyer(w);

  // The 402 states the digest of the request it answered (for scheme clients that see no request).
  const path = new URL(a.url).pathname;
  const digest = await requestDigest({ method: 'GET', path, query: 'network=chain-devnet', body: undefined });
  const offer = await unpaidOffer(a.url);
  t.like(offer.v2.extensions?.[REQUEST_BINDING_EXTENSION]?.info, { digest, required: false });
  const other = await unpaidOffer(`${a.url}&city=Paris`);
  t.is(other.v2.extensions?.[REQUEST_BINDING_EXTENSION]?.info.digest, await requestDigest({ method: 'GET', path, query: 'city=Paris', body: undefined }));

  const { pay, sent } = recordingPayingFetch(w, buyer);
  const paid = await pay(a.url);
  t.is(paid.status, 200, await paid.text());
  const { transaction } = decodePaymentResponse(paid.headers.get('payment-response')!);
  t.true(
    (await memosOf(t, transaction)).some((m) => m.startsWith(`${REQUEST_BINDING_PREFIX}${digest}:`)),
    'the memo names this request',
  );
  const signature = sent.at(-1)!.get('payment-signature')!;
  const spent = await tokenBalance(w, buyer.publicKey.toBase58());

  // The same payment on another query of the link, and on a sibling link with the very same offer: bound elsewhere.
  for (const url of [`${a.url}&city=Paris`, sibling.url]) {
    const res = await fetch(url, { headers: { 'PAYMENT-SIGNATURE': signature } });
    t.is(res.status, 402, url);
    const body = (await res.json()) as { error: string; details?: { request_digest?: string } };
    t.is(body.error, 'payment_bound_elsewhere', url);
    t.regex(body.details?.request_digest ?? '', /^[0-9a-f]{64}$/);
  }
  // … and on its own request it is the replay of the call it paid for.
  const replay = await fetch(a.url, { headers: { 'PAYMENT-SIGNATURE': signature } });
  t.is(replay.status, 200);
  t.is(replay.headers.get('x-svc-replayed'), 'true');

  // A stock-style unbound payment (a random memo): accepted by default, refused where binding is required.
  const unbound = await buildPayment(w, strict.url, buyer);
  const refused = await fetch(strict.url, { headers: { 'PAYMENT-SIGNATURE': unbound.paymentSignature } });
  t.is(refused.status, 402);
  t.is(((await refused.json()) as { error: string }).error, 'payment_unbound');
  t.is(await tokenBalance(w, buyer.publicKey.toBase58()), spent, 'nothing moved for the refused payments');
  const bound = await payingFetch(w, buyer)(strict.url);
  t.is(bound.status, 200, 'the kit pays a link that requires binding');
  t.deepEqual(await bound.json(), { link: 'strict' });
  const plain = await buildPayment(w, sibling.url, buyer);
  t.is((await fetch(sibling.url, { headers: { 'PAYMENT-SIGNATURE': plain.paymentSignature } })).status, 200, 'unbound accepted on a default link');
  t.is(await settledCount(t, sibling.link.id), 1);
  t.is(await settledCount(t, strict.link.id), 1);
});

/** A wallet-adapter signer (signMessage) of a keypair, as @x402/extensions' sign-in-with-x client takes one. */
function walletSigner(kp: Keypair) {
  const pkcs8 = Buffer.concat([Buffer.from('302e020100300506032b657004220420', 'hex'), kp.secretKey.subarray(0, 32)]);
  const key = createPrivateKey({ key: pkcs8, format: 'der', type: 'pkcs8' });
  return { address: kp.publicKey.toBase58(), publicKey: kp.publicKey, signMessage: async (m: Uint8Array) => new Uint8Array(sign(null, m, key)) };
}

test('returning payers: within access_window the wallet that paid signs in (sign-in-with-x, stock @x402/extensions client) instead of paying; nonce single use; others and expired access get the 402', async (t) => {
  const w = t.context;
  const { link, url } = await createLink(w, { access_window: '1h', response: { body: { secret: 'sauce' } } });
  t.is(link.access_window, '1h');
  const buyer = await fundBuyer(w);
  const signer = walletSigner(buyer);
  const stranger = walletSigner(Keypair.generate());

  // The 402 carries the extension's challenge, fresh each time.
  const offer = await unpaidOffer(url);
  const challenge = offer.v2.extensions?.[SIGN_IN_WITH_X];
  t.like(challenge?.info, { domain: new URL(url).host, uri: offer.v2.resource.url, version: '1' });
  t.deepEqual(challenge?.supportedChains, [{ chainId: CAIP2['chain-devnet'], type: 'ed25519' }]);
  t.not((await unpaidOffer(url)).v2.extensions[SIGN_IN_WITH_X].info.nonce, challenge.info.nonce);

  // Records the SIGN-IN-WITH-X header each sign-in sends.
  const headersSent: string[] = [];
  const recording = (async (input: RequestInfo | URL, init?: RequestInit) => {
    const request = new Request(input, init);
    const h = request.headers.get(SIGN_IN_WITH_X);
    if (h) headersSent.push(h);
    return fetch(request);
  }) as typeof fetch;

  // Before paying: no access.
  const early = await wrapFetchWithSIWx(recording, signer)(url);
  t.is(early.status, 402);
  t.is(((await early.json()) as { error: string }).error, 'siwx_not_paid');

  const paid = await payingFetch(w, buyer)(url);
  t.is(paid.status, 200, await paid.text());
  const balance = await tokenBalance(w, buyer.publicKey.toBase58());

  const again = await wrapFetchWithSIWx(recording, signer)(url);
  t.is(again.status, 200);
  t.is(again.headers.get('x-svc-access'), SIGN_IN_WITH_X);
  t.deepEqual(await again.json(), { secret: 'sauce' });
  t.is(await tokenBalance(w, buyer.publicKey.toBase58()), balance, 'not charged again');
  t.is(await settledCount(t, link.id), 1, 'an access is not a sale');

  // The same signed sign-in again: its nonce is spent.
  const reused = await fetch(url, { headers: { [SIGN_IN_WITH_X]: headersSent.at(-1)! } });
  t.is(reused.status, 402);
  t.is(((await reused.json()) as { error: string }).error, 'siwx_nonce_used');
  // Altered (another address claiming the signature): refused.
  const forged = { ...JSON.parse(Buffer.from(headersSent.at(-1)!, 'base64').toString('utf8')), address: stranger.address };
  const refusedForged = await fetch(url, { headers: { [SIGN_IN_WITH_X]: base64Json(forged) } });
  t.is(((await refusedForged.json()) as { error: string }).error, 'siwx_invalid');
  // A wallet that paid two hours ago, on a one-hour window: the 402.
  const pk = (await w.app.database.store.paymentLinks.get('chain-devnet', link.id))!.pk;
  await w.app.database.store.linkAccess.recordPayment('chain-devnet', pk, stranger.address, new Date(Date.now() - 2 * 3600_000));
  const expired = await wrapFetchWithSIWx(fetch, stranger)(url);
  t.is(expired.status, 402);
  t.is(((await expired.json()) as { error: string }).error, 'siwx_access_expired');
});
