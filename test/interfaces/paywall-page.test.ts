import anyTest, { type TestFn } from 'ava';
import { chromium, type Browser } from 'playwright-core';
import type { UnpaidFastPath } from '../../interfaces/paywall/fast-402.ts';
import { prefersHtml } from '../../interfaces/paywall/page.ts';
import { chromiumOrThrow } from '../support/chromium.ts';
import { createLink, fundFeeVault, startPaywallApp, stopPaywallApp, type CreatedLink, type PaywallWorld } from '../support/paywall.ts';

// The paywall page (docs/paywall.md "In a browser"): a browser opening a share_url gets a 402 page a person can read
// and pay from a wallet (Solana Pay transaction request); API clients keep the JSON 402 byte for byte. One app and one
// Chromium (Debian's, driven by playwright-core) for the file.

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
