import anyTest, { type TestFn } from 'ava';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { LedgerThread } from '../../adapters/ledger/embedded/ledger-thread.ts';
import { GuardedOutboundHttp } from '../../adapters/http/outbound.ts';
import { createClient, errorCode } from '../../interfaces/client/index.ts';
import { http, linkBody, randomAddress, recordAgent, startTestApp, type HttpResult, type TestApp } from '../support/app.ts';
import { writeCoreAsset } from '../support/core-asset.ts';
import { buildChain, unknownSignature } from '../support/receipts.ts';
import { TestClock } from '../support/clock.ts';

// DECISIONS "Identity": profiles and handles, public reads (resolve, get), verify verdicts and domain
// verification against a real local HTTPS server whose self-signed certificate the app trusts through SVC_OUTBOUND_CA.
// One app for the file on a test clock; the tests run serially (they share the HTTPS server and the clock).

interface Ctx {
  app: TestApp;
  /** owner of the agents below (principal key:<id>) */
  key: string;
  /** another principal on devnet */
  other: string;
  /** the local HTTPS server's host:port (127.0.0.1:<port>), allow-listed */
  host: string;
  /** what the server answers at /.well-known/svc-agent.json */
  wellKnown: { status: number; body: string };
  server: Server;
  certDir: string;
  /** the self-signed certificate (PEM) */
  cert: string;
}

const test = anyTest as TestFn<Ctx>;
const run = promisify(execFile);

test.before(async (t) => {
  const certDir = await mkdtemp(join(tmpdir(), 'svc-identity-cert-'));
  const keyPath = join(certDir, 'key.pem');
  const certPath = join(certDir, 'cert.pem');
  await run('openssl', [
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
    '-days',
    '1',
    '-keyout',
    keyPath,
    '-out',
    certPath,
    '-subj',
    '/CN=127.0.0.1',
    '-addext',
    'subjectAltName=IP:127.0.0.1',
  ]);
  const cert = await readFile(certPath, 'utf8');
  const wellKnown = { status: 404, body: '' };
  const server = createServer({ key: await readFile(keyPath), cert }, (req, res) => {
    if (req.url !== '/.well-known/svc-agent.json') return void res.writeHead(404).end();
    res.writeHead(wellKnown.status, { 'content-type': 'application/json' }).end(wellKnown.body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const host = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  // a test clock: disclosure links expire when the test moves it, not after a wait
  const app = await startTestApp({ env: { SVC_OUTBOUND_ALLOW: host, SVC_OUTBOUND_CA: cert }, appOptions: { clock: new TestClock() } });
  t.context = {
    app,
    key: (await app.services.access.issueKey({ network: 'chain-devnet', role: 'user', owner_wallet: null })).key,
    other: (await app.services.access.issueKey({ network: 'chain-devnet', role: 'user', owner_wallet: null })).key,
    host,
    wellKnown,
    server,
    certDir,
    cert,
  };
});

test.after.always(async (t) => {
  t.context.server?.close();
  if (t.context.certDir) await rm(t.context.certDir, { recursive: true, force: true });
});

// ── helpers ──────────────────────────────────────────────────────────────────────────────────────────────────────────

const IDENTITY_FIELDS = `mint network owner name profile { handle displayName description image capabilities updatedAt }
  domains { domain verifiedAt } claims { id type statement evidenceUrl public createdAt revokedAt } capabilityCards { id capability public } reputation { settledCalls rating volume { currency asset amountAtomic calls } lastSettledAt }`;

function gql(t: { context: Ctx }, key: string, query: string, variables?: Record<string, unknown>): Promise<HttpResult> {
  return http(t.context.app, 'POST', '/graphql', { key, body: { query, variables } });
}

const trpc = (t: { context: Ctx }, key: string) => createClient({ url: t.context.app.url, apiKey: key });

let handles = 0;
/** a fresh handle per call: tests run concurrently on one database */
const handle = (base: string) => `${base}-${process.pid % 1000}-${++handles}`;

async function putProfile(t: { context: Ctx }, mint: string, body: Record<string, unknown>, key = t.context.key) {
  return http(t.context.app, 'PUT', `/v1/identity/${mint}/profile`, { key, body });
}

async function eventsOf(t: { context: Ctx }, kind: string, agent: string): Promise<any[]> {
  const res = await http(t.context.app, 'GET', `/v1/events?kind=${kind}&agent=${agent}`, { key: t.context.key });
  return res.body.data;
}

function ledger(t: { context: Ctx }): LedgerThread {
  return t.context.app.ledgers.embedded['chain-devnet'] as LedgerThread;
}

/** claims the domain and serves the document the claim asks for, then verifies it over REST */
async function proveDomain(t: { context: Ctx }, mint: string, document?: (doc: Record<string, unknown>) => unknown): Promise<HttpResult> {
  const claim = await http(t.context.app, 'POST', `/v1/identity/${mint}/domains`, { key: t.context.key, body: { domain: t.context.host } });
  t.context.wellKnown.status = 200;
  t.context.wellKnown.body = JSON.stringify(document ? document(claim.body.document) : claim.body.document);
  return http(t.context.app, 'POST', `/v1/identity/${mint}/domains/${t.context.host}/verify`, { key: t.context.key });
}

// ── profiles and handles ─────────────────────────────────────────────────────────────────────────────────────────────

test.serial('PUT profile on REST: stored, read back by anyone on the network, event identity.profile.updated', async (t) => {
  const { mint, owner } = await recordAgent(t.context.app, t.context.key, { name: 'Weather bot' });
  const h = handle('Weather');
  const put = await putProfile(t, mint, {
    handle: h,
    display_name: 'Weather',
    description: 'Forecasts',
    image: 'https://example.com/w.png',
    capabilities: ['weather.forecast'],
  });
  t.is(put.status, 200, JSON.stringify(put.body));
  t.like(put.body, {
    mint,
    network: 'chain-devnet',
    owner,
    name: 'Weather bot',
    profile: { handle: h, display_name: 'Weather', description: 'Forecasts', image: 'https://example.com/w.png', capabilities: ['weather.forecast'] },
    domains: [],
    claims: [],
    capability_cards: [],
  });
  t.deepEqual(put.body.reputation, { settled_calls: 0, rating: null, volume: [], last_settled_at: null });

  // another principal reads it (public on the network)
  const read = await http(t.context.app, 'GET', `/v1/identity/${mint}`, { key: t.context.other });
  t.is(read.status, 200);
  t.deepEqual(read.body, put.body);

  const events = await eventsOf(t, 'identity.profile.updated', mint);
  t.is(events.length, 1);
  t.like(events[0], {
    kind: 'identity.profile.updated',
    agent_asset: mint,
    metadata: { mint, handle: h, previous_handle: null, display_name: 'Weather', capabilities: ['weather.forecast'] },
  });

  // a second PUT replaces the whole profile and names the previous handle
  const h2 = handle('Forecast');
  const again = await putProfile(t, mint, { handle: h2 });
  t.is(again.status, 200);
  t.like(again.body.profile, { handle: h2, display_name: null, description: null, image: null, capabilities: [] });
  const later = await eventsOf(t, 'identity.profile.updated', mint);
  t.is(later.length, 2);
  t.like(later[0], { metadata: { handle: h2, previous_handle: h } });
});

test.serial('handles are unique per network case-insensitively (409), reserved and malformed ones are 400, another principal gets 404', async (t) => {
  const a = await recordAgent(t.context.app, t.context.key);
  const b = await recordAgent(t.context.app, t.context.key);
  const h = handle('Unique');
  t.is((await putProfile(t, a.mint, { handle: h })).status, 200);
  // the same agent may keep its handle in another case
  t.is((await putProfile(t, a.mint, { handle: h.toUpperCase() })).status, 200);

  const taken = await putProfile(t, b.mint, { handle: h.toLowerCase() });
  t.is(taken.status, 409);
  t.like(taken.body, { error: 'conflict', details: { path: 'handle' } });
  t.regex(taken.body.message, /taken/);
  t.is(typeof taken.body.request_id, 'string');

  for (const reserved of ['admin', 'API', 'Svc', 'support', 'root', 'SYSTEM']) {
    const res = await putProfile(t, b.mint, { handle: reserved });
    t.is(res.status, 400, reserved);
    t.is(res.body.error, 'invalid_request');
    t.regex(res.body.message, /reserved/);
  }
  for (const bad of ['ab', '-lead', 'with space', 'x'.repeat(33)]) {
    const res = await putProfile(t, b.mint, { handle: bad });
    t.is(res.status, 400, bad);
    t.is(res.body.error, 'invalid_request');
  }
  t.is((await putProfile(t, b.mint, { handle: handle('ok'), image: 'http://plain.example/x.png' })).status, 400);
  t.is((await putProfile(t, b.mint, { handle: handle('ok'), unknown: 1 })).status, 400);

  const foreign = await putProfile(t, a.mint, { handle: handle('Thief') }, t.context.other);
  t.is(foreign.status, 404);
  t.is(foreign.body.error, 'agent_not_found');
  t.is((await http(t.context.app, 'GET', `/v1/identity/${await randomAddress()}`, { key: t.context.key })).status, 404);
  t.is((await http(t.context.app, 'GET', `/v1/identity/${a.mint}`)).status, 401);
});

test.serial('profile on tRPC and GraphQL: the same service, the same errors', async (t) => {
  const { mint } = await recordAgent(t.context.app, t.context.key);
  const h = handle('Trpc');
  const viaTrpc = await trpc(t, t.context.key).identity.putProfile.mutate({ mint, handle: h, display_name: 'T' });
  t.like(viaTrpc.profile, { handle: h, display_name: 'T' });
  const refused = await trpc(t, t.context.key)
    .identity.putProfile.mutate({ mint, handle: 'admin' })
    .catch((e: unknown) => e);
  t.is(errorCode(refused), 'invalid_request');
  const hidden = await trpc(t, t.context.other)
    .identity.putProfile.mutate({ mint, handle: handle('x') })
    .catch((e: unknown) => e);
  t.is(errorCode(hidden), 'agent_not_found');

  const g = handle('Gql');
  const viaGql = await gql(t, t.context.key, `mutation($input: IdentityProfileInput!) { setIdentityProfile(input: $input) { ${IDENTITY_FIELDS} } }`, {
    input: { mint, handle: g, displayName: 'G', capabilities: ['a.b'] },
  });
  t.is(viaGql.status, 200);
  t.falsy(viaGql.body.errors, JSON.stringify(viaGql.body.errors));
  t.like(viaGql.body.data.setIdentityProfile.profile, { handle: g, displayName: 'G', capabilities: ['a.b'], description: null });
  const gqlTaken = await gql(t, t.context.key, `mutation($input: IdentityProfileInput!) { setIdentityProfile(input: $input) { mint } }`, {
    input: { mint: (await recordAgent(t.context.app, t.context.key)).mint, handle: g.toUpperCase() },
  });
  t.is(gqlTaken.body.errors?.[0]?.extensions?.code, 'conflict');

  // agent { identity { … } }: the nested field on the Agent type
  const nested = await gql(t, t.context.key, `query($mint: String!) { agent(mint: $mint) { mint identity { ${IDENTITY_FIELDS} } } }`, { mint });
  t.falsy(nested.body.errors, JSON.stringify(nested.body.errors));
  t.like(nested.body.data.agent.identity, { mint, profile: { handle: g } });
});

// ── resolve ──────────────────────────────────────────────────────────────────────────────────────────────────────────

test.serial('resolve by mint and handle (any case, with @) on REST, tRPC and GraphQL; one key exactly; unknown → 404', async (t) => {
  const { mint } = await recordAgent(t.context.app, t.context.key);
  const h = handle('Resolve');
  t.is((await putProfile(t, mint, { handle: h })).status, 200);

  const byHandle = await http(t.context.app, 'GET', `/v1/identity/resolve?handle=${encodeURIComponent(`@${h.toUpperCase()}`)}`, { key: t.context.other });
  t.is(byHandle.status, 200, JSON.stringify(byHandle.body));
  t.is(byHandle.body.mint, mint);
  const byMint = await http(t.context.app, 'GET', `/v1/identity/resolve?mint=${mint}`, { key: t.context.other });
  t.deepEqual(byMint.body, byHandle.body);

  const viaTrpc = await trpc(t, t.context.other).identity.resolve.query({ handle: h.toLowerCase() });
  t.deepEqual(viaTrpc, byHandle.body);
  const viaGql = await gql(
    t,
    t.context.other,
    `query($h: String) { resolveIdentity(handle: $h) { mint profile { handle } reputation { settledCalls rating } } }`,
    { h },
  );
  t.falsy(viaGql.body.errors, JSON.stringify(viaGql.body.errors));
  t.deepEqual(viaGql.body.data.resolveIdentity, { mint, profile: { handle: h }, reputation: { settledCalls: 0, rating: null } });

  for (const q of ['', `?mint=${mint}&handle=${h}`]) {
    const res = await http(t.context.app, 'GET', `/v1/identity/resolve${q}`, { key: t.context.key });
    t.is(res.status, 400, q);
    t.is(res.body.error, 'invalid_request');
  }
  const none = await http(t.context.app, 'GET', `/v1/identity/resolve?handle=${handle('nobody')}`, { key: t.context.key });
  t.is(none.status, 404);
  t.is(none.body.error, 'agent_not_found');
  const gqlNone = await gql(t, t.context.key, `{ resolveIdentity(domain: "nowhere.example") { mint } }`);
  t.is(gqlNone.body.errors?.[0]?.extensions?.code, 'agent_not_found');
});

test.serial('reputation: settled calls, volume per currency and rating from the agent’s earn receipts the ledger proved', async (t) => {
  const { app } = t.context;
  const { mint } = await recordAgent(app, t.context.key);
  const empty = { settled_calls: 0, rating: null, volume: [], last_settled_at: null };
  // two pushed receipts naming no transaction (verification not_applicable), then four settled calls, one answered 500,
  // and one denied call that does not count — these five naming their settlement: pending until the ledger check
  // decides, counted only once it is verified
  const chain = buildChain(mint, 7, (i) =>
    i < 2
      ? { response: { status: 200 } }
      : { tx_sig: unknownSignature(), ...(i === 6 ? { decision: 'deny' as const } : { response: { status: i === 5 ? 500 : 200 } }) },
  );
  for (const r of chain) {
    const res = await http(app, 'POST', `/v1/receipts/${mint}`, { key: t.context.key, body: r });
    t.is(res.status, 200, JSON.stringify(res.body));
  }
  t.deepEqual(
    (await http(app, 'GET', `/v1/identity/${mint}`, { key: t.context.other })).body.reputation,
    empty,
    'pending and not_applicable receipts do not count',
  );
  // the receipts job's verdict, as it records it
  const now = app.services.clock.now();
  for (const r of chain.slice(2))
    t.true(
      await app.database.store.receipts.setVerification('chain-devnet', r.receipt_hash, {
        status: 'verified',
        reason: 'checked',
        checkedAt: now,
        attempts: 1,
        nextCheckAt: null,
      }),
    );
  const read = await http(app, 'GET', `/v1/identity/${mint}`, { key: t.context.other });
  t.deepEqual(read.body.reputation, {
    settled_calls: 4,
    rating: 3.8,
    volume: [{ currency: 'USDC', asset: chain[0]!.price.asset, amount_atomic: '40000', calls: 4 }],
    last_settled_at: new Date(chain[5]!.ts).toISOString(),
  });
});

// ── verify ───────────────────────────────────────────────────────────────────────────────────────────────────────────

const names = (checks: { name: string; ok: boolean }[]) => Object.fromEntries(checks.map((c) => [c.name, c.ok]));

test.serial('verify: deny for an unknown agent, warn for a bare one, deny on a threshold, on all three doors', async (t) => {
  const unknown = await http(t.context.app, 'POST', '/v1/identity/verify', { key: t.context.other, body: { mint: await randomAddress() } });
  t.is(unknown.status, 200, JSON.stringify(unknown.body));
  t.like(unknown.body, { verdict: 'deny', score: 0, profile: null });
  t.deepEqual(names(unknown.body.checks), { agent_recorded: false });

  const { mint } = await recordAgent(t.context.app, t.context.key);
  const bare = await http(t.context.app, 'POST', '/v1/identity/verify', { key: t.context.other, body: { mint, capability: 'weather.forecast' } });
  t.is(bare.body.verdict, 'warn');
  // recorded agents hold their Core asset on the ledger (DECISIONS "Agents, submissions and events")
  t.deepEqual(names(bare.body.checks), {
    agent_recorded: true,
    asset_on_ledger: true,
    not_disabled: true,
    handle_set: false,
    domain_verified: false,
    capability_declared: false,
    registration: false,
  });
  t.is(bare.body.checks.find((c: { name: string }) => c.name === 'registration').detail, 'the agent has no registration uri');
  // deny checks weigh 3, warn checks 1: 7 of 11
  t.is(bare.body.score, 63);
  t.is(bare.body.profile.mint, mint);

  const strict = await trpc(t, t.context.other).identity.verify.mutate({
    mint,
    thresholds: { min_rating: 4, require_verified_domain: true, min_settled_calls: 1 },
  });
  t.is(strict.verdict, 'deny');
  t.like(names(strict.checks), { domain_verified: false, rating: false, settled_calls: false });
  t.regex(strict.checks.find((c) => c.name === 'rating')!.detail, /no settled call/);

  const viaGql = await gql(
    t,
    t.context.other,
    `query($m: String) { verifyIdentity(mint: $m, thresholds: { minSettledCalls: 0 }) { verdict score checks { name ok detail } profile { mint } } }`,
    { m: mint },
  );
  t.falsy(viaGql.body.errors, JSON.stringify(viaGql.body.errors));
  t.is(viaGql.body.data.verifyIdentity.verdict, 'WARN');
  t.like(names(viaGql.body.data.verifyIdentity.checks), { settled_calls: true });

  const bad = await http(t.context.app, 'POST', '/v1/identity/verify', { key: t.context.other, body: { mint, handle: 'x' } });
  t.is(bad.status, 400);
  t.is(bad.body.error, 'invalid_request');
});

test.serial('verify: not_disabled fails (deny) when the account at the mint is no longer a Core asset', async (t) => {
  const { mint } = await recordAgent(t.context.app, t.context.key);
  await ledger(t).setAccount(mint, { lamports: 1_000_000n, data: new Uint8Array(8), owner: '11111111111111111111111111111111' });
  const res = await http(t.context.app, 'POST', '/v1/identity/verify', { key: t.context.other, body: { mint } });
  t.is(res.body.verdict, 'deny');
  t.like(names(res.body.checks), { asset_on_ledger: true, not_disabled: false });
});

// ── domains (serial: one HTTPS server) ───────────────────────────────────────────────────────────────────────────────

// (before the domain test below: the domain this agent verifies is released by its new owner's record, so that test can
// verify it for another agent)
test.serial('recorded again with a new owner: its handle is released and its domains are unverified under the new owner', async (t) => {
  const { app } = t.context;
  const { mint } = await recordAgent(app, t.context.key);
  const h = handle('Former');
  t.is((await putProfile(t, mint, { handle: h, display_name: 'Former owner' })).status, 200);
  const proved = await proveDomain(t, mint);
  t.is(proved.status, 200, JSON.stringify(proved.body));
  const formerToken = proved.body.token;
  t.is((await http(app, 'GET', `/v1/identity/resolve?domain=${t.context.host}`, { key: t.context.other })).body.mint, mint);

  // the asset changes hands on the ledger; the new owner records it
  const newOwner = await randomAddress();
  await writeCoreAsset(ledger(t), mint, { owner: newOwner });
  const recorded = await http(app, 'POST', '/v1/agents/record', { key: t.context.key, body: { mint, owner: newOwner } });
  t.is(recorded.status, 200, JSON.stringify(recorded.body));

  const read = await http(app, 'GET', `/v1/identity/${mint}`, { key: t.context.other });
  t.is(read.body.owner, newOwner);
  t.is(read.body.profile.handle, null);
  t.deepEqual(read.body.domains, []);
  t.is((await http(app, 'GET', `/v1/identity/resolve?handle=${h}`, { key: t.context.other })).status, 404, 'the handle no longer names it');
  t.is((await http(app, 'GET', `/v1/identity/resolve?domain=${t.context.host}`, { key: t.context.other })).status, 404, 'the domain no longer proves it');
  const [released] = await eventsOf(t, 'identity.profile.updated', mint);
  t.like(released, { metadata: { mint, handle: null, previous_handle: h } });
  // the claim is there, unverified, with a token the former owner's document does not hold
  const claim = await http(app, 'POST', `/v1/identity/${mint}/domains`, { key: t.context.key, body: { domain: t.context.host } });
  t.like(claim.body, { domain: t.context.host, verified_at: null });
  t.not(claim.body.token, formerToken);
  const stale = await http(app, 'POST', `/v1/identity/${mint}/domains/${t.context.host}/verify`, { key: t.context.key });
  t.is(stale.status, 400, JSON.stringify(stale.body));
  t.like(stale.body, { error: 'invalid_request', details: { reason: 'token_mismatch' } });
  // recording it again with the same owner changes nothing more
  t.is((await putProfile(t, mint, { handle: h })).status, 200);
  t.is((await http(app, 'POST', '/v1/agents/record', { key: t.context.key, body: { mint, owner: newOwner } })).status, 200);
  t.is((await http(app, 'GET', `/v1/identity/${mint}`, { key: t.context.other })).body.profile.handle, h);
});

test.serial('domain: claimed, then verified against a real HTTPS server (self-signed CA from SVC_OUTBOUND_CA); resolve by domain; verify allows', async (t) => {
  const { mint, owner } = await recordAgent(t.context.app, t.context.key);
  const claim = await http(t.context.app, 'POST', `/v1/identity/${mint}/domains`, { key: t.context.key, body: { domain: t.context.host } });
  t.is(claim.status, 200, JSON.stringify(claim.body));
  t.like(claim.body, {
    domain: t.context.host,
    url: `https://${t.context.host}/.well-known/svc-agent.json`,
    document: { mint, network: 'chain-devnet' },
    verified_at: null,
  });
  t.is(claim.body.document.token, claim.body.token);
  // claiming again answers the same token; another principal cannot claim for the agent
  t.is(
    (await http(t.context.app, 'POST', `/v1/identity/${mint}/domains`, { key: t.context.key, body: { domain: t.context.host.toUpperCase() } })).body.token,
    claim.body.token,
  );
  t.is((await http(t.context.app, 'POST', `/v1/identity/${mint}/domains`, { key: t.context.other, body: { domain: t.context.host } })).status, 404);

  // not served yet → 400 naming the status
  t.context.wellKnown.status = 404;
  const early = await http(t.context.app, 'POST', `/v1/identity/${mint}/domains/${t.context.host}/verify`, { key: t.context.key });
  t.is(early.status, 400);
  t.like(early.body, { error: 'invalid_request', details: { reason: 'status' } });

  const proved = await proveDomain(t, mint);
  t.is(proved.status, 200, JSON.stringify(proved.body));
  t.is(typeof proved.body.verified_at, 'string');
  const events = await eventsOf(t, 'identity.domain.verified', mint);
  t.is(events.length, 1);
  t.like(events[0], { metadata: { mint, domain: t.context.host, url: `https://${t.context.host}/.well-known/svc-agent.json` } });
  // verifying again changes nothing and appends nothing
  t.is((await http(t.context.app, 'POST', `/v1/identity/${mint}/domains/${t.context.host}/verify`, { key: t.context.key })).status, 200);
  t.is((await eventsOf(t, 'identity.domain.verified', mint)).length, 1);

  const byDomain = await http(t.context.app, 'GET', `/v1/identity/resolve?domain=${t.context.host}`, { key: t.context.other });
  t.is(byDomain.status, 200);
  t.is(byDomain.body.mint, mint);
  t.deepEqual(byDomain.body.domains, [{ domain: t.context.host, verified_at: proved.body.verified_at }]);

  // everything in place: a live Core asset, a handle, the domain, the capability, the thresholds → allow, 100
  // the asset's uri is the gateway's own registration document of the agent
  const uri = `${t.context.app.services.settings.baseUrl}/v1/agents/${mint}/registration.json?network=chain-devnet`;
  await writeCoreAsset(ledger(t), mint, { owner, uri });
  t.is((await putProfile(t, mint, { handle: handle('Allowed'), capabilities: ['weather.forecast'] })).status, 200);
  // intent pay: the agent sells a paid endpoint
  t.is((await http(t.context.app, 'POST', '/v1/payment-links', { key: t.context.key, body: linkBody(mint) })).status, 201);
  const allowed = await http(t.context.app, 'POST', '/v1/identity/verify', {
    key: t.context.other,
    body: { domain: t.context.host, intent: 'pay', capability: 'weather.forecast', thresholds: { require_verified_domain: true, min_settled_calls: 0 } },
  });
  t.is(allowed.status, 200);
  t.like(allowed.body, { verdict: 'allow', score: 100 });
  t.true(allowed.body.checks.every((c: { ok: boolean }) => c.ok));
  t.deepEqual(
    allowed.body.checks.map((c: { name: string }) => c.name),
    ['agent_recorded', 'asset_on_ledger', 'not_disabled', 'handle_set', 'domain_verified', 'capability_declared', 'registration', 'intent', 'settled_calls'],
  );
  t.like(allowed.body.profile.registration, { uri, hosted: true, ok: true });

  // the domain proves one agent: another agent of the network cannot verify it
  const second = await recordAgent(t.context.app, t.context.key);
  const taken = await proveDomain(t, second.mint);
  t.is(taken.status, 409);
  t.is(taken.body.error, 'conflict');
});

test.serial('domain: a document with the wrong mint, network or token, or not JSON, is refused with its reason; GraphQL and tRPC doors', async (t) => {
  const { mint } = await recordAgent(t.context.app, t.context.key);
  const cases: [string, (doc: Record<string, unknown>) => unknown][] = [
    ['mint_mismatch', (d) => ({ ...d, mint: '11111111111111111111111111111111' })],
    ['network_mismatch', (d) => ({ ...d, network: 'chain-mainnet' })],
    ['token_mismatch', (d) => ({ ...d, token: 'svc_dv_other' })],
    ['document_invalid', () => ({ mint })],
  ];
  for (const [reason, doc] of cases) {
    const res = await proveDomain(t, mint, doc);
    t.is(res.status, 400, reason);
    t.like(res.body, { error: 'invalid_request', details: { reason } });
  }
  t.context.wellKnown.body = 'not json';
  const notJson = await http(t.context.app, 'POST', `/v1/identity/${mint}/domains/${t.context.host}/verify`, { key: t.context.key });
  t.like(notJson.body, { error: 'invalid_request', details: { reason: 'not_json' } });

  // a domain never claimed; an unreachable domain is refused by the outbound guard
  t.is((await http(t.context.app, 'POST', `/v1/identity/${mint}/domains/never.example/verify`, { key: t.context.key })).status, 404);
  await http(t.context.app, 'POST', `/v1/identity/${mint}/domains`, { key: t.context.key, body: { domain: '127.0.0.1:9' } });
  const refused = await http(t.context.app, 'POST', `/v1/identity/${mint}/domains/127.0.0.1:9/verify`, { key: t.context.key });
  t.like(refused.body, { error: 'invalid_request', details: { reason: 'url_refused' } });
  t.is((await http(t.context.app, 'POST', `/v1/identity/${mint}/domains`, { key: t.context.key, body: { domain: 'not a domain' } })).status, 400);

  // tRPC and GraphQL: claim on one, verify on the other
  const claim = await trpc(t, t.context.key).identity.addDomain.mutate({ mint, domain: t.context.host });
  t.context.wellKnown.status = 200;
  t.context.wellKnown.body = JSON.stringify(claim.document);
  const viaGql = await gql(
    t,
    t.context.key,
    `mutation($m: String!, $d: String!) { verifyIdentityDomain(mint: $m, domain: $d) { domain verifiedAt document { mint network token } } }`,
    { m: mint, d: t.context.host },
  );
  // the first serial test's agent holds the domain: conflict on this door too
  t.is(viaGql.body.errors?.[0]?.extensions?.code, 'conflict');
  const gqlClaim = await gql(t, t.context.key, `mutation($m: String!, $d: String!) { addIdentityDomain(mint: $m, domain: $d) { token url verifiedAt } }`, {
    m: mint,
    d: t.context.host,
  });
  t.is(gqlClaim.body.data.addIdentityDomain.token, claim.token);
});

test.serial('SVC_OUTBOUND_CA: the self-signed server is refused without it (TLS failure), reached with it; checks stay on', async (t) => {
  t.context.wellKnown.status = 200;
  t.context.wellKnown.body = '{}';
  const url = `https://${t.context.host}/.well-known/svc-agent.json`;
  const without = await new GuardedOutboundHttp({ allow: [t.context.host] }).request({ url, method: 'GET' });
  t.like(without, { ok: false, reason: 'network' });
  const trusted = await new GuardedOutboundHttp({ allow: [t.context.host], ca: t.context.cert }).request({ url, method: 'GET' });
  t.like(trusted, { ok: true, status: 200 });
  // the CA does not open the address guard: the same server under a name not on the allow-list is still refused
  const unlisted = await new GuardedOutboundHttp({ ca: t.context.cert }).request({ url, method: 'GET' });
  t.like(unlisted, { ok: false, reason: 'url_refused' });
  // a bad PEM stops start-up naming the setting
  const { loadConfig } = await import('../../interfaces/config.ts');
  t.throws(() => loadConfig({ SVC_OUTBOUND_CA: 'not a certificate' }), { message: /SVC_OUTBOUND_CA/ });
});

// ── claims ───────────────────────────────────────────────────────────────────────────────────────────────────────────

test.serial(
  'claims: created (public by default) and shown in the identity, private ones to the owner only, revoked ones kept; events; three doors',
  async (t) => {
    const { mint } = await recordAgent(t.context.app, t.context.key);
    const created = await http(t.context.app, 'POST', `/v1/identity/${mint}/claims`, {
      key: t.context.key,
      body: { type: 'organization', statement: 'Operated by Example Ltd', evidence_url: 'https://example.com/about' },
    });
    t.is(created.status, 200, JSON.stringify(created.body));
    t.like(created.body, {
      mint,
      type: 'organization',
      statement: 'Operated by Example Ltd',
      evidence_url: 'https://example.com/about',
      public: true,
      revoked_at: null,
    });
    t.regex(created.body.id, /^clm_/);
    const hidden = await trpc(t, t.context.key).identity.createClaim.mutate({ mint, type: 'contact', statement: 'ops@example.com', public: false });
    t.is(hidden.public, false);

    const read = await http(t.context.app, 'GET', `/v1/identity/${mint}`, { key: t.context.other });
    t.deepEqual(read.body.claims, [created.body]);
    const own = await http(t.context.app, 'GET', `/v1/identity/${mint}/claims`, { key: t.context.key });
    t.deepEqual(
      own.body.data.map((c: { id: string }) => c.id),
      [created.body.id, hidden.id],
    );
    t.is((await http(t.context.app, 'GET', `/v1/identity/${mint}/claims`, { key: t.context.other })).status, 404);
    t.is((await http(t.context.app, 'POST', `/v1/identity/${mint}/claims`, { key: t.context.other, body: { type: 'x', statement: 'y' } })).status, 404);
    const bad = await http(t.context.app, 'POST', `/v1/identity/${mint}/claims`, { key: t.context.key, body: { type: 'Bad Type', statement: '' } });
    t.is(bad.status, 400);
    t.is(bad.body.error, 'invalid_request');

    const viaGql = await gql(t, t.context.key, `mutation($m: String!, $id: String!) { revokeIdentityClaim(mint: $m, id: $id) { id revokedAt } }`, {
      m: mint,
      id: created.body.id,
    });
    t.falsy(viaGql.body.errors, JSON.stringify(viaGql.body.errors));
    t.is(typeof viaGql.body.data.revokeIdentityClaim.revokedAt, 'string');
    // revoking again answers the claim unchanged and appends nothing
    const again = await http(t.context.app, 'POST', `/v1/identity/${mint}/claims/${created.body.id}/revoke`, { key: t.context.key });
    t.is(again.status, 200);
    t.is(again.body.revoked_at, viaGql.body.data.revokeIdentityClaim.revokedAt);
    t.is((await http(t.context.app, 'POST', `/v1/identity/${mint}/claims/clm_none/revoke`, { key: t.context.key })).status, 404);

    t.deepEqual((await http(t.context.app, 'GET', `/v1/identity/${mint}`, { key: t.context.other })).body.claims, []);
    const gqlCreated = await gql(t, t.context.key, `mutation($input: IdentityClaimInput!) { createIdentityClaim(input: $input) { id public } }`, {
      input: { mint, type: 'license', statement: 'Licensed forecaster' },
    });
    t.is(gqlCreated.body.data.createIdentityClaim.public, true);
    const viaResolve = await gql(t, t.context.other, `query($m: String) { resolveIdentity(mint: $m) { claims { id type statement } } }`, { m: mint });
    t.deepEqual(viaResolve.body.data.resolveIdentity.claims, [
      { id: gqlCreated.body.data.createIdentityClaim.id, type: 'license', statement: 'Licensed forecaster' },
    ]);

    t.is((await eventsOf(t, 'identity.claim.created', mint)).length, 3);
    const revoked = await eventsOf(t, 'identity.claim.revoked', mint);
    t.is(revoked.length, 1);
    t.like(revoked[0], { metadata: { mint, claim_id: created.body.id, type: 'organization' } });

    // DECISIONS "Wire conventions": the owner's list is the list envelope, paged by cursor (REST and tRPC)
    const ids: string[] = [];
    let cursor: string | null = null;
    for (let page = 0; page < 3; page += 1) {
      const query: string = cursor ? `?limit=1&cursor=${cursor}` : '?limit=1';
      const got = await http(t.context.app, 'GET', `/v1/identity/${mint}/claims${query}`, { key: t.context.key });
      t.is(got.status, 200, JSON.stringify(got.body));
      t.is(got.body.has_more, page < 2);
      t.is(got.body.next_cursor === null, page === 2);
      ids.push(...got.body.data.map((c: { id: string }) => c.id));
      cursor = got.body.next_cursor;
    }
    t.deepEqual(ids, [created.body.id, hidden.id, gqlCreated.body.data.createIdentityClaim.id]);
    const whole = await trpc(t, t.context.key).identity.listClaims.query({ mint });
    t.like(whole, { has_more: false, next_cursor: null });
    t.is(whole.data.length, 3);
  },
);

// ── disclosures ──────────────────────────────────────────────────────────────────────────────────────────────────────

test.serial(
  'disclosures: a link reveals the named fields (private claims included) to any key of the network until it expires (410); token shown once',
  async (t) => {
    const { mint } = await recordAgent(t.context.app, t.context.key);
    const h = handle('Disclose');
    t.is((await putProfile(t, mint, { handle: h })).status, 200);
    const secret = await trpc(t, t.context.key).identity.createClaim.mutate({ mint, type: 'contact', statement: 'ops@example.com', public: false });

    const link = await http(t.context.app, 'POST', `/v1/identity/${mint}/disclosures`, {
      key: t.context.key,
      body: { fields: ['profile', 'private_claims'], expires_in: 600 },
    });
    t.is(link.status, 200, JSON.stringify(link.body));
    t.regex(link.body.token, /^svc_dl_/);
    t.is(link.body.url, `${t.context.app.services.settings.baseUrl}/v1/identity/disclosures/${link.body.token}`);
    t.deepEqual(link.body.fields, ['profile', 'private_claims']);
    t.is(
      (await http(t.context.app, 'POST', `/v1/identity/${mint}/disclosures`, { key: t.context.other, body: { fields: ['profile'], expires_in: 600 } })).status,
      404,
    );
    t.is(
      (await http(t.context.app, 'POST', `/v1/identity/${mint}/disclosures`, { key: t.context.key, body: { fields: ['secrets'], expires_in: 600 } })).status,
      400,
    );
    t.is(
      (await http(t.context.app, 'POST', `/v1/identity/${mint}/disclosures`, { key: t.context.key, body: { fields: ['profile'], expires_in: 1 } })).status,
      400,
    );

    const read = await http(t.context.app, 'GET', `/v1/identity/disclosures/${link.body.token}`, { key: t.context.other });
    t.is(read.status, 200, JSON.stringify(read.body));
    t.like(read.body, { mint, fields: ['profile', 'private_claims'], profile: { handle: h } });
    t.deepEqual(read.body.private_claims, [secret]);
    t.false('reputation' in read.body);
    t.false('claims' in read.body);

    const viaGql = await gql(
      t,
      t.context.other,
      `query($token: String!) { identityDisclosure(token: $token) { mint fields profile { handle } privateClaims { id } reputation { settledCalls } } }`,
      { token: link.body.token },
    );
    t.falsy(viaGql.body.errors, JSON.stringify(viaGql.body.errors));
    t.deepEqual(viaGql.body.data.identityDisclosure, {
      mint,
      fields: ['PROFILE', 'PRIVATE_CLAIMS'],
      profile: { handle: h },
      privateClaims: [{ id: secret.id }],
      reputation: null,
    });
    const gqlLink = await gql(
      t,
      t.context.key,
      `mutation($m: String!) { createIdentityDisclosure(mint: $m, fields: [REPUTATION], expiresIn: 60) { token expiresAt } }`,
      { m: mint },
    );
    t.falsy(gqlLink.body.errors, JSON.stringify(gqlLink.body.errors));

    t.is((await http(t.context.app, 'GET', `/v1/identity/disclosures/svc_dl_${'x'.repeat(32)}`, { key: t.context.other })).status, 404);

    t.context.app.testClock!.advance(600_000);
    const expired = await http(t.context.app, 'GET', `/v1/identity/disclosures/${link.body.token}`, { key: t.context.other });
    t.is(expired.status, 410);
    t.is(expired.body.error, 'disclosure_expired');
    const expiredTrpc = await trpc(t, t.context.other)
      .identity.disclosure.query({ token: gqlLink.body.data.createIdentityDisclosure.token })
      .catch((e: unknown) => e);
    t.is(errorCode(expiredTrpc), 'disclosure_expired');
  },
);

// ── history ──────────────────────────────────────────────────────────────────────────────────────────────────────────

test.serial('history: the agent’s identity events newest first, paged, to its owner only; REST, tRPC and GraphQL', async (t) => {
  const { mint } = await recordAgent(t.context.app, t.context.key);
  t.is((await putProfile(t, mint, { handle: handle('History') })).status, 200);
  const claim = await trpc(t, t.context.key).identity.createClaim.mutate({ mint, type: 'org', statement: 'Example' });
  await trpc(t, t.context.key).identity.revokeClaim.mutate({ mint, id: claim.id });

  const page = await http(t.context.app, 'GET', `/v1/identity/${mint}/history?limit=2`, { key: t.context.key });
  t.is(page.status, 200, JSON.stringify(page.body));
  t.deepEqual(
    page.body.data.map((e: { kind: string }) => e.kind),
    ['identity.claim.revoked', 'identity.claim.created'],
  );
  t.truthy(page.body.next_cursor);
  const rest = await trpc(t, t.context.key).identity.history.query({ mint, cursor: page.body.next_cursor, limit: 2 });
  t.deepEqual(
    rest.data.map((e) => e.kind),
    ['identity.profile.updated'],
  );
  t.is((await http(t.context.app, 'GET', `/v1/identity/${mint}/history`, { key: t.context.other })).status, 404);

  const viaGql = await gql(t, t.context.key, `query($m: String) { resolveIdentity(mint: $m) { history(first: 5) { data { kind agentAsset } } } }`, { m: mint });
  t.falsy(viaGql.body.errors, JSON.stringify(viaGql.body.errors));
  t.deepEqual(
    viaGql.body.data.resolveIdentity.history.data.map((e: { kind: string }) => e.kind),
    ['identity.claim.revoked', 'identity.claim.created', 'identity.profile.updated'],
  );
});
