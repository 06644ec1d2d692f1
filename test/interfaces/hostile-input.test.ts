import anyTest, { type ExecutionContext, type TestFn } from 'ava';
import { request as rawRequest } from 'node:http';
import { http, issueKey, linkBody, randomAddress, recordAgent, startTestApp, type HttpResult, type TestApp } from '../support/app.ts';
import { graphqlSse } from '../support/sse.ts';

// Hostile input answers 4xx with the envelope, never 500: each known hostile request, over real HTTP.

const test = anyTest as TestFn<{ app: TestApp; key: string; admin: string; owner: string }>;

const ULID = /^[0-9A-HJKMNP-TV-Z]{26}$/;

/** A 4xx in the envelope of hosted-api §7 whose request_id is the X-Svc-Request-Id header. */
function expectError(t: ExecutionContext, res: HttpResult, status: number, code: string): Record<string, any> {
  t.is(res.status, status, JSON.stringify(res.body));
  t.is(res.body?.error, code, JSON.stringify(res.body));
  t.is(typeof res.body?.message, 'string');
  const id = res.headers.get('x-svc-request-id');
  t.regex(id ?? '', ULID);
  t.is(res.body?.request_id, id);
  return res.body;
}

function expectIssueAt(t: ExecutionContext, body: Record<string, any>, path: string, code?: string): void {
  const issues = (body.details?.issues ?? []) as { path: string; code: string }[];
  t.true(
    issues.some((i) => i.path === path && (code === undefined || i.code === code)),
    `issue at ${path}${code ? ` (${code})` : ''}: ${JSON.stringify(issues)}`,
  );
}

test.before(async (t) => {
  const app = await startTestApp();
  const key = await issueKey(app);
  const admin = await issueKey(app, 'chain-devnet', 'admin');
  const { mint } = await recordAgent(app, key);
  t.context = { app, key, admin, owner: mint };
});

// ── NUL bytes and lone surrogates ──────────────────────────────────────────────────────────────────────────────────

test('a NUL byte in a path parameter is invalid_request at that parameter, not a database error', async (t) => {
  const { app, key } = t.context;
  for (const path of ['/v1/events/%00', '/v1/payment-links/%00', '/v1/agents/%00', '/v1/events/a%00b']) {
    const body = expectError(t, await http(app, 'GET', path, { key }), 400, 'invalid_request');
    expectIssueAt(t, body, path.startsWith('/v1/agents') ? 'mint' : 'id', 'invalid_text');
  }
});

test('a NUL byte in a query parameter is invalid_request at that parameter', async (t) => {
  const { app, key } = t.context;
  const body = expectError(t, await http(app, 'GET', '/v1/events?kind=%00', { key }), 400, 'invalid_request');
  expectIssueAt(t, body, 'kind', 'invalid_text');
  const agent = expectError(t, await http(app, 'GET', '/v1/events?agent=x%00y', { key }), 400, 'invalid_request');
  expectIssueAt(t, agent, 'agent', 'invalid_text');
});

test('a NUL byte in a label or name on create-link, record-agent and create-key is invalid_request with its path', async (t) => {
  const { app, key, admin, owner } = t.context;
  const link = expectError(t, await http(app, 'POST', '/v1/payment-links', { key, body: linkBody(owner, { label: '\u0000' }) }), 400, 'invalid_request');
  expectIssueAt(t, link, 'label', 'invalid_text');
  const agent = expectError(
    t,
    await http(app, 'POST', '/v1/agents/record', { key, body: { mint: await randomAddress(), owner: await randomAddress(), name: 'a\u0000' } }),
    400,
    'invalid_request',
  );
  expectIssueAt(t, agent, 'name', 'invalid_text');
  const created = expectError(
    t,
    await http(app, 'POST', '/v1/admin/api-keys', { key: admin, body: { network: 'chain-devnet', label: '\u0000' } }),
    400,
    'invalid_request',
  );
  expectIssueAt(t, created, 'label', 'invalid_text');
});

test('a NUL byte nested in a free-form body (response body, metadata keys) is refused with its path', async (t) => {
  const { app, key, owner } = t.context;
  const nested = expectError(
    t,
    await http(app, 'POST', '/v1/payment-links', { key, body: linkBody(owner, { response: { body: { list: ['ok', 'x\u0000'] } } }) }),
    400,
    'invalid_request',
  );
  expectIssueAt(t, nested, 'response.body.list.1', 'invalid_text');
  const keyed = expectError(
    t,
    await http(app, 'POST', '/v1/payment-links', { key, body: linkBody(owner, { metadata: { 'a\u0000': 1 } }) }),
    400,
    'invalid_request',
  );
  t.regex(JSON.stringify(keyed.details.issues), /invalid_text/);
});

test('a lone surrogate in a label is invalid_request; a well-formed pair is kept', async (t) => {
  const { app, key, owner } = t.context;
  // JSON.stringify writes a lone surrogate as the escape \ud800, which is what a hostile client sends.
  for (const label of ['\ud800', 'a\udc00b', 'x\ud83d']) {
    const body = expectError(t, await http(app, 'POST', '/v1/payment-links', { key, body: linkBody(owner, { label }) }), 400, 'invalid_request');
    expectIssueAt(t, body, 'label', 'invalid_text');
  }
  const ok = await http(app, 'POST', '/v1/payment-links', { key, body: linkBody(owner, { label: 'weather \ud83c\udf24' }) });
  t.is(ok.status, 201, JSON.stringify(ok.body));
  t.is(ok.body.label, 'weather \ud83c\udf24');
});

test('tRPC and GraphQL refuse a NUL byte the same way', async (t) => {
  const { app, key, owner } = t.context;
  const trpc = await fetch(`${app.url}/trpc/events.get?input=${encodeURIComponent(JSON.stringify({ id: '\u0000' }))}`, {
    headers: { authorization: `Bearer ${key}` },
  });
  const trpcBody = (await trpc.json()) as any;
  t.is(trpc.status, 400, JSON.stringify(trpcBody));
  t.is(trpcBody.error.data.code, 'invalid_request');
  t.is(trpcBody.error.data.request_id, trpc.headers.get('x-svc-request-id'));

  const gql = await http(app, 'POST', '/graphql', {
    key,
    body: {
      query: 'mutation($input: CreatePaymentLinkInput!) { createPaymentLink(input: $input) { id } }',
      variables: { input: { label: '\u0000', ownerAgent: owner, method: 'GET', price: '$0.01', response: { body: {} } } },
    },
  });
  t.is(gql.status, 200, JSON.stringify(gql.body));
  t.is(gql.body.errors?.[0]?.extensions?.code, 'invalid_request', JSON.stringify(gql.body));
});

test('a GraphQL subscription refuses a NUL byte in after before the store sees it', async (t) => {
  const { app, key } = t.context;
  const stream = graphqlSse(app, { key, query: 'subscription($after: ID) { events(after: $after) { id } }', variables: { after: '\u0000' } });
  try {
    const { data: payload } = await stream.waitFor((m) => m.data !== null);
    t.is(payload.errors?.[0]?.extensions?.code, 'invalid_request', JSON.stringify(payload));
    t.is(payload.errors?.[0]?.extensions?.request_id, stream.headers['x-svc-request-id']);
  } finally {
    stream.close();
  }
});

test('nesting deeper than 64 levels is invalid_request (too_deep), not a stack overflow', async (t) => {
  const { app, key, owner } = t.context;
  // 200,000 levels fit in 1 MiB; every recursive walker (schemas, hashing for Idempotency-Key) would overflow.
  const deep = `${'['.repeat(200_000)}${']'.repeat(200_000)}`;
  const body = JSON.stringify(linkBody(owner, { response: { body: { x: '__DEEP__' } } })).replace('"__DEEP__"', deep);
  for (const headers of [{}, { 'idempotency-key': 'deep-1' }] as Record<string, string>[]) {
    const res = await http(app, 'POST', '/v1/payment-links', { key, body, headers });
    const error = expectError(t, res, 400, 'invalid_request');
    t.regex(JSON.stringify(error.details.issues), /too_deep/);
  }
  const ok = await http(app, 'POST', '/v1/payment-links', { key, body: linkBody(owner, { response: { body: { a: [[[[{ b: [1] }]]]] } } }) });
  t.is(ok.status, 201, JSON.stringify(ok.body));
});

test('the paywall answers payment_link_not_found for an id holding a NUL byte', async (t) => {
  const { app } = t.context;
  for (const path of ['/x/%00', '/x/a%00', '/x/%00?network=chain-devnet', '/x/%F0%9F%8C%A4', `/x/${'d'.repeat(65)}`]) {
    expectError(t, await http(app, 'GET', path), 404, 'payment_link_not_found');
  }
  // Not UTF-8 at all (an encoded lone surrogate): the URL itself is malformed.
  expectError(t, await http(app, 'GET', '/x/%ED%A0%80'), 400, 'invalid_request');
});

// ── Atomic amounts fit u64 ──────────────────────────────────────────────────────────────────────────────────────────

const HUGE = '11111111111111111111111111111111';

test('a price whose atomic amount exceeds u64 is invalid_request on parse-price, create, PATCH and preview', async (t) => {
  const { app, key, owner } = t.context;
  const parsed = expectError(t, await http(app, 'POST', '/v1/seller/parse-price', { key, body: { price: HUGE } }), 400, 'invalid_request');
  expectIssueAt(t, parsed, 'price', 'invalid_price');
  const created = expectError(t, await http(app, 'POST', '/v1/payment-links', { key, body: linkBody(owner, { price: HUGE }) }), 400, 'invalid_request');
  expectIssueAt(t, created, 'price', 'invalid_price');
  const preview = expectError(
    t,
    await http(app, 'POST', '/v1/payment-links/preview', { key, body: { owner_agent: owner, method: 'GET', price: HUGE } }),
    400,
    'invalid_request',
  );
  expectIssueAt(t, preview, 'price', 'invalid_price');

  const link = await http(app, 'POST', '/v1/payment-links', { key, body: linkBody(owner) });
  t.is(link.status, 201);
  const patched = expectError(t, await http(app, 'PATCH', `/v1/payment-links/${link.body.id}`, { key, body: { price: HUGE } }), 400, 'invalid_request');
  expectIssueAt(t, patched, 'price', 'invalid_price');
});

test('the largest u64 atomic amount is accepted and one more is refused', async (t) => {
  const { app, key } = t.context;
  // USDC has 6 decimals: u64 max 18446744073709551615 atomic = 18446744073709.551615 USDC.
  const max = await http(app, 'POST', '/v1/seller/parse-price', { key, body: { price: '18446744073709.551615' } });
  t.is(max.status, 200, JSON.stringify(max.body));
  t.is(max.body.amount_atomic, '18446744073709551615');
  expectError(t, await http(app, 'POST', '/v1/seller/parse-price', { key, body: { price: '18446744073709.551616' } }), 400, 'invalid_request');
});

// ── Faucet ─────────────────────────────────────────────────────────────────────────────────────────────────────────

test('the faucet refuses the system program address (and amounts past u64) with invalid_request', async (t) => {
  const { app, key } = t.context;
  const sys = expectError(
    t,
    await http(app, 'POST', '/v1/dev/faucet', { key, body: { address: '11111111111111111111111111111111', sol: '0.001' } }),
    400,
    'invalid_request',
  );
  expectIssueAt(t, sys, 'address');
  const to = await randomAddress();
  const sol = expectError(
    t,
    await http(app, 'POST', '/v1/dev/faucet', { key, body: { address: to, sol: '99999999999999999999.999999999' } }),
    400,
    'invalid_request',
  );
  expectIssueAt(t, sol, 'sol');
  const amount = expectError(
    t,
    await http(app, 'POST', '/v1/dev/faucet', { key, body: { address: to, token: 'USDC', amount: '99999999999999999999.999999' } }),
    400,
    'invalid_request',
  );
  expectIssueAt(t, amount, 'amount');
  const ok = await http(app, 'POST', '/v1/dev/faucet', { key, body: { address: to, sol: '0.001' } });
  t.is(ok.status, 200, JSON.stringify(ok.body));
});

// ── tRPC and GraphQL transport errors ──────────────────────────────────────────────────────────────────────────────

test('tRPC POST with content-type text/plain is a 4xx with the request id, not 500 "unknown"', async (t) => {
  const { app, key } = t.context;
  for (const body of ['{"price":"$1"}', 'not json', '']) {
    const res = await fetch(`${app.url}/trpc/seller.parsePrice`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'text/plain' },
      body,
    });
    const json = (await res.json()) as any;
    t.true(res.status >= 400 && res.status < 500, `${res.status} ${JSON.stringify(json)}`);
    t.is(json.error?.data?.request_id, res.headers.get('x-svc-request-id'), JSON.stringify(json));
    t.not(json.error?.data?.code, 'internal_error');
  }
});

test('GraphQL GET with unparsable variables is invalid_request, not internal_error', async (t) => {
  const { app, key } = t.context;
  for (const variables of ['{', '[1]', '"x"', 'null']) {
    const res = await http(app, 'GET', `/graphql?query=${encodeURIComponent('{__typename}')}&variables=${encodeURIComponent(variables)}`, { key });
    t.true(res.status < 500, `${variables}: ${res.status} ${JSON.stringify(res.body)}`);
    if (res.body?.errors) {
      t.is(res.body.errors[0].extensions.code, 'invalid_request', `${variables}: ${JSON.stringify(res.body)}`);
      t.is(res.body.errors[0].extensions.request_id, res.headers.get('x-svc-request-id'));
    }
  }
  const bad = await http(app, 'GET', `/graphql?query=${encodeURIComponent('{__typename}')}&variables=%7B`, { key });
  t.is(bad.status, 400, JSON.stringify(bad.body));
  t.is(bad.body.errors[0].extensions.code, 'invalid_request');
  const post = await http(app, 'POST', '/graphql', { key, body: '{"query":"{__typename}","variables":"{"}' });
  t.true(post.status >= 400 && post.status < 500, JSON.stringify(post.body));
  t.is(post.body.errors[0].extensions.code, 'invalid_request');
});

test('a number beyond a double (1e400) is invalid_request, with or without an Idempotency-Key', async (t) => {
  const { app, key } = t.context;
  for (const headers of [{}, { 'idempotency-key': 'huge-number' }] as Record<string, string>[]) {
    const res = await http(app, 'POST', '/v1/seller/parse-price', { key, body: '{"price":"$1","x":[1e400]}', headers });
    const body = expectError(t, res, 400, 'invalid_request');
    expectIssueAt(t, body, 'x.0', 'invalid_number');
  }
});

test('a repeated GraphQL syntax error names each request its own id', async (t) => {
  const { app, key } = t.context;
  const ids = new Set<string>();
  for (let i = 0; i < 3; i++) {
    const res = await http(app, 'POST', '/graphql', { key, body: { query: '{ paymentLink(id: ' } });
    t.is(res.body.errors?.[0]?.extensions?.code, 'invalid_request', JSON.stringify(res.body));
    t.is(res.body.errors[0].extensions.request_id, res.headers.get('x-svc-request-id'));
    ids.add(res.body.errors[0].extensions.request_id);
  }
  t.is(ids.size, 3);
});

test('what fastify refuses under /trpc (a body type it cannot parse, a malformed URL) answers in tRPC error shape', async (t) => {
  const { app, key } = t.context;
  for (const [path, contentType] of [
    ['/trpc/seller.parsePrice', 'application/x-www-form-urlencoded'],
    ['/trpc/seller.parsePrice', 'application/octet-stream'],
    ['/trpc/seller.parsePrice%ED%A0%80', 'application/json'],
  ]) {
    const res = await fetch(`${app.url}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': contentType! },
      body: '{"price":"$1"}',
    });
    const json = (await res.json()) as any;
    t.is(res.status, 400, JSON.stringify(json));
    t.is(json.error?.data?.code, 'invalid_request', JSON.stringify(json));
    t.is(json.error.code, -32600);
    t.is(json.error.data.request_id, res.headers.get('x-svc-request-id'));
  }
});

// ── Oversized request lines and headers ────────────────────────────────────────────────────────────────────────────

/** Raw HTTP/1.1 so the request line and headers are exactly what a hostile client sends. */
function raw(
  app: TestApp,
  path: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: string }> {
  const url = new URL(app.url);
  return new Promise((resolve, reject) => {
    const req = rawRequest({ host: url.hostname, port: url.port, path, method: 'GET', headers }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

test('a request line or headers over 16 KiB answer 431 headers_too_large in the envelope with X-Svc-Request-Id', async (t) => {
  const { app, key } = t.context;
  for (const [path, headers] of [
    [`/v1/events?kind=${'a'.repeat(20_000)}`, { authorization: `Bearer ${key}` }],
    ['/v1/health', { authorization: `Bearer ${key}`, 'x-filler': 'b'.repeat(20_000) }],
    [`/x/${'c'.repeat(20_000)}`, {}],
  ] as const) {
    const res = await raw(app, path, headers);
    t.is(res.status, 431, res.body);
    const body = JSON.parse(res.body);
    t.is(body.error, 'headers_too_large');
    t.is(typeof body.message, 'string');
    t.regex(String(res.headers['x-svc-request-id']), ULID);
    t.is(body.request_id, res.headers['x-svc-request-id']);
    t.regex(String(res.headers['content-type']), /application\/json/);
  }
});
