import test from 'ava';
import { http, issueKey, linkBody, makeDataDir, recordAgent, removeDataDir, startTestApp, type TestApp } from '../support/app.ts';

// ARCHITECTURE "Scale-out"/"Defaults are embedded": the data directory keeps PostgreSQL and the generated keys
// across restarts, so links, events and API keys survive a stop and start.

test('links, events, agents, API keys and generated fee authorities survive a restart on the same data dir', async (t) => {
  const dir = await makeDataDir();
  let app: TestApp | undefined;
  try {
    app = await startTestApp({ dataDir: dir });
    const key = await issueKey(app);
    const liveKey = await issueKey(app, 'chain-mainnet');
    const { mint, owner } = await recordAgent(app, key);
    const created = await http(app, 'POST', '/v1/payment-links', { key, body: linkBody(mint, { id: 'survivor', metadata: { note: 'kept' } }) });
    t.is(created.status, 201, JSON.stringify(created.body));
    const disabled = await http(app, 'PATCH', '/v1/payment-links/survivor', { key, body: { disabled: true } });
    t.is(disabled.status, 200);
    const eventsBefore = (await http(app, 'GET', `/v1/events?agent=${mint}`, { key })).body.data;
    t.is(eventsBefore.length, 2);
    const healthBefore = (await http(app, 'GET', '/v1/health', { key })).body;
    await app.close();
    app = undefined;

    app = await startTestApp({ dataDir: dir });
    t.false(app.database.reused, 'the second start owns the cluster again');

    const link = await http(app, 'GET', '/v1/payment-links/survivor', { key });
    t.is(link.status, 200, 'the API key and the link survived');
    const { share_url: _oldShare, facilitator: _oldFacilitator, ...before } = disabled.body;
    const { share_url: _newShare, facilitator: _newFacilitator, ...after } = link.body;
    t.deepEqual(after, before, 'every stored field is as it was (the port, hence base URL, may change)');
    t.is(link.body.disabled, true);
    t.deepEqual(link.body.metadata, { note: 'kept' });

    const agent = await http(app, 'GET', `/v1/agents/${mint}`, { key });
    t.is(agent.status, 200);
    t.is(agent.body.owner, owner);

    const eventsAfter = (await http(app, 'GET', `/v1/events?agent=${mint}`, { key })).body.data;
    t.deepEqual(eventsAfter, eventsBefore);

    t.is((await http(app, 'GET', '/v1/health', { key: liveKey })).status, 200, 'the mainnet key survived too');
    const healthAfter = (await http(app, 'GET', '/v1/health', { key })).body;
    t.deepEqual(healthAfter.protocol_fee, healthBefore.protocol_fee, 'generated fee authorities are kept under the data dir');

    // The restarted app keeps writing: a new link and its event land after the old ones.
    const again = await http(app, 'POST', '/v1/payment-links', { key, body: linkBody(mint, { label: 'after restart' }) });
    t.is(again.status, 201);
    const list = await http(app, 'GET', `/v1/payment-links?owner_agent=${mint}`, { key });
    t.deepEqual(
      list.body.data.map((l: { id: string }) => l.id),
      [again.body.id, 'survivor'],
    );
    const events = (await http(app, 'GET', `/v1/events?agent=${mint}`, { key })).body.data;
    t.deepEqual(
      events.map((e: { kind: string }) => e.kind),
      ['payment_link.created', 'payment_link.updated', 'payment_link.created'],
    );
    t.is((await http(app, 'POST', '/v1/payment-links', { key, body: linkBody(mint, { id: 'survivor' }) })).status, 409, 'the slug is still taken');
  } finally {
    await app?.close();
    await removeDataDir(dir);
  }
});
