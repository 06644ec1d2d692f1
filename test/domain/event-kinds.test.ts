import test from 'ava';
import { checkEvent, eventCatalogue, EVENT_KIND_NAMES } from '../../domain/events/kinds.ts';
import { http, issueKey, linkBody, recordAgent } from '../support/app.ts';
import { fundBuyer, payingFetch, startPaywallApp } from '../support/paywall.ts';

// The event catalogue. Appends are typed by kind at compile time; here every event a real flow
// stores (link created, updated, rotated, paid with the fee on, deleted) is checked against the catalogue at run time.

test('every event of a full flow matches the catalogue: a known kind, an allowed phase, metadata of its schema', async (t) => {
  const world = await startPaywallApp();
  const { app, key } = world;
  const { mint } = await recordAgent(app, key);
  const created = await http(app, 'POST', '/v1/payment-links', {
    key,
    body: linkBody(mint, { id: 'catalogue-link', webhook_url: 'https://example.com/hook' }),
  });
  t.is(created.status, 201, JSON.stringify(created.body));
  t.is((await http(app, 'PATCH', '/v1/payment-links/catalogue-link', { key, body: { label: 'Renamed' } })).status, 200);
  t.is((await http(app, 'POST', '/v1/payment-links/catalogue-link/webhook-secret/rotate', { key })).status, 200);
  const buyer = await fundBuyer(world, '1');
  const paid = await payingFetch(world, buyer)(created.body.share_url);
  t.is(paid.status, 200, await paid.clone().text());
  t.is((await http(app, 'DELETE', '/v1/payment-links/catalogue-link', { key })).status, 204);

  const admin = await issueKey(app, 'chain-devnet', 'admin');
  const events = (await http(app, 'GET', '/v1/events?limit=200', { key: admin })).body.data as { kind: string; phase: 'confirmed'; metadata: unknown }[];
  const kinds = new Set(events.map((e) => e.kind));
  for (const kind of [
    'payment_link.created',
    'payment_link.updated',
    'payment_link.deleted',
    'payment_link.settled',
    'payment_link.served',
    'receipt.published',
    'protocol.fee.collected',
  ]) {
    t.true(kinds.has(kind), `the flow wrote ${kind}`);
  }
  for (const e of events) t.is(checkEvent(e), null, `${e.kind}: ${JSON.stringify(e.metadata).slice(0, 300)}`);

  // The catalogue is documentation on REST (and the OpenAPI document) and GraphQL, from the one table.
  const rest = await http(app, 'GET', '/v1/event-kinds', { key });
  t.is(rest.status, 200);
  t.deepEqual(rest.body.data, eventCatalogue());
  const gql = await http(app, 'POST', '/graphql', { key, body: { query: '{ eventKinds }' } });
  t.deepEqual(gql.body.data.eventKinds, eventCatalogue());
  const openapi = (await http(app, 'GET', '/openapi.json')).body;
  t.truthy(openapi.paths['/v1/event-kinds']?.get);
});

test('checkEvent refuses an unknown kind, a phase the kind does not have and metadata off its schema', (t) => {
  t.regex(checkEvent({ kind: 'payment_link.exploded', phase: 'confirmed', metadata: {} }) ?? '', /unknown kind/);
  t.regex(checkEvent({ kind: 'payment_link.deleted', phase: 'prepared', metadata: { payment_link_id: 'x' } }) ?? '', /no phase prepared/);
  t.regex(checkEvent({ kind: 'payment_link.served', phase: 'confirmed', metadata: { payment_link_id: 'x', status: '200' } }) ?? '', /metadata/);
});

test('the catalogue documents every kind with a JSON Schema of its metadata', (t) => {
  const docs = eventCatalogue();
  t.deepEqual(
    docs.map((d) => d.kind),
    EVENT_KIND_NAMES,
  );
  for (const d of docs) {
    t.truthy(d.description);
    t.true(d.phases.length > 0);
    // one object, or (prepared or indexer-made; receipt or on_chain) a union of objects
    const shapes = (d.metadata_schema.anyOf ?? d.metadata_schema.oneOf ?? [d.metadata_schema]) as { type?: string }[];
    for (const shape of shapes) t.is(shape.type, 'object', d.kind);
  }
});
