import anyTest, { type TestFn } from 'ava';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer as createHttpServer } from 'node:http';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Keypair } from '@solana/web3.js';
import type { LedgerThread } from '../../adapters/ledger/embedded/ledger-thread.ts';
import { REGISTRATION_TYPE, RegistrationV1 } from '../../domain/identity/registration.ts';
import { createClient, errorCode } from '../../interfaces/client/index.ts';
import { http, linkBody, randomAddress, recordAgent, removeDataDir, startTestApp, type HttpResult, type TestApp } from '../support/app.ts';
import { writeCoreAsset } from '../support/core-asset.ts';

// Identity, second part: capability cards (owner CRUD, public ones in the identity and the verify check), registration
// documents (served publicly, hosted by agents/prepare, read back by resolve and verify through the guarded outbound
// port from a real local HTTPS server), the intent check, and the anonymous disclosure read (per-IP limited).

interface Ctx {
  app: TestApp;
  key: string;
  other: string;
  /** the local HTTPS server's host:port, allow-listed and trusted through SVC_OUTBOUND_CA */
  host: string;
  /** what the server answers at /registration.json */
  served: { status: number; body: string };
  server: Server;
  certDir: string;
}

const test = anyTest as TestFn<Ctx>;
const run = promisify(execFile);

test.before(async (t) => {
  const certDir = await mkdtemp(join(tmpdir(), 'svc-identity-cards-'));
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
  const served = { status: 404, body: '' };
  const server = createServer({ key: await readFile(keyPath), cert }, (req, res) => {
    if (req.url !== '/registration.json') return void res.writeHead(404).end();
    res.writeHead(served.status, { 'content-type': 'application/json' }).end(served.body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const host = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  const app = await startTestApp({ env: { SVC_OUTBOUND_ALLOW: host, SVC_OUTBOUND_CA: cert } });
  t.context = {
    app,
    key: (await app.services.access.issueKey({ network: 'chain-devnet', role: 'user', owner_wallet: null })).key,
    other: (await app.services.access.issueKey({ network: 'chain-devnet', role: 'user', owner_wallet: null })).key,
    host,
    served,
    server,
    certDir,
  };
});

test.after.always(async (t) => {
  t.context.server?.close();
  if (t.context.certDir) await rm(t.context.certDir, { recursive: true, force: true });
});

const gql = (t: { context: Ctx }, key: string | undefined, query: string, variables?: Record<string, unknown>): Promise<HttpResult> =>
  http(t.context.app, 'POST', '/graphql', { ...(key ? { key } : {}), body: { query, variables } });
const trpc = (t: { context: Ctx }, key: string) => createClient({ url: t.context.app.url, apiKey: key });
const cards = (mint: string) => `/v1/identity/${mint}/capability-cards`;
const names = (checks: { name: string; ok: boolean }[]) => Object.fromEntries(checks.map((c) => [c.name, c.ok]));
const ledger = (t: { context: Ctx }) => t.context.app.ledgers.embedded['chain-devnet'] as LedgerThread;
const registrationPath = (mint: string) => `/v1/agents/${mint}/registration.json?network=chain-devnet`;

async function eventsOf(t: { context: Ctx }, kind: string, agent: string): Promise<any[]> {
  return (await http(t.context.app, 'GET', `/v1/events?kind=${kind}&agent=${agent}`, { key: t.context.key })).body.data;
}

// ── capability cards ─────────────────────────────────────────────────────────────────────────────────────────────────

test('capability cards on REST: create (201), list, get, patch, delete (204); public ones in the identity; one per capability; events', async (t) => {
  const { mint } = await recordAgent(t.context.app, t.context.key);
  const created = await http(t.context.app, 'POST', cards(mint), {
    key: t.context.key,
    body: {
      capability: 'weather.forecast',
      title: 'Forecast',
      description: 'Hourly forecasts',
      endpoint: 'https://example.com/forecast',
      tags: ['weather', 'weather'],
    },
  });
  t.is(created.status, 201, JSON.stringify(created.body));
  t.like(created.body, {
    mint,
    capability: 'weather.forecast',
    title: 'Forecast',
    description: 'Hourly forecasts',
    endpoint: 'https://example.com/forecast',
    tags: ['weather'],
    public: true,
  });
  t.regex(created.body.id, /^cap_/);
  const secret = await http(t.context.app, 'POST', cards(mint), { key: t.context.key, body: { capability: 'internal.audit', public: false } });
  t.is(secret.status, 201);
  t.like(secret.body, { title: null, description: null, endpoint: null, tags: [], public: false });

  // one card per capability name
  const twice = await http(t.context.app, 'POST', cards(mint), { key: t.context.key, body: { capability: 'weather.forecast' } });
  t.is(twice.status, 409);
  t.like(twice.body, { error: 'conflict', details: { path: 'capability' } });
  for (const body of [
    { capability: 'Bad Name' },
    { capability: 'a.b', endpoint: 'http://plain.example/' },
    { capability: 'a.b', tags: ['UPPER'] },
    { capability: 'a.b', extra: 1 },
  ]) {
    const bad = await http(t.context.app, 'POST', cards(mint), { key: t.context.key, body });
    t.is(bad.status, 400, JSON.stringify(body));
    t.is(bad.body.error, 'invalid_request');
  }

  // the owner sees every card, by capability name; anyone on the network sees the public ones in the identity
  const own = await http(t.context.app, 'GET', cards(mint), { key: t.context.key });
  t.deepEqual(
    own.body.data.map((c: { capability: string }) => c.capability),
    ['internal.audit', 'weather.forecast'],
  );
  const publicView = await http(t.context.app, 'GET', `/v1/identity/${mint}`, { key: t.context.other });
  t.deepEqual(publicView.body.capability_cards, [created.body]);
  t.deepEqual((await http(t.context.app, 'GET', `${cards(mint)}/${created.body.id}`, { key: t.context.key })).body, created.body);

  // patch: the fields given change, null clears, the capability name stays
  const patched = await http(t.context.app, 'PATCH', `${cards(mint)}/${created.body.id}`, {
    key: t.context.key,
    body: { description: null, tags: ['sky'], public: false },
  });
  t.is(patched.status, 200, JSON.stringify(patched.body));
  t.like(patched.body, {
    capability: 'weather.forecast',
    title: 'Forecast',
    description: null,
    endpoint: 'https://example.com/forecast',
    tags: ['sky'],
    public: false,
  });
  t.deepEqual((await http(t.context.app, 'GET', `/v1/identity/${mint}`, { key: t.context.other })).body.capability_cards, []);
  t.is((await http(t.context.app, 'PATCH', `${cards(mint)}/${created.body.id}`, { key: t.context.key, body: { capability: 'renamed' } })).status, 400);

  const deleted = await http(t.context.app, 'DELETE', `${cards(mint)}/${secret.body.id}`, { key: t.context.key });
  t.is(deleted.status, 204);
  t.is((await http(t.context.app, 'GET', `${cards(mint)}/${secret.body.id}`, { key: t.context.key })).status, 404);
  t.is((await http(t.context.app, 'DELETE', `${cards(mint)}/${secret.body.id}`, { key: t.context.key })).status, 404);
  t.is((await http(t.context.app, 'PATCH', `${cards(mint)}/cap_none`, { key: t.context.key, body: { title: 'x' } })).status, 404);

  // another principal: 404 on every owner route, as for any owned resource
  for (const [method, path, body] of [
    ['GET', cards(mint), undefined],
    ['POST', cards(mint), { capability: 'x.y' }],
    ['GET', `${cards(mint)}/${created.body.id}`, undefined],
    ['PATCH', `${cards(mint)}/${created.body.id}`, { title: 'stolen' }],
    ['DELETE', `${cards(mint)}/${created.body.id}`, undefined],
  ] as const) {
    const res = await http(t.context.app, method, path, { key: t.context.other, ...(body ? { body } : {}) });
    t.is(res.status, 404, `${method} ${path}`);
    t.is(res.body.error, 'agent_not_found');
  }

  t.like(await eventsOf(t, 'identity.capability_card.created', mint), [
    { metadata: { mint, capability: 'internal.audit', public: false } },
    { metadata: { mint, capability: 'weather.forecast', public: true } },
  ]);
  const updated = await eventsOf(t, 'identity.capability_card.updated', mint);
  t.is(updated.length, 1);
  t.like(updated[0], { agent_asset: mint, metadata: { card_id: created.body.id, capability: 'weather.forecast', public: false } });
  t.like(await eventsOf(t, 'identity.capability_card.deleted', mint), [{ metadata: { card_id: secret.body.id, capability: 'internal.audit' } }]);
});

test('capability cards on tRPC and GraphQL: the same service; agent { identity { capabilityCards allCapabilityCards } }', async (t) => {
  const { mint } = await recordAgent(t.context.app, t.context.key);
  const viaTrpc = await trpc(t, t.context.key).identity.createCard.mutate({ mint, capability: 'image.resize', tags: ['image'] });
  t.like(viaTrpc, { capability: 'image.resize', public: true });
  t.is(
    errorCode(
      await trpc(t, t.context.key)
        .identity.createCard.mutate({ mint, capability: 'image.resize' })
        .catch((e: unknown) => e),
    ),
    'conflict',
  );
  t.is(
    errorCode(
      await trpc(t, t.context.other)
        .identity.listCards.query({ mint })
        .catch((e: unknown) => e),
    ),
    'agent_not_found',
  );

  const created = await gql(t, t.context.key, `mutation($input: CapabilityCardInput!) { createCapabilityCard(input: $input) { id capability title public } }`, {
    input: { mint, capability: 'image.crop', title: 'Crop', public: false },
  });
  t.falsy(created.body.errors, JSON.stringify(created.body.errors));
  const crop = created.body.data.createCapabilityCard;
  t.like(crop, { capability: 'image.crop', title: 'Crop', public: false });
  const updated = await gql(t, t.context.key, `mutation($input: CapabilityCardUpdate!) { updateCapabilityCard(input: $input) { id title public } }`, {
    input: { mint, id: crop.id, title: null, public: true },
  });
  t.falsy(updated.body.errors, JSON.stringify(updated.body.errors));
  t.deepEqual(updated.body.data.updateCapabilityCard, { id: crop.id, title: null, public: true });
  const one = await gql(t, t.context.key, `query($m: String!, $id: String!) { capabilityCard(mint: $m, id: $id) { capability } }`, { m: mint, id: crop.id });
  t.deepEqual(one.body.data.capabilityCard, { capability: 'image.crop' });

  const nested = `query($m: String!) { agent(mint: $m) { identity { capabilityCards { capability } allCapabilityCards { capability public } } } }`;
  const mine = await gql(t, t.context.key, nested, { m: mint });
  t.falsy(mine.body.errors, JSON.stringify(mine.body.errors));
  t.deepEqual(mine.body.data.agent.identity, {
    capabilityCards: [{ capability: 'image.crop' }, { capability: 'image.resize' }],
    allCapabilityCards: [
      { capability: 'image.crop', public: true },
      { capability: 'image.resize', public: true },
    ],
  });
  // another principal reads the public cards through resolveIdentity, not the owner's list
  const theirs = await gql(
    t,
    t.context.other,
    `query($m: String) { resolveIdentity(mint: $m) { capabilityCards { capability } allCapabilityCards { capability } } }`,
    { m: mint },
  );
  t.deepEqual(theirs.body.data.resolveIdentity.capabilityCards, [{ capability: 'image.crop' }, { capability: 'image.resize' }]);
  t.is(theirs.body.data.resolveIdentity.allCapabilityCards, null);
  t.is(theirs.body.errors?.[0]?.extensions?.code, 'agent_not_found');
  const denied = await gql(t, t.context.other, `mutation($m: String!, $id: String!) { deleteCapabilityCard(mint: $m, id: $id) }`, { m: mint, id: crop.id });
  t.is(denied.body.errors?.[0]?.extensions?.code, 'agent_not_found');

  const gone = await gql(t, t.context.key, `mutation($m: String!, $id: String!) { deleteCapabilityCard(mint: $m, id: $id) }`, { m: mint, id: crop.id });
  t.deepEqual(gone.body.data, { deleteCapabilityCard: true });
  t.deepEqual(
    (await trpc(t, t.context.key).identity.listCards.query({ mint })).data.map((c) => c.capability),
    ['image.resize'],
  );
});

test('an agent holds at most 64 capability cards (the 65th is invalid_request naming the limit, concurrent creates too); deleting one makes room', async (t) => {
  const { mint } = await recordAgent(t.context.app, t.context.key);
  const svc = trpc(t, t.context.key);
  let last = '';
  for (let i = 0; i < 56; i++) last = (await svc.identity.createCard.mutate({ mint, capability: `bulk.c${String(i).padStart(2, '0')}` })).id;
  // ten creates at once for the last eight places: exactly eight land (the count is checked under the agent's lock)
  const racing = await Promise.all(
    Array.from({ length: 10 }, (_, i) => http(t.context.app, 'POST', cards(mint), { key: t.context.key, body: { capability: `bulk.race${i}` } })),
  );
  t.deepEqual(racing.map((r) => r.status).sort(), [...Array(8).fill(201), 400, 400]);
  const over = await http(t.context.app, 'POST', cards(mint), { key: t.context.key, body: { capability: 'bulk.extra' } });
  t.is(over.status, 400);
  t.like(over.body, { error: 'invalid_request', details: { limit: 64 } });
  t.is((await http(t.context.app, 'GET', cards(mint), { key: t.context.key })).body.data.length, 64);
  await svc.identity.deleteCard.mutate({ mint, id: last });
  t.is((await http(t.context.app, 'POST', cards(mint), { key: t.context.key, body: { capability: 'bulk.extra' } })).status, 201);
});

test('verify: capability_declared reads the public capability cards (a private card declares nothing)', async (t) => {
  const { mint } = await recordAgent(t.context.app, t.context.key);
  const ask = async () =>
    (await http(t.context.app, 'POST', '/v1/identity/verify', { key: t.context.other, body: { mint, capability: 'voice.transcribe' } })).body;
  t.false(names((await ask()).checks).capability_declared);
  const card = await http(t.context.app, 'POST', cards(mint), { key: t.context.key, body: { capability: 'voice.transcribe', public: false } });
  t.false(names((await ask()).checks).capability_declared);
  await http(t.context.app, 'PATCH', `${cards(mint)}/${card.body.id}`, { key: t.context.key, body: { public: true } });
  const declared = await ask();
  t.true(names(declared.checks).capability_declared);
  t.is(
    declared.checks.find((c: { name: string }) => c.name === 'capability_declared').detail,
    `the agent declares voice.transcribe (capability card ${card.body.id})`,
  );
});

// ── registration documents ───────────────────────────────────────────────────────────────────────────────────────────

test('registration.json: public (no key), registration-v1 with the agent’s paid endpoints, capabilities, receipts service and registry entry', async (t) => {
  const { mint } = await recordAgent(t.context.app, t.context.key, { name: 'Weather bot' });
  const base = t.context.app.services.settings.baseUrl;
  const link = await http(t.context.app, 'POST', '/v1/payment-links', { key: t.context.key, body: linkBody(mint) });
  const mpp = await http(t.context.app, 'POST', '/v1/payment-links', { key: t.context.key, body: linkBody(mint, { label: 'By MPP', protocol: 'mpp' }) });
  t.is(mpp.status, 201, JSON.stringify(mpp.body));
  const off = await http(t.context.app, 'POST', '/v1/payment-links', { key: t.context.key, body: linkBody(mint, { label: 'Off' }) });
  await http(t.context.app, 'PATCH', `/v1/payment-links/${off.body.id}`, { key: t.context.key, body: { disabled: true } });
  await http(t.context.app, 'POST', cards(mint), { key: t.context.key, body: { capability: 'weather.forecast' } });
  await http(t.context.app, 'POST', cards(mint), { key: t.context.key, body: { capability: 'weather.secret', public: false } });
  await http(t.context.app, 'PUT', `/v1/identity/${mint}/profile`, {
    key: t.context.key,
    body: { handle: `reg-${process.pid}`, description: 'Forecasts', image: 'https://example.com/w.png' },
  });

  const doc = await http(t.context.app, 'GET', registrationPath(mint));
  t.is(doc.status, 200, JSON.stringify(doc.body));
  t.is(doc.headers.get('ratelimit-policy'), '600;w=60');
  t.true(RegistrationV1.safeParse(doc.body).success);
  t.deepEqual(doc.body, {
    type: REGISTRATION_TYPE,
    name: 'Weather bot',
    description: 'Forecasts',
    image: 'https://example.com/w.png',
    // each paid endpoint named by its rail (newest first): an MPP link is no x402 service
    services: [
      { name: 'mpp', endpoint: mpp.body.share_url, skills: ['weather.forecast'] },
      { name: 'x402', endpoint: link.body.share_url, skills: ['weather.forecast'] },
      { name: 'receipts', endpoint: `${base}/v1/receipts/${mint}` },
    ],
    active: true,
    registrations: [{ agentId: mint, agentRegistry: 'solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1:1DREGFgysWYxLnRnKQnwrxnJQeSMk2HmGaC6whw2B2p' }],
  });
  // a key changes nothing; the network is the query's (chain-mainnet when not named, as the paywall's URLs)
  t.deepEqual((await http(t.context.app, 'GET', registrationPath(mint), { key: t.context.other })).body, doc.body);
  const mainnet = await http(t.context.app, 'GET', `/v1/agents/${mint}/registration.json`);
  t.is(mainnet.status, 404);
  t.is(mainnet.body.error, 'agent_not_found');
  t.is((await http(t.context.app, 'GET', registrationPath(await randomAddress()))).status, 404);
  t.is((await http(t.context.app, 'GET', '/v1/agents/not-a-mint/registration.json')).status, 400);
  t.is((await http(t.context.app, 'GET', `/v1/agents/${mint}/registration.json?network=chain-moon`)).status, 400);

  // tRPC with no key, GraphQL with no key (agentRegistration) and nested on the agent
  t.deepEqual(await trpc(t, '').identity.registration.query({ mint, network: 'chain-devnet' }), doc.body);
  const anonymous = await gql(t, undefined, `query($m: String!) { agentRegistration(mint: $m, network: CHAIN_DEVNET) }`, { m: mint });
  t.falsy(anonymous.body.errors, JSON.stringify(anonymous.body.errors));
  t.deepEqual(anonymous.body.data.agentRegistration, doc.body);
  const nested = await gql(t, t.context.key, `query($m: String!) { agent(mint: $m) { registration } }`, { m: mint });
  t.deepEqual(nested.body.data.agent.registration, doc.body);
});

test('agents/prepare without uri: the gateway hosts the registration document, its URL is the asset’s uri; with uri, the caller’s', async (t) => {
  const owner = Keypair.generate().publicKey.toBase58();
  const base = t.context.app.services.settings.baseUrl;
  const hosted = await http(t.context.app, 'POST', '/v1/agents/prepare', {
    key: t.context.key,
    body: { owner, name: 'Hosted agent', description: 'Hosted here', services: [{ name: 'A2A', endpoint: 'https://agent.example/a2a' }] },
  });
  t.is(hosted.status, 200, JSON.stringify(hosted.body));
  const asset = hosted.body.echo.asset;
  t.like(hosted.body.echo, { uri: `${base}/v1/agents/${asset}/registration.json?network=chain-devnet`, registration_hosted: true });

  const given = await http(t.context.app, 'POST', '/v1/agents/prepare', {
    key: t.context.key,
    body: { owner, name: 'Own doc', uri: 'https://agent.example/reg.json' },
  });
  t.is(given.status, 200);
  t.like(given.body.echo, { uri: 'https://agent.example/reg.json', registration_hosted: false });

  // the URL the asset carries is where the gateway serves the document, once the agent is recorded
  t.is((await http(t.context.app, 'GET', hosted.body.echo.uri.slice(base.length))).body.error, 'agent_not_found');
});

test('resolve and verify read the registration document back: the gateway’s own, a valid one over HTTPS, an invalid, missing or refused one', async (t) => {
  const { mint, owner } = await recordAgent(t.context.app, t.context.key);
  const resolve = async () => (await http(t.context.app, 'GET', `/v1/identity/resolve?mint=${mint}`, { key: t.context.other })).body.registration;
  const verify = async () =>
    (await http(t.context.app, 'POST', '/v1/identity/verify', { key: t.context.other, body: { mint } })).body.checks.find(
      (c: { name: string }) => c.name === 'registration',
    );

  // the gateway's own: built in place, no fetch
  const own = `${t.context.app.services.settings.baseUrl}${registrationPath(mint)}`;
  await writeCoreAsset(ledger(t), mint, { owner, uri: own });
  t.deepEqual(await resolve(), { uri: own, hosted: true, ok: true, detail: 'the gateway serves the agent’s registration-v1 document' });
  // GET /v1/identity/{mint} does not read it back
  t.is((await http(t.context.app, 'GET', `/v1/identity/${mint}`, { key: t.context.other })).body.registration, null);

  // another document on a real HTTPS server (allow-listed, trusted through SVC_OUTBOUND_CA)
  const external = `https://${t.context.host}/registration.json`;
  await writeCoreAsset(ledger(t), mint, { owner, uri: external });
  const valid = { type: REGISTRATION_TYPE, name: 'x', description: 'y', image: '', registrations: [{ agentId: mint, agentRegistry: 'r' }] };
  t.context.served.status = 200;
  t.context.served.body = JSON.stringify(valid);
  t.deepEqual(await resolve(), { uri: external, hosted: false, ok: true, detail: `a valid registration-v1 document at ${external}` });
  t.like(await verify(), { ok: true });

  const failures: [unknown, RegExp][] = [
    [{ ...valid, x402support: true }, /not registration-v1: \(root\): Unrecognized key/],
    [{ ...valid, services: [{ name: 'a', endpoint: 'b', extra: 1 }] }, /not registration-v1: services\.0: Unrecognized key/],
    [{ ...valid, type: 'other' }, /not registration-v1: type:/],
    [{ ...valid, registrations: [{ agentId: 'someone-else', agentRegistry: 'r' }] }, /registers another agent/],
    ['not json', /is not JSON/],
  ];
  for (const [body, detail] of failures) {
    t.context.served.body = typeof body === 'string' ? body : JSON.stringify(body);
    const check = await verify();
    t.false(check.ok, JSON.stringify(body));
    t.regex(check.detail, detail);
  }
  t.context.served.status = 404;
  t.regex((await verify()).detail, /answered HTTP 404/);
  t.like(await resolve(), { ok: false, hosted: false });

  // refused by the outbound guard (loopback, not allow-listed): reported, never fetched
  await writeCoreAsset(ledger(t), mint, { owner, uri: 'https://127.0.0.1:9/registration.json' });
  const refused = await verify();
  t.false(refused.ok);
  t.regex(refused.detail, /unreachable/);
  const whole = await http(t.context.app, 'POST', '/v1/identity/verify', { key: t.context.other, body: { mint } });
  t.is(whole.body.verdict, 'warn');
});

test('resolve still answers when the ledger does not (the recorded uri is read back); verify, which judges the asset, is 502', async (t) => {
  const { mint } = await recordAgent(t.context.app, t.context.key);
  // a JSON-RPC node in front of the app's devnet that can be made to fail, and a second gateway on the same database using it
  let broken = false;
  const upstream = t.context.app.ledgers.rpcUrls['chain-devnet']!;
  const node = createHttpServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (broken) return void res.writeHead(503, { 'content-type': 'text/plain' }).end('node down');
      fetch(upstream, { method: 'POST', headers: { 'content-type': 'application/json' }, body: Buffer.concat(chunks) })
        .then(async (r) => res.writeHead(r.status, { 'content-type': 'application/json' }).end(Buffer.from(await r.arrayBuffer())))
        .catch(() => res.writeHead(502).end());
    });
  });
  await new Promise<void>((resolve) => node.listen(0, '127.0.0.1', resolve));
  const remote = await startTestApp({
    databaseUrl: t.context.app.database.url,
    env: { SVC_DEVNET_LEDGER: `http://127.0.0.1:${(node.address() as AddressInfo).port}`, SVC_JOBS: 'off' },
  });
  t.teardown(async () => {
    await remote.close();
    await removeDataDir(remote.dataDir);
    await new Promise((resolve) => node.close(resolve));
  });
  broken = true;
  const resolved = await http(remote, 'GET', `/v1/identity/resolve?mint=${mint}`, { key: t.context.other });
  t.is(resolved.status, 200, JSON.stringify(resolved.body));
  t.deepEqual(resolved.body.registration, { uri: null, hosted: false, ok: false, detail: 'the agent has no registration uri' });
  const verified = await http(remote, 'POST', '/v1/identity/verify', { key: t.context.other, body: { mint } });
  t.is(verified.status, 502);
  t.is(verified.body.error, 'rpc_unavailable');
});

// ── intent ───────────────────────────────────────────────────────────────────────────────────────────────────────────

test('verify intent: pay warns without a paid endpoint and passes with one; delegate denies an unproven agent; hire; unknown intent 400; GraphQL enum', async (t) => {
  const { mint } = await recordAgent(t.context.app, t.context.key);
  const verify = async (body: Record<string, unknown>) =>
    (await http(t.context.app, 'POST', '/v1/identity/verify', { key: t.context.other, body: { mint, ...body } })).body;
  const intentOf = (r: { checks: { name: string; ok: boolean; detail: string }[] }) => r.checks.find((c) => c.name === 'intent');

  t.like(intentOf(await verify({ intent: 'pay' })), { ok: false, detail: 'pay: the agent sells no paid endpoint (no enabled payment link)' });
  await http(t.context.app, 'POST', '/v1/payment-links', { key: t.context.key, body: linkBody(mint) });
  t.like(intentOf(await verify({ intent: 'pay' })), { ok: true, detail: 'pay: the agent sells 1 paid endpoint' });

  const delegate = await verify({ intent: 'delegate' });
  t.is(delegate.verdict, 'deny');
  t.like(intentOf(delegate), { ok: false });

  t.like(intentOf(await verify({ intent: 'hire', capability: 'data.clean' })), { ok: false });
  await http(t.context.app, 'POST', cards(mint), { key: t.context.key, body: { capability: 'data.clean' } });
  t.like(intentOf(await verify({ intent: 'hire', capability: 'data.clean' })), { ok: true });

  const bad = await http(t.context.app, 'POST', '/v1/identity/verify', { key: t.context.other, body: { mint, intent: 'steal' } });
  t.is(bad.status, 400);
  t.is(bad.body.error, 'invalid_request');
  const viaTrpc = await trpc(t, t.context.other).identity.verify.mutate({ mint, intent: 'hire' });
  t.true(names(viaTrpc.checks).intent);
  const viaGql = await gql(t, t.context.other, `query($m: String) { verifyIdentity(mint: $m, intent: DELEGATE) { verdict checks { name ok } } }`, { m: mint });
  t.falsy(viaGql.body.errors, JSON.stringify(viaGql.body.errors));
  t.is(viaGql.body.data.verifyIdentity.verdict, 'DENY');
  t.false(names(viaGql.body.data.verifyIdentity.checks).intent);
});

// ── anonymous disclosure reads ───────────────────────────────────────────────────────────────────────────────────────

test('disclosure links are read with no key (the link is the credential) on REST, tRPC and GraphQL; a key of the other network changes nothing', async (t) => {
  const { mint } = await recordAgent(t.context.app, t.context.key);
  await http(t.context.app, 'PUT', `/v1/identity/${mint}/profile`, { key: t.context.key, body: { handle: `anon-${process.pid}` } });
  const link = await http(t.context.app, 'POST', `/v1/identity/${mint}/disclosures`, { key: t.context.key, body: { fields: ['profile'], expires_in: 600 } });
  const path = `/v1/identity/disclosures/${link.body.token}`;

  const anonymous = await http(t.context.app, 'GET', path);
  t.is(anonymous.status, 200, JSON.stringify(anonymous.body));
  t.like(anonymous.body, { mint, network: 'chain-devnet', fields: ['profile'], profile: { handle: `anon-${process.pid}` } });
  t.truthy(anonymous.headers.get('ratelimit-limit'));
  const live = (await t.context.app.services.access.issueKey({ network: 'chain-mainnet', role: 'user', owner_wallet: null })).key;
  t.deepEqual((await http(t.context.app, 'GET', path, { key: live })).body, anonymous.body);
  t.is((await http(t.context.app, 'GET', `/v1/identity/disclosures/svc_dl_${'y'.repeat(32)}`)).status, 404);
  t.is((await http(t.context.app, 'GET', '/v1/identity/disclosures/nope')).status, 400);

  t.like(await trpc(t, '').identity.disclosure.query({ token: link.body.token }), { mint });
  const viaGql = await gql(t, undefined, `query($token: String!) { identityDisclosure(token: $token) { mint profile { handle } } }`, {
    token: link.body.token,
  });
  t.falsy(viaGql.body.errors, JSON.stringify(viaGql.body.errors));
  t.is(viaGql.body.data.identityDisclosure.mint, mint);

  // the OpenAPI document says so: no security on the public routes
  const openapi = (await http(t.context.app, 'GET', '/openapi.json')).body;
  t.deepEqual(openapi.paths['/v1/identity/disclosures/{token}'].get.security, []); // no key: said explicitly
  t.deepEqual(openapi.paths['/v1/agents/{mint}/registration.json'].get.security, []);
  t.truthy(openapi.paths['/v1/identity/{mint}'].get.security);
});

test('the anonymous reads are limited per client IP in the `public` bucket (429 rate_limited, Retry-After)', async (t) => {
  const app = await startTestApp({ env: { SVC_RATE_LIMITS: JSON.stringify({ public: 3 }) } });
  try {
    const path = `/v1/identity/disclosures/svc_dl_${'z'.repeat(32)}`;
    for (let i = 0; i < 3; i++) t.is((await http(app, 'GET', path)).status, 404);
    const limited = await http(app, 'GET', `/v1/agents/${await randomAddress()}/registration.json`);
    t.is(limited.status, 429);
    t.like(limited.body, { error: 'rate_limited', details: { bucket: 'public', limit: 3 } });
    t.truthy(limited.headers.get('retry-after'));
  } finally {
    await app.close();
    await removeDataDir(app.dataDir);
  }
});

test('a former owner’s card does not hold its capability name against the agent’s current owner', async (t) => {
  const { app, key } = t.context;
  const { mint } = await recordAgent(app, key);
  // a card left by a previous owner principal of the agent (ownership moved since): hidden from everyone
  const now = new Date();
  await app.database.store.transaction((tx) =>
    tx.identity.insertCard({
      network: 'chain-devnet',
      id: 'cap_former_owner',
      mint,
      capability: 'weather.forecast',
      title: null,
      description: null,
      endpoint: null,
      tags: [],
      public: true,
      ownerPrincipal: 'key:former-owner',
      createdAt: now,
      updatedAt: now,
    }),
  );
  const created = await http(app, 'POST', cards(mint), { key, body: { capability: 'weather.forecast', public: true } });
  t.is(created.status, 201, JSON.stringify(created.body));
  const listed = await http(app, 'GET', cards(mint), { key });
  t.deepEqual(
    listed.body.data.map((c: { id: string }) => c.id),
    [created.body.id],
  );
});
