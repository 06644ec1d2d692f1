import anyTest, { type ExecutionContext, type TestFn } from 'ava';
import { createClient } from 'graphql-ws';
import WebSocket from 'ws';
import { http, issueKey, linkBody, recordAgent, startTestApp, type HttpResult, type TestApp } from '../support/app.ts';
import { EVENT_FIELDS, LINK_FIELDS } from '../support/graphql.ts';
import { graphqlSse } from '../support/sse.ts';
import { GRAPHQL_LIMITS } from '../../interfaces/policies/graphql-limits.ts';
import { DomainError, ERROR_CODES } from '../../domain/shared/errors.ts';
import { restError, toDomainError } from '../../interfaces/errors.ts';

// One query must not stall everyone: a GraphQL operation is measured before it runs (tokens, aliases, depth,
// estimated cost) and refused with query_too_complex in the standard extensions; its cost is counted against the key's
// `graphql` bucket; an answer over the byte cap is replaced by the error. Over HTTP POST/GET, SSE and graphql-ws.

interface Ctx {
  app: TestApp;
  key: string;
  agent: string;
}

const test = anyTest as TestFn<Ctx>;
const ULID = /^[0-9A-HJKMNP-TV-Z]{26}$/;
/** lowered so the cost-counting test reaches it; one small operation takes one slot */
const GRAPHQL_LIMIT = 60;

/** The document of the report: 1,000 aliases of paymentLinks(first: 200), about 72 KB. */
const ATTACK = `{ ${Array.from({ length: 1000 }, (_, i) => `a${i}: paymentLinks(first: 200) { data { id label price payTo shareUrl } }`).join(' ')} }`;

/** What a dashboard asks for: a full page of links, a full page of events. */
const DASHBOARD = `query Dashboard { paymentLinks(first: 200) { data { ${LINK_FIELDS} } nextCursor hasMore }
  events(first: 200) { data { ${EVENT_FIELDS} } nextCursor hasMore } }`;

/**
 * Cost of `paymentLinks(first: 200) { data { LINK_FIELDS } }`: 1 + 200 × (data 1 + 60), where LINK_FIELDS is 12 scalars
 * + response (1 + 3) + 8 scalars + accepts (1 + 3 × 8, a short list) + counters (1 + 5) + 5 scalars = 60.
 */
const FULL_PAGE = `paymentLinks(first: 200) { data { ${LINK_FIELDS} } }`;
const FULL_PAGE_COST = 12_201;
/** slots one full page takes from the graphql bucket: ceil(cost / 500) */
const FULL_PAGE_SLOTS = Math.ceil(FULL_PAGE_COST / 500);

function gql(t: ExecutionContext<Ctx>, query: string, key: string | null = t.context.key, variables?: Record<string, unknown>): Promise<HttpResult> {
  return http(t.context.app, 'POST', '/graphql', { ...(key ? { key } : {}), body: { query, variables } });
}

function aliases(n: number): string {
  return `{ ${Array.from({ length: n }, (_, i) => `l${i}: paymentLinks(first: 1) { hasMore }`).join(' ')} }`;
}

/**
 * The single query_too_complex error of an HTTP answer, in the shared extensions. A refused document is a GraphQL
 * request error, answered with graphql-over-http's status for one whichever limit refused it: 200 under
 * application/json (what `gql` asks for), 400 under application/graphql-response+json.
 */
function expectTooComplex(t: ExecutionContext<Ctx>, res: HttpResult, limit: string, status = 200): Record<string, any> {
  t.is(res.status, status, JSON.stringify(res.body).slice(0, 500));
  const errors = res.body?.errors as any[];
  t.is(errors?.length, 1, JSON.stringify(res.body).slice(0, 500));
  const error = errors[0];
  t.is(error.extensions.code, 'query_too_complex');
  t.is(error.extensions.status, 400);
  t.is(error.extensions.details.limit, limit);
  t.regex(error.extensions.request_id, ULID);
  t.is(error.extensions.request_id, res.headers.get('x-svc-request-id'));
  t.false('http' in error.extensions);
  t.falsy(res.body.data, 'nothing ran');
  return error;
}

test.before(async (t) => {
  const app = await startTestApp({ env: { SVC_RATE_LIMITS: JSON.stringify({ graphql: GRAPHQL_LIMIT }) } });
  const key = await issueKey(app);
  const { mint } = await recordAgent(app, key);
  for (let i = 0; i < 3; i++) {
    const res = await http(app, 'POST', '/v1/payment-links', { key, body: linkBody(mint, { label: `link ${i}` }) });
    if (res.status !== 201) throw new Error(JSON.stringify(res.body));
  }
  t.context = { app, key, agent: mint };
});

test('the attack document (1,000 aliases of paymentLinks(first: 200)) is refused before anything runs', async (t) => {
  t.true(ATTACK.length > 60_000, `${ATTACK.length} bytes`);
  const key = await issueKey(t.context.app);
  const started = performance.now();
  const res = await gql(t, ATTACK, key);
  t.log(`refused in ${Math.round(performance.now() - started)} ms`);
  const error = expectTooComplex(t, res, 'tokens', 200);
  t.is(error.extensions.details.max, GRAPHQL_LIMITS.maxTokens);
  const strict = await http(t.context.app, 'POST', '/graphql', { key, body: { query: ATTACK }, headers: { accept: 'application/graphql-response+json' } });
  expectTooComplex(t, strict, 'tokens', 400);
  // No resolver ran: the key's window of the paymentLinks procedure (default) is untouched.
  const rest = await http(t.context.app, 'GET', '/v1/payment-links?limit=1', { key });
  t.is(rest.status, 200);
  t.is(rest.headers.get('ratelimit-remaining'), '599');
});

test('a dashboard query (a full page of links and one of events) still works', async (t) => {
  // An admin key of the network: the links are another principal's (a user key would see none of them).
  const res = await gql(t, DASHBOARD, await issueKey(t.context.app, 'chain-devnet', 'admin'));
  t.is(res.status, 200);
  t.falsy(res.body.errors, JSON.stringify(res.body.errors));
  t.is(res.body.data.paymentLinks.data.length, 3);
  t.true(res.body.data.events.data.length >= 3);
  // GraphiQL's introspection query (15 levels deep) is within the limits too.
  const { getIntrospectionQuery } = await import('graphql');
  const schema = await gql(t, getIntrospectionQuery(), null);
  t.is(schema.status, 200);
  t.truthy(schema.body.data.__schema);
});

test('aliases: 20 are fine, 21 are query_too_complex', async (t) => {
  const ok = await gql(t, aliases(20));
  t.is(ok.status, 200);
  t.falsy(ok.body.errors);
  t.is(Object.keys(ok.body.data).length, 20);
  const refused = expectTooComplex(t, await gql(t, aliases(21)), 'aliases');
  t.like(refused.extensions.details, { max: 20, actual: 21 });
  const strict = await http(t.context.app, 'POST', '/graphql', {
    key: t.context.key,
    body: { query: aliases(21) },
    headers: { accept: 'application/graphql-response+json' },
  });
  expectTooComplex(t, strict, 'aliases', 400);
  // through a fragment spread twice: counted per use
  const fragment = `fragment F on PaymentLinkPage { ${Array.from({ length: 11 }, (_, i) => `h${i}: hasMore`).join(' ')} }
    { paymentLinks(first: 1) { ...F } again: paymentLinks(first: 1) { ...F } }`;
  t.like(expectTooComplex(t, await gql(t, fragment), 'aliases').extensions.details, { actual: 23 });
});

test('depth: nesting past 16 levels is query_too_complex (introspection included)', async (t) => {
  const nest = (levels: number) => `{ __schema { types { fields { type ${'{ ofType '.repeat(levels)}{ name }${' }'.repeat(levels)} } } } }`;
  // __schema types fields type + n × ofType + name
  const ok = await gql(t, nest(11));
  t.is(ok.status, 200, JSON.stringify(ok.body).slice(0, 300));
  t.like(expectTooComplex(t, await gql(t, nest(13)), 'depth').extensions.details, { max: 16, actual: 18 });
});

test('cost: page size counts; three full pages are over the limit; variables are taken into account', async (t) => {
  t.true(2 * FULL_PAGE_COST < GRAPHQL_LIMITS.maxCost && 3 * FULL_PAGE_COST > GRAPHQL_LIMITS.maxCost);
  // fresh keys: every admitted operation here takes up to 49 of the key's 60 graphql slots
  const two = await gql(t, `{ a: ${FULL_PAGE} b: ${FULL_PAGE} }`, await issueKey(t.context.app));
  t.is(two.status, 200);
  t.falsy(two.body.errors);
  const three = expectTooComplex(t, await gql(t, `{ a: ${FULL_PAGE} b: ${FULL_PAGE} c: ${FULL_PAGE} }`), 'cost');
  const strict = await http(t.context.app, 'POST', '/graphql', {
    key: t.context.key,
    body: { query: `{ a: ${FULL_PAGE} b: ${FULL_PAGE} c: ${FULL_PAGE} }` },
    headers: { accept: 'application/graphql-response+json' },
  });
  expectTooComplex(t, strict, 'cost', 400);
  t.like(three.extensions.details, { max: GRAPHQL_LIMITS.maxCost, actual: 3 * FULL_PAGE_COST });

  // the page size comes from a variable: 100 per page fits three times, 200 does not
  const paged = `query($n: Int) { a: paymentLinks(first: $n) { data { ${LINK_FIELDS} } } b: paymentLinks(first: $n) { data { ${LINK_FIELDS} } }
    c: paymentLinks(first: $n) { data { ${LINK_FIELDS} } } }`;
  t.falsy((await gql(t, paged, await issueKey(t.context.app), { n: 100 })).body.errors);
  expectTooComplex(t, await gql(t, paged, t.context.key, { n: 200 }), 'cost');
});

test('the limits apply to GET, SSE and graphql-ws alike', async (t) => {
  const { app, key } = t.context;
  // GET
  const get = await http(app, 'GET', `/graphql?query=${encodeURIComponent(aliases(21))}`, { key });
  expectTooComplex(t, get, 'aliases');

  // SSE: the subscription is refused before it starts, with the error as its one payload
  const manyAliases = `subscription { events { ${Array.from({ length: 21 }, (_, i) => `i${i}: id`).join(' ')} } }`;
  const sse = await sseOnce(app, manyAliases, key);
  t.is(sse.errors?.[0]?.extensions?.code, 'query_too_complex', JSON.stringify(sse));
  t.is(sse.errors?.[0]?.extensions?.details?.limit, 'aliases');

  // graphql-ws: a query and a subscription over the socket
  const client = createClient({
    url: `${app.url.replace(/^http/, 'ws')}/graphql`,
    webSocketImpl: WebSocket,
    connectionParams: { authorization: key },
    retryAttempts: 0,
  });
  try {
    const results: any[] = [];
    for (const query of [`{ a: ${FULL_PAGE} b: ${FULL_PAGE} c: ${FULL_PAGE} }`, manyAliases, ATTACK]) {
      results.push(
        await new Promise((resolve, reject) => {
          let first: unknown;
          client.subscribe(
            { query },
            { next: (r) => (first ??= r), error: (e) => resolve(e), complete: () => (first ? resolve(first) : reject(new Error('no result'))) },
          );
        }),
      );
    }
    const codes = results.map((r) => (Array.isArray(r) ? r[0] : r.errors?.[0])?.extensions);
    t.like(codes[0], { code: 'query_too_complex', details: { limit: 'cost' } });
    t.like(codes[1], { code: 'query_too_complex', details: { limit: 'aliases' } });
    t.like(codes[2], { code: 'query_too_complex', details: { limit: 'tokens' } });
    for (const c of codes) t.false('http' in c, 'no HTTP hint over the socket');
  } finally {
    await client.dispose();
  }
});

test("an operation's cost is counted against the key's graphql bucket (ceil(cost / 500) slots)", async (t) => {
  const key = await issueKey(t.context.app);
  const small = await gql(t, '{ paymentLinks(first: 1) { hasMore } }', key);
  t.is(small.status, 200);
  t.is(small.headers.get('ratelimit-limit'), '600', 'the headers of the last decision: the procedure’s default bucket');

  // A full page costs 12,201: 25 slots. With the small one, 1 + 2 × 25 = 51 of 60 are taken; the third full page is refused.
  for (let i = 0; i < 2; i++) t.falsy((await gql(t, `{ ${FULL_PAGE} }`, key)).body.errors);
  const refused = await gql(t, `{ ${FULL_PAGE} }`, key);
  t.is(refused.status, 429, JSON.stringify(refused.body).slice(0, 300));
  const error = refused.body.errors[0];
  t.is(error.extensions.code, 'rate_limited');
  t.like(error.extensions.details, { bucket: 'graphql', limit: GRAPHQL_LIMIT });
  t.truthy(refused.headers.get('retry-after'));
  t.is(refused.headers.get('ratelimit-remaining'), String(GRAPHQL_LIMIT - 1 - 2 * FULL_PAGE_SLOTS));
  t.falsy(refused.body.data);
  // 9 slots are left: small operations still run
  t.falsy((await gql(t, '{ paymentLinks(first: 1) { hasMore } }', key)).body.errors);
});

test('an answer over the byte cap is replaced by query_too_complex, never sent', async (t) => {
  // Five links of about 900 KB each, on chain-mainnet so the other tests' pages stay small: a cheap query, a 4.5 MB answer.
  const key = await issueKey(t.context.app, 'chain-mainnet');
  const { mint } = await recordAgent(t.context.app, key);
  for (let i = 0; i < 5; i++) {
    const res = await http(t.context.app, 'POST', '/v1/payment-links', {
      key,
      body: linkBody(mint, { label: `big ${i}`, response: { body: { blob: 'x'.repeat(900_000) } } }),
    });
    t.is(res.status, 201, JSON.stringify(res.body).slice(0, 300));
  }
  const big = await gql(t, '{ paymentLinks(first: 10) { data { id response { body } } } }', key);
  const error = expectTooComplex(t, big, 'response_bytes');
  t.true(error.extensions.details.actual > GRAPHQL_LIMITS.maxResponseBytes);
  t.true(Number(big.headers.get('content-length') ?? 0) < 10_000, 'the error, not the data');
  // under the cap: fine
  const one = await gql(t, '{ paymentLinks(first: 1) { data { id response { body } } } }', key);
  t.is(one.status, 200);
  t.is(one.body.data.paymentLinks.data.length, 1);
});

test('query_too_complex is one code of the error table: REST envelope and tRPC code from the same row', (t) => {
  t.deepEqual(ERROR_CODES.query_too_complex, { status: 400, trpc: 'BAD_REQUEST' });
  const error = new DomainError('query_too_complex', 'too big', { limit: 'cost', max: 1, actual: 2 });
  t.deepEqual(restError(error, 'REQ'), {
    status: 400,
    body: { error: 'query_too_complex', message: 'too big', details: { limit: 'cost', max: 1, actual: 2 }, request_id: 'REQ' },
  });
  t.is(toDomainError(error).error.code, 'query_too_complex');
});

/** Opens an SSE subscription and returns its first payload. */
async function sseOnce(app: TestApp, query: string, key: string): Promise<any> {
  const stream = graphqlSse(app, { key, query });
  try {
    return (await stream.waitFor((m) => (m.event === 'next' || m.event === 'message') && m.data !== null)).data;
  } finally {
    stream.close();
  }
}
