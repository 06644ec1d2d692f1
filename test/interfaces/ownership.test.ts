import anyTest, { type ExecutionContext, type TestFn } from 'ava';
import { createClient as createWsClient, type Client as WsClient } from 'graphql-ws';
import WebSocket from 'ws';
import { PublicKey } from '@solana/web3.js';
import type { LedgerThread } from '../../adapters/ledger/embedded/ledger-thread.ts';
import { createClient, errorCode, type Client } from '../../interfaces/client/index.ts';
import { coreAssetOwner } from '../../domain/agents/asset.ts';
import { MPL_CORE_PROGRAM_ID } from '../../domain/treasury/derive.ts';
import { initOrm, migratorOf } from '../../adapters/store/mikro-orm-store.ts';
import { coreAssetData, writeCoreAsset as writeAsset } from '../support/core-asset.ts';
import { http, linkBody, networkOfKey, randomAddress, startTestApp, type TestApp } from '../support/app.ts';
import { until } from '../support/until.ts';
import { graphqlSse } from '../support/sse.ts';
import { fundBuyer, payingFetch } from '../support/paywall.ts';

// README "Ownership": a key's principal is its owner_wallet when set, otherwise the key itself. Principal B
// sees, changes and receives nothing of principal A's — over REST, tRPC, GraphQL and both subscription transports —
// keys of one owner_wallet share everything, and an admin key sees all of its network and nothing of the other.

interface Side {
  key: string;
  /** the owner_wallet of the key, if any */
  wallet: string | null;
  agent: string;
  /** the link this principal made in `before` */
  link: string;
  trpc: Client;
}

interface Ctx {
  app: TestApp;
  /** principal wallet:WA (two keys) */
  a: Side;
  a2: string;
  /** principal key:B */
  b: Side;
  admin: string;
  mainnetAdmin: string;
  mainnetKey: string;
}

const test = anyTest as TestFn<Ctx>;

async function issue(app: TestApp, options: { network?: 'chain-devnet' | 'chain-mainnet'; role?: 'user' | 'admin'; wallet?: string } = {}) {
  const created = await app.services.access.issueKey({
    network: options.network ?? 'chain-devnet',
    role: options.role ?? 'user',
    owner_wallet: options.wallet ?? null,
  });
  return created.key;
}

/** Records an agent of `owner`: its Core asset written on the ledger first (an agent exists only there). */
async function record(app: TestApp, key: string, owner: string): Promise<string> {
  const asset = await randomAddress();
  await writeAsset(app.ledgers.embedded[networkOfKey(key)] as LedgerThread, asset, { owner });
  const res = await http(app, 'POST', '/v1/agents/record', { key, body: { mint: asset, owner } });
  if (res.status !== 200) throw new Error(`record agent failed: ${res.status} ${JSON.stringify(res.body)}`);
  return asset;
}

async function createLink(door: { app: TestApp; key: string }, agent: string, id: string, overrides: Record<string, unknown> = {}) {
  const { app, key } = door;
  const res = await http(app, 'POST', '/v1/payment-links', { key, body: linkBody(agent, { id, ...overrides }) });
  if (res.status !== 201) throw new Error(`create link failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

test.before(async (t) => {
  const app = await startTestApp();
  const walletA = await randomAddress();
  const keyA = await issue(app, { wallet: walletA });
  const a2 = await issue(app, { wallet: walletA });
  const keyB = await issue(app);
  const agentA = await record(app, keyA, walletA);
  const agentB = await record(app, keyB, await randomAddress());
  await createLink({ app, key: keyA }, agentA, 'a-link', { webhook_url: 'https://example.com/a-hook' });
  await createLink({ app, key: keyB }, agentB, 'b-link');
  t.context = {
    app,
    a: { key: keyA, wallet: walletA, agent: agentA, link: 'a-link', trpc: createClient({ url: app.url, apiKey: keyA }) },
    a2,
    b: { key: keyB, wallet: null, agent: agentB, link: 'b-link', trpc: createClient({ url: app.url, apiKey: keyB }) },
    admin: await issue(app, { role: 'admin' }),
    mainnetAdmin: await issue(app, { network: 'chain-mainnet', role: 'admin' }),
    mainnetKey: await issue(app, { network: 'chain-mainnet' }),
  };
});

/** An error envelope without its request id, the link id replaced: another's link must read like a missing one. */
function envelope(body: Record<string, unknown>, id: string): string {
  const { request_id: _request_id, ...rest } = body;
  return JSON.stringify(rest).replaceAll(id, '<id>');
}

const ids = (page: { data: { id: string }[] }) => page.data.map((l) => l.id);

async function eventsOf(app: TestApp, key: string, query = ''): Promise<{ id: string; kind: string; metadata: Record<string, unknown> }[]> {
  const res = await http(app, 'GET', `/v1/events?limit=200${query}`, { key });
  if (res.status !== 200) throw new Error(`events failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.data;
}

const linkIdsOf = (events: { metadata: Record<string, unknown> }[]) => new Set(events.map((e) => e.metadata.payment_link_id));

// ── REST ────────────────────────────────────────────────────────────────────────────────────────────────────────

test('REST: another principal gets 404, like a missing link, on read, update, delete and rotate; nothing changes', async (t) => {
  const { app, a, b } = t.context;
  const missing = await http(app, 'GET', '/v1/payment-links/no-such-link', { key: b.key });
  t.is(missing.status, 404);
  const attempts: [string, string, unknown][] = [
    ['GET', `/v1/payment-links/${a.link}`, undefined],
    ['PATCH', `/v1/payment-links/${a.link}`, { label: 'stolen', owner_agent: b.agent }],
    ['DELETE', `/v1/payment-links/${a.link}`, undefined],
    ['POST', `/v1/payment-links/${a.link}/webhook-secret/rotate`, undefined],
  ];
  for (const [method, path, body] of attempts) {
    const res = await http(app, method, path, { key: b.key, body });
    t.is(res.status, 404, `${method} ${path}`);
    t.is(envelope(res.body, a.link), envelope(missing.body, 'no-such-link'), `${method} ${path} discloses nothing`);
  }
  const own = await http(app, 'GET', `/v1/payment-links/${a.link}`, { key: a.key });
  t.is(own.status, 200);
  t.like(own.body, { label: 'Weather report', owner_agent: a.agent, webhook_secret_set: true });
  t.false('webhook_secret' in own.body, 'reads never carry the secret');
});

test("REST: lists hold only the caller's links; keys of one owner_wallet share them (read and write)", async (t) => {
  const { app, a, a2, b, admin } = t.context;
  const listB = await http(app, 'GET', '/v1/payment-links?limit=200', { key: b.key });
  t.is(listB.status, 200);
  t.true(listB.body.data.length > 0 && listB.body.data.every((l: { id: string }) => !l.id.startsWith('a-')), JSON.stringify(ids(listB.body)));
  t.true(ids(listB.body).includes(b.link));
  const filtered = await http(app, 'GET', `/v1/payment-links?owner_agent=${a.agent}`, { key: b.key });
  t.deepEqual(filtered.body.data, [], "filtering by another principal's agent finds nothing");

  const listA2 = await http(app, 'GET', '/v1/payment-links?limit=200', { key: a2 });
  t.true(ids(listA2.body).includes(a.link));
  t.false(ids(listA2.body).includes(b.link));
  const shared = await createLink({ app, key: a2 }, a.agent, 'a-shared');
  const patched = await http(app, 'PATCH', `/v1/payment-links/${shared.id}`, { key: a.key, body: { label: 'edited by the other key' } });
  t.is(patched.status, 200, JSON.stringify(patched.body));

  const all = await http(app, 'GET', '/v1/payment-links?limit=200', { key: admin });
  t.true(ids(all.body).includes(a.link) && ids(all.body).includes(b.link) && ids(all.body).includes('a-shared'), 'admin lists the network');
});

test("REST: agents of another principal are 404; owner_agent must be one of the caller's agents (403 forbidden)", async (t) => {
  const { app, a, a2, b } = t.context;
  const read = await http(app, 'GET', `/v1/agents/${a.agent}`, { key: b.key });
  t.is(read.status, 404);
  t.is(read.body.error, 'agent_not_found');
  t.is((await http(app, 'GET', `/v1/agents/${a.agent}`, { key: a2 })).status, 200, "the same wallet's other key");

  const create = await http(app, 'POST', '/v1/payment-links', { key: b.key, body: linkBody(a.agent, { id: 'b-redirect' }) });
  t.is(create.status, 403);
  t.like(create.body, { error: 'forbidden', details: { path: 'owner_agent' } });
  const repoint = await http(app, 'PATCH', `/v1/payment-links/${b.link}`, { key: b.key, body: { owner_agent: a.agent } });
  t.is(repoint.status, 403);
  t.like(repoint.body, { error: 'forbidden', details: { path: 'owner_agent' } });
  const preview = await http(app, 'POST', '/v1/payment-links/preview', { key: b.key, body: { owner_agent: a.agent, method: 'GET', price: '$0.01' } });
  t.is(preview.status, 403);
  t.is((await http(app, 'GET', `/v1/payment-links/${b.link}`, { key: b.key })).body.owner_agent, b.agent, "B's link still pays B's agent");
});

test("REST: events are the caller's only (list and get); admin reads its whole network; the other network's admin none of it", async (t) => {
  const { app, a, b, admin, mainnetAdmin } = t.context;
  const ofA = await eventsOf(app, a.key);
  const ofB = await eventsOf(app, b.key);
  t.true(linkIdsOf(ofA).has(a.link));
  t.false(linkIdsOf(ofA).has(b.link));
  t.true(linkIdsOf(ofB).has(b.link));
  t.false(linkIdsOf(ofB).has(a.link));
  t.deepEqual(await eventsOf(app, b.key, `&agent=${a.agent}`), []);
  t.deepEqual(await eventsOf(app, b.key, `&id=${ofA[0]!.id}`), []);

  const aEvent = ofA.find((e) => e.metadata.payment_link_id === a.link)!;
  const read = await http(app, 'GET', `/v1/events/${aEvent.id}`, { key: b.key });
  t.is(read.status, 404);
  t.is(read.body.error, 'event_not_found');
  t.is((await http(app, 'GET', `/v1/events/${aEvent.id}`, { key: a.key })).status, 200);

  const ofAdmin = linkIdsOf(await eventsOf(app, admin));
  t.true(ofAdmin.has(a.link) && ofAdmin.has(b.link));
  t.is((await http(app, 'GET', `/v1/events/${aEvent.id}`, { key: admin })).status, 200);
  t.is((await http(app, 'GET', `/v1/events/${aEvent.id}`, { key: mainnetAdmin })).status, 404);
  t.false(linkIdsOf(await eventsOf(app, mainnetAdmin)).has(a.link));
});

test("REST: an admin key reads and changes every link of its network; the other network's admin gets 404", async (t) => {
  const { app, b, admin, mainnetAdmin } = t.context;
  t.is((await http(app, 'GET', `/v1/payment-links/${b.link}`, { key: admin })).status, 200);
  const patched = await http(app, 'PATCH', `/v1/payment-links/${b.link}`, { key: admin, body: { disabled: false, label: 'reviewed' } });
  t.is(patched.status, 200);
  t.is(patched.body.label, 'reviewed');
  t.is((await http(app, 'GET', `/v1/payment-links/${b.link}`, { key: mainnetAdmin })).status, 404);
  const mainnetList = await http(app, 'GET', '/v1/payment-links?limit=200', { key: mainnetAdmin });
  t.false(ids(mainnetList.body).includes(b.link));
});

// ── tRPC and GraphQL ────────────────────────────────────────────────────────────────────────────────────────────

async function trpcCode(work: Promise<unknown>): Promise<string | undefined> {
  try {
    await work;
    return 'no error';
  } catch (e) {
    return errorCode(e);
  }
}

test("tRPC: another principal's link, agent and event are not found; lists and events hold only the caller's", async (t) => {
  const { a, b } = t.context;
  t.is(await trpcCode(b.trpc.paymentLinks.get.query({ id: a.link })), 'payment_link_not_found');
  t.is(await trpcCode(b.trpc.paymentLinks.update.mutate({ id: a.link, label: 'stolen' })), 'payment_link_not_found');
  t.is(await trpcCode(b.trpc.paymentLinks.rotateWebhookSecret.mutate({ id: a.link })), 'payment_link_not_found');
  t.is(await trpcCode(b.trpc.paymentLinks.delete.mutate({ id: a.link })), 'payment_link_not_found');
  t.is(await trpcCode(b.trpc.agents.get.query({ mint: a.agent })), 'agent_not_found');
  t.is(await trpcCode(b.trpc.paymentLinks.create.mutate(linkBody(a.agent) as never)), 'forbidden');

  const list = await b.trpc.paymentLinks.list.query({ limit: 200 });
  t.true(ids(list).includes(b.link));
  t.false(ids(list).includes(a.link));
  const events = await b.trpc.events.list.query({ limit: 200 });
  t.false(linkIdsOf(events.data).has(a.link));
  const aEvent = (await a.trpc.events.list.query({ kind: 'payment_link.created', limit: 200 })).data.find((e) => e.metadata.payment_link_id === a.link)!;
  t.is(await trpcCode(b.trpc.events.get.query({ id: aEvent.id })), 'event_not_found');
  t.is((await a.trpc.paymentLinks.get.query({ id: a.link })).label, 'Weather report', 'unchanged');
});

function gql(t: ExecutionContext<Ctx>, key: string, query: string, variables: Record<string, unknown> = {}) {
  return http(t.context.app, 'POST', '/graphql', { key, body: { query, variables } });
}

test("GraphQL: another principal's link, agent and event are not found; lists and events hold only the caller's", async (t) => {
  const { a, b } = t.context;
  const codeOf = async (query: string, variables: Record<string, unknown>) => (await gql(t, b.key, query, variables)).body.errors?.[0]?.extensions?.code;
  t.is(await codeOf('query($id: ID!) { paymentLink(id: $id) { id } }', { id: a.link }), 'payment_link_not_found');
  t.is(await codeOf('mutation($id: ID!) { updatePaymentLink(id: $id, input: { label: "stolen" }) { id } }', { id: a.link }), 'payment_link_not_found');
  t.is(await codeOf('mutation($id: ID!) { rotatePaymentLinkWebhookSecret(id: $id) { webhookSecret } }', { id: a.link }), 'payment_link_not_found');
  t.is(await codeOf('mutation($id: ID!) { deletePaymentLink(id: $id) }', { id: a.link }), 'payment_link_not_found');
  t.is(await codeOf('query($mint: String!) { agent(mint: $mint) { mint } }', { mint: a.agent }), 'agent_not_found');
  t.is(
    await codeOf(
      'mutation($agent: String!) { createPaymentLink(input: { label: "x", ownerAgent: $agent, method: GET, price: "$0.01", response: { body: "x" } }) { id } }',
      { agent: a.agent },
    ),
    'forbidden',
  );

  const lists = await gql(t, b.key, '{ paymentLinks(first: 200) { data { id } } events(first: 200) { data { id metadata } } }');
  t.falsy(lists.body.errors);
  t.true(ids(lists.body.data.paymentLinks).includes(b.link));
  t.false(ids(lists.body.data.paymentLinks).includes(a.link));
  t.true(linkIdsOf(lists.body.data.events.data).has(b.link));
  t.false(linkIdsOf(lists.body.data.events.data).has(a.link));
  const aEvent = (await eventsOf(t.context.app, a.key, '&kind=payment_link.created')).find((e) => e.metadata.payment_link_id === a.link)!;
  t.is(await codeOf('query($id: ID!) { event(id: $id) { id } }', { id: aEvent.id }), 'event_not_found');
  const read = await gql(t, a.key, 'query($id: ID!) { paymentLink(id: $id) { label webhookSecretSet webhookSecret } }', { id: a.link });
  t.deepEqual(read.body.data.paymentLink, { label: 'Weather report', webhookSecretSet: true, webhookSecret: null });
});

// ── Subscriptions: graphql-ws and SSE ───────────────────────────────────────────────────────────────────────────

const SUB = 'subscription($after: ID) { events(after: $after) { id kind network metadata } }';

interface Received {
  id: string;
  kind: string;
  network: string;
  metadata: { payment_link_id?: string };
}

interface Stream {
  events: Received[];
  errors: unknown[];
  /** resolves once an event for link `id` arrived */
  waitForLink(id: string): Promise<void>;
  close(): void;
}

function collector(): Pick<Stream, 'events' | 'errors' | 'waitForLink'> & { push(e: Received): void; fail(e: unknown): void } {
  const events: Received[] = [];
  const errors: unknown[] = [];
  const waiters = new Set<() => void>();
  return {
    events,
    errors,
    push(e) {
      events.push(e);
      for (const w of waiters) w();
    },
    fail(e) {
      errors.push(e);
      for (const w of waiters) w();
    },
    // no deadline of its own: an event that never comes is AVA's timeout to report (test/support/until.ts)
    waitForLink(id) {
      return new Promise((resolve) => {
        const check = () => {
          if (!events.some((e) => e.metadata.payment_link_id === id)) return;
          waiters.delete(check);
          resolve();
        };
        waiters.add(check);
        check();
      });
    },
  };
}

function subscribeWs(app: TestApp, key: string, after: string | undefined): Stream & { client: WsClient } {
  const c = collector();
  const client = createWsClient({
    url: `${app.url.replace(/^http/, 'ws')}/graphql`,
    webSocketImpl: WebSocket,
    connectionParams: { authorization: key },
    retryAttempts: 0,
  });
  client.subscribe<{ events: Received }>(
    { query: SUB, variables: { after } },
    {
      next: (result) => {
        for (const e of result.errors ?? []) c.fail(e);
        if (result.data?.events) c.push(result.data.events);
      },
      error: (err) => c.fail(err),
      complete: () => {},
    },
  );
  return { ...c, client, close: () => void client.dispose() };
}

/** GraphQL over SSE (Yoga's distinct-connections mode). */
function subscribeSse(app: TestApp, key: string, after: string | undefined): Stream {
  const c = collector();
  const stream = graphqlSse(app, {
    key,
    query: SUB,
    variables: { after },
    onMessage: (m) => {
      if (!m.data || typeof m.data !== 'object') return;
      const message = m.data as { data?: { events?: Received }; errors?: unknown[] };
      for (const e of message.errors ?? []) c.fail(e);
      if (message.data?.events) c.push(message.data.events);
    },
  });
  return { ...c, close: () => stream.close() };
}

/** The newest event the key can read: a subscription from it gets everything after, whenever it attaches. */
async function cursorOf(app: TestApp, key: string): Promise<string | undefined> {
  return (await eventsOf(app, key))[0]?.id;
}

// Serial (AVA runs serial tests first, alone): no other test's events land in these streams.
test.serial("graphql-ws and SSE: each principal receives only its own events, admin its whole network, the other network's admin none of it", async (t) => {
  const { app, a, b, admin, mainnetAdmin, mainnetKey } = t.context;
  const mainnetAgent = await record(app, mainnetKey, await randomAddress());
  await createLink({ app, key: mainnetKey }, mainnetAgent, 'sub-m0');
  const streams: Record<string, Stream> = {};
  t.teardown(() => {
    for (const s of Object.values(streams)) s.close();
  });
  const cursors = {
    a: await cursorOf(app, a.key),
    b: await cursorOf(app, b.key),
    admin: await cursorOf(app, admin),
    mainnet: await cursorOf(app, mainnetAdmin),
  };
  streams.aWs = subscribeWs(app, a.key, cursors.a);
  streams.bWs = subscribeWs(app, b.key, cursors.b);
  streams.adminWs = subscribeWs(app, admin, cursors.admin);
  streams.mainnetWs = subscribeWs(app, mainnetAdmin, cursors.mainnet);
  streams.aSse = subscribeSse(app, a.key, cursors.a);
  streams.bSse = subscribeSse(app, b.key, cursors.b);
  streams.adminSse = subscribeSse(app, admin, cursors.admin);

  // Interleaved, so each stream's own last event arrives after every event of the other principal (seq order).
  await createLink({ app, key: a.key }, a.agent, 'sub-a1');
  await createLink({ app, key: b.key }, b.agent, 'sub-b1');
  await createLink({ app, key: a.key }, a.agent, 'sub-a2');
  await createLink({ app, key: b.key }, b.agent, 'sub-b2');
  await createLink({ app, key: mainnetKey }, mainnetAgent, 'sub-m1');

  // Each stream is awaited until its last link arrived, its errors asserted first (a failed delivery arrives as a
  // GraphQL error in place of its event), then until every link it should see arrived: one delivered late shows as
  // out of order, not as missing.
  const expect = async (name: keyof typeof streams, links: string[], why: string) => {
    const stream = streams[name]!;
    await stream.waitForLink(links.at(-1)!);
    t.deepEqual(stream.errors, [], `${name}: no error`);
    for (const link of links) await stream.waitForLink(link);
    t.deepEqual([...linkIdsOf(stream.events)], links, `${name}: ${why}`);
  };
  for (const name of ['aWs', 'aSse'] as const) await expect(name, ['sub-a1', 'sub-a2'], "A's own, nothing of B's");
  for (const name of ['bWs', 'bSse'] as const) await expect(name, ['sub-b1', 'sub-b2'], "B's own, nothing of A's");
  for (const name of ['adminWs', 'adminSse'] as const) await expect(name, ['sub-a1', 'sub-b1', 'sub-a2', 'sub-b2'], 'the whole devnet, in commit order');
  await expect('mainnetWs', ['sub-m1'], 'the mainnet admin: nothing of devnet');
  t.true(Object.values(streams).every((s) => s.errors.length === 0));
  t.true(Object.values(streams).every((s) => s.events.every((e) => e.network === (s === streams.mainnetWs ? 'CHAIN_MAINNET' : 'CHAIN_DEVNET'))));
});

test("a subscription resuming after another principal's event answers event_not_found on both transports", async (t) => {
  const { app, a, b } = t.context;
  const aEvent = await cursorOf(app, a.key);
  t.truthy(aEvent);
  for (const stream of [subscribeWs(app, b.key, aEvent), subscribeSse(app, b.key, aEvent)]) {
    try {
      await until('the stream answers an error', () => stream.errors.length > 0);
      t.is((stream.errors[0] as { extensions?: { code?: string } }).extensions?.code, 'event_not_found');
      t.deepEqual(stream.events, []);
    } finally {
      stream.close();
    }
  }
});

// ── Paid calls: the paywall's events belong to the link's owner ─────────────────────────────────────────────────

test("a paid call's events (settled, served, receipt.published, protocol.fee.collected) reach the link's owner and admin only", async (t) => {
  const { app, a, b, admin } = t.context;
  const link = await createLink({ app, key: a.key }, a.agent, 'a-paid');
  const world = { app, key: a.key, rpcUrl: app.ledgers.rpcUrls['chain-devnet']! };
  const buyer = await fundBuyer(world);
  const res = await payingFetch(world, buyer)(link.share_url);
  t.is(res.status, 200, await res.text());
  const kinds = (events: { kind: string; metadata: Record<string, unknown> }[]) =>
    events
      .filter((e) => e.metadata.payment_link_id === 'a-paid')
      .map((e) => e.kind)
      .sort();
  const expected = ['payment_link.created', 'payment_link.served', 'payment_link.settled', 'protocol.fee.collected', 'receipt.published'];
  t.deepEqual(kinds(await eventsOf(app, a.key)), expected);
  t.deepEqual(kinds(await eventsOf(app, admin)), expected);
  t.deepEqual(kinds(await eventsOf(app, b.key)), []);
});

// ── Agents ──────────────────────────────────────────────────────────────────────────────────────────────────────

test("agents: a key with an owner_wallet records that wallet's agents only; another principal cannot re-record an agent (409)", async (t) => {
  const { app, a, a2, b } = t.context;
  const foreign = await http(app, 'POST', '/v1/agents/record', { key: a.key, body: { mint: await randomAddress(), owner: await randomAddress() } });
  t.is(foreign.status, 403);
  t.like(foreign.body, { error: 'forbidden', details: { path: 'owner' } });

  const sameOwner = await http(app, 'POST', '/v1/agents/record', { key: b.key, body: { mint: a.agent, owner: a.wallet } });
  t.is(sameOwner.status, 409, JSON.stringify(sameOwner.body));
  t.is(sameOwner.body.error, 'conflict');
  // another owner than the ledger's: not an agent of that owner at all
  const otherOwner = await http(app, 'POST', '/v1/agents/record', { key: b.key, body: { mint: a.agent, owner: await randomAddress() } });
  t.is(otherOwner.status, 422, JSON.stringify(otherOwner.body));
  t.like(otherOwner.body, { error: 'agent_not_on_ledger', details: { found: 'asset_of_another_owner', asset_owner: a.wallet } });
  // The same principal (the wallet's other key) records it again: name and uri change, the owner stays.
  const again = await http(app, 'POST', '/v1/agents/record', { key: a2, body: { mint: a.agent, owner: a.wallet, name: 'renamed' } });
  t.is(again.status, 200, JSON.stringify(again.body));
  t.like(again.body, { owner: a.wallet, name: 'renamed' });
  t.is((await http(app, 'GET', `/v1/agents/${a.agent}`, { key: b.key })).status, 404, "still not B's");
});

/** Writes a Metaplex Core AssetV1 account (owner, update authority None) at `mint` on the embedded devnet. */
async function writeCoreAsset(app: TestApp, mint: string, owner: string): Promise<void> {
  await writeAsset(app.ledgers.embedded['chain-devnet'] as LedgerThread, mint, { owner });
}

test("agents: the ledger's Core asset owner lets the new owner re-record a recorded agent; naming the owner alone does not", async (t) => {
  const { app } = t.context;
  const oldWallet = await randomAddress();
  const newWallet = await randomAddress();
  const oldKey = await issue(app, { wallet: oldWallet });
  const newKey = await issue(app, { wallet: newWallet });
  const stranger = await issue(app);
  const mint = await record(app, oldKey, oldWallet);
  await createLink({ app, key: oldKey }, mint, 'moved-agent-link');

  // The ledger still shows the old owner: a new owner is refused.
  const refused = await http(app, 'POST', '/v1/agents/record', { key: newKey, body: { mint, owner: newWallet } });
  t.is(refused.status, 422);
  t.is(refused.body.error, 'agent_not_on_ledger');

  // The asset moved to newWallet on the ledger.
  await writeCoreAsset(app, mint, newWallet);
  const account = await app.services.ledgers['chain-devnet']!.getAccount(mint);
  t.is(account && coreAssetOwner(account), newWallet);
  // A key of another wallet cannot claim it for newWallet (its owner_wallet decides), nor for itself.
  t.is((await http(app, 'POST', '/v1/agents/record', { key: oldKey, body: { mint, owner: newWallet } })).status, 403);
  const moved = await http(app, 'POST', '/v1/agents/record', { key: newKey, body: { mint, owner: newWallet } });
  t.is(moved.status, 200, JSON.stringify(moved.body));
  t.is(moved.body.owner, newWallet);
  t.is((await http(app, 'GET', `/v1/agents/${mint}`, { key: oldKey })).status, 404, "no longer the old principal's");
  t.is((await http(app, 'GET', `/v1/agents/${mint}`, { key: newKey })).status, 200);
  t.is((await http(app, 'POST', '/v1/payment-links', { key: oldKey, body: linkBody(mint) })).status, 403, 'nor its owner_agent');
  // The old owner's link stays the old owner's.
  t.is((await http(app, 'GET', '/v1/payment-links/moved-agent-link', { key: newKey })).status, 404);
  t.is((await http(app, 'GET', '/v1/payment-links/moved-agent-link', { key: oldKey })).status, 200);

  // Naming the ledger's owner from a key of no wallet proves nothing: conflict.
  const claimed = await http(app, 'POST', '/v1/agents/record', { key: stranger, body: { mint, owner: newWallet } });
  t.is(claimed.status, 409);
  t.is((await http(app, 'GET', `/v1/agents/${mint}`, { key: newKey })).body.owner, newWallet);
});

test('agents: a key of no wallet may move a stale record to the owner the ledger shows', async (t) => {
  const { app } = t.context;
  const first = await issue(app);
  const second = await issue(app);
  const recordedOwner = await randomAddress();
  const ledgerOwner = await randomAddress();
  const mint = await record(app, first, recordedOwner);
  await writeCoreAsset(app, mint, ledgerOwner);
  t.is(
    (await http(app, 'POST', '/v1/agents/record', { key: second, body: { mint, owner: recordedOwner } })).status,
    422,
    'the ledger no longer shows the recorded owner',
  );
  t.is((await http(app, 'POST', '/v1/agents/record', { key: second, body: { mint, owner: await randomAddress() } })).status, 422, "not the ledger's owner");
  const moved = await http(app, 'POST', '/v1/agents/record', { key: second, body: { mint, owner: ledgerOwner } });
  t.is(moved.status, 200, JSON.stringify(moved.body));
  t.is((await http(app, 'GET', `/v1/agents/${mint}`, { key: first })).status, 404);
});

test('agents: a legacy agent nobody owns is admin-only until a principal records it with the same owner', async (t) => {
  const { app, admin } = t.context;
  const owner = await randomAddress();
  const mint = await randomAddress();
  const em = app.database.orm.em.fork();
  await em.execute(
    `insert into agents (network, mint, owner, name, uri, treasury, executive, source, owner_principal, registered_at, updated_at)
     values ('chain-devnet', ?, ?, null, null, ?, null, 'recorded', null, now(), now())`,
    [mint, owner, await randomAddress()],
  );
  const adopter = await issue(app);
  const late = await issue(app);
  t.is((await http(app, 'GET', `/v1/agents/${mint}`, { key: adopter })).status, 404);
  t.is((await http(app, 'GET', `/v1/agents/${mint}`, { key: admin })).status, 200);
  t.is((await http(app, 'POST', '/v1/agents/record', { key: adopter, body: { mint, owner } })).status, 422, 'no asset on the ledger: not adopted');
  await writeCoreAsset(app, mint, owner);
  t.is(
    (await http(app, 'POST', '/v1/agents/record', { key: adopter, body: { mint, owner: await randomAddress() } })).status,
    422,
    "another owner than the ledger's",
  );
  const adopted = await http(app, 'POST', '/v1/agents/record', { key: adopter, body: { mint, owner } });
  t.is(adopted.status, 200);
  t.is(typeof adopted.body.proven_at, 'string', 'adopting it proved it');
  t.is((await http(app, 'GET', `/v1/agents/${mint}`, { key: adopter })).status, 200);
  t.is((await http(app, 'POST', '/v1/agents/record', { key: late, body: { mint, owner } })).status, 409);
});

test('agents: concurrent first records of one mint by two principals: one owns it, the other gets 409', async (t) => {
  const { app } = t.context;
  const [first, second] = [await issue(app), await issue(app)];
  const mint = await randomAddress();
  const owner = await randomAddress();
  await writeCoreAsset(app, mint, owner);
  const keys = Array.from({ length: 8 }, (_, i) => (i % 2 ? second : first));
  const results = await Promise.all(keys.map((key) => http(app, 'POST', '/v1/agents/record', { key, body: { mint, owner } })));
  const winners = new Set(keys.filter((_, i) => results[i]!.status === 200));
  t.is(winners.size, 1, JSON.stringify(results.map((r) => r.status)));
  t.true(results.every((r) => r.status === 200 || (r.status === 409 && r.body.error === 'conflict')));
  const winnerKey = winners.has(first) ? first : second;
  const loserKey = winnerKey === first ? second : first;
  t.is((await http(app, 'GET', `/v1/agents/${mint}`, { key: winnerKey })).status, 200);
  t.is((await http(app, 'GET', `/v1/agents/${mint}`, { key: loserKey })).status, 404);
});

test('coreAssetOwner reads the owner of an AssetV1 account and nothing else', (t) => {
  const owner = PublicKey.unique().toBase58();
  const data = coreAssetData({ owner });
  const account = { address: PublicKey.unique().toBase58(), lamports: 1n, owner: MPL_CORE_PROGRAM_ID, data, executable: false };
  t.is(coreAssetOwner(account), owner);
  t.is(coreAssetOwner({ ...account, owner: '11111111111111111111111111111111' }), null, "another program's account");
  t.is(coreAssetOwner({ ...account, data: Uint8Array.of(5, ...data.subarray(1)) }), null, 'a collection, not an asset');
  t.is(coreAssetOwner({ ...account, data: data.subarray(0, 20) }), null, 'too short');
});

// ── Migration 0005: rows from before ownership ──────────────────────────────────────────────────────────────────

test('migration 0005 gives legacy links, agents and events their owners, and leaves the rest admin-only', async (t) => {
  const { app } = t.context;
  const admin = app.database.orm.em.fork();
  await admin.execute('create database legacy_0005');
  const url = app.database.url.replace(/\/[^/]+$/, '/legacy_0005');
  const orm = await initOrm(url, 2);
  t.teardown(() => orm.close());
  await (await migratorOf(orm)).up({ to: '0003-paid-calls' });
  const em = orm.em.fork();
  const walletKey = { id: 'K-WALLET', wallet: await randomAddress() };
  const [walletAgent, linkedAgent, loneAgent] = [await randomAddress(), await randomAddress(), await randomAddress()];
  const plainOwner = await randomAddress();
  await em.execute(
    `insert into api_keys (id, network, prefix, key_hash, owner_wallet, role, created_at) values
       ('K-WALLET', 'chain-devnet', 'svc_test_aaa', 'h1', ?, 'user', now()),
       ('K-PLAIN', 'chain-devnet', 'svc_test_bbb', 'h2', null, 'user', now())`,
    [walletKey.wallet],
  );
  const agent = (mint: string, owner: string) =>
    em.execute(
      `insert into agents (network, mint, owner, treasury, source, registered_at, updated_at) values ('chain-devnet', ?, ?, 'T', 'recorded', now(), now())`,
      [mint, owner],
    );
  await agent(walletAgent, walletKey.wallet);
  await agent(linkedAgent, plainOwner);
  await agent(loneAgent, await randomAddress());
  const link = ({ pk, id, owner, by, at }: { pk: string; id: string; owner: string; by: string; at: string }) =>
    em.execute(
      `insert into payment_links (pk, id, network, label, owner_agent, method, price, currency, amount_atomic, accepts_currencies, protocol,
         response, wrap_receipt, settle_policy, metadata, created_by, created_at, updated_at)
       values (?, ?, 'chain-devnet', 'l', ?, 'GET', '$0.01', 'USDC', 10000, '[]', 'x402', '{}', false, 'before_forward', '{}', ?, ?, ?)`,
      [pk, id, owner, by, at, at],
    );
  await link({ pk: 'P1', id: 'by-wallet', owner: walletAgent, by: 'K-WALLET', at: '2026-01-01T00:00:00Z' });
  await link({ pk: 'P2', id: 'by-plain', owner: linkedAgent, by: 'K-PLAIN', at: '2026-01-01T00:00:00Z' });
  // "reused" was deleted by K-WALLET's principal and re-created by K-PLAIN: the old events are not K-PLAIN's.
  await link({ pk: 'P3', id: 'reused', owner: linkedAgent, by: 'K-PLAIN', at: '2026-03-01T00:00:00Z' });
  const event = (id: string, agentAsset: string | null, linkId: string | null, at: string) =>
    em.execute(
      `insert into events (id, network, kind, phase, agent_asset, metadata, created_at, updated_at) values (?, 'chain-devnet', 'k', 'confirmed', ?, ?::jsonb, ?, ?)`,
      [id, agentAsset, JSON.stringify(linkId ? { payment_link_id: linkId } : {}), at, at],
    );
  await event('E1', walletAgent, 'by-wallet', '2026-02-01T00:00:00Z');
  await event('E2', linkedAgent, 'by-plain', '2026-02-01T00:00:00Z');
  await event('E3', linkedAgent, 'reused', '2026-02-01T00:00:00Z'); // before the current "reused" existed
  await event('E4', linkedAgent, 'reused', '2026-04-01T00:00:00Z');
  await event('E5', loneAgent, null, '2026-04-01T00:00:00Z');
  await event('E6', walletAgent, null, '2026-04-01T00:00:00Z');

  await (await migratorOf(orm)).up();
  const owners = async (table: string, key: string) =>
    Object.fromEntries(
      ((await em.execute(`select ${key} as k, owner_principal as o from ${table}`)) as { k: string; o: string | null }[]).map((r) => [r.k, r.o]),
    );
  t.deepEqual(await owners('payment_links', 'id'), { 'by-wallet': `wallet:${walletKey.wallet}`, 'by-plain': 'key:K-PLAIN', reused: 'key:K-PLAIN' });
  t.deepEqual(await owners('agents', 'mint'), { [walletAgent]: `wallet:${walletKey.wallet}`, [linkedAgent]: 'key:K-PLAIN', [loneAgent]: null });
  t.deepEqual(await owners('events', 'id'), {
    E1: `wallet:${walletKey.wallet}`,
    E2: 'key:K-PLAIN',
    E3: null,
    E4: 'key:K-PLAIN',
    E5: null,
    E6: `wallet:${walletKey.wallet}`,
  });
});
