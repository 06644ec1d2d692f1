import { mkdir } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import anyTest, { type TestFn } from 'ava';
import { chromium, type Browser, type BrowserContext, type Page, type WebSocketRoute } from 'playwright-core';
import { buildExplorer } from '../../interfaces/explorer/build.ts';
import { amountOf, localTime } from '../../interfaces/explorer/web/format.ts';
import { liveEvent, mergeEvents, resumeAfter, timeline, type ShownEvent } from '../../interfaces/explorer/web/timeline.ts';
import { http, recordAgent } from '../support/app.ts';
import { afterAll } from '../support/teardown.ts';
import { chromiumOrThrow } from '../support/chromium.ts';
import { createLink, fundFeeVault, fundBuyer, getLink, payingFetch, startPaywallApp, type EventRow, type PaywallWorld } from '../support/paywall.ts';

// The explorer page in a real browser (Chromium from the Debian package, driven by playwright-core; one launch for the
// file). A paid call made before the page opens is in the history it shows on connect; one made between its history
// read and its subscription's attach is replayed after its cursor; one made while it is open arrives live; each shows
// once, as one paid call from settlement to fee, with the agent's name and local times in fixed columns; the page fits
// a phone's width. Its 402 offer is decoded; the owner agent's treasury balance and receipt chain show, with the
// receipt's verification state. Screenshots go to test-artifacts/ (gitignored).

/** generous: two cores shared by several test processes; nothing here waits on wall-clock speed otherwise */
const WAIT_MS = 90_000;
/** a locale and a time zone a half hour off UTC: a time sliced out of the ISO string would not match */
const LOCALE = 'en-GB';
const TIME_ZONE = 'Asia/Kolkata';
const ARTIFACTS = fileURLToPath(new URL('../../test-artifacts/', import.meta.url));
const AGENT_NAME = 'Weather bot';

interface Ctx {
  w: PaywallWorld;
  browser: Browser;
  desktop: BrowserContext;
  page: Page;
  scriptBytes: number;
  /** the paid calls' link and transactions, made by the desktop test for the phone test (one object: AVA copies the context per test) */
  shared: { paid?: { linkId: string; txs: string[] } };
}

const test = anyTest as TestFn<Ctx>;

test.before(async (t) => {
  // SVC_CHROMIUM, else `chromium` on PATH, as `npm test`'s pretest step (scripts/ensure-chromium.ts) installs it
  const executablePath = chromiumOrThrow();
  const { bytes } = await buildExplorer();
  await mkdir(ARTIFACTS, { recursive: true });
  const w = await startPaywallApp();
  // The fee authority's token account exists before the payment (as in receipts-paywall.test.ts).
  await fundFeeVault(w);
  const browser = await chromium.launch({ executablePath, args: ['--no-sandbox'] });
  afterAll(() => browser.close()); // before the app, which would otherwise wait for the pages' open streams
  const desktop = await browser.newContext({ viewport: { width: 1280, height: 900 }, locale: LOCALE, timezoneId: TIME_ZONE });
  const page = await desktop.newPage();
  t.context = { w, browser, desktop, page, scriptBytes: bytes, shared: {} };
});

/**
 * Opens the page and connects it with the key; answers once it is live. `beforeLive` runs after the page has read its
 * history and before its subscription attaches (it holds the page's stream-token request meanwhile): what it commits
 * falls in the gap a page without a cursor would miss.
 */
async function connect(page: Page, w: PaywallWorld, beforeLive?: () => Promise<void>): Promise<void> {
  if (beforeLive) {
    await page.route(
      '**/v1/auth/stream-token',
      async (route) => {
        await beforeLive();
        await route.continue();
      },
      { times: 1 },
    );
  }
  await page.goto(`${w.app.url}/explorer`);
  await page.fill('#key', w.key);
  await page.click('#connect');
  await page.waitForFunction(() => document.querySelector('#status')?.textContent === 'live', undefined, { timeout: WAIT_MS });
}

/** The settlement transaction of a link's latest paid call. */
async function lastTx(w: PaywallWorld, linkId: string): Promise<string> {
  const tx = (await getLink(w, linkId)).counters.last_tx_sig;
  if (!tx) throw new Error(`link ${linkId} has no settled call`);
  return tx;
}

const call = (tx: string) => `#events tbody.call[data-tx="${tx}"]`;

/** Every step of the paid call `tx` is shown, the receipt's check included (it is made by a job after the call). */
async function waitForWholeCall(page: Page, tx: string): Promise<void> {
  for (const step of ['payment_link.settled', 'payment_link.served', 'receipt.published', 'receipt.verified', 'protocol.fee.collected']) {
    await page.waitForSelector(`${call(tx)} .chip.done[data-step="${step}"]`, { timeout: WAIT_MS });
  }
}

/** The left edge and width of each column header, to compare before and after rows arrive. */
const columns = (page: Page) =>
  page.$$eval('#events thead th', (ths) =>
    ths.map((th) => {
      const r = th.getBoundingClientRect();
      return [Math.round(r.left), Math.round(r.width)];
    }),
  );

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

test.serial('paid calls made before the page opens, while it attaches and after show once each, from settled → served → receipt → fee', async (t) => {
  const { w, page } = t.context;
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));

  // Before the page is opened: a named agent's link, paid once.
  const { mint: agent } = await recordAgent(w.app, w.key, { name: AGENT_NAME });
  const { link, url } = await createLink(w, {}, agent);
  const buyer = await fundBuyer(w);
  const pay = payingFetch(w, buyer);
  t.is((await pay(url)).status, 200);
  const before = await lastTx(w, link.id);

  // Paid again after the page read its history, before its subscription attached: replayed after the page's cursor.
  let between = '';
  await connect(page, w, async () => {
    t.is((await pay(url)).status, 200);
    between = await lastTx(w, link.id);
  });
  // From the history page: the call is there with no new event to bring it.
  await page.waitForSelector(`${call(before)} tr[data-kind="payment_link.settled"][data-link="${link.id}"]`, { timeout: WAIT_MS });
  await waitForWholeCall(page, before);
  await waitForWholeCall(page, between);
  t.not(between, before);
  const cols = await columns(page);

  // The agent by its name (GET /v1/agents/{mint}), its address in the tooltip.
  await page.waitForFunction((sel) => document.querySelector(sel)?.textContent === 'Weather bot', `${call(before)} tr.call-summary td.agent`, {
    timeout: WAIT_MS,
  });
  t.is(await page.getAttribute(`${call(before)} tr.call-summary td.agent span`, 'title'), agent);
  // The amount in USDC, not atomic units.
  t.is(await page.textContent(`${call(before)} tr.call-summary td.amount`), '0.01 USDC'); // linkBody's price, $0.01

  // Local time: the time of day in the browser's zone and locale, on one line; the ISO instant in the tooltip.
  const time = await page.$eval(`${call(before)} tr[data-kind="payment_link.settled"] td.time`, (td) => {
    const el = td.querySelector('time')!;
    return {
      text: el.textContent,
      iso: el.getAttribute('datetime'),
      title: el.getAttribute('title'),
      lines: el.getClientRects().length,
      clipped: td.scrollWidth > td.clientWidth,
    };
  });
  const settled = (await http(w.app, 'GET', `/v1/events?kind=payment_link.settled&agent=${agent}`, { key: w.key })).body.data as EventRow[];
  const settledAt = settled.find((e) => e.metadata.tx_sig === before)!.created_at;
  t.is(time.iso, settledAt);
  t.is(time.title, settledAt);
  t.is(time.text, new Intl.DateTimeFormat(LOCALE, { timeZone: TIME_ZONE, hour: '2-digit', minute: '2-digit', second: '2-digit' }).format(new Date(settledAt)));
  t.regex(time.text ?? '', /^\d{2}:\d{2}:\d{2}$/);
  t.is(time.lines, 1, 'the time does not wrap');
  t.false(time.clipped, 'the time fits its column');

  // Paid again while the page is open: it arrives live as one more paid call, each of its events once.
  t.is((await pay(url)).status, 200);
  const after = await lastTx(w, link.id);
  await waitForWholeCall(page, after);
  t.is(await page.locator(call(after)).count(), 1);
  t.is(await page.locator(`${call(after)} .phase`).count(), 0, 'a live event reads as confirmed, as the history does');
  for (const tx of [before, between, after]) t.is(await page.locator(call(tx)).count(), 1);
  t.is(await page.locator(`#events tr[data-kind="payment_link.settled"][data-link="${link.id}"]`).count(), 3);
  const ids = await page.$$eval('#events tr[data-id]', (rows) => rows.map((r) => r.getAttribute('data-id')));
  t.is(new Set(ids).size, ids.length, 'no event is shown twice');
  // every event the key can list is on the page (history and live together leave no gap)
  const listed = ((await http(w.app, 'GET', '/v1/events?limit=200', { key: w.key })).body.data as { id: string }[]).map((e) => e.id);
  await page.waitForFunction((want) => want.every((id) => document.querySelector(`#events tr[data-id="${id}"]`)), listed, { timeout: WAIT_MS });
  // the columns did not move as rows arrived
  t.deepEqual(await columns(page), cols);

  // The link's counters follow (the page re-reads the list on events).
  await page.waitForFunction((id) => document.querySelector(`#links tr[data-link-id="${id}"] td.settled`)?.textContent === '3', link.id, { timeout: WAIT_MS });
  t.is(await page.textContent(`#links tr[data-link-id="${link.id}"] td.calls`), '3');

  // The 402 offer, decoded from PAYMENT-REQUIRED.
  await page.click(`#links tr[data-link-id="${link.id}"] button.offer`);
  await page.waitForSelector('#offer tr.accept', { timeout: WAIT_MS });
  const offered = await page.$$eval('#offer tr.accept td:nth-child(3)', (cells) => cells.map((c) => c.textContent));
  t.true(offered.includes(link.accepts[0]!.amount), JSON.stringify(offered));

  // The owner agent: the treasury's USDC and the receipt chain, each receipt with its verification state.
  await page.click(`#links tr[data-link-id="${link.id}"] button.agent`);
  await page.waitForSelector('#balances tr[data-symbol="USDC"]', { timeout: WAIT_MS });
  t.not(await page.textContent('#balances tr[data-symbol="USDC"] td.amount'), '0');
  await page.waitForSelector('#receipts tr[data-nonce="2"][data-verification="verified"]', { timeout: WAIT_MS });
  const receipts = await http(w.app, 'GET', `/v1/receipts/${agent}`, { key: w.key });
  t.is(
    await page.getAttribute('#receipts tr[data-nonce="0"]', 'data-verification'),
    receipts.body.data.find((r: { nonce: number }) => r.nonce === 0).verification.status,
  );

  await page.screenshot({ path: `${ARTIFACTS}explorer-desktop.png`, fullPage: true });
  t.deepEqual(errors, []);
  t.context.shared.paid = { linkId: link.id, txs: [before, between, after] };
});

test.serial("at a phone's width (375 px) the page does not scroll sideways: events become cards, each paid call shown once", async (t) => {
  const { w, browser } = t.context;
  const { paid } = t.context.shared;
  if (!paid) return t.fail('needs the paid calls of the test before');
  const phone = await browser.newContext({
    viewport: { width: 375, height: 812 },
    isMobile: true,
    hasTouch: true,
    deviceScaleFactor: 2,
    locale: LOCALE,
    timezoneId: TIME_ZONE,
  });
  try {
    const page = await phone.newPage();
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await connect(page, w);
    for (const tx of paid.txs) await waitForWholeCall(page, tx);
    for (const tx of paid.txs) t.is(await page.locator(call(tx)).count(), 1);
    await page.waitForFunction((sel) => document.querySelector(sel)?.textContent === 'Weather bot', `${call(paid.txs[0]!)} tr.call-summary td.agent`, {
      timeout: WAIT_MS,
    });
    // The lists below the events, with an agent open, are the widest content the page has.
    await page.click(`#links tr[data-link-id="${paid.linkId}"] button.agent`);
    await page.waitForSelector('#receipts tr[data-nonce="2"]', { timeout: WAIT_MS });

    const layout = await page.evaluate(() => ({
      viewport: window.innerWidth,
      page: document.documentElement.scrollWidth,
      header: getComputedStyle(document.querySelector('#events thead')!).display,
      row: getComputedStyle(document.querySelector('#events tr.call-summary')!).display,
    }));
    t.is(layout.viewport, 375);
    t.true(layout.page <= layout.viewport, `the page is ${layout.page} px wide`);
    t.is(layout.header, 'none');
    t.is(layout.row, 'grid');
    await page.screenshot({ path: `${ARTIFACTS}explorer-phone.png`, fullPage: true });
    t.deepEqual(errors, []);
  } finally {
    await phone.close();
  }
});

test.serial('a dropped connection resumes after the last event it delivered: a call paid while it was down shows once', async (t) => {
  const { w, desktop } = t.context;
  const { paid } = t.context.shared;
  if (!paid) return t.fail('needs the paid calls of the test before');
  const page = await desktop.newPage();
  try {
    // The page's graphql-ws traffic passes through here: the subscribe requests are read, and the socket is dropped.
    const subscribed: { after?: string }[] = [];
    const sockets: WebSocketRoute[] = [];
    await page.routeWebSocket(/\/graphql$/, (ws) => {
      const server = ws.connectToServer();
      ws.onMessage((m) => {
        const message = JSON.parse(String(m));
        if (message.type === 'subscribe') subscribed.push(message.payload.variables);
        server.send(m);
      });
      server.onMessage((m) => ws.send(m));
      sockets.push(ws);
    });
    await connect(page, w);
    for (const tx of paid.txs) await waitForWholeCall(page, tx);

    const link = await getLink(w, paid.linkId);
    const pay = payingFetch(w, await fundBuyer(w));
    t.is((await pay(link.share_url)).status, 200);
    const live = await lastTx(w, paid.linkId);
    await waitForWholeCall(page, live);
    const delivered = await page.$$eval(`${call(live)} tr[data-id]`, (rows) => rows.map((r) => r.getAttribute('data-id')));

    // The connection drops (a gateway restarting: graphql-ws reconnects); a call is paid before it is back.
    let down = '';
    await page.route(
      '**/v1/auth/stream-token',
      async (route) => {
        t.is((await pay(link.share_url)).status, 200);
        down = await lastTx(w, paid.linkId);
        await route.continue();
      },
      { times: 1 },
    );
    sockets[0]!.close({ code: 1012, reason: 'service restart' });
    await page.waitForFunction(() => document.querySelector('#status')?.textContent === 'live', undefined, { timeout: WAIT_MS });
    await waitForWholeCall(page, down);

    t.is(subscribed.length, 2);
    t.not(subscribed[1]?.after, subscribed[0]?.after);
    // the reconnection resumes after an event delivered live (newer than the first cursor), not from the start
    const listed = ((await http(w.app, 'GET', '/v1/events?limit=200', { key: w.key })).body.data as EventRow[]).map((e) => e.id);
    const resumed = listed.indexOf(subscribed[1]?.after ?? '');
    t.true(resumed >= 0 && resumed < listed.indexOf(subscribed[0]?.after ?? ''), JSON.stringify({ subscribed, resumed }));
    t.true(resumed <= listed.indexOf(delivered[0] ?? ''), 'no older than the live call');
    for (const tx of [...paid.txs, live, down]) t.is(await page.locator(call(tx)).count(), 1);
    const ids = await page.$$eval('#events tr[data-id]', (rows) => rows.map((r) => r.getAttribute('data-id')));
    t.is(new Set(ids).size, ids.length, 'no event is shown twice');
  } finally {
    await page.close();
  }
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
    // Any of them counts, however late it arrives: the 2 s between links is a pace, not a deadline.
    const made: string[] = [];
    let seen = false;
    while (!seen) {
      made.push((await createLink(w)).link.id);
      const rows = made.map((id) => `#events tr[data-kind="payment_link.created"][data-link="${id}"]`).join(', ');
      seen = await page.waitForSelector(rows, { timeout: 2_000 }).then(
        () => true,
        () => false,
      );
    }
    t.true(seen, 'an event reached the page connected with the pasted token');

    await page.click('#connect');
    await page.waitForFunction(() => /invalid_api_key/.test(document.querySelector('#status')?.textContent ?? ''), undefined, { timeout: WAIT_MS });
    t.pass();
  } finally {
    await page.close();
  }
});

// The page's timeline rules, without a browser.

const at = (second: number) => `2026-11-28T10:00:${String(second).padStart(2, '0')}.000Z`;
function shown(fields: Partial<ShownEvent> & { id: string; second: number }): ShownEvent {
  const { second, ...rest } = fields;
  return { kind: 'payment_link.created', phase: 'confirmed', signature: null, agent_asset: null, metadata: {}, created_at: at(second), ...rest };
}

test('the subscription resumes after the newest event of the history that can no longer change phase', (t) => {
  const moving = shown({ id: 'e3', second: 3, kind: 'agent.create', phase: 'submitted' });
  const settled = shown({ id: 'e2', second: 2 });
  t.is(resumeAfter([moving, settled, shown({ id: 'e1', second: 1 })]), 'e2');
  t.is(resumeAfter([moving]), 'e3');
  t.is(resumeAfter([]), undefined);
});

test('history and live merge by id: a replayed or moved event replaces its row, newest first', (t) => {
  const history = [shown({ id: 'e2', second: 2, kind: 'agent.create', phase: 'submitted' }), shown({ id: 'e1', second: 1 })];
  const merged = mergeEvents(history, [
    liveEvent({ ...shown({ id: 'e2', second: 2, kind: 'agent.create' }), phase: 'CONFIRMED' as ShownEvent['phase'] }),
    shown({ id: 'e1', second: 1 }),
    shown({ id: 'e3', second: 3 }),
  ]);
  t.deepEqual(
    merged.map((e) => [e.id, e.phase]),
    [
      ['e3', 'confirmed'],
      ['e2', 'confirmed'],
      ['e1', 'confirmed'],
    ],
  );
});

test('the events of one paid call form one entry in step order, which keeps its place as later steps arrive', (t) => {
  const tx = 'sig1';
  const events = [
    shown({ id: 'v', second: 9, kind: 'receipt.verified', metadata: { tx_sig: tx } }),
    shown({ id: 'other', second: 5 }),
    shown({ id: 'fee', second: 2, kind: 'protocol.fee.collected', signature: tx, metadata: { tx_sig: tx, payment_link_id: 'L' } }),
    shown({ id: 'r', second: 2, kind: 'receipt.published', signature: tx, metadata: { receipt: { tx_sig: tx }, payment_link_id: 'L' } }),
    shown({ id: 's', second: 2, kind: 'payment_link.settled', signature: tx, metadata: { tx_sig: tx, payment_link_id: 'L' } }),
    shown({ id: 'sv', second: 2, kind: 'payment_link.served', signature: tx, metadata: { tx_sig: tx, payment_link_id: 'L' } }),
  ];
  const entries = timeline(mergeEvents([], events));
  t.deepEqual(
    entries.map((e) => e.key),
    ['other', tx],
  );
  const call = entries[1]!;
  if (call.type !== 'call') return t.fail();
  t.is(call.link, 'L');
  t.deepEqual(
    call.events.map((e) => e.id),
    ['s', 'sv', 'r', 'v', 'fee'],
  );
});

test("amounts read in the stable's units; times in the reader's zone, the date only for another day", (t) => {
  const stables = new Map([['mintU', { symbol: 'USDC', decimals: 6 }]]);
  t.is(amountOf('10000', 'mintU', stables), '0.01 USDC');
  t.is(amountOf('10000', 'other', stables), '10000 (atomic)');
  const now = new Date('2026-11-28T12:00:00.000Z');
  const today = localTime('2026-11-28T11:59:30.000Z', now);
  t.false(today.includes('T'), today);
  t.regex(today, /\d{2}:\d{2}:\d{2}/);
  const before = localTime('2026-11-20T11:59:30.000Z', now);
  t.not(before, today);
  t.notRegex(before, /:\d{2}:\d{2}/, 'another day shows the minute, not the second');
  t.is(localTime(null), '—');
});
