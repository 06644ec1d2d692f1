import anyTest, { type TestFn } from 'ava';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { buildExplorer } from '../../interfaces/explorer/build.ts';
import { GatewayIndex } from '../../interfaces/pages/landing.ts';
import { http, issueKey, linkBody, recordAgent, startTestApp, type TestApp } from '../support/app.ts';
import { afterAll } from '../support/teardown.ts';
import { chromiumOrThrow } from '../support/chromium.ts';

// The gateway's pages in a real browser that may reach the gateway only (as behind a firewall or offline): the
// landing page, the API reference, GraphiQL, the explorer and a payment link's page load with every file from the
// gateway, no request to another host, no failed request and no console error. GraphiQL renders and runs a query;
// the reference shows the operations of /openapi.json.

/** generous: two cores shared by several test processes; nothing here waits on wall-clock speed otherwise */
const WAIT_MS = 90_000;

interface Ctx {
  app: TestApp;
  key: string;
  linkId: string;
  browser: Browser;
}

const test = anyTest as TestFn<Ctx>;

test.before(async (t) => {
  const executablePath = chromiumOrThrow();
  await buildExplorer();
  const app = await startTestApp();
  const key = await issueKey(app);
  const { mint } = await recordAgent(app, key);
  const link = await http(app, 'POST', '/v1/payment-links', { key, body: linkBody(mint) });
  if (link.status !== 201) throw new Error(`link: ${link.status} ${JSON.stringify(link.body)}`);
  const browser = await chromium.launch({ executablePath, args: ['--no-sandbox'] });
  afterAll(() => browser.close()); // before the app, which would otherwise wait for the pages' open streams
  t.context = { app, key, linkId: link.body.id, browser };
});

/** What went wrong while a page loaded and ran; each list must stay empty. */
interface Trouble {
  /** requests to any host but the gateway (aborted) */
  outside: string[];
  /** requests that failed, or answered 4xx/5xx */
  failed: string[];
  /** console errors and uncaught exceptions */
  errors: string[];
}

/**
 * A browser context that reaches the gateway only: every other request is recorded and aborted. `document402` is the
 * one document allowed to answer 402 (a payment link's page: its status is the offer itself, hosted-api §4.2).
 */
async function guardedPage(t: { context: Ctx }, options: { document402?: string } = {}): Promise<{ context: BrowserContext; page: Page; trouble: Trouble }> {
  const origin = new URL(t.context.app.url).origin;
  const context = await t.context.browser.newContext();
  const trouble: Trouble = { outside: [], failed: [], errors: [] };
  await context.route('**/*', (route) => {
    const url = route.request().url();
    if (url.startsWith('blob:') || url.startsWith('data:') || new URL(url).origin === origin) return route.continue();
    trouble.outside.push(url);
    return route.abort('blockedbyclient');
  });
  const page = await context.newPage();
  const paymentDocument = (url: string, status: number) => status === 402 && url === options.document402;
  page.on('requestfailed', (req) => {
    if (!trouble.outside.includes(req.url())) trouble.failed.push(`${req.url()}: ${req.failure()?.errorText}`);
  });
  page.on('response', (res) => {
    if (res.status() >= 400 && !paymentDocument(res.url(), res.status())) trouble.failed.push(`${res.url()}: ${res.status()}`);
  });
  page.on('pageerror', (e) => trouble.errors.push(`uncaught: ${e.message}`));
  page.on('console', (msg) => {
    if (msg.type() !== 'error') return;
    // Chromium logs every 4xx document as "Failed to load resource"; the payment link's 402 is its answer, not a fault.
    if (/status of 402/.test(msg.text()) && msg.location().url === options.document402) return;
    trouble.errors.push(`${msg.text()} (${msg.location().url})`);
  });
  return { context, page, trouble };
}

test.serial('GET / answers a JSON index to API clients and the landing page to browsers; the favicon and assets are served with caching headers', async (t) => {
  const { app } = t.context;
  const json = await http(app, 'GET', '/');
  t.is(json.status, 200);
  t.regex(json.headers.get('content-type') ?? '', /^application\/json/);
  t.regex(json.headers.get('vary') ?? '', /Accept/);
  const index = GatewayIndex.parse(json.body);
  const base = app.services.settings.baseUrl;
  t.deepEqual(index, {
    name: 'svc-gateway',
    version: app.services.settings.version,
    commit: 'test',
    networks: ['chain-devnet', 'chain-mainnet'],
    links: { explorer: `${base}/explorer`, graphql: `${base}/graphql`, docs: `${base}/docs`, openapi: `${base}/openapi.json`, health: `${base}/v1/health` },
  });

  const html = await fetch(`${app.url}/`, { headers: { accept: 'text/html,application/xhtml+xml,*/*;q=0.8' } });
  t.is(html.status, 200);
  t.regex(html.headers.get('content-type') ?? '', /^text\/html/);
  t.regex(html.headers.get('content-security-policy') ?? '', /default-src 'none'/);
  t.regex(await html.text(), /<link rel="icon"/);

  const icon = await fetch(`${app.url}/favicon.ico`);
  t.is(icon.status, 200);
  t.is(icon.headers.get('content-type'), 'image/svg+xml');
  t.regex(await icon.text(), /^<svg/);

  // A package's file is kept a year (its URL names the version); the pages' own files are revalidated.
  const docs = await (await fetch(`${app.url}/docs`)).text();
  const bundle = /src="(\/assets\/swagger-ui-dist@[^"]+\/swagger-ui-bundle\.js)"/.exec(docs)?.[1];
  t.truthy(bundle, docs);
  const vendor = await fetch(`${app.url}${bundle}`);
  t.is(vendor.status, 200);
  t.regex(vendor.headers.get('cache-control') ?? '', /max-age=31536000, immutable/);
  t.regex(vendor.headers.get('content-type') ?? '', /^text\/javascript/);
  const plain = await fetch(`${app.url}${bundle}`, { headers: { 'accept-encoding': 'identity' } });
  t.is(plain.headers.get('content-encoding'), null);
  const plainBytes = Buffer.from(await plain.arrayBuffer());
  // fetch asks for gzip and unpacks it: the same bytes, fewer on the wire
  t.is(vendor.headers.get('content-encoding'), 'gzip');
  t.true(Number(vendor.headers.get('content-length')) < plainBytes.length / 2, `${vendor.headers.get('content-length')} of ${plainBytes.length}`);
  t.true(Buffer.from(await vendor.arrayBuffer()).equals(plainBytes));
  const own = await fetch(`${app.url}/assets/pages/docs.js`);
  t.is(own.headers.get('cache-control'), 'no-cache');
  const etag = own.headers.get('etag');
  t.truthy(etag);
  const again = await fetch(`${app.url}/assets/pages/docs.js`, { headers: { 'if-none-match': etag! } });
  t.is(again.status, 304);
  const unknown = await http(app, 'GET', '/assets/swagger-ui-dist@0.0.1/swagger-ui-bundle.js');
  t.is(unknown.status, 404);
  t.is(unknown.body.error, 'not_found');
  const traversal = await http(app, 'GET', '/assets/pages/..%2F..%2Fpackage.json');
  t.is(traversal.status, 404);
});

const CLEAN: Trouble = { outside: [], failed: [], errors: [] };

// In a browser that reaches only the gateway, each page loads without an outside request, a failed request or a
// console error.

test.serial('the landing page: what runs, the links, and the programs of each embedded ledger', async (t) => {
  const { app } = t.context;
  const { context, page, trouble } = await guardedPage(t);
  try {
    await page.goto(`${app.url}/`);
    t.is(await page.textContent('#version'), app.services.settings.version);
    t.is(await page.textContent('#commit'), 'test');
    for (const path of ['/explorer', '/graphql', '/docs', '/openapi.json', '/v1/health']) t.is(await page.locator(`a[href="${path}"]`).count(), 1, path);
    const health = app.services.meta.health();
    for (const network of ['chain-devnet', 'chain-mainnet'] as const) {
      const loaded = new Set(health.ledger[network]!.programs.map((p) => p.name));
      t.is(await page.getAttribute(`[data-network="${network}"] tr[data-program="mpl-core"]`, 'data-loaded'), String(loaded.has('mpl-core')));
      const missing = health.ledger[network]!.missing.length > 0;
      t.is(await page.locator(`[data-network="${network}"] code.command`).count(), missing ? 1 : 0);
    }
    t.deepEqual(trouble, CLEAN);
  } finally {
    await context.close();
  }
});

test.serial('/docs: the API reference lists every operation of /openapi.json', async (t) => {
  const { app } = t.context;
  const { context, page, trouble } = await guardedPage(t);
  try {
    await page.goto(`${app.url}/docs`);
    await page.waitForSelector('.opblock', { timeout: WAIT_MS });
    const openapi = (await http(app, 'GET', '/openapi.json')).body as { paths: Record<string, Record<string, unknown>> };
    const operations = Object.values(openapi.paths).reduce((n, item) => n + Object.keys(item).filter((m) => m !== 'parameters').length, 0);
    t.is(await page.locator('.opblock').count(), operations);
    t.true((await page.locator('.opblock-summary-path[data-path="/v1/health"]').count()) > 0);
    t.deepEqual(trouble, CLEAN);
  } finally {
    await context.close();
  }
});

test.serial("/graphql: GraphiQL renders from the gateway's files and runs a query with the key in its headers", async (t) => {
  const { app, key, linkId } = t.context;
  const { context, page, trouble } = await guardedPage(t);
  try {
    // GraphiQL keeps its headers editor in localStorage: the key as if typed there
    await context.addInitScript((headers) => localStorage.setItem('graphiql:headers', headers), JSON.stringify({ Authorization: `Bearer ${key}` }));
    const query = '{ paymentLinks(first: 1) { hasMore data { id } } }';
    await page.goto(`${app.url}/graphql?query=${encodeURIComponent(query)}`);
    await page.waitForSelector('.graphiql-container .monaco-editor', { timeout: WAIT_MS });
    await page.click('.graphiql-execute-button');
    await page.waitForFunction((id) => document.querySelector('.result-window')?.textContent?.includes(id) === true, linkId, { timeout: WAIT_MS });
    t.deepEqual(trouble, CLEAN);
  } finally {
    await context.close();
  }
});

test.serial('/explorer loads', async (t) => {
  const { app } = t.context;
  const { context, page, trouble } = await guardedPage(t);
  try {
    await page.goto(`${app.url}/explorer`);
    await page.waitForSelector('#connect', { timeout: WAIT_MS });
    await page.waitForLoadState('load');
    t.deepEqual(trouble, CLEAN);
  } finally {
    await context.close();
  }
});

test.serial('a payment link opened in a browser: its document answers 402 (the offer), which is what it is for', async (t) => {
  const { app, linkId } = t.context;
  const url = `${app.url}/x/${linkId}?network=chain-devnet`;
  const { context, page, trouble } = await guardedPage(t, { document402: url });
  try {
    const res = await page.goto(url);
    t.is(res?.status(), 402);
    await page.waitForLoadState('load');
    t.deepEqual(trouble, CLEAN);
  } finally {
    await context.close();
  }
});
