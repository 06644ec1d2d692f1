import anyTest, { type TestFn } from 'ava';
import { chromium, type Browser } from 'playwright-core';
import { Connection, type Keypair, VersionedTransaction } from '@solana/web3.js';
import { checkSession, newPageSession, PAGE_SESSION_MS, sessionQuery, type PageSession } from '../../domain/paywall/solana-pay.ts';
import { cosignRequest, walletTransaction } from '../../domain/paywall/wallet.ts';
import { feeSplits } from '../../domain/facilitator/splits.ts';
import { treasuryOf } from '../../domain/treasury/derive.ts';
import { decodeTransaction } from '../../domain/facilitator/decode.ts';
import { isMemo } from '../../domain/facilitator/instructions.ts';
import { REQUEST_BINDING_PREFIX, requestDigest } from '../../domain/shared/request-binding.ts';
import type { UnpaidFastPath } from '../../interfaces/paywall/fast-402.ts';
import { prefersHtml } from '../../interfaces/pages/html.ts';
import { chromiumOrThrow } from '../support/chromium.ts';
import {
  createLink,
  eventsOf,
  fundBuyer,
  fundFeeVault,
  legacyAgentWithLink,
  paidCallsOf,
  receiptsOf,
  startPaywallApp,
  tokenBalance,
  unpaidOffer,
  type CreatedLink,
  type PaywallWorld,
} from '../support/paywall.ts';
import { closeConnection } from '../support/ledger.ts';
import { afterAll } from '../support/teardown.ts';

// The paywall page (docs/paywall.md "In a browser"): a browser opening a share_url gets a 402 page a person can read
// and pay from a wallet (Solana Pay transaction request); API clients keep the JSON 402 byte for byte. One app and one
// Chromium (Debian's, driven by playwright-core) for the file.

/** generous: two cores shared by several test processes; nothing here waits on wall-clock speed otherwise */
const WAIT_MS = 90_000;
/** What Chromium sends on a navigation. */
const BROWSER_ACCEPT =
  'text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7';
/** the paywall's shared key (SVC_MPP_SECRET), known here so a test can sign a page session as the gateway does */
const SESSION_SECRET = 'paywall-page-test-session-key-0123456789';
const SESSION_KEY = new TextEncoder().encode(SESSION_SECRET);
/** the bearer of POST /facilitator/cosign and /accounts */
const ACCOUNTS_SECRET = 'paywall-page-test-accounts-bearer';

interface Ctx {
  w: PaywallWorld;
  browser: Browser;
  created: CreatedLink;
}

const test = anyTest as TestFn<Ctx>;

test.before(async (t) => {
  const executablePath = chromiumOrThrow();
  const w = await startPaywallApp({ SVC_MPP_SECRET: SESSION_SECRET, SVC_FACILITATOR_ACCOUNTS_SECRET: ACCOUNTS_SECRET });
  await fundFeeVault(w);
  const created = await createLink(w, { label: 'Weather <report>', metadata: { description: 'Tomorrow’s forecast for Paris' } });
  const browser = await chromium.launch({ executablePath, args: ['--no-sandbox'] });
  afterAll(() => browser.close()); // before the app, which would otherwise wait for the pages' open streams
  t.context = { w, browser, created };
});

/** Unpaid 402s answered before fastify (interfaces/paywall/fast-402.ts). */
const beforeFastify = (w: PaywallWorld): number => (w.app.fastify as unknown as { unpaidFastPath: UnpaidFastPath }).unpaidFastPath.answered;

/** Status, the headers that do not vary per request, and the body bytes. */
async function jsonAnswer(url: string, accept: string | undefined) {
  const res = await fetch(url, accept === undefined ? {} : { headers: { accept } });
  const headers = [...res.headers].filter(([name]) => !/^(x-svc-request-id|ratelimit-.*|date|connection|keep-alive)$/.test(name));
  return { status: res.status, headers, body: Buffer.from(await res.arrayBuffer()) };
}

test('Accept decides: a browser navigation prefers HTML; no Accept, */*, JSON and ties do not', (t) => {
  t.true(prefersHtml(BROWSER_ACCEPT));
  t.true(prefersHtml('text/html'));
  t.false(prefersHtml(undefined));
  t.false(prefersHtml('*/*'));
  t.false(prefersHtml('application/json'));
  t.false(prefersHtml('application/json, text/html'));
  t.false(prefersHtml('text/html;q=0.5, application/json'));
  t.false(prefersHtml('text/plain'));
});

test.serial('API clients get the same JSON 402 bytes before and after a browser saw the page, still from the fast path', async (t) => {
  const { w, created } = t.context;
  const accepts = [undefined, '*/*', 'application/json'];
  // warm: the first unpaid request renders the challenge the fast path serves
  await jsonAnswer(created.url, undefined);
  const before = await Promise.all(accepts.map((a) => jsonAnswer(created.url, a)));
  const page = await fetch(created.url, { headers: { accept: BROWSER_ACCEPT } });
  t.is(page.status, 402);
  t.regex(page.headers.get('content-type') ?? '', /^text\/html/);
  await page.text();
  const fastBefore = beforeFastify(w);
  const after = await Promise.all(accepts.map((a) => jsonAnswer(created.url, a)));
  t.is(beforeFastify(w) - fastBefore, accepts.length, 'the JSON 402s still come from the fast path');
  for (const [i, answer] of after.entries()) {
    t.is(answer.status, 402);
    t.deepEqual(answer.headers, before[i]!.headers);
    t.true(answer.body.equals(before[i]!.body), `Accept ${accepts[i]}: same bytes`);
    t.true(answer.body.equals(before[0]!.body), 'every JSON client gets one answer');
  }
  const offer = JSON.parse(after[0]!.body.toString('utf8')) as { accepts: { maxAmountRequired: string }[] };
  t.is(offer.accepts[0]!.maxAmountRequired, '10000');
});

test.serial('in Chromium the page shows the label, the human price, the network, what is bought, the snippets and the wallet QR/link', async (t) => {
  const { w, browser, created } = t.context;
  const page = await browser.newPage();
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  const res = await page.goto(created.url);
  t.is(res?.status(), 402);
  t.is(await page.textContent('#label'), 'Weather <report>');
  t.is(await page.textContent('#description'), 'Tomorrow’s forecast for Paris');
  t.is(await page.textContent('#prices .price'), '0.01 USDC');
  t.regex((await page.textContent('#prices .fee')) ?? '', /0\.0001 USDC protocol fee \(1\.00%\): 0\.0101 USDC/);
  t.is(await page.textContent('#network'), 'chain-devnet');
  t.regex((await page.textContent('#receive')) ?? '', /GET .*\/x\/.*application\/json/);
  const code = (await page.$$eval('pre.snippet', (els) => els.map((e) => e.textContent ?? ''))).join('\n');
  t.regex(code, /from 'svc-gateway\/client\/pay'/);
  t.regex(code, /from '@x402\/fetch'/);
  t.regex(code, /new ExactSvmFeeScheme\(/);
  t.true(code.includes(created.url));
  // the QR code is inline SVG (nothing from another host), the link a Solana Pay transaction request
  t.is(await page.locator('#qr svg').count(), 1);
  const href = (await page.getAttribute('#solana-pay', 'href')) ?? '';
  t.true(href.startsWith('solana:'), href);
  const request = new URL(decodeURIComponent(href.slice('solana:'.length)));
  t.is(request.origin, new URL(w.app.services.settings.baseUrl).origin);
  t.is(request.pathname, `/x/${created.link.id}/solana-pay`);
  t.is(request.searchParams.get('network'), 'chain-devnet');
  // Solana Pay GET: label and icon for the wallet
  const meta = (await (await fetch(request)).json()) as { label: string; icon: string };
  t.regex(meta.label, /^Weather <report> · 0\.0101 USDC$/);
  const icon = await fetch(meta.icon);
  t.is(icon.status, 200);
  t.regex(icon.headers.get('content-type') ?? '', /^image\/svg\+xml/);
  t.deepEqual(errors, []);
  await page.close();
});

test.serial('a wallet pays the page: Solana Pay POST, sign, send; the open page shows the paid response once; one receipt, one set of events', async (t) => {
  const { w, browser, created } = t.context;
  const page = await browser.newPage();
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await page.goto(created.url);
  const href = (await page.getAttribute('#solana-pay', 'href')) ?? '';
  const request = decodeURIComponent(href.slice('solana:'.length)).replace(new URL(w.app.services.settings.baseUrl).origin, new URL(w.app.url).origin);

  // refusals first, in the standard envelope: an account that is no address, a link whose session was tampered with
  const post = (url: string, body: unknown) => fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const badAccount = await post(request, { account: 'not-a-key' });
  t.is(badAccount.status, 400);
  t.like(await badAccount.json(), { error: 'invalid_request' });
  const stretched = new URL(request);
  stretched.searchParams.set('expires', String(Number(stretched.searchParams.get('expires')) + 3600));
  const forged = await post(stretched.toString(), { account: created.treasury });
  t.is(forged.status, 400);
  t.like(await forged.json(), { error: 'invalid_request', details: { reason: 'session_invalid' } });

  // the wallet: POST its account, sign the co-signed transaction, send it to the devnet's JSON-RPC
  const buyer = await fundBuyer(w);
  const answer = await post(request, { account: buyer.publicKey.toBase58() });
  t.is(answer.status, 200);
  const { transaction, message } = (await answer.json()) as { transaction: string; message: string };
  t.is(message, 'Weather <report>: 0.0101 USDC');
  const tx = VersionedTransaction.deserialize(Buffer.from(transaction, 'base64'));
  t.is(tx.message.staticAccountKeys[0]!.toBase58(), (await w.app.services.facilitator!.health()).fee_payer, 'the facilitator pays the fees');
  t.false(
    tx.signatures[0]!.every((b) => b === 0),
    'partially signed by the facilitator',
  );
  tx.sign([buyer]);
  await new Connection(w.rpcUrl, 'confirmed').sendRawTransaction(tx.serialize());

  await page.waitForSelector('#status[data-state="paid"]', { timeout: WAIT_MS });
  t.deepEqual(JSON.parse((await page.textContent('#paid-body')) ?? ''), { forecast: 'sunny' });
  t.regex((await page.textContent('#paid-meta')) ?? '', /HTTP 200/);

  // a second read with the page's own secret learns it was paid, not the response again
  const secret = /"secret":"([A-Za-z0-9_-]+)"/.exec(await page.content())?.[1] ?? '';
  const reference = new URL(request).searchParams.get('reference')!;
  const again = await fetch(`${w.app.url}/x/${created.link.id}/solana-pay/${reference}?network=chain-devnet`, { headers: { 'x-svc-page-secret': secret } });
  t.is(again.status, 200);
  const read = (await again.json()) as { state: string; response: unknown };
  t.is(read.state, 'paid');
  t.is(read.response, null);
  const stranger = await fetch(`${w.app.url}/x/${created.link.id}/solana-pay/${reference}?network=chain-devnet`, { headers: { 'x-svc-page-secret': 'guess' } });
  t.is(stranger.status, 403);

  // the paywall's own record: one paid call, one earn receipt, one settled and one served event
  const calls = await paidCallsOf(w, created.link.id);
  t.is(calls.length, 1);
  t.is(calls[0]!.status, 'done');
  const signature = calls[0]!.signature!;
  t.is((await receiptsOf(w, created.agent)).filter((r) => r.tx_sig === signature).length, 1);
  t.is((await eventsOf(w, 'payment_link.settled', created.agent)).filter((e) => e.signature === signature).length, 1);
  t.is((await eventsOf(w, 'payment_link.served', created.agent)).filter((e) => e.signature === signature).length, 1);
  t.deepEqual(errors, []);
  await page.close();
});

test.serial('status reads racing for one wallet payment: exactly one gets the response, one paid call and one receipt', async (t) => {
  const { w, created } = t.context;
  // a page fetched without a browser: its session from the HTML (what the page's script holds)
  const html = await (await fetch(created.url, { headers: { accept: BROWSER_ACCEPT } })).text();
  const secret = /"secret":"([A-Za-z0-9_-]+)"/.exec(html)?.[1] ?? '';
  const href = /id="solana-pay" href="([^"]+)"/.exec(html)?.[1] ?? '';
  const request = decodeURIComponent(href.replace(/&amp;/g, '&').slice('solana:'.length)).replace(
    new URL(w.app.services.settings.baseUrl).origin,
    new URL(w.app.url).origin,
  );
  const reference = new URL(request).searchParams.get('reference')!;
  const buyer = await fundBuyer(w);
  const answer = await fetch(request, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ account: buyer.publicKey.toBase58() }),
  });
  const tx = VersionedTransaction.deserialize(Buffer.from(((await answer.json()) as { transaction: string }).transaction, 'base64'));
  tx.sign([buyer]);
  const connection = new Connection(w.rpcUrl, 'confirmed');
  t.teardown(() => closeConnection(connection));
  const sent = await connection.sendRawTransaction(tx.serialize());
  // waits on the ledger's confirmation, then reads race
  await connection.confirmTransaction(sent, 'confirmed');
  const status = () =>
    fetch(`${w.app.url}/x/${created.link.id}/solana-pay/${reference}?network=chain-devnet`, { headers: { 'x-svc-page-secret': secret } }).then(
      (r) => r.json() as Promise<{ state: string; response: unknown }>,
    );
  const reads = await Promise.all([status(), status(), status(), status()]);
  t.deepEqual(
    reads.map((r) => r.state),
    ['paid', 'paid', 'paid', 'paid'],
  );
  t.is(reads.filter((r) => r.response !== null).length, 1, 'the response is served once');
  const calls = (await paidCallsOf(w, created.link.id)).filter((c) => c.signature === sent);
  t.is(calls.length, 1);
  t.is((await receiptsOf(w, created.agent)).filter((r) => r.tx_sig === sent).length, 1);
  t.is((await eventsOf(w, 'payment_link.settled', created.agent)).filter((e) => e.signature === sent).length, 1);
});

/** The transaction request URL of a page session, on the test app's origin (the page names the configured base URL). */
const requestUrl = (w: PaywallWorld, id: string, session: Pick<PageSession, 'reference' | 'expires' | 'sig'>): string =>
  `${w.app.url}/x/${encodeURIComponent(id)}/solana-pay?${sessionQuery('chain-devnet', session)}`;

const postJson = (url: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });

const readStatus = (w: PaywallWorld, id: string, session: Pick<PageSession, 'reference' | 'secret'>) =>
  fetch(`${w.app.url}/x/${encodeURIComponent(id)}/solana-pay/${session.reference}?network=chain-devnet`, { headers: { 'x-svc-page-secret': session.secret } });

test.serial('a wallet POST for a link whose agent is unproven: 409 agent_unproven, nothing co-signed, nothing moved or recorded', async (t) => {
  const { w } = t.context;
  // DECISIONS "Agents, submissions and events": no payment into the treasury of an agent not proven on the ledger
  const legacy = await legacyAgentWithLink(w);
  const session = newPageSession({ key: SESSION_KEY, network: 'chain-devnet', id: legacy.link.id, now: new Date() });
  const buyer = await fundBuyer(w);
  const before = await tokenBalance(w, buyer.publicKey.toBase58());
  const res = await postJson(requestUrl(w, legacy.link.id, session), { account: buyer.publicKey.toBase58() });
  t.is(res.status, 409);
  const body = (await res.json()) as Record<string, unknown>;
  t.like(body, { error: 'agent_unproven', details: { mint: legacy.mint, network: 'chain-devnet', treasury: treasuryOf(legacy.mint) } });
  t.regex(String(body.message), /nothing was charged/);
  t.false('transaction' in body, 'nothing for the wallet to sign');
  t.is(await tokenBalance(w, buyer.publicKey.toBase58()), before);
  t.is(await tokenBalance(w, treasuryOf(legacy.mint)), 0n);
  t.deepEqual(await paidCallsOf(w, legacy.link.id), []);
  // its status reads refuse alike: the page of an unproven agent's link records nothing
  const status = await readStatus(w, legacy.link.id, session);
  t.is(status.status, 409);
  t.like(await status.json(), { error: 'agent_unproven' });
});

test.serial('an expired page session: the wallet POST is 409 transaction_expired (page_expired) and nothing is signed; its status still reads', async (t) => {
  const { w, created } = t.context;
  // signed as the gateway signs one, two session lengths ago: past its end whatever the clocks read
  const session = newPageSession({ key: SESSION_KEY, network: 'chain-devnet', id: created.link.id, now: new Date(Date.now() - 2 * PAGE_SESSION_MS) });
  const url = requestUrl(w, created.link.id, session);
  const buyer = await fundBuyer(w);
  const res = await postJson(url, { account: buyer.publicKey.toBase58() });
  t.is(res.status, 409);
  const body = (await res.json()) as Record<string, unknown>;
  t.like(body, { error: 'transaction_expired', details: { reason: 'page_expired' } });
  t.false('transaction' in body, 'nothing for the wallet to sign');
  // the wallet's GET only names the payee (label, icon): the session is enforced where a transaction is built
  const meta = await fetch(url);
  t.is(meta.status, 200);
  t.like(await meta.json(), { label: 'Weather <report> · 0.0101 USDC' });
  // the status route reads by the page's secret, past the end too: a payment sent just before it is still recorded
  const status = await readStatus(w, created.link.id, session);
  t.is(status.status, 200);
  t.deepEqual(await status.json(), { state: 'waiting' });
});

/**
 * A settlement naming the page's reference with the facilitator as fee payer (what the status route re-verifies),
 * built for `amount` (and `payTo`) instead of the offer's: the cosign request body a wallet's transaction would come from.
 */
async function cosignBodyFor(w: PaywallWorld, options: { created: CreatedLink; reference: string; account: string; amount: string; payTo?: string }) {
  const offer = await unpaidOffer(options.created.url);
  const offered = offer.v2.accepts[0];
  // other terms than the link's: the fee split those terms owe, as a facilitator client would state it
  const extra = { ...offered.extra, splits: feeSplits(BigInt(options.amount), offered.extra['svc.fee']) };
  const accept = { ...offered, amount: options.amount, extra, ...(options.payTo ? { payTo: options.payTo } : {}) };
  const { blockhash } = await w.app.services.ledgers['chain-devnet']!.getLatestBlockhash();
  const unsigned = walletTransaction({
    network: 'chain-devnet',
    accept,
    feePayer: accept.extra.feePayer,
    account: options.account,
    reference: options.reference,
    blockhash,
  });
  return cosignRequest(accept, offer.v2.resource, unsigned);
}

/** Signs a co-signed transaction as the buyer's wallet, sends it and waits for the ledger's confirmation. */
async function signAndLand(w: PaywallWorld, transaction: string, buyer: Keypair): Promise<string> {
  const tx = VersionedTransaction.deserialize(Buffer.from(transaction, 'base64'));
  tx.sign([buyer]);
  const connection = new Connection(w.rpcUrl, 'confirmed');
  try {
    const signature = await connection.sendRawTransaction(tx.serialize());
    await connection.confirmTransaction(signature, 'confirmed');
    return signature;
  } finally {
    // web3.js would otherwise reconnect its WebSocket forever once the app is gone, and the file never exits
    await closeConnection(connection);
  }
}

test.serial(
  'landed transactions naming the reference that pay the wrong amount or another payee are not recorded; the right payment after them is, once',
  async (t) => {
    const { w, created } = t.context;
    const session = newPageSession({ key: SESSION_KEY, network: 'chain-devnet', id: created.link.id, now: new Date() });
    const buyer = await fundBuyer(w);
    const account = buyer.publicKey.toBase58();
    // a wallet holding a USDC account (the co-signed transaction creates none), not the link's payee
    const elsewhere = (await fundBuyer(w, '0.000001')).publicKey.toBase58();
    // half the price, then the full price to a wallet that is not the link's payee: each co-signed by the facilitator
    // for those terms (it settles for any payTo, F§1) and landed by the buyer
    const land = async (terms: { amount: string; payTo?: string }) => {
      const cosign = await postJson(`${w.app.url}/facilitator/cosign`, await cosignBodyFor(w, { created, reference: session.reference, account, ...terms }), {
        authorization: `Bearer ${ACCOUNTS_SECRET}`,
      });
      const cosigned = (await cosign.json()) as { success: boolean; transaction: string };
      t.true(cosigned.success, JSON.stringify(cosigned));
      return signAndLand(w, cosigned.transaction, buyer);
    };
    const wrong = [await land({ amount: '5000' }), await land({ amount: '10000', payTo: elsewhere })];
    t.is(await tokenBalance(w, account), 1_000_000n - 5050n - 10100n, 'both moved on the ledger');
    t.is(await tokenBalance(w, elsewhere), 10_001n);

    // the page's status ignores them: not this link's settlement, so no paid call, no receipt, no event
    for (let i = 0; i < 2; i++) {
      const read = await readStatus(w, created.link.id, session);
      t.is(read.status, 200);
      t.deepEqual(await read.json(), { state: 'waiting' });
    }
    const unrecorded = async () => {
      t.deepEqual(
        (await paidCallsOf(w, created.link.id)).filter((c) => wrong.includes(c.signature ?? '')),
        [],
      );
      t.deepEqual(
        (await receiptsOf(w, created.agent)).filter((r) => wrong.includes(r.tx_sig ?? '')),
        [],
      );
      t.deepEqual(
        (await eventsOf(w, 'payment_link.settled', created.agent)).filter((e) => wrong.includes(e.signature ?? '')),
        [],
      );
      t.deepEqual(
        (await eventsOf(w, 'payment_link.served', created.agent)).filter((e) => wrong.includes(e.signature ?? '')),
        [],
      );
    };
    await unrecorded();

    // the right payment on the same page afterwards is recorded once, and its response served once
    const answer = await postJson(requestUrl(w, created.link.id, session), { account });
    t.is(answer.status, 200);
    const paid = await signAndLand(w, ((await answer.json()) as { transaction: string }).transaction, buyer);
    const first = (await (await readStatus(w, created.link.id, session)).json()) as { state: string; signature: string; response: unknown };
    t.like(first, { state: 'paid', signature: paid });
    t.not(first.response, null);
    t.like(await (await readStatus(w, created.link.id, session)).json(), { state: 'paid', signature: paid, response: null });
    t.is((await paidCallsOf(w, created.link.id)).filter((c) => c.signature === paid).length, 1);
    t.is((await receiptsOf(w, created.agent)).filter((r) => r.tx_sig === paid).length, 1);
    t.is((await eventsOf(w, 'payment_link.settled', created.agent)).filter((e) => e.signature === paid).length, 1);
    await unrecorded();
  },
);

test.serial(
  'a link requiring request binding is paid from its page: the wallet transaction names the page’s GET; an unbound settlement naming the reference is not recorded',
  async (t) => {
    const { w } = t.context;
    const strict = await createLink(w, { request_binding: 'required' });
    const session = newPageSession({ key: SESSION_KEY, network: 'chain-devnet', id: strict.link.id, now: new Date() });
    const buyer = await fundBuyer(w);
    const account = buyer.publicKey.toBase58();
    // a settlement of the link's very terms naming the page's reference, but unbound (a random memo): not this page's payment
    const cosign = await postJson(
      `${w.app.url}/facilitator/cosign`,
      await cosignBodyFor(w, { created: strict, reference: session.reference, account, amount: '10000' }),
      { authorization: `Bearer ${ACCOUNTS_SECRET}` },
    );
    const unbound = await signAndLand(w, ((await cosign.json()) as { transaction: string }).transaction, buyer);
    t.deepEqual(await (await readStatus(w, strict.link.id, session)).json(), { state: 'waiting' });

    const answer = await postJson(requestUrl(w, strict.link.id, session), { account });
    t.is(answer.status, 200);
    const { transaction } = (await answer.json()) as { transaction: string };
    const digest = await requestDigest({ method: 'GET', path: `/x/${strict.link.id}`, query: '', body: undefined });
    const memos = decodeTransaction(Buffer.from(transaction, 'base64'))
      .instructions.filter(isMemo)
      .map((ix) => new TextDecoder().decode(ix.data));
    t.is(memos.length, 1);
    t.true(memos[0]!.startsWith(`${REQUEST_BINDING_PREFIX}${digest}:`), memos[0]);
    const paid = await signAndLand(w, transaction, buyer);
    t.like(await (await readStatus(w, strict.link.id, session)).json(), { state: 'paid', signature: paid });
    t.deepEqual(
      (await paidCallsOf(w, strict.link.id)).map((c) => c.signature),
      [paid],
      'the unbound one is not recorded',
    );
    t.not(unbound, paid);
  },
);

test.serial('POST /facilitator/cosign without the bearer or with a wrong one: 403 forbidden, as /accounts, and nothing signed', async (t) => {
  const { w, created } = t.context;
  const session = newPageSession({ key: SESSION_KEY, network: 'chain-devnet', id: created.link.id, now: new Date() });
  const buyer = await fundBuyer(w);
  const body = await cosignBodyFor(w, { created, reference: session.reference, account: buyer.publicKey.toBase58(), amount: '10000' });
  for (const authorization of [undefined, 'Bearer wrong-bearer-wrong-bearer', `Bearer ${ACCOUNTS_SECRET.slice(1)}`, ACCOUNTS_SECRET]) {
    const res = await postJson(`${w.app.url}/facilitator/cosign`, body, authorization ? { authorization } : {});
    t.is(res.status, 403, String(authorization));
    const answer = (await res.json()) as Record<string, unknown>;
    t.like(answer, { error: 'forbidden' });
    t.false('transaction' in answer, 'nothing signed');
  }
  // the same body with the bearer is co-signed: the refusals above were the guard's
  const allowed = await postJson(`${w.app.url}/facilitator/cosign`, body, { authorization: `Bearer ${ACCOUNTS_SECRET}` });
  t.is(allowed.status, 200);
  t.like(await allowed.json(), { success: true });
});

test('a page session binds the link and expires', (t) => {
  const key = new Uint8Array(32).fill(7);
  const now = new Date('2026-01-01T00:00:00Z');
  const s = newPageSession({ key, network: 'chain-devnet', id: 'weather', now });
  const fields = { reference: s.reference, expires: String(s.expires), sig: s.sig };
  t.true(checkSession({ key, network: 'chain-devnet', id: 'weather', ...fields, now }).ok);
  t.like(checkSession({ key, network: 'chain-devnet', id: 'other', ...fields, now }), { ok: false, reason: 'invalid_request' });
  t.like(checkSession({ key, network: 'chain-devnet', id: 'weather', ...fields, now: new Date(s.expires * 1000) }), {
    ok: false,
    reason: 'transaction_expired',
  });
});
