import anyTest, { type ExecutionContext, type TestFn } from 'ava';
import { createClient, errorCode, type Client } from '../../interfaces/client/index.ts';
import { http, issueKey, linkBody, randomAddress, recordAgent, startTestApp, type TestApp } from '../support/app.ts';
import { asGraphqlEnums, EVENT_FIELDS, LINK_FIELDS } from '../support/graphql.ts';

// One domain, three front doors: the same payment link reads identically over REST, tRPC and GraphQL, and the same
// bad input fails with the same error code on all three (ARCHITECTURE "One definition per thing").

interface Ctx {
  app: TestApp;
  key: string;
  agent: string;
  trpc: Client;
}

const test = anyTest as TestFn<Ctx>;

const snake = (key: string) => key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
const camel = (key: string) => key.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());

function snakeKeys(value: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [snake(k), v]));
}

/** GraphQL PaymentLink → the REST wire shape. `response` and `metadata` keep their keys (mimeType is camelCase on the wire). */
function linkToWire(link: Record<string, any>): Record<string, unknown> {
  const wire = snakeKeys(link);
  wire.counters = snakeKeys(link.counters);
  wire.accepts = (link.accepts as Record<string, unknown>[]).map(snakeKeys);
  return wire;
}

function gql(t: ExecutionContext<Ctx>, query: string, variables?: Record<string, unknown>, key = t.context.key) {
  return http(t.context.app, 'POST', '/graphql', { key, body: { query, variables } });
}

async function typeFields(t: ExecutionContext<Ctx>, name: string): Promise<string[]> {
  const res = await gql(t, `query($name: String!) { __type(name: $name) { fields { name } } }`, { name });
  return (res.body.data.__type.fields as { name: string }[]).map((f) => f.name);
}

test.before(async (t) => {
  const app = await startTestApp();
  const key = await issueKey(app);
  const { mint } = await recordAgent(app, key, { name: 'Parity' });
  t.context = { app, key, agent: mint, trpc: createClient({ url: app.url, apiKey: key }) };
});

test('a payment link created over REST reads the same over REST, tRPC and GraphQL, every field', async (t) => {
  const created = await http(t.context.app, 'POST', '/v1/payment-links', {
    key: t.context.key,
    body: linkBody(t.context.agent, {
      id: 'parity-link',
      label: 'Parity check',
      method: 'POST',
      price: '1.5 usdc',
      response: { status: 202, mimeType: 'text/plain', body: 'accepted' },
      webhook_url: 'https://example.com/hooks/parity',
      wrap_receipt: true,
      settle_policy: 'on_success',
      access_window: '90m',
      request_binding: 'required',
      protocol: 'mpp',
      metadata: { upstream_url: 'https://api.example.com/run', pricing_type: 'fixed', nested: { a: [1, 2] } },
    }),
  });
  t.is(created.status, 201, JSON.stringify(created.body));

  const rest = await http(t.context.app, 'GET', '/v1/payment-links/parity-link', { key: t.context.key });
  t.is(rest.status, 200);
  const trpc = await t.context.trpc.paymentLinks.get.query({ id: 'parity-link' });
  const graphql = await gql(t, `query($id: ID!) { paymentLink(id: $id) { ${LINK_FIELDS} } }`, { id: 'parity-link' });
  t.falsy(graphql.body.errors, JSON.stringify(graphql.body.errors));

  // The webhook secret is in the create answer only: REST and tRPC reads omit it, GraphQL reads answer null. The
  // create answer says whether each accept's token account is ready; a read does not check (pay_to_ready: null).
  const { webhook_secret: secret, ...createdRead } = created.body;
  t.regex(secret, /^whsec_/);
  t.deepEqual(rest.body, { ...createdRead, accepts: createdRead.accepts.map((a: object) => ({ ...a, pay_to_ready: null })) });
  t.true(created.body.accepts.every((a: { pay_to_ready: unknown }) => a.pay_to_ready === true));
  t.deepEqual(trpc, rest.body);
  const { webhook_secret: graphqlSecret, ...graphqlRead } = linkToWire(graphql.body.data.paymentLink);
  t.is(graphqlSecret, null);
  // GraphQL answers the enums' UPPER_CASE values (its enum convention); the CAIP-2 network of each accept is a string on both
  t.deepEqual(graphqlRead, asGraphqlEnums(rest.body, ['network', 'protocol', 'settle_policy', 'request_binding']));
  t.like(graphqlRead, { network: 'CHAIN_DEVNET', protocol: 'MPP', settle_policy: 'ON_SUCCESS', request_binding: 'REQUIRED' });
  t.like(rest.body, { access_window: '90m', request_binding: 'required' });

  // The GraphQL type exposes every wire field of the create answer (and nothing else), nested types included.
  const restKeys = (o: object) => Object.keys(o).sort();
  t.deepEqual((await typeFields(t, 'PaymentLink')).map(snake).sort(), restKeys(created.body));
  t.deepEqual((await typeFields(t, 'PaymentLinkCounters')).map(snake).sort(), restKeys(rest.body.counters));
  t.deepEqual((await typeFields(t, 'AcceptEntry')).map(snake).sort(), restKeys(rest.body.accepts[0]));
  t.deepEqual((await typeFields(t, 'LinkResponse')).sort(), restKeys(rest.body.response));
});

test('an event reads the same over REST, tRPC and GraphQL, every field', async (t) => {
  const link = await http(t.context.app, 'POST', '/v1/payment-links', { key: t.context.key, body: linkBody(t.context.agent, { id: 'parity-event' }) });
  t.is(link.status, 201);
  const list = await http(t.context.app, 'GET', `/v1/events?kind=payment_link.created&agent=${t.context.agent}&limit=200`, { key: t.context.key });
  t.is(list.status, 200);
  const id = list.body.data.find((e: any) => e.metadata.payment_link_id === 'parity-event')?.id as string;
  t.truthy(id);
  const rest = await http(t.context.app, 'GET', `/v1/events/${id}`, { key: t.context.key });
  const trpc = await t.context.trpc.events.get.query({ id });
  const graphql = await gql(t, `query($id: ID!) { event(id: $id) { ${EVENT_FIELDS} } }`, { id });
  t.deepEqual(trpc, rest.body);
  t.deepEqual(snakeKeys(graphql.body.data.event), asGraphqlEnums(rest.body, ['network', 'phase', 'phases.phase']));
  t.deepEqual((await typeFields(t, 'Event')).map(snake).sort(), Object.keys(rest.body).sort());
});

interface Case {
  title: string;
  body: (owner: string) => Record<string, unknown>;
  code: string;
}

const CASES: Case[] = [
  { title: 'bad price "abc"', body: (o) => linkBody(o, { price: 'abc' }), code: 'invalid_request' },
  { title: 'price with 7 decimals', body: (o) => linkBody(o, { price: '0.0000001' }), code: 'invalid_request' },
  { title: 'zero price', body: (o) => linkBody(o, { price: '0' }), code: 'invalid_request' },
  {
    title: 'missing label',
    body: (o) => {
      const { label: _l, ...rest } = linkBody(o);
      return rest;
    },
    code: 'invalid_request',
  },
  { title: 'blank label', body: (o) => linkBody(o, { label: '   ' }), code: 'invalid_request' },
  { title: 'lower-case method', body: (o) => linkBody(o, { method: 'get' }), code: 'invalid_request' },
  { title: 'owner_agent not an address', body: (o) => linkBody(o, { owner_agent: 'not-an-address' }), code: 'invalid_request' },
  { title: 'webhook_url not http(s)', body: (o) => linkBody(o, { webhook_url: 'ftp://example.com/x' }), code: 'invalid_request' },
  { title: 'response status outside 2xx', body: (o) => linkBody(o, { response: { status: 500, body: 'x' } }), code: 'invalid_request' },
  { title: 'currency unknown on the network', body: (o) => linkBody(o, { currency: 'USDT' }), code: 'invalid_request' },
];

for (const c of CASES) {
  test(`same error code on REST, tRPC and GraphQL: ${c.title}`, async (t) => {
    const body = c.body(t.context.agent);
    const rest = await http(t.context.app, 'POST', '/v1/payment-links', { key: t.context.key, body });
    const trpcError = await t.context.trpc.paymentLinks.create.mutate(body as never).then(
      () => undefined,
      (err: unknown) => err,
    );
    const input = Object.fromEntries(Object.entries(body).map(([k, v]) => [camel(k), v]));
    const graphql = await gql(t, `mutation($input: CreatePaymentLinkInput!) { createPaymentLink(input: $input) { id } }`, { input });

    t.is(rest.body.error, c.code, JSON.stringify(rest.body));
    t.is(errorCode(trpcError), c.code, String(trpcError));
    t.is(graphql.body.errors?.[0]?.extensions?.code, c.code, JSON.stringify(graphql.body));
  });
}

test('same error code on all three: unknown owner agent, unknown link, unknown key', async (t) => {
  const body = linkBody(await randomAddress());
  const input = Object.fromEntries(Object.entries(body).map(([k, v]) => [camel(k), v]));
  const CREATE = `mutation($input: CreatePaymentLinkInput!) { createPaymentLink(input: $input) { id } }`;
  const GET = `query($id: ID!) { paymentLink(id: $id) { id } }`;
  const codes = async (rest: Promise<{ body: any }>, trpc: Promise<unknown>, graphql: Promise<{ body: any }>) => [
    (await rest).body.error,
    errorCode(
      await trpc.then(
        () => undefined,
        (e: unknown) => e,
      ),
    ),
    (await graphql).body.errors?.[0]?.extensions?.code,
  ];

  t.deepEqual(
    await codes(
      http(t.context.app, 'POST', '/v1/payment-links', { key: t.context.key, body }),
      t.context.trpc.paymentLinks.create.mutate(body as never),
      gql(t, CREATE, { input }),
    ),
    ['agent_not_found', 'agent_not_found', 'agent_not_found'],
  );
  t.deepEqual(
    await codes(
      http(t.context.app, 'GET', '/v1/payment-links/no-such-link', { key: t.context.key }),
      t.context.trpc.paymentLinks.get.query({ id: 'no-such-link' }),
      gql(t, GET, { id: 'no-such-link' }),
    ),
    ['payment_link_not_found', 'payment_link_not_found', 'payment_link_not_found'],
  );
  const unknownKey = `svc_test_${'z'.repeat(32)}`;
  t.deepEqual(
    await codes(
      http(t.context.app, 'GET', '/v1/payment-links/no-such-link', { key: unknownKey }),
      createClient({ url: t.context.app.url, apiKey: unknownKey }).paymentLinks.get.query({ id: 'no-such-link' }),
      gql(t, GET, { id: 'no-such-link' }, unknownKey),
    ),
    ['invalid_api_key', 'invalid_api_key', 'invalid_api_key'],
  );
});
