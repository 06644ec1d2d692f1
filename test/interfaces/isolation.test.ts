import anyTest, { type ExecutionContext, type TestFn } from 'ava';
import { http, issueKey, linkBody, recordAgent, startTestApp, writeAgentAsset, type HttpResult, type TestApp } from '../support/app.ts';

// hosted-api §5.2–5.4: the key prefix fixes the network and a key never sees the other network's rows.

interface World {
  mint: string;
  link: Record<string, any>;
  events: Record<string, any>[];
}

const test = anyTest as TestFn<{ app: TestApp; test: string; live: string; devnet: World; mainnet: World }>;

function expectError(t: ExecutionContext, res: HttpResult, status: number, code: string): void {
  t.is(res.status, status, JSON.stringify(res.body));
  t.is(res.body?.error, code);
  t.is(res.body?.request_id, res.headers.get('x-svc-request-id'));
}

async function seed(app: TestApp, key: string, slug: string): Promise<World> {
  const { mint } = await recordAgent(app, key);
  const created = await http(app, 'POST', '/v1/payment-links', { key, body: linkBody(mint, { id: slug }) });
  if (created.status !== 201) throw new Error(`create failed: ${created.status} ${JSON.stringify(created.body)}`);
  const updated = await http(app, 'PATCH', `/v1/payment-links/${slug}`, { key, body: { label: 'Updated' } });
  if (updated.status !== 200) throw new Error(`patch failed: ${updated.status}`);
  const events = await http(app, 'GET', `/v1/events?agent=${mint}`, { key });
  return { mint, link: updated.body, events: events.body.data };
}

test.before(async (t) => {
  const app = await startTestApp();
  const testKey = await issueKey(app, 'chain-devnet');
  const liveKey = await issueKey(app, 'chain-mainnet');
  t.context = {
    app,
    test: testKey,
    live: liveKey,
    devnet: await seed(app, testKey, 'devnet-only'),
    mainnet: await seed(app, liveKey, 'mainnet-only'),
  };
});

test('the key prefix fixes the network of what a key creates', (t) => {
  const { test: testKey, live, devnet, mainnet } = t.context;
  t.true(testKey.startsWith('svc_test_'));
  t.true(live.startsWith('svc_live_'));
  t.is(devnet.link.network, 'chain-devnet');
  t.is(mainnet.link.network, 'chain-mainnet');
  t.is(mainnet.link.accepts[0].network, 'solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp');
  t.is(mainnet.link.accepts[0].asset, 'EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v');
  t.is(devnet.events.length, 2);
  t.is(mainnet.events.length, 2);
  t.true(devnet.events.every((e) => e.network === 'chain-devnet'));
  t.true(mainnet.events.every((e) => e.network === 'chain-mainnet'));
});

for (const [from, to] of [
  ['test', 'mainnet'],
  ['live', 'devnet'],
] as const) {
  const title = from === 'test' ? 'a devnet key never sees chain-mainnet rows' : 'a mainnet key never sees chain-devnet rows';

  test(`${title}: payment links`, async (t) => {
    const { app } = t.context;
    const key = t.context[from];
    const other = t.context[to];
    const id = other.link.id as string;
    expectError(t, await http(app, 'GET', `/v1/payment-links/${id}`, { key }), 404, 'payment_link_not_found');
    expectError(t, await http(app, 'PATCH', `/v1/payment-links/${id}`, { key, body: { label: 'hijacked' } }), 404, 'payment_link_not_found');
    expectError(t, await http(app, 'PATCH', `/v1/payment-links/${id}`, { key, body: { disabled: true } }), 404, 'payment_link_not_found');
    expectError(t, await http(app, 'DELETE', `/v1/payment-links/${id}`, { key }), 404, 'payment_link_not_found');

    const all = await http(app, 'GET', '/v1/payment-links?limit=200', { key });
    t.is(all.status, 200);
    t.false(all.body.data.some((l: { id: string }) => l.id === id));
    const byOwner = await http(app, 'GET', `/v1/payment-links?owner_agent=${other.mint}`, { key });
    t.deepEqual(byOwner.body.data, []);

    // The owner still sees the link unchanged.
    const owner = from === 'test' ? t.context.live : t.context.test;
    const own = await http(app, 'GET', `/v1/payment-links/${id}`, { key: owner });
    t.is(own.status, 200);
    t.is(own.body.label, 'Updated');
    t.is(own.body.disabled, false);
  });

  test(`${title}: events`, async (t) => {
    const { app } = t.context;
    const key = t.context[from];
    const other = t.context[to];
    for (const event of other.events) {
      expectError(t, await http(app, 'GET', `/v1/events/${event.id}`, { key }), 404, 'event_not_found');
      const byId = await http(app, 'GET', `/v1/events?id=${event.id}`, { key });
      t.deepEqual(byId.body.data, []);
    }
    const byAgent = await http(app, 'GET', `/v1/events?agent=${other.mint}`, { key });
    t.deepEqual(byAgent.body.data, []);
    const all = await http(app, 'GET', `/v1/events?limit=200&kind=${encodeURIComponent('payment_link.*')}`, { key });
    t.is(all.status, 200);
    const ids = new Set(other.events.map((e) => e.id));
    t.false(all.body.data.some((e: { id: string }) => ids.has(e.id)));
    t.true(all.body.data.length > 0, 'the key sees its own events');
  });

  test(`${title}: agents`, async (t) => {
    const { app } = t.context;
    const key = t.context[from];
    const other = t.context[to];
    expectError(t, await http(app, 'GET', `/v1/agents/${other.mint}`, { key }), 404, 'agent_not_found');
    // Nor can a link be hung on the other network's agent.
    expectError(t, await http(app, 'POST', '/v1/payment-links', { key, body: linkBody(other.mint) }), 404, 'agent_not_found');
    const preview = await http(app, 'POST', '/v1/payment-links/preview', { key, body: { owner_agent: other.mint, method: 'GET', price: '$0.01' } });
    expectError(t, preview, 404, 'agent_not_found');
  });
}

test('the same slug and the same mint may exist once per network', async (t) => {
  const { app, test: testKey, live } = t.context;
  // one address holding a Core asset on each network's ledger
  const { mint, owner } = await writeAgentAsset(app, 'chain-devnet', { name: 'devnet twin' });
  await writeAgentAsset(app, 'chain-mainnet', { mint, owner, name: 'mainnet twin' });
  t.is((await http(app, 'POST', '/v1/agents/record', { key: testKey, body: { mint, owner, name: 'devnet twin' } })).status, 200);
  t.is((await http(app, 'POST', '/v1/agents/record', { key: live, body: { mint, owner, name: 'mainnet twin' } })).status, 200);
  t.is((await http(app, 'GET', `/v1/agents/${mint}`, { key: testKey })).body.name, 'devnet twin');
  t.is((await http(app, 'GET', `/v1/agents/${mint}`, { key: live })).body.name, 'mainnet twin');

  const a = await http(app, 'POST', '/v1/payment-links', { key: testKey, body: linkBody(mint, { id: 'twin', label: 'devnet' }) });
  const b = await http(app, 'POST', '/v1/payment-links', { key: live, body: linkBody(mint, { id: 'twin', label: 'mainnet' }) });
  t.is(a.status, 201);
  t.is(b.status, 201, JSON.stringify(b.body));
  t.is((await http(app, 'GET', '/v1/payment-links/twin', { key: testKey })).body.label, 'devnet');
  t.is((await http(app, 'GET', '/v1/payment-links/twin', { key: live })).body.label, 'mainnet');

  t.is((await http(app, 'DELETE', '/v1/payment-links/twin', { key: testKey })).status, 204);
  t.is((await http(app, 'GET', '/v1/payment-links/twin', { key: live })).status, 200, 'deleting on devnet leaves mainnet alone');
});

test('a key whose prefix was swapped (same secret) is 401 invalid_api_key', async (t) => {
  const { app, test: testKey, live } = t.context;
  const swappedTest = testKey.replace(/^svc_test_/, 'svc_live_');
  const swappedLive = live.replace(/^svc_live_/, 'svc_test_');
  t.not(swappedTest, testKey);
  t.not(swappedLive, live);
  for (const key of [swappedTest, swappedLive]) {
    expectError(t, await http(app, 'GET', '/v1/health', { key }), 401, 'invalid_api_key');
    expectError(t, await http(app, 'GET', '/v1/payment-links', { key }), 401, 'invalid_api_key');
  }
  // The real keys still work.
  t.is((await http(app, 'GET', '/v1/health', { key: testKey })).status, 200);
  t.is((await http(app, 'GET', '/v1/health', { key: live })).status, 200);
});
