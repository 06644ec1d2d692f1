import anyTest, { type ExecutionContext, type TestFn } from 'ava';
import { http, issueKey, linkBody, randomAddress, recordAgent, startTestApp, writeAgentAsset, type HttpResult, type TestApp } from '../support/app.ts';
import { toGraphqlError } from '../../interfaces/graphql/yoga.ts';
import { EVENT_FIELDS, LINK_FIELDS } from '../support/graphql.ts';
import { graphqlSse } from '../support/sse.ts';

// GraphQL over HTTP end to end (real PostgreSQL, real HTTP): queries, mutations, error extensions, auth,
// network isolation and subscriptions over SSE. graphql-ws is covered in subscriptions.test.ts.

interface Ctx {
  app: TestApp;
  key: string;
  mainnetKey: string;
  agent: string;
}

const test = anyTest as TestFn<Ctx>;

const ULID = /^[0-9A-HJKMNP-TV-Z]{26}$/;
const AGENTS_READ_LIMIT = 5;

const CREATE = `mutation Create($input: CreatePaymentLinkInput!) { createPaymentLink(input: $input) { ${LINK_FIELDS} } }`;
const UPDATE = `mutation Update($id: ID!, $input: UpdatePaymentLinkInput!) { updatePaymentLink(id: $id, input: $input) { ${LINK_FIELDS} } }`;
const GET_LINK = `query Link($id: ID!) { paymentLink(id: $id) { ${LINK_FIELDS} } }`;
const EVENTS = `query Events($kinds: [String!], $agent: String, $after: String, $first: Int) {
  events(kinds: $kinds, agent: $agent, after: $after, first: $first) { data { ${EVENT_FIELDS} } nextCursor hasMore } }`;

/** POST /graphql; `key: null` sends no Authorization header. */
function gql<T = any>(
  t: ExecutionContext<Ctx>,
  query: string,
  variables?: Record<string, unknown>,
  key: string | null = t.context.key,
): Promise<HttpResult<T>> {
  return http<T>(t.context.app, 'POST', '/graphql', { ...(key ? { key } : {}), body: { query, variables } });
}

/** The single error of a response, its extensions checked against the shared shape. */
function expectError(t: ExecutionContext<Ctx>, res: HttpResult, code: string, status: number): Record<string, any> {
  const errors = res.body?.errors as any[] | undefined;
  t.true(Array.isArray(errors) && errors.length === 1, JSON.stringify(res.body));
  const error = errors![0];
  t.is(error.extensions.code, code, JSON.stringify(error));
  t.is(error.extensions.status, status);
  t.is(typeof error.message, 'string');
  t.true(error.message.length > 0);
  t.regex(error.extensions.request_id, ULID);
  t.is(error.extensions.request_id, res.headers.get('x-svc-request-id'));
  t.false('http' in error.extensions);
  return error;
}

function linkInput(owner: string, overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return { label: 'Weather report', ownerAgent: owner, method: 'GET', price: '$0.01', response: { body: { forecast: 'sunny' } }, ...overrides };
}

async function createLink(t: ExecutionContext<Ctx>, overrides: Record<string, unknown> = {}): Promise<Record<string, any>> {
  const res = await gql(t, CREATE, { input: linkInput(t.context.agent, overrides) });
  t.falsy(res.body.errors, JSON.stringify(res.body.errors));
  return res.body.data.createPaymentLink;
}

test.before(async (t) => {
  // agents.read lowered so one test can reach it; the other tests stay far below.
  const app = await startTestApp({ env: { SVC_RATE_LIMITS: JSON.stringify({ 'agents.read': AGENTS_READ_LIMIT }) } });
  const key = await issueKey(app);
  const mainnetKey = await issueKey(app, 'chain-mainnet');
  const { mint } = await recordAgent(app, key, { name: 'Forecaster' });
  t.context = { app, key, mainnetKey, agent: mint };
});

test('recordAgent and agent go through the agent service', async (t) => {
  const { mint, owner } = await writeAgentAsset(t.context.app, 'chain-devnet', { name: 'Scout' });
  const recorded = await gql(
    t,
    `mutation($input: RecordAgentInput!) { recordAgent(input: $input) { mint network owner name uri treasury executive delegations { stableSymbol } source registeredAt provenAt } }`,
    {
      input: { mint, owner, name: 'Scout', uri: null },
    },
  );
  t.falsy(recorded.body.errors);
  const agent = recorded.body.data.recordAgent;
  t.like(agent, { mint, owner, network: 'CHAIN_DEVNET', name: 'Scout', uri: null, executive: null, delegations: [], source: 'RECORDED' });
  const rest = await http(t.context.app, 'GET', `/v1/agents/${mint}`, { key: t.context.key });
  t.is(agent.treasury, rest.body.treasury);
  t.is(agent.registeredAt, rest.body.registered_at);
  t.is(agent.provenAt, rest.body.proven_at);

  const read = await gql(t, `query($mint: String!) { agent(mint: $mint) { mint owner } }`, { mint });
  t.deepEqual(read.body.data.agent, { mint, owner });

  const missing = await gql(t, `query($mint: String!) { agent(mint: $mint) { mint } }`, { mint: await randomAddress() });
  expectError(t, missing, 'agent_not_found', 404);
  t.deepEqual(missing.body.data, { agent: null });

  const invalid = await gql(t, `mutation($input: RecordAgentInput!) { recordAgent(input: $input) { mint } }`, { input: { mint: 'not-an-address', owner } });
  const error = expectError(t, invalid, 'invalid_request', 400);
  t.true(
    error.extensions.details.issues.some((i: any) => i.path === 'mint'),
    JSON.stringify(error.extensions.details),
  );

  // an address where the ledger holds no Core asset of that owner (DECISIONS "Agents, submissions and events")
  const nothing = await gql(t, `mutation($input: RecordAgentInput!) { recordAgent(input: $input) { mint } }`, {
    input: { mint: await randomAddress(), owner },
  });
  t.like(expectError(t, nothing, 'agent_not_on_ledger', 422).extensions.details, { found: 'nothing' });
});

test('createPaymentLink returns the wire type in camelCase and records payment_link.created', async (t) => {
  const link = await createLink(t, {
    id: 'gql-weather',
    label: '  Weather report  ',
    price: '0.25 usdc',
    response: { status: 201, mimeType: 'text/plain', body: 'sunny' },
    webhookUrl: 'https://example.com/hook',
    wrapReceipt: true,
    settlePolicy: 'ON_SUCCESS',
    metadata: { upstream_url: 'https://api.example.com/weather', region: 'eu' },
    currency: null, // GraphQL null on an optional field means "not given"
  });
  t.like(link, {
    id: 'gql-weather',
    network: 'CHAIN_DEVNET',
    label: 'Weather report',
    ownerAgent: t.context.agent,
    method: 'GET',
    path: '/x/gql-weather',
    price: '0.25 usdc',
    currency: 'USDC',
    acceptsCurrencies: [],
    protocol: 'X402',
    response: { status: 201, mimeType: 'text/plain', body: 'sunny' },
    webhookUrl: 'https://example.com/hook',
    wrapReceipt: true,
    settlePolicy: 'ON_SUCCESS',
    disabled: false,
    metadata: { upstream_url: 'https://api.example.com/weather', region: 'eu' },
    counters: { callCount: 0, settledCount: 0, lastCalledAt: null, lastSettledAt: null, lastTxSig: null },
  });
  t.is(link.accepts.length, 1);
  // hosted-api §2.2–2.3: payTo is one value on the link and its accepts (the treasury); the token account its own field
  t.like(link.accepts[0], {
    scheme: 'exact',
    amount: '250000',
    currency: 'USDC',
    payTo: link.payTo,
    payToTokenAccount: link.payToTokenAccount,
    payToReady: true,
  });
  t.true(link.shareUrl.endsWith('/x/gql-weather?network=chain-devnet'));
  t.is(link.createdAt, link.updatedAt);

  // The webhook secret is answered by the create call only; reads say that one is set.
  t.regex(link.webhookSecret, /^whsec_/);
  t.true(link.webhookSecretSet);
  const read = await gql(t, GET_LINK, { id: link.id });
  t.deepEqual(
    read.body.data.paymentLink,
    { ...link, webhookSecret: null, accepts: link.accepts.map((a: object) => ({ ...a, payToReady: null })) },
    'a read does not check payToReady',
  );

  const events = await gql(t, EVENTS, { kinds: ['payment_link.created'], agent: t.context.agent, first: 200 });
  const created = events.body.data.events.data.find((e: any) => e.metadata.payment_link_id === link.id);
  t.truthy(created, 'payment_link.created recorded');
  t.like(created, { kind: 'payment_link.created', phase: 'CONFIRMED', network: 'CHAIN_DEVNET', agentAsset: t.context.agent, signature: null, slot: null });
  t.is(created.metadata.payment_link.id, link.id);

  const one = await gql(t, `query($id: ID!) { event(id: $id) { ${EVENT_FIELDS} } }`, { id: created.id });
  t.deepEqual(one.body.data.event, created);
});

test('updatePaymentLink patches, clears webhookUrl with an explicit null, and records payment_link.updated', async (t) => {
  const link = await createLink(t, { webhookUrl: 'https://example.com/hook', metadata: { a: 1 } });
  const renamed = await gql(t, UPDATE, { id: link.id, input: { label: 'Renamed', price: '$0.5', wrapReceipt: null } });
  t.falsy(renamed.body.errors, JSON.stringify(renamed.body.errors));
  t.like(renamed.body.data.updatePaymentLink, {
    label: 'Renamed',
    price: '$0.5',
    webhookUrl: 'https://example.com/hook',
    wrapReceipt: false,
    metadata: { a: 1 },
  });
  t.is(renamed.body.data.updatePaymentLink.accepts[0].amount, '500000');

  const cleared = await gql(t, UPDATE, { id: link.id, input: { webhookUrl: null, disabled: true } });
  t.like(cleared.body.data.updatePaymentLink, { webhookUrl: null, disabled: true, label: 'Renamed' });

  const events = await gql(t, EVENTS, { kinds: ['payment_link.updated'], agent: t.context.agent, first: 200 });
  const mine = events.body.data.events.data.filter((e: any) => e.metadata.payment_link_id === link.id);
  t.is(mine.length, 2);
  // newest first
  t.deepEqual(mine[0].metadata.changed.sort(), ['disabled', 'webhook_url']);
  t.deepEqual(mine[1].metadata.changed.sort(), ['label', 'price']);

  const invalid = await gql(t, UPDATE, { id: link.id, input: { webhookUrl: 'ftp://example.com' } });
  const error = expectError(t, invalid, 'invalid_request', 400);
  t.true(error.extensions.details.issues.some((i: any) => i.path === 'webhook_url'));
});

test('deletePaymentLink returns true, the link is gone, payment_link.deleted is recorded', async (t) => {
  const link = await createLink(t);
  const deleted = await gql(t, `mutation($id: ID!) { deletePaymentLink(id: $id) }`, { id: link.id });
  t.deepEqual(deleted.body, { data: { deletePaymentLink: true } });

  const read = await gql(t, GET_LINK, { id: link.id });
  expectError(t, read, 'payment_link_not_found', 404);
  t.deepEqual(read.body.data, { paymentLink: null });

  const again = await gql(t, `mutation($id: ID!) { deletePaymentLink(id: $id) }`, { id: link.id });
  expectError(t, again, 'payment_link_not_found', 404);

  const events = await gql(t, EVENTS, { kinds: ['payment_link.*'], agent: t.context.agent, first: 200 });
  const kinds = events.body.data.events.data.filter((e: any) => e.metadata.payment_link_id === link.id).map((e: any) => e.kind);
  t.deepEqual(kinds, ['payment_link.deleted', 'payment_link.created']);
});

test('paymentLinks pages newest first with first/after and filters by ownerAgent', async (t) => {
  const { mint } = await recordAgent(t.context.app, t.context.key);
  const ids: string[] = [];
  for (let i = 0; i < 3; i++) {
    const res = await gql(t, CREATE, { input: linkInput(mint, { label: `L${i}` }) });
    ids.push(res.body.data.createPaymentLink.id);
  }
  const LIST = `query($owner: String, $after: String, $first: Int) { paymentLinks(ownerAgent: $owner, after: $after, first: $first) { data { id ownerAgent } nextCursor hasMore } }`;
  const first = await gql(t, LIST, { owner: mint, first: 2 });
  const page1 = first.body.data.paymentLinks;
  t.deepEqual(
    page1.data.map((l: any) => l.id),
    [ids[2], ids[1]],
  );
  t.true(page1.hasMore);
  t.is(typeof page1.nextCursor, 'string');
  const second = await gql(t, LIST, { owner: mint, first: 2, after: page1.nextCursor });
  t.deepEqual(second.body.data.paymentLinks, { data: [{ id: ids[0], ownerAgent: mint }], nextCursor: null, hasMore: false });

  expectError(t, await gql(t, LIST, { first: 0 }), 'invalid_request', 400);
  expectError(t, await gql(t, LIST, { after: 'not a cursor' }), 'invalid_request', 400);
});

test('events pages with first/after; a bad kind pattern is invalid_request', async (t) => {
  const { mint } = await recordAgent(t.context.app, t.context.key);
  for (let i = 0; i < 3; i++) await gql(t, CREATE, { input: linkInput(mint) });
  const page1 = (await gql(t, EVENTS, { agent: mint, first: 2 })).body.data.events;
  t.is(page1.data.length, 2);
  t.true(page1.hasMore);
  const page2 = (await gql(t, EVENTS, { agent: mint, first: 2, after: page1.nextCursor })).body.data.events;
  t.is(page2.data.length, 1);
  t.false(page2.hasMore);
  const all = [...page1.data, ...page2.data];
  t.is(new Set(all.map((e: any) => e.id)).size, 3);
  t.true(all.every((e: any) => e.agentAsset === mint && e.kind === 'payment_link.created'));

  const bad = await gql(t, EVENTS, { kinds: ['payment_link.created', 'Not A Kind'] });
  const error = expectError(t, bad, 'invalid_request', 400);
  // the procedure's input names it `kind` (comma-separated patterns, as over REST)
  t.is(error.extensions.details.issues[0].path, 'kind');

  expectError(t, await gql(t, `query($id: ID!) { event(id: $id) { id } }`, { id: 'nope' }), 'event_not_found', 404);
});

test('invalid input is invalid_request with details.issues, from the shared zod schema or GraphQL itself', async (t) => {
  const badPrice = await gql(t, CREATE, { input: linkInput(t.context.agent, { price: 'abc' }) });
  const error = expectError(t, badPrice, 'invalid_request', 400);
  t.deepEqual(error.path, ['createPaymentLink']);
  t.like(error.extensions.details.issues[0], { path: 'price', code: 'invalid_price' });
  t.deepEqual(badPrice.body.data, { createPaymentLink: null });

  const tooPrecise = await gql(t, CREATE, { input: linkInput(t.context.agent, { price: '0.0000001' }) });
  t.is(expectError(t, tooPrecise, 'invalid_request', 400).extensions.details.issues[0].path, 'price');

  const badBody = await gql(t, CREATE, { input: linkInput(t.context.agent, { response: { status: 404, body: 'x' } }) });
  t.true(expectError(t, badBody, 'invalid_request', 400).extensions.details.issues.some((i: any) => i.path === 'response.status'));

  const badMetadata = await gql(t, CREATE, { input: linkInput(t.context.agent, { metadata: { upstream_url: 'not a url' } }) });
  t.true(expectError(t, badMetadata, 'invalid_request', 400).extensions.details.issues.some((i: any) => i.path === 'metadata.upstream_url'));

  // Rejected by GraphQL before any resolver runs: still invalid_request, with the GraphQL message as the issue.
  const { label: _label, ...withoutLabel } = linkInput(t.context.agent);
  const missing = await gql(t, CREATE, { input: withoutLabel });
  const missingError = expectError(t, missing, 'invalid_request', 400);
  t.regex(missingError.extensions.details.issues[0].message, /label/);

  const badEnum = await gql(t, CREATE, { input: linkInput(t.context.agent, { method: 'get' }) });
  expectError(t, badEnum, 'invalid_request', 400);

  const unknownField = await gql(t, `{ paymentLink(id: "x") { nope } }`);
  expectError(t, unknownField, 'invalid_request', 400);

  const syntax = await gql(t, `{ paymentLink(id: `);
  expectError(t, syntax, 'invalid_request', 400);

  const unknownAgent = await gql(t, CREATE, { input: linkInput(await randomAddress()) });
  t.is(expectError(t, unknownAgent, 'agent_not_found', 404).extensions.details.path, 'owner_agent');

  const taken = await createLink(t);
  expectError(t, await gql(t, CREATE, { input: linkInput(t.context.agent, { id: taken.id }) }), 'conflict', 409);
});

test('enum inputs take the UPPER_CASE GraphQL values; a wire value or an unknown value is a GraphQL validation error (400), never a 500', async (t) => {
  // the GraphQL values reach the domain as its wire values, and REST answers those
  const link = await createLink(t, { protocol: 'MPP', settlePolicy: 'ON_SUCCESS', currency: 'USDC', method: 'POST' });
  t.like(link, { protocol: 'MPP', settlePolicy: 'ON_SUCCESS', currency: 'USDC', network: 'CHAIN_DEVNET', method: 'POST' });
  const rest = await http(t.context.app, 'GET', `/v1/payment-links/${link.id}`, { key: t.context.key });
  t.like(rest.body, { protocol: 'mpp', settle_policy: 'on_success', currency: 'USDC', network: 'chain-devnet', method: 'POST' });
  // a valid symbol the network lacks reaches the domain (as USDT) and is refused there, with REST's issue path
  const mainnetOnly = await gql(t, CREATE, { input: linkInput(t.context.agent, { acceptsCurrencies: ['USDT'] }) });
  t.like(expectError(t, mainnetOnly, 'invalid_request', 400).extensions.details.issues[0], { path: 'accepts_currencies.0', code: 'invalid_currency' });

  const refused = async (res: HttpResult, value: string, enumName: string) => {
    t.not(res.status, 500);
    const error = expectError(t, res, 'invalid_request', 400);
    t.regex(error.message, new RegExp(`"${value}".*"${enumName}"|${enumName}.*${value}`), error.message);
    t.is(error.path, undefined, 'refused by validation, before any resolver');
    t.falsy(res.body.data);
  };
  // as variables: the REST wire values and lower-case symbols (REST accepts any case) are not GraphQL values
  await refused(await gql(t, CREATE, { input: linkInput(t.context.agent, { protocol: 'mpp' }) }), 'mpp', 'Protocol');
  await refused(await gql(t, CREATE, { input: linkInput(t.context.agent, { settlePolicy: 'on_success' }) }), 'on_success', 'SettlePolicy');
  await refused(await gql(t, CREATE, { input: linkInput(t.context.agent, { currency: 'usdc' }) }), 'usdc', 'StableSymbol');
  await refused(await gql(t, CREATE, { input: linkInput(t.context.agent, { acceptsCurrencies: ['USDC', 'EURC'] }) }), 'EURC', 'StableSymbol');
  // as literals in the document
  const literal = await gql(t, `{ agentRegistration(mint: "${t.context.agent}", network: chain_devnet) }`);
  await refused(literal, 'chain_devnet', 'Network');
  const quoted = await gql(t, `{ receipts(agent: "${t.context.agent}", kind: "earn") { data { nonce } } }`);
  await refused(quoted, 'earn', 'ReceiptKind');
  // and the UPPER_CASE literal is accepted
  const ok = await gql(t, `{ receipts(agent: "${t.context.agent}", kind: EARN) { data { nonce kind } } }`);
  t.falsy(ok.body.errors, JSON.stringify(ok.body.errors));
  t.deepEqual(ok.body.data.receipts.data, []);
});

test('unknown ids are payment_link_not_found', async (t) => {
  const res = await gql(t, GET_LINK, { id: 'no-such-link' });
  const error = expectError(t, res, 'payment_link_not_found', 404);
  t.deepEqual(error.extensions.details, { id: 'no-such-link' });
  expectError(t, await gql(t, UPDATE, { id: 'no-such-link', input: { label: 'x' } }), 'payment_link_not_found', 404);
});

test('no key is missing_api_key, a bad key invalid_api_key; introspection needs no key', async (t) => {
  const none = await gql(t, GET_LINK, { id: 'x' }, null);
  expectError(t, none, 'missing_api_key', 401);
  const bad = await gql(t, GET_LINK, { id: 'x' }, `svc_test_${'a'.repeat(32)}`);
  expectError(t, bad, 'invalid_api_key', 401);
  const mutation = await gql(t, CREATE, { input: linkInput(t.context.agent) }, null);
  expectError(t, mutation, 'missing_api_key', 401);

  const typename = await gql(t, `{ __typename __type(name: "PaymentLink") { name } }`, undefined, null);
  t.deepEqual(typename.body, { data: { __typename: 'Query', __type: { name: 'PaymentLink' } } });
});

test('a chain-mainnet key does not see chain-devnet links or events', async (t) => {
  const link = await createLink(t);
  const main = t.context.mainnetKey;
  expectError(t, await gql(t, GET_LINK, { id: link.id }, main), 'payment_link_not_found', 404);
  expectError(t, await gql(t, UPDATE, { id: link.id, input: { label: 'stolen' } }, main), 'payment_link_not_found', 404);
  expectError(t, await gql(t, `mutation($id: ID!) { deletePaymentLink(id: $id) }`, { id: link.id }, main), 'payment_link_not_found', 404);

  const list = await gql(t, `{ paymentLinks(first: 200) { data { id network } } }`, undefined, main);
  t.false(list.body.data.paymentLinks.data.some((l: any) => l.id === link.id));
  const events = await gql(t, EVENTS, { first: 200 }, main);
  t.true(events.body.data.events.data.every((e: any) => e.network === 'CHAIN_MAINNET'));
  // The devnet agent does not exist on mainnet either.
  expectError(t, await gql(t, CREATE, { input: linkInput(t.context.agent) }, main), 'agent_not_found', 404);

  // Still there for its owner.
  t.is((await gql(t, GET_LINK, { id: link.id })).body.data.paymentLink.label, 'Weather report');
});

test('what /graphql refuses before any GraphQL runs answers { errors } with the code: a body it cannot read, an Accept it cannot answer, a reservation asked for as JSON', async (t) => {
  const { app, key } = t.context;
  const refused = async (init: { method: string; headers: Record<string, string>; body?: string }, code: string, message: RegExp) => {
    const res = await fetch(`${app.url}/graphql`, { ...init, headers: { authorization: `Bearer ${key}`, ...init.headers } });
    const text = await res.text();
    t.is(res.status, 400, text);
    t.regex(res.headers.get('content-type') ?? '', /^application\/json/);
    const body = JSON.parse(text);
    const error = expectError(t, { status: res.status, headers: res.headers, body }, 'invalid_request', 400);
    t.like(error.extensions.details.issues[0], { path: '', code });
    t.regex(error.message, message);
  };
  await refused(
    { method: 'POST', headers: { 'content-type': 'text/plain' }, body: JSON.stringify({ query: '{ __typename }' }) },
    'unsupported_media_type',
    /Content-Type: application\/json/,
  );
  // a subscription streams: a plain JSON POST cannot carry it
  await refused(
    {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify({ query: 'subscription { events { id } }' }),
    },
    'not_acceptable',
    /text\/event-stream/,
  );
  // graphql-sse's single connection mode answers its reservation as text
  await refused({ method: 'PUT', headers: { accept: 'application/json' } }, 'not_acceptable', /Accept: text\/plain/);
});

test('GET serves queries, refuses mutations (method_not_allowed) and GraphiQL in a browser', async (t) => {
  const query = encodeURIComponent('{ paymentLinks(first: 1) { hasMore } }');
  const get = await http(t.context.app, 'GET', `/graphql?query=${query}`, { key: t.context.key });
  t.is(get.status, 200);
  t.is(typeof get.body.data.paymentLinks.hasMore, 'boolean');

  const mutation = encodeURIComponent('mutation { deletePaymentLink(id: "x") }');
  const refused = await http(t.context.app, 'GET', `/graphql?query=${mutation}`, { key: t.context.key });
  t.is(refused.status, 405);
  expectError(t, refused, 'method_not_allowed', 405);

  const page = await fetch(`${t.context.app.url}/graphql`, { headers: { accept: 'text/html' } });
  t.is(page.status, 200);
  t.regex(page.headers.get('content-type') ?? '', /text\/html/);
  t.regex(await page.text(), /graphiql/i);
});

test('the rate-limit bucket of a procedure is shared by REST and GraphQL, with the same headers and rate_limited', async (t) => {
  const key = await issueKey(t.context.app);
  const mint = await randomAddress();
  const AGENT = `query($mint: String!) { agent(mint: $mint) { mint } }`;
  for (let i = 0; i < 3; i++) {
    const rest = await http(t.context.app, 'GET', `/v1/agents/${mint}`, { key });
    t.is(rest.body.error, 'agent_not_found');
  }
  for (let i = 0; i < AGENTS_READ_LIMIT - 3; i++) {
    const res = await gql(t, AGENT, { mint }, key);
    expectError(t, res, 'agent_not_found', 404);
    t.is(res.headers.get('ratelimit-limit'), String(AGENTS_READ_LIMIT));
    t.is(res.headers.get('ratelimit-remaining'), String(AGENTS_READ_LIMIT - 4 - i));
  }
  const limited = await gql(t, AGENT, { mint }, key);
  const error = expectError(t, limited, 'rate_limited', 429);
  t.like(error.extensions.details, { bucket: 'agents.read', limit: AGENTS_READ_LIMIT });
  t.is(limited.headers.get('ratelimit-remaining'), '0');
  t.truthy(limited.headers.get('retry-after'));
  // Other buckets of the same key are untouched.
  t.falsy((await gql(t, `{ paymentLinks(first: 1) { hasMore } }`, undefined, key)).body.errors);
});

test('an Idempotency-Key on a GraphQL mutation replays the first outcome', async (t) => {
  const { mint } = await recordAgent(t.context.app, t.context.key);
  const send = () =>
    http(t.context.app, 'POST', '/graphql', {
      key: t.context.key,
      headers: { 'idempotency-key': `gql-${mint}` },
      body: { query: CREATE, variables: { input: linkInput(mint) } },
    });
  const first = await send();
  const second = await send();
  t.falsy(first.body.errors, JSON.stringify(first.body.errors));
  t.deepEqual(second.body.data, first.body.data);
  t.is(second.headers.get('idempotent-replayed'), 'true');
  t.is(first.headers.get('idempotent-replayed'), null);
  const links = await gql(t, `query($owner: String) { paymentLinks(ownerAgent: $owner) { data { id } } }`, { owner: mint });
  t.deepEqual(links.body.data.paymentLinks.data, [{ id: first.body.data.createPaymentLink.id }]);
});

test('unexpected errors are masked to internal_error and logged once with the request id', (t) => {
  const logged: object[] = [];
  const error = toGraphqlError(new Error('connection refused at 10.0.0.7'), 'REQ1', { error: (obj) => logged.push(obj) });
  t.is(error.message.includes('10.0.0.7'), false);
  t.deepEqual(error.extensions, { code: 'internal_error', status: 500, request_id: 'REQ1' });
  t.is(logged.length, 1);
  t.like(logged[0], { request_id: 'REQ1' });
  // formatting twice neither logs twice nor changes the error
  t.is(toGraphqlError(error, 'REQ1', { error: (obj) => logged.push(obj) }), error);
  t.is(logged.length, 1);
});

// ---------------------------------------------------------------------------------------------------------------
// SSE (GraphQL over Server-Sent Events, Yoga's distinct-connections mode)

/** A subscription over SSE, answered once its head arrived. */
async function openSse(t: ExecutionContext<Ctx>, query: string, variables: Record<string, unknown>, key: string | null) {
  const stream = graphqlSse(t.context.app, { key, query, variables });
  await stream.opened;
  return stream;
}

test('an SSE subscription receives events of its network, with the same auth', async (t) => {
  const { mint } = await recordAgent(t.context.app, t.context.key);
  const anchor = await createLink(t, { ownerAgent: mint, label: 'anchor' });
  const anchorEvent = (await gql(t, EVENTS, { agent: mint, first: 1 })).body.data.events.data[0];
  t.is(anchorEvent.metadata.payment_link_id, anchor.id);

  const SUB = `subscription($kinds: [String!], $agent: String, $after: ID) { events(kinds: $kinds, agent: $agent, after: $after) { id kind agentAsset metadata } }`;
  // `after` makes the test independent of when the stream attaches: anything after the anchor is replayed or live.
  const stream = await openSse(t, SUB, { kinds: ['payment_link.*'], agent: mint, after: anchorEvent.id }, t.context.key);
  try {
    t.is(stream.status, 200);
    t.regex(stream.headers['content-type'] ?? '', /text\/event-stream/);
    t.regex(String(stream.headers['x-svc-request-id']), ULID);
    t.is(stream.headers['ratelimit-limit'], '600', 'the subscription counted in the events.read bucket');
    const created = await http(t.context.app, 'POST', '/v1/payment-links', { key: t.context.key, body: linkBody(mint, { label: 'over SSE' }) });
    t.is(created.status, 201);
    const message = await stream.next();
    t.is(message?.event, 'next');
    t.like(message?.data.data.events, { kind: 'payment_link.created', agentAsset: mint, metadata: { payment_link_id: created.body.id } });
  } finally {
    stream.close();
  }

  // No stream without credentials: HTTP 401 in the envelope (EventSource does not reconnect to that).
  const anonymous = await http(t.context.app, 'POST', '/graphql', { headers: { accept: 'text/event-stream' }, body: { query: SUB, variables: {} } });
  t.is(anonymous.status, 401);
  t.like(anonymous.body, { error: 'missing_api_key' });

  const unknownCursor = await openSse(t, SUB, { after: 'no-such-event' }, t.context.key);
  try {
    const message = await unknownCursor.next();
    t.is(message?.data.errors[0].extensions.code, 'event_not_found');
    t.is((await unknownCursor.next())?.event, 'complete');
  } finally {
    unknownCursor.close();
  }
});
