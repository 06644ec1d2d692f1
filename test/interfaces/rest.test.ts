import anyTest, { type ExecutionContext, type TestFn } from 'ava';
import { createHash } from 'node:crypto';
import { PublicKey } from '@solana/web3.js';
import { getAssociatedTokenAddressSync, TOKEN_PROGRAM_ID } from '@solana/spl-token';
import { TestClock } from '../support/clock.ts';
import { AccessService, KEY_CACHE_TTL_MS } from '../../domain/access/service.ts';
import { DomainError } from '../../domain/shared/errors.ts';
import { http, issueKey, linkBody, randomAddress, recordAgent, startTestApp, writeAgentAsset, type HttpResult, type TestApp } from '../support/app.ts';
import { until } from '../support/until.ts';

// REST /v1 end to end over real HTTP: hosted-api §2.1–2.4, §3.2, §4.1, §5, §7 and DECISIONS.

const test = anyTest as TestFn<{ app: TestApp; key: string }>;

const MPL_CORE = new PublicKey('CoREENxT6tW1HoK8ypY1SxRMZTcVPm7R94rH4PZNhX7d');
const DEVNET_USDC = '4zMMC9srt5Ri5X14GAgXhaHii3GnPAEERYPJgZJDncDU';
const DEVNET_CAIP2 = 'solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1';
const ULID = /^[0-9A-HJKMNP-TV-Z]{26}$/;
const ISO_MS = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

function treasuryPda(asset: string): PublicKey {
  return PublicKey.findProgramAddressSync([Buffer.from('mpl-core-execute'), new PublicKey(asset).toBuffer()], MPL_CORE)[0];
}

function devnetPayTo(asset: string): string {
  return getAssociatedTokenAddressSync(new PublicKey(DEVNET_USDC), treasuryPda(asset), true, TOKEN_PROGRAM_ID).toBase58();
}

/** Every response carries X-Svc-Request-Id (a ULID). */
function requestIdOf(t: ExecutionContext, res: HttpResult): string {
  const id = res.headers.get('x-svc-request-id');
  t.truthy(id, 'X-Svc-Request-Id header');
  t.regex(id ?? '', ULID);
  return id!;
}

/** The error envelope of hosted-api §7, with the header equal to body.request_id. */
function expectError(t: ExecutionContext, res: HttpResult, status: number, code: string): Record<string, any> {
  t.is(res.status, status, JSON.stringify(res.body));
  t.is(res.body?.error, code, JSON.stringify(res.body));
  t.is(typeof res.body?.message, 'string');
  t.true(res.body.message.length > 0);
  t.is(res.body.request_id, requestIdOf(t, res));
  for (const k of Object.keys(res.body)) t.true(['error', 'message', 'details', 'request_id'].includes(k), `unexpected envelope key ${k}`);
  if ('details' in res.body) t.is(typeof res.body.details, 'object');
  t.regex(res.headers.get('content-type') ?? '', /application\/json/);
  return res.body;
}

function expectIssues(t: ExecutionContext, body: Record<string, any>, paths: string[]): void {
  const issues = body.details?.issues as { path: string; message: string; code: string }[];
  t.true(Array.isArray(issues) && issues.length > 0, JSON.stringify(body));
  for (const issue of issues) {
    t.is(typeof issue.path, 'string');
    t.is(typeof issue.message, 'string');
    t.is(typeof issue.code, 'string');
  }
  for (const path of paths)
    t.true(
      issues.some((i) => i.path === path),
      `issue at ${path}: ${JSON.stringify(issues)}`,
    );
}

async function createLink(t: ExecutionContext<{ app: TestApp; key: string }>, owner: string, overrides: Record<string, unknown> = {}) {
  const res = await http(t.context.app, 'POST', '/v1/payment-links', { key: t.context.key, body: linkBody(owner, overrides) });
  t.is(res.status, 201, JSON.stringify(res.body));
  return res.body as Record<string, any>;
}

async function eventsOf(t: ExecutionContext<{ app: TestApp; key: string }>, query: string) {
  const res = await http(t.context.app, 'GET', `/v1/events?${query}`, { key: t.context.key });
  t.is(res.status, 200, JSON.stringify(res.body));
  return res.body as { data: Record<string, any>[]; next_cursor: string | null; has_more: boolean };
}

test.before(async (t) => {
  const app = await startTestApp();
  t.context = { app, key: await issueKey(app) };
});

// ── Payment links: create ──────────────────────────────────────────────────────────────────────────────────────

test('create returns 201 with every output field of §2.2 and the echoed stored fields', async (t) => {
  const { app, key } = t.context;
  const { mint } = await recordAgent(app, key);
  const res = await http(app, 'POST', '/v1/payment-links', {
    key,
    body: linkBody(mint, { metadata: { provider_url: 'https://provider.example', custom: { a: 1 } } }),
  });
  t.is(res.status, 201, JSON.stringify(res.body));
  requestIdOf(t, res);
  const link = res.body;
  const payTo = devnetPayTo(mint);

  t.regex(link.id, ULID, 'without id the API mints a ULID');
  t.is(link.network, 'chain-devnet');
  t.is(link.label, 'Weather report');
  t.is(link.owner_agent, mint);
  // hosted-api §2.2–2.3: pay_to has one meaning on a link and its accepts — the x402 payTo, the treasury; the token
  // account the seller leg credits is its own field
  t.is(link.pay_to, treasuryPda(mint).toBase58());
  t.is(link.pay_to_token_account, payTo);
  t.is(link.method, 'GET');
  t.is(link.path, `/x/${link.id}`);
  t.is(link.price, '$0.01');
  t.is(link.currency, 'USDC');
  t.deepEqual(link.accepts_currencies, []);
  t.is(link.facilitator, `${app.services.settings.baseUrl}/facilitator`);
  t.regex(link.facilitator, /^https?:\/\//);
  t.is(link.share_url, `${app.services.settings.baseUrl}/x/${link.id}?network=chain-devnet`);
  // hosted-api §2.3: an accept's pay_to is the x402 payTo (the treasury); the token account it credits is beside it,
  // made ready by the create call, so real clients can pay at once.
  const treasury = treasuryPda(mint).toBase58();
  t.deepEqual(link.accepts, [
    {
      scheme: 'exact',
      network: DEVNET_CAIP2,
      pay_to: treasury,
      pay_to_token_account: payTo,
      pay_to_ready: true,
      asset: DEVNET_USDC,
      amount: '10000',
      currency: 'USDC',
    },
  ]);
  const reread = await http(app, 'GET', `/v1/payment-links/${link.id}`, { key });
  t.deepEqual(reread.body.accepts[0], { ...link.accepts[0], pay_to_ready: null }, 'a read does not check the ledger: null');
  t.deepEqual(link.counters, { call_count: 0, settled_count: 0, last_called_at: null, last_settled_at: null, last_tx_sig: null });
  t.regex(link.created_at, ISO_MS);
  t.deepEqual(link.metadata, { provider_url: 'https://provider.example', custom: { a: 1 } });
  // DECISIONS "Payment links": the output echoes every stored field.
  t.is(link.protocol, 'x402');
  t.deepEqual(link.response, { status: 200, mimeType: 'application/json', body: { forecast: 'sunny' } });
  t.is(link.webhook_url, null);
  t.is(link.wrap_receipt, false);
  t.is(link.disabled, false);
  t.regex(link.updated_at, ISO_MS);
  t.is(link.updated_at, link.created_at);

  const read = await http(app, 'GET', `/v1/payment-links/${link.id}`, { key });
  t.is(read.status, 200);
  const unchecked = link.accepts.map((a: Record<string, unknown>) => ({ ...a, pay_to_ready: null }));
  t.deepEqual(read.body, { ...link, accepts: unchecked }, 'GET returns what create returned (a read does not check pay_to_ready)');
});

test('create echoes protocol, response, webhook_url and wrap_receipt as given', async (t) => {
  const { mint } = await recordAgent(t.context.app, t.context.key);
  const link = await createLink(t, mint, {
    method: 'POST',
    price: '1.5 usdc',
    protocol: 'mpp',
    response: { status: 202, mimeType: 'text/plain', body: 'thanks' },
    webhook_url: 'https://hooks.example/settled',
    wrap_receipt: true,
  });
  t.is(link.method, 'POST');
  t.is(link.price, '1.5 usdc');
  t.is(link.currency, 'USDC');
  t.is(link.accepts[0].amount, '1500000');
  t.is(link.protocol, 'mpp');
  t.deepEqual(link.response, { status: 202, mimeType: 'text/plain', body: 'thanks' });
  t.is(link.webhook_url, 'https://hooks.example/settled');
  t.is(link.wrap_receipt, true);
});

test('a caller-chosen slug: 409 conflict when taken, reusable after DELETE (204, empty body)', async (t) => {
  const { app, key } = t.context;
  const { mint } = await recordAgent(app, key);
  const first = await createLink(t, mint, { id: 'weather-now' });
  t.is(first.id, 'weather-now');
  t.is(first.path, '/x/weather-now');
  t.is(first.share_url, `${app.services.settings.baseUrl}/x/weather-now?network=chain-devnet`);

  const dup = await http(app, 'POST', '/v1/payment-links', { key, body: linkBody(mint, { id: 'weather-now', label: 'Other' }) });
  expectError(t, dup, 409, 'conflict');
  t.is((await http(app, 'GET', '/v1/payment-links/weather-now', { key })).body.label, 'Weather report', 'the first link is untouched');

  const del = await fetch(`${app.url}/v1/payment-links/weather-now`, { method: 'DELETE', headers: { authorization: `Bearer ${key}` } });
  t.is(del.status, 204);
  t.is(await del.text(), '');
  t.regex(del.headers.get('x-svc-request-id') ?? '', ULID);

  expectError(t, await http(app, 'GET', '/v1/payment-links/weather-now', { key }), 404, 'payment_link_not_found');
  expectError(t, await http(app, 'DELETE', '/v1/payment-links/weather-now', { key }), 404, 'payment_link_not_found');
  expectError(t, await http(app, 'PATCH', '/v1/payment-links/weather-now', { key, body: { label: 'x' } }), 404, 'payment_link_not_found');

  const again = await createLink(t, mint, { id: 'weather-now', label: 'Second life' });
  t.is(again.label, 'Second life');
  t.true(again.created_at >= first.created_at);
  t.deepEqual(again.counters, first.counters);
});

test('invalid slugs are refused with invalid_request', async (t) => {
  const { app, key } = t.context;
  const { mint } = await recordAgent(app, key);
  for (const id of ['has space', '-leading', 'a/b', 'x'.repeat(65), '']) {
    const res = await http(app, 'POST', '/v1/payment-links', { key, body: linkBody(mint, { id }) });
    expectIssues(t, expectError(t, res, 400, 'invalid_request'), ['id']);
  }
});

test('a link whose owner_agent is not recorded → 404 agent_not_found', async (t) => {
  const { app, key } = t.context;
  const stranger = await randomAddress();
  const res = await http(app, 'POST', '/v1/payment-links', { key, body: linkBody(stranger) });
  const body = expectError(t, res, 404, 'agent_not_found');
  t.is(body.details?.path, 'owner_agent');
  const preview = await http(app, 'POST', '/v1/payment-links/preview', { key, body: { owner_agent: stranger, method: 'GET', price: '$0.01' } });
  expectError(t, preview, 404, 'agent_not_found');
});

test('zod failures → 400 invalid_request with details.issues[{path, message, code}]', async (t) => {
  const { app, key } = t.context;
  const { mint } = await recordAgent(app, key);
  const missing = await http(app, 'POST', '/v1/payment-links', { key, body: { owner_agent: mint, method: 'FETCH', price: 5 } });
  expectIssues(t, expectError(t, missing, 400, 'invalid_request'), ['label', 'method', 'price', 'response']);

  const badAddress = await http(app, 'POST', '/v1/payment-links', { key, body: linkBody('not-an-address') });
  expectIssues(t, expectError(t, badAddress, 400, 'invalid_request'), ['owner_agent']);

  const unknownField = await http(app, 'POST', '/v1/payment-links', { key, body: linkBody(mint, { colour: 'blue' }) });
  expectError(t, unknownField, 400, 'invalid_request');

  const tooMany = await http(app, 'POST', '/v1/payment-links', { key, body: linkBody(mint, { accepts_currencies: ['USDC', 'USDC', 'USDC', 'USDC'] }) });
  expectIssues(t, expectError(t, tooMany, 400, 'invalid_request'), ['accepts_currencies']);

  const badPrice = await http(app, 'POST', '/v1/payment-links', { key, body: linkBody(mint, { price: '0.0000001' }) });
  expectIssues(t, expectError(t, badPrice, 400, 'invalid_request'), ['price']);

  const badUrl = await http(app, 'POST', '/v1/payment-links', { key, body: linkBody(mint, { webhook_url: 'ftp://x.example' }) });
  expectIssues(t, expectError(t, badUrl, 400, 'invalid_request'), ['webhook_url']);
});

test('malformed JSON → 400 invalid_request; a body over 1 MiB → 413 payload_too_large', async (t) => {
  const { app, key } = t.context;
  const malformed = await http(app, 'POST', '/v1/payment-links', { key, body: '{"label": "x",' });
  expectError(t, malformed, 400, 'invalid_request');

  const { mint } = await recordAgent(app, key);
  const big = JSON.stringify(linkBody(mint, { response: { body: 'x'.repeat(1024 * 1024) } }));
  t.true(big.length > 1024 * 1024);
  const tooLarge = await http(app, 'POST', '/v1/payment-links', { key, body: big });
  expectError(t, tooLarge, 413, 'payload_too_large');
  const list = await http(app, 'GET', `/v1/payment-links?owner_agent=${mint}`, { key });
  t.deepEqual(list.body.data, [], 'nothing was stored');
});

test('unknown route → 404 not_found envelope', async (t) => {
  const { app, key } = t.context;
  expectError(t, await http(app, 'GET', '/v1/no-such-route', { key }), 404, 'not_found');
  expectError(t, await http(app, 'GET', '/v1/no-such-route'), 404, 'not_found');
  expectError(t, await http(app, 'POST', '/v1/payment-links/a/b/c', { key, body: {} }), 404, 'not_found');
});

test('concurrent creates of one slug: exactly one 201, the rest 409, one created event', async (t) => {
  const { app, key } = t.context;
  const { mint } = await recordAgent(app, key);
  const results = await Promise.all(
    Array.from({ length: 6 }, (_, i) => http(app, 'POST', '/v1/payment-links', { key, body: linkBody(mint, { id: 'race-slug', label: `racer ${i}` }) })),
  );
  t.deepEqual(results.map((r) => r.status).sort(), [201, 409, 409, 409, 409, 409]);
  for (const r of results.filter((r) => r.status === 409)) expectError(t, r, 409, 'conflict');
  const events = await eventsOf(t, `agent=${mint}`);
  t.deepEqual(
    events.data.map((e) => e.kind),
    ['payment_link.created'],
    'a refused insert writes no event (same transaction)',
  );
  const winner = results.find((r) => r.status === 201)!;
  t.is(events.data[0]!.metadata.payment_link.label, winner.body.label);
});

// fastify answers router-level failures (FST_ERR_BAD_URL, FST_ERR_MAX_PARAM_LENGTH) before any hook runs;
// buildHttp's `frameworkErrors` gives them the envelope and X-Svc-Request-Id too.
test('a malformed percent-encoded path still gets the error envelope and X-Svc-Request-Id', async (t) => {
  const { app, key } = t.context;
  const res = await http(app, 'GET', '/v1/payment-links/%E0%A4%A', { key });
  expectError(t, res, 400, 'invalid_request');
});

// ── Payment links: read, list, update ──────────────────────────────────────────────────────────────────────────

test('get of an unknown id → 404 payment_link_not_found', async (t) => {
  const { app, key } = t.context;
  const body = expectError(t, await http(app, 'GET', '/v1/payment-links/no-such-link', { key }), 404, 'payment_link_not_found');
  t.deepEqual(body.details, { id: 'no-such-link' });
});

test('list: newest first, owner_agent filter, cursor pagination without duplicates', async (t) => {
  const { app, key } = t.context;
  const { mint } = await recordAgent(app, key);
  const { mint: other } = await recordAgent(app, key);
  const created: string[] = [];
  for (let i = 0; i < 5; i++) created.push((await createLink(t, mint, { label: `link ${i}` })).id);
  const foreign = await createLink(t, other);

  const all = await http(app, 'GET', `/v1/payment-links?owner_agent=${mint}`, { key });
  t.is(all.status, 200);
  requestIdOf(t, all);
  t.deepEqual(Object.keys(all.body).sort(), ['data', 'has_more', 'next_cursor']);
  t.deepEqual(
    all.body.data.map((l: { id: string }) => l.id),
    [...created].reverse(),
    'newest first',
  );
  t.is(all.body.has_more, false);
  t.is(all.body.next_cursor, null);
  t.false(
    all.body.data.some((l: { id: string }) => l.id === foreign.id),
    'the filter excludes other owners',
  );

  const seen: string[] = [];
  const pages: boolean[] = [];
  let cursor: string | null = null;
  do {
    const query: string = `owner_agent=${mint}&limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
    const page: HttpResult = await http(app, 'GET', `/v1/payment-links?${query}`, { key });
    t.is(page.status, 200, JSON.stringify(page.body));
    t.true(page.body.data.length <= 2);
    seen.push(...page.body.data.map((l: { id: string }) => l.id));
    pages.push(page.body.has_more);
    cursor = page.body.next_cursor;
    t.is(cursor !== null, page.body.has_more);
  } while (cursor && pages.length < 10);
  t.deepEqual(pages, [true, true, false]);
  t.deepEqual(seen, [...created].reverse(), 'every link exactly once, in order');

  const unfiltered = await http(app, 'GET', '/v1/payment-links?limit=200', { key });
  t.true(unfiltered.body.data.some((l: { id: string }) => l.id === foreign.id));
  t.true(unfiltered.body.data.every((l: { network: string }) => l.network === 'chain-devnet'));
});

test('list limit bounds: 0 and 201 → 400, 1 and 200 accepted; a malformed cursor → 400', async (t) => {
  const { app, key } = t.context;
  expectIssues(t, expectError(t, await http(app, 'GET', '/v1/payment-links?limit=0', { key }), 400, 'invalid_request'), ['limit']);
  expectIssues(t, expectError(t, await http(app, 'GET', '/v1/payment-links?limit=201', { key }), 400, 'invalid_request'), ['limit']);
  expectError(t, await http(app, 'GET', '/v1/payment-links?limit=abc', { key }), 400, 'invalid_request');
  expectError(t, await http(app, 'GET', '/v1/payment-links?limit=1.5', { key }), 400, 'invalid_request');
  t.is((await http(app, 'GET', '/v1/payment-links?limit=1', { key })).status, 200);
  t.is((await http(app, 'GET', '/v1/payment-links?limit=200', { key })).status, 200);
  expectError(t, await http(app, 'GET', '/v1/payment-links?cursor=not-a-cursor', { key }), 400, 'invalid_request');
  // Cursors are opaque: a forged one is a 400, never a database error.
  const forged = (value: unknown) => encodeURIComponent(Buffer.from(JSON.stringify(value)).toString('base64url'));
  for (const cursor of [{ seq: '99999999999999999999999' }, { seq: '9223372036854775808' }, { seq: '-1' }, { seq: 5 }, {}, []]) {
    expectError(t, await http(app, 'GET', `/v1/events?cursor=${forged(cursor)}`, { key }), 400, 'invalid_request');
  }
  t.is((await http(app, 'GET', `/v1/events?cursor=${forged({ seq: '9223372036854775807' })}`, { key })).status, 200);
  for (const cursor of [{ pk: 123 }, { seq: '1' }, 'x']) {
    expectError(t, await http(app, 'GET', `/v1/payment-links?cursor=${forged(cursor)}`, { key }), 400, 'invalid_request');
  }
  expectError(t, await http(app, 'GET', '/v1/events?limit=0', { key }), 400, 'invalid_request');
  expectError(t, await http(app, 'GET', '/v1/events?limit=201', { key }), 400, 'invalid_request');
});

test('PATCH label, price and disabled; each emits payment_link.updated; a disabled link stays readable', async (t) => {
  const { app, key } = t.context;
  const { mint } = await recordAgent(app, key);
  const link = await createLink(t, mint);

  const renamed = await http(app, 'PATCH', `/v1/payment-links/${link.id}`, { key, body: { label: 'Renamed' } });
  t.is(renamed.status, 200, JSON.stringify(renamed.body));
  requestIdOf(t, renamed);
  t.is(renamed.body.label, 'Renamed');
  t.is(renamed.body.price, '$0.01');
  t.is(renamed.body.created_at, link.created_at);
  t.true(renamed.body.updated_at >= link.updated_at);

  const repriced = await http(app, 'PATCH', `/v1/payment-links/${link.id}`, { key, body: { price: '$0.02' } });
  t.is(repriced.status, 200);
  t.is(repriced.body.price, '$0.02');
  t.is(repriced.body.accepts[0].amount, '20000');
  t.is(repriced.body.label, 'Renamed');

  const disabled = await http(app, 'PATCH', `/v1/payment-links/${link.id}`, { key, body: { disabled: true } });
  t.is(disabled.status, 200);
  t.is(disabled.body.disabled, true);
  const readDisabled = await http(app, 'GET', `/v1/payment-links/${link.id}`, { key });
  t.is(readDisabled.status, 200, 'GET by id still works on a disabled link');
  t.is(readDisabled.body.disabled, true);
  t.deepEqual(readDisabled.body.counters, link.counters, 'counters kept');
  t.true(
    (await http(app, 'GET', `/v1/payment-links?owner_agent=${mint}`, { key })).body.data.some(
      (l: { id: string; disabled: boolean }) => l.id === link.id && l.disabled,
    ),
  );

  const enabled = await http(app, 'PATCH', `/v1/payment-links/${link.id}`, { key, body: { disabled: false } });
  t.is(enabled.status, 200);
  t.is(enabled.body.disabled, false);

  const bad = await http(app, 'PATCH', `/v1/payment-links/${link.id}`, { key, body: { disabled: 'yes' } });
  expectIssues(t, expectError(t, bad, 400, 'invalid_request'), ['disabled']);
  const badPrice = await http(app, 'PATCH', `/v1/payment-links/${link.id}`, { key, body: { price: '-1' } });
  expectError(t, badPrice, 400, 'invalid_request');
  t.is((await http(app, 'GET', `/v1/payment-links/${link.id}`, { key })).body.price, '$0.02', 'a refused PATCH changes nothing');

  const events = await eventsOf(t, `kind=payment_link.updated&agent=${mint}`);
  t.is(events.data.length, 4, 'label, price, disabled true, disabled false');
  t.true(events.data.every((e) => e.kind === 'payment_link.updated' && e.metadata.payment_link_id === link.id));
  t.deepEqual(
    events.data.map((e) => e.metadata.payment_link?.disabled),
    [false, true, false, false],
    'newest first: enabled, disabled, repriced, renamed',
  );
});

test("PATCH of the price alone keeps the link's currency; a price naming a symbol switches it (chain-mainnet)", async (t) => {
  const { app } = t.context;
  const live = await issueKey(app, 'chain-mainnet');
  const { mint } = await recordAgent(app, live);
  const created = await http(app, 'POST', '/v1/payment-links', {
    key: live,
    body: linkBody(mint, { price: '1', currency: 'usdt', accepts_currencies: ['USDC'] }),
  });
  t.is(created.status, 201, JSON.stringify(created.body));
  t.is(created.body.currency, 'USDT');
  t.deepEqual(
    created.body.accepts.map((a: { currency: string }) => a.currency),
    ['USDT', 'USDC'],
  );

  const repriced = await http(app, 'PATCH', `/v1/payment-links/${created.body.id}`, { key: live, body: { price: '2' } });
  t.is(repriced.status, 200, JSON.stringify(repriced.body));
  t.is(repriced.body.currency, 'USDT', 'the currency was not part of the PATCH');
  t.is(repriced.body.accepts[0].asset, 'Es9vMFrzaCERmJfrF4H2FYD4KCoNkY11McCe8BenwNYB');
  t.is(repriced.body.accepts[0].amount, '2000000');
  t.deepEqual(repriced.body.accepts_currencies, ['USDC']);

  const dollars = await http(app, 'PATCH', `/v1/payment-links/${created.body.id}`, { key: live, body: { price: '$3' } });
  t.is(dollars.body.currency, 'USDT');
  t.is(dollars.body.accepts[0].amount, '3000000');

  const named = await http(app, 'PATCH', `/v1/payment-links/${created.body.id}`, { key: live, body: { price: '4 USDG' } });
  t.is(named.status, 200, JSON.stringify(named.body));
  t.is(named.body.currency, 'USDG');
  t.deepEqual(
    named.body.accepts.map((a: { currency: string; amount: string }) => [a.currency, a.amount]),
    [
      ['USDG', '4000000'],
      ['USDC', '4000000'],
    ],
  );

  const switched = await http(app, 'PATCH', `/v1/payment-links/${created.body.id}`, { key: live, body: { price: '5', currency: 'USDC' } });
  t.is(switched.body.currency, 'USDC');
  t.deepEqual(
    switched.body.accepts.map((a: { currency: string }) => a.currency),
    ['USDC'],
    'the primary is not repeated in accepts',
  );
});

// ── Events ─────────────────────────────────────────────────────────────────────────────────────────────────────

test('payment_link.created/updated/deleted events: wildcard kind, agent and id filters, GET by id', async (t) => {
  const { app, key } = t.context;
  const { mint } = await recordAgent(app, key);
  const link = await createLink(t, mint);
  t.is((await http(app, 'PATCH', `/v1/payment-links/${link.id}`, { key, body: { label: 'Changed' } })).status, 200);
  t.is((await http(app, 'DELETE', `/v1/payment-links/${link.id}`, { key })).status, 204);

  const events = await eventsOf(t, `kind=${encodeURIComponent('payment_link.*')}&agent=${mint}`);
  t.deepEqual(
    events.data.map((e) => e.kind),
    ['payment_link.deleted', 'payment_link.updated', 'payment_link.created'],
  );
  for (const e of events.data) {
    t.regex(e.id, ULID);
    t.is(e.network, 'chain-devnet');
    t.is(e.agent_asset, mint);
    t.is(e.metadata.payment_link_id, link.id);
    t.true(['prepared', 'submitted', 'confirmed', 'failed'].includes(e.phase));
    t.regex(e.created_at, ISO_MS);
    for (const field of ['signature', 'block_time', 'confirmed_at', 'slot', 'error_code', 'error_logs', 'client_reference']) t.true(field in e, field);
  }
  t.is(events.has_more, false);
  t.is(events.next_cursor, null);

  const exact = await eventsOf(t, `kind=payment_link.created&agent=${mint}`);
  t.deepEqual(
    exact.data.map((e) => e.kind),
    ['payment_link.created'],
  );
  const several = await eventsOf(t, `kind=${encodeURIComponent('payment_link.created,payment_link.deleted')}&agent=${mint}`);
  t.deepEqual(
    several.data.map((e) => e.kind),
    ['payment_link.deleted', 'payment_link.created'],
  );
  const none = await eventsOf(t, `kind=${encodeURIComponent('receipt.*')}&agent=${mint}`);
  t.deepEqual(none.data, []);

  const updated = events.data[1]!;
  const byId = await eventsOf(t, `id=${updated.id}`);
  t.deepEqual(
    byId.data.map((e) => e.id),
    [updated.id],
  );

  const one = await http(app, 'GET', `/v1/events/${updated.id}`, { key });
  t.is(one.status, 200);
  requestIdOf(t, one);
  t.deepEqual(one.body, updated);

  const paged = await eventsOf(t, `agent=${mint}&limit=2`);
  t.is(paged.data.length, 2);
  t.true(paged.has_more);
  const rest = await eventsOf(t, `agent=${mint}&limit=2&cursor=${encodeURIComponent(paged.next_cursor!)}`);
  t.deepEqual(
    rest.data.map((e) => e.id),
    [events.data[2]!.id],
  );
  t.false(rest.has_more);

  expectError(t, await http(app, 'GET', '/v1/events/01ARZ3NDEKTSV4RRFFQ69G5FAV', { key }), 404, 'event_not_found');
  expectError(t, await http(app, 'GET', `/v1/events?kind=${encodeURIComponent('Not A Kind')}`, { key }), 400, 'invalid_request');
});

test('preview returns accepts[], pay_to and facilitator and stores nothing', async (t) => {
  const { app, key } = t.context;
  const { mint } = await recordAgent(app, key);
  const res = await http(app, 'POST', '/v1/payment-links/preview', { key, body: { owner_agent: mint, method: 'GET', price: '$0.01' } });
  t.is(res.status, 200, JSON.stringify(res.body));
  requestIdOf(t, res);
  const payTo = devnetPayTo(mint);
  t.is(res.body.treasury, treasuryPda(mint).toBase58());
  t.is(res.body.pay_to, res.body.treasury, 'pay_to is the x402 payTo, as on a link');
  t.is(res.body.pay_to_token_account, payTo);
  t.is(res.body.facilitator, `${app.services.settings.baseUrl}/facilitator`);
  t.deepEqual(res.body.accepts, [
    {
      scheme: 'exact',
      network: DEVNET_CAIP2,
      pay_to: res.body.treasury,
      pay_to_token_account: payTo,
      pay_to_ready: null,
      asset: DEVNET_USDC,
      amount: '10000',
      currency: 'USDC',
    },
  ]);

  const bad = await http(app, 'POST', '/v1/payment-links/preview', { key, body: { owner_agent: mint, method: 'GET', price: '1.5 usdt' } });
  expectError(t, bad, 400, 'invalid_request');

  t.deepEqual((await http(app, 'GET', `/v1/payment-links?owner_agent=${mint}`, { key })).body.data, [], 'no link stored');
  t.deepEqual((await eventsOf(t, `agent=${mint}`)).data, [], 'no event written');
});

// ── Seller utilities and meta ──────────────────────────────────────────────────────────────────────────────────

test('POST /v1/seller/parse-price: the accepted forms', async (t) => {
  const { app, key } = t.context;
  const cases: [string, string, string][] = [
    ['$0.01', '10000', '0.01 USDC'],
    ['0.01', '10000', '0.01 USDC'],
    ['0.01 USDC', '10000', '0.01 USDC'],
    ['1.5 usdc', '1500000', '1.5 USDC'],
    ['0.000001', '1', '0.000001 USDC'],
  ];
  for (const [price, amount, display] of cases) {
    const res = await http(app, 'POST', '/v1/seller/parse-price', { key, body: { price } });
    t.is(res.status, 200, `${price}: ${JSON.stringify(res.body)}`);
    requestIdOf(t, res);
    t.deepEqual(res.body, { amount_atomic: amount, currency: 'USDC', decimals: 6, display }, price);
  }
});

test('POST /v1/seller/parse-price: refusals are 400 invalid_request', async (t) => {
  const { app, key } = t.context;
  // On chain-devnet only USDC exists.
  for (const price of ['1.5 usdt', '0.0000001', '0', '-1', '$0', 'abc', '']) {
    const res = await http(app, 'POST', '/v1/seller/parse-price', { key, body: { price } });
    expectIssues(t, expectError(t, res, 400, 'invalid_request'), ['price']);
  }
  expectError(t, await http(app, 'POST', '/v1/seller/parse-price', { key, body: {} }), 400, 'invalid_request');
  expectError(t, await http(app, 'POST', '/v1/seller/parse-price', { key, body: { price: 1 } }), 400, 'invalid_request');
});

test("GET /v1/seller/networks lists both networks with the caller's marked current", async (t) => {
  const { app, key } = t.context;
  const res = await http(app, 'GET', '/v1/seller/networks', { key });
  t.is(res.status, 200);
  const byName = Object.fromEntries(res.body.data.map((n: { network: string }) => [n.network, n]));
  t.deepEqual(Object.keys(byName).sort(), ['chain-devnet', 'chain-mainnet']);
  t.is(byName['chain-devnet'].current, true);
  t.is(byName['chain-mainnet'].current, false);
  t.is(byName['chain-devnet'].caip2, DEVNET_CAIP2);
  t.is(byName['chain-mainnet'].caip2, 'solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp');
  t.deepEqual(
    byName['chain-devnet'].stables.map((s: { symbol: string }) => s.symbol),
    ['USDC'],
  );
  t.is(byName['chain-devnet'].stables[0].mint, DEVNET_USDC);
  t.deepEqual(byName['chain-mainnet'].stables.map((s: { symbol: string }) => s.symbol).sort(), ['USDC', 'USDG', 'USDT']);
  t.is(byName['chain-devnet'].protocol_fee.bps, 100);
});

// ── The list envelope (DECISIONS "Wire conventions") ──────────────────────────────────────────────────────────────

test('every list route answers the list envelope: the OpenAPI document says so, bounded lists are one complete page', async (t) => {
  const { app, key } = t.context;
  // the document: a 200 whose body holds an array `data` requires next_cursor (string|null) and has_more (boolean)
  const doc = (await http(app, 'GET', '/openapi.json')).body as { paths: Record<string, Record<string, any>> };
  const lists: string[] = [];
  for (const [path, ops] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(ops)) {
      const schema = op.responses?.['200']?.content?.['application/json']?.schema;
      if (schema?.properties?.data?.type !== 'array') continue;
      lists.push(`${method} ${path}`);
      t.deepEqual(
        ['data', 'next_cursor', 'has_more'].filter((k) => !schema.required?.includes(k)),
        [],
        `${method} ${path} requires the envelope's fields`,
      );
      t.is(schema.properties.has_more?.type, 'boolean', `${method} ${path} has_more`);
    }
  }
  for (const route of [
    'get /v1/identity/{mint}/claims',
    'get /v1/identity/{mint}/capability-cards',
    'get /v1/discover',
    'get /v1/metrics/usage',
    'get /v1/indexer/status',
  ]) {
    t.true(lists.includes(route), route);
  }

  // the answers: bounded lists say has_more false and next_cursor null
  const { mint } = await recordAgent(app, key);
  for (const path of [
    '/v1/seller/networks',
    '/v1/buyer/networks',
    '/v1/buyer/currency',
    '/v1/event-kinds',
    '/v1/indexer/status',
    `/v1/identity/${mint}/capability-cards`,
    `/v1/identity/${mint}/claims`,
  ]) {
    const res = await http(app, 'GET', path, { key });
    t.is(res.status, 200, `${path}: ${JSON.stringify(res.body)}`);
    t.true(Array.isArray(res.body.data), path);
    t.like(res.body, { next_cursor: null, has_more: false }, path);
  }
});

test('discover pages by cursor: has_more and next_cursor while matches remain, each match once', async (t) => {
  const { app, key } = t.context;
  const { mint } = await recordAgent(app, key);
  const word = `pagetest${Date.now().toString(36)}`;
  const made: string[] = [];
  for (let i = 0; i < 3; i += 1) made.push((await createLink(t, mint, { label: `${word} ${i}`, metadata: { discoverable: true } })).id);
  const first = await http(app, 'GET', `/v1/discover?q=${word}&limit=2`, { key });
  t.is(first.status, 200, JSON.stringify(first.body));
  t.is(first.body.data.length, 2);
  t.is(first.body.has_more, true);
  t.is(typeof first.body.next_cursor, 'string');
  const second = await http(app, 'GET', `/v1/discover?q=${word}&limit=2&cursor=${first.body.next_cursor}`, { key });
  t.like(second.body, { has_more: false, next_cursor: null });
  t.deepEqual([...first.body.data, ...second.body.data].map((i: { id: string }) => i.id).sort(), [...made].sort());
  const bad = await http(app, 'GET', '/v1/discover?cursor=not-a-cursor', { key });
  t.is(bad.status, 400);
});

test('GET /v1/health has the protocol_fee block', async (t) => {
  const { app, key } = t.context;
  const res = await http(app, 'GET', '/v1/health', { key });
  t.is(res.status, 200);
  requestIdOf(t, res);
  t.is(res.body.protocol_fee.bps, 100);
  t.is(res.body.protocol_fee.pct, '1.00');
  t.deepEqual(Object.keys(res.body.protocol_fee.authorities).sort(), ['chain-devnet', 'chain-mainnet']);
  for (const authority of Object.values<string>(res.body.protocol_fee.authorities)) t.notThrows(() => new PublicKey(authority));
});

test('GET /v1/version = { version, commit, api, openapi }', async (t) => {
  const { app, key } = t.context;
  const res = await http(app, 'GET', '/v1/version', { key });
  t.is(res.status, 200);
  t.deepEqual(res.body, { version: app.services.settings.version, commit: 'test', api: 'v1', openapi: '3.1.0' });
  t.regex(res.body.version, /^\d+\.\d+\.\d+/);
});

// ── Agents ─────────────────────────────────────────────────────────────────────────────────────────────────────

test('POST /v1/agents/record then GET /v1/agents/{mint} returns the agent record', async (t) => {
  const { app, key } = t.context;
  const { mint, owner } = await writeAgentAsset(app, 'chain-devnet', { name: 'Forecaster', uri: 'https://agents.example/f.json' });
  const recorded = await http(app, 'POST', '/v1/agents/record', { key, body: { mint, owner, name: 'Forecaster', uri: 'https://agents.example/f.json' } });
  t.is(recorded.status, 200, JSON.stringify(recorded.body));
  const res = await http(app, 'GET', `/v1/agents/${mint}`, { key });
  t.is(res.status, 200);
  requestIdOf(t, res);
  const agent = res.body;
  t.deepEqual(Object.keys(agent).sort(), [
    'delegations',
    'executive',
    'mint',
    'name',
    'network',
    'owner',
    'proven_at',
    'registered_at',
    'source',
    'treasury',
    'uri',
  ]);
  t.is(agent.mint, mint);
  t.is(agent.network, 'chain-devnet');
  t.is(agent.owner, owner);
  t.is(agent.name, 'Forecaster');
  t.is(agent.uri, 'https://agents.example/f.json');
  t.is(agent.treasury, treasuryPda(mint).toBase58());
  t.is(agent.executive, null);
  t.deepEqual(agent.delegations, []);
  t.is(agent.source, 'recorded');
  t.regex(agent.registered_at, ISO_MS);
  t.is(agent.proven_at, agent.registered_at, 'proven when recorded: the ledger holds its asset');
  t.deepEqual(recorded.body, agent);
  // DECISIONS "Agents, submissions and events": an address with no Core asset of that owner is not recorded
  const stranger = await randomAddress();
  const refused = expectError(t, await http(app, 'POST', '/v1/agents/record', { key, body: { mint: stranger, owner } }), 422, 'agent_not_on_ledger');
  t.like(refused.details, { found: 'nothing', mint: stranger });
  expectError(t, await http(app, 'GET', `/v1/agents/${stranger}`, { key }), 404, 'agent_not_found');

  expectError(t, await http(app, 'GET', `/v1/agents/${await randomAddress()}`, { key }), 404, 'agent_not_found');
  expectError(t, await http(app, 'GET', '/v1/agents/not-a-mint', { key }), 400, 'invalid_request');
  expectIssues(t, expectError(t, await http(app, 'POST', '/v1/agents/record', { key, body: { mint } }), 400, 'invalid_request'), ['owner']);
});

// ── Authentication and keys ────────────────────────────────────────────────────────────────────────────────────

test('no Authorization header → 401 missing_api_key on every /v1 route', async (t) => {
  const { app } = t.context;
  for (const [method, path] of [
    ['GET', '/v1/payment-links'],
    ['POST', '/v1/payment-links'],
    ['GET', '/v1/payment-links/x'],
    ['GET', '/v1/events'],
    ['GET', '/v1/health'],
    ['GET', '/v1/version'],
    ['POST', '/v1/seller/parse-price'],
  ] as const) {
    const res = await http(app, method, path, method === 'POST' ? { body: {} } : {});
    expectError(t, res, 401, 'missing_api_key');
  }
});

test('garbage, unknown and disabled keys → 401 invalid_api_key', async (t) => {
  const { app } = t.context;
  const invalid = async (headers: Record<string, string>) => expectError(t, await http(app, 'GET', '/v1/health', { headers }), 401, 'invalid_api_key');
  await invalid({ authorization: 'Bearer garbage' });
  await invalid({ authorization: 'Basic dXNlcjpwYXNz' });
  await invalid({ authorization: `Bearer svc_test_${'A'.repeat(32)}` }); // well-formed, unknown
  await invalid({ authorization: `Bearer svc_prod_${'A'.repeat(32)}` });

  const created = await app.services.access.issueKey({ network: 'chain-devnet' });
  t.is((await http(app, 'GET', '/v1/health', { key: created.key })).status, 200);
  await app.database.orm.em.fork().execute('update api_keys set disabled_at = now() where id = ?', [created.id]);
  // Key rows are cached per process until the key's api_key.disabled event, KEY_CACHE_TTL_MS at most (on the app's
  // clock: the bound is proven on a moved TestClock below): a key disabled behind the API's back (here by SQL, no
  // event) is refused once the cached row expires.
  await until('the cached key row expired', async () => (await http(app, 'GET', '/v1/health', { key: created.key })).status !== 200, { everyMs: 250 });
  expectError(t, await http(app, 'GET', '/v1/health', { key: created.key }), 401, 'invalid_api_key');
  expectError(t, await http(app, 'GET', '/v1/payment-links', { key: created.key }), 401, 'invalid_api_key');
});

test('a key row is cached for KEY_CACHE_TTL_MS on the clock: a key disabled behind the service (no event) is refused exactly when its row expires', async (t) => {
  const { app } = t.context;
  const clock = new TestClock('2030-01-01T00:00:00.000Z');
  // the real service over the app's real store, on a clock the test moves
  const access = new AccessService({ store: app.database.store, clock });
  const created = await access.issueKey({ network: 'chain-devnet' });
  const bearer = `Bearer ${created.key}`;
  t.is((await access.authenticate(bearer)).keyId, created.id);
  await app.database.orm.em.fork().execute('update api_keys set disabled_at = now() where id = ?', [created.id]);
  clock.advance(KEY_CACHE_TTL_MS - 1);
  t.is((await access.authenticate(bearer)).keyId, created.id, 'the cached row answers until the TTL (the backstop of the disable event)');
  clock.advance(1);
  await t.throwsAsync(access.authenticate(bearer), { instanceOf: DomainError, message: /disabled/ });
});

test('the database stores only the SHA-256 of a key', async (t) => {
  const { app } = t.context;
  const created = await app.services.access.issueKey({ network: 'chain-devnet', label: 'hash check' });
  t.regex(created.key, /^svc_test_[0-9A-Za-z]{32}$/);
  const rows = (await app.database.orm.em.fork().execute('select * from api_keys where id = ?', [created.id])) as Record<string, unknown>[];
  t.is(rows.length, 1);
  const row = rows[0]!;
  t.is(row.key_hash, createHash('sha256').update(created.key, 'utf8').digest('hex'));
  t.is(row.prefix, created.key.slice(0, 12));
  const secret = created.key.slice('svc_test_'.length);
  for (const [column, value] of Object.entries(row)) {
    const text = value instanceof Date ? value.toISOString() : JSON.stringify(value);
    t.false(text?.includes(created.key) ?? false, `${column} holds the key`);
    t.false(text?.includes(secret) ?? false, `${column} holds the secret`);
  }
  const anywhere = (await app.database.orm.em
    .fork()
    .execute('select count(*)::int as n from api_keys where row_to_json(api_keys)::text like ?', [`%${secret}%`])) as { n: number }[];
  t.is(anywhere[0]!.n, 0);
});

// ── tRPC over HTTP ─────────────────────────────────────────────────────────────────────────────────────────────

test('tRPC over HTTP: an unknown id is HTTP 404 with error.data.code payment_link_not_found', async (t) => {
  const { app, key } = t.context;
  const input = encodeURIComponent(JSON.stringify({ id: 'no-such-link' }));
  const res = await http(app, 'GET', `/trpc/paymentLinks.get?input=${input}`, { key });
  t.is(res.status, 404, JSON.stringify(res.body));
  t.is(res.body.error.data.code, 'payment_link_not_found');
  t.is(res.body.error.data.httpStatus, 404);
  t.is(res.body.error.data.request_id, requestIdOf(t, res));

  const { mint } = await recordAgent(app, key);
  const link = await createLink(t, mint);
  const ok = await http(app, 'GET', `/trpc/paymentLinks.get?input=${encodeURIComponent(JSON.stringify({ id: link.id }))}`, { key });
  t.is(ok.status, 200);
  t.is(ok.body.result.data.id, link.id);

  const anonymous = await http(app, 'GET', `/trpc/paymentLinks.get?input=${input}`);
  t.is(anonymous.status, 401);
  t.is(anonymous.body.error.data.code, 'missing_api_key');
});
