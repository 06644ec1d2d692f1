import anyTest, { type TestFn } from 'ava';
import { chromium, type Browser } from 'playwright-core';
import { Connection, VersionedTransaction } from '@solana/web3.js';
import { checkSession, newPageSession } from '../../domain/paywall/solana-pay.ts';
import type { UnpaidFastPath } from '../../interfaces/paywall/fast-402.ts';
import { prefersHtml } from '../../interfaces/pages/html.ts';
import { chromiumOrThrow } from '../support/chromium.ts';
import { createLink, eventsOf, fundBuyer, fundFeeVault, paidCallsOf, receiptsOf, startPaywallApp, stopPaywallApp, type CreatedLink, type PaywallWorld } from '../support/paywall.ts';

// The paywall page (docs/paywall.md "In a browser"): a browser opening a share_url gets a 402 page a person can read
// and pay from a wallet (Solana Pay transaction request); API clients keep the JSON 402 byte for byte. One app and one
// Chromium (Debian's, driven by playwright-core) for the file.

/** generous: two cores shared by several test processes; nothing here waits on wall-clock speed otherwise */
const WAIT_MS = 90_000;
/** What Chromium sends on a navigation. */
const BROWSER_ACCEPT = 'text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7';

interface Ctx {
  w: PaywallWorld;
  browser: Browser;
  created: CreatedLink;
}

const test = anyTest as TestFn<Ctx>;

test.before(async (t) => {
  const executablePath = chromiumOrThrow();
  const w = await startPaywallApp();
  await fundFeeVault(w);
  const created = await createLink(w, { label: 'Weather <report>', metadata: { description: 'Tomorrow’s forecast for Paris' } });
  const browser = await chromium.launch({ executablePath, args: ['--no-sandbox'] });
  t.context = { w, browser, created };
});

test.after.always(async (t) => {
  await t.context.browser?.close();
  await stopPaywallApp(t.context.w);
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
  t.false(tx.signatures[0]!.every((b) => b === 0), 'partially signed by the facilitator');
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
  const request = decodeURIComponent(href.replace(/&amp;/g, '&').slice('solana:'.length)).replace(new URL(w.app.services.settings.baseUrl).origin, new URL(w.app.url).origin);
  const reference = new URL(request).searchParams.get('reference')!;
  const buyer = await fundBuyer(w);
  const answer = await fetch(request, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ account: buyer.publicKey.toBase58() }) });
  const tx = VersionedTransaction.deserialize(Buffer.from(((await answer.json()) as { transaction: string }).transaction, 'base64'));
  tx.sign([buyer]);
  const connection = new Connection(w.rpcUrl, 'confirmed');
  const sent = await connection.sendRawTransaction(tx.serialize());
  // waits on the ledger's confirmation, then reads race
  await connection.confirmTransaction(sent, 'confirmed');
  const status = () => fetch(`${w.app.url}/x/${created.link.id}/solana-pay/${reference}?network=chain-devnet`, { headers: { 'x-svc-page-secret': secret } }).then((r) => r.json() as Promise<{ state: string; response: unknown }>);
  const reads = await Promise.all([status(), status(), status(), status()]);
  t.deepEqual(reads.map((r) => r.state), ['paid', 'paid', 'paid', 'paid']);
  t.is(reads.filter((r) => r.response !== null).length, 1, 'the response is served once');
  const calls = (await paidCallsOf(w, created.link.id)).filter((c) => c.signature === sent);
  t.is(calls.length, 1);
  t.is((await receiptsOf(w, created.agent)).filter((r) => r.tx_sig === sent).length, 1);
  t.is((await eventsOf(w, 'payment_link.settled', created.agent)).filter((e) => e.signature === sent).length, 1);
});

test('a page session binds the link and expires', (t) => {
  const key = new Uint8Array(32).fill(7);
  const now = new Date('2026-01-01T00:00:00Z');
  const s = newPageSession({ key, network: 'chain-devnet', id: 'weather', now });
  const fields = { reference: s.reference, expires: String(s.expires), sig: s.sig };
  t.true(checkSession({ key, network: 'chain-devnet', id: 'weather', ...fields, now }).ok);
  t.like(checkSession({ key, network: 'chain-devnet', id: 'other', ...fields, now }), { ok: false, reason: 'invalid_request' });
  t.like(checkSession({ key, network: 'chain-devnet', id: 'weather', ...fields, now: new Date(s.expires * 1000) }), { ok: false, reason: 'transaction_expired' });
});
