import anyTest, { type TestFn } from 'ava';
import { chromium, type Browser, type Page } from 'playwright-core';
import { buildExplorer } from '../../interfaces/explorer/build.ts';
import { http } from '../support/app.ts';
import { chromiumOrThrow } from '../support/chromium.ts';
import { createLink, fundBuyer, payingFetch, startPaywallApp, stopPaywallApp, type PaywallWorld } from '../support/paywall.ts';

// Issue 16: the explorer page in a real browser (Chromium from the Debian package, driven by playwright-core; one
// launch for the file). The page is opened with a key; a link created and paid while it is open shows up as live event
// rows (graphql-ws with a stream token) and as the link's counters (REST); its 402 offer is decoded; the owner agent's
// treasury balance and receipt chain show, with the receipt's verification state.

/** generous: two cores shared by several test processes; nothing here waits on wall-clock speed otherwise */
const WAIT_MS = 90_000;

interface Ctx {
  w: PaywallWorld;
  browser: Browser;
  page: Page;
  scriptBytes: number;
}

const test = anyTest as TestFn<Ctx>;

test.before(async (t) => {
  // SVC_CHROMIUM, else `chromium` on PATH, as `npm test`'s pretest step (scripts/ensure-chromium.ts) installs it
  const executablePath = chromiumOrThrow();
  const { bytes } = await buildExplorer();
  const w = await startPaywallApp();
  // The fee authority's token account exists before the payment (as in receipts-paywall.test.ts).
  await w.app.services.dev.fund('chain-devnet', { address: w.app.services.settings.fee.authorities['chain-devnet'], token: 'USDC', amount: '1' });
  const browser = await chromium.launch({ executablePath, args: ['--no-sandbox'] });
  const page = await browser.newPage();
  t.context = { w, browser, page, scriptBytes: bytes };
});

test.after.always(async (t) => {
  await t.context.browser?.close();
  await stopPaywallApp(t.context.w);
});

test.serial('the page is served from the build directory, with its script under 100 KiB', async (t) => {
  const { w, scriptBytes } = t.context;
  const page = await http(w.app, 'GET', '/explorer');
  t.is(page.status, 200);
  t.regex(page.headers.get('content-type') ?? '', /^text\/html/);
  t.regex(page.headers.get('content-security-policy') ?? '', /default-src 'self'/);
  const script = await fetch(`${w.app.url}/explorer/assets/explorer.js`);
  t.is(script.status, 200);
  t.is((await script.arrayBuffer()).byteLength, scriptBytes);
  t.true(scriptBytes < 100 * 1024, `${scriptBytes} bytes`);
  const unknown = await http(w.app, 'GET', '/explorer/assets/secret.env');
  t.is(unknown.status, 404);
  t.is(unknown.body.error, 'not_found');
});

test.serial('a link created and paid while the page is open appears live: event rows, counters, offer, treasury and receipts', async (t) => {
  const { w, page } = t.context;
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));

  await page.goto(`${w.app.url}/explorer`);
  await page.fill('#key', w.key);
  await page.click('#connect');
  await page.waitForFunction(() => document.querySelector('#status')?.textContent === 'live', undefined, { timeout: WAIT_MS });

  // Created while the page is open: the event row, then the link's row (the page re-reads the list on events).
  const { link, agent, url } = await createLink(t.context.w);
  await page.waitForSelector(`#events tr[data-kind="payment_link.created"][data-link="${link.id}"]`, { timeout: WAIT_MS });
  await page.waitForSelector(`#links tr[data-link-id="${link.id}"]`, { timeout: WAIT_MS });
  t.is(await page.textContent(`#links tr[data-link-id="${link.id}"] td.settled`), '0');

  // Paid while the page is open.
  const buyer = await fundBuyer(w);
  const paid = await payingFetch(w, buyer)(url);
  t.is(paid.status, 200);
  await page.waitForSelector(`#events tr[data-kind="payment_link.settled"][data-link="${link.id}"]`, { timeout: WAIT_MS });
  await page.waitForFunction(
    (id) => document.querySelector(`#links tr[data-link-id="${id}"] td.settled`)?.textContent === '1',
    link.id,
    { timeout: WAIT_MS },
  );
  t.is(await page.textContent(`#links tr[data-link-id="${link.id}"] td.calls`), '1');

  // The 402 offer, decoded from PAYMENT-REQUIRED.
  await page.click(`#links tr[data-link-id="${link.id}"] button.offer`);
  await page.waitForSelector('#offer tr.accept', { timeout: WAIT_MS });
  const offered = await page.$$eval('#offer tr.accept td:nth-child(3)', (cells) => cells.map((c) => c.textContent));
  t.true(offered.includes(link.accepts[0]!.amount), JSON.stringify(offered));

  // The owner agent: the treasury's USDC and the receipt chain, each receipt with its verification state; the page
  // re-reads it on the receipt.verified event.
  await page.click(`#links tr[data-link-id="${link.id}"] button.agent`);
  await page.waitForSelector('#balances tr[data-symbol="USDC"]', { timeout: WAIT_MS });
  t.not(await page.textContent('#balances tr[data-symbol="USDC"] td.amount'), '0');
  await page.waitForSelector('#receipts tr[data-nonce="0"][data-verification="verified"]', { timeout: WAIT_MS });
  const receipts = await http(w.app, 'GET', `/v1/receipts/${agent}`, { key: w.key });
  t.is(await page.getAttribute('#receipts tr[data-nonce="0"]', 'data-verification'), receipts.body.data[0].verification.status);
  t.deepEqual(errors, []);
});

test.serial('a pasted stream token connects the page once; pasted again, the spent token is refused', async (t) => {
  const { w, browser } = t.context;
  const page = await browser.newPage();
  try {
    const token = (await http(w.app, 'POST', '/v1/auth/stream-token', { key: w.key })).body.token as string;
    await page.goto(`${w.app.url}/explorer`);
    await page.fill('#token', token);
    await page.click('#connect');
    await page.waitForFunction(() => document.querySelector('#status')?.textContent === 'live', undefined, { timeout: WAIT_MS });
    // Without a key the page subscribes without `after`: links are made until one arrives (the attach is not acknowledged).
    let seen = false;
    for (let attempt = 0; attempt < 30 && !seen; attempt++) {
      const { link } = await createLink(w);
      seen = await page
        .waitForSelector(`#events tr[data-kind="payment_link.created"][data-link="${link.id}"]`, { timeout: 2_000 })
        .then(() => true, () => false);
    }
    t.true(seen, 'an event reached the page connected with the pasted token');

    await page.click('#connect');
    await page.waitForFunction(() => /invalid_api_key/.test(document.querySelector('#status')?.textContent ?? ''), undefined, { timeout: WAIT_MS });
    t.pass();
  } finally {
    await page.close();
  }
});
