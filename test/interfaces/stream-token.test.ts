import anyTest, { type ExecutionContext, type TestFn } from 'ava';
import { createClient as createSseClient } from 'graphql-sse';
import { createClient as createWsClient } from 'graphql-ws';
import WebSocket from 'ws';
import { AccessService } from '../../domain/access/service.ts';
import { http, issueKey, linkBody, recordAgent, startTwoInstances, type TestApp } from '../support/app.ts';
import { until } from '../support/until.ts';
import { openSse } from '../support/sse.ts';

// Browser auth for subscriptions. POST /v1/auth/stream-token → a token valid 60 s, used once (across nodes),
// for the key's principal and network; accepted as `?token=` on SSE and as graphql-ws connectionParams.token. SSE
// without valid credentials is an HTTP 401 in the envelope. graphql-sse's single connection mode works.

interface Ctx {
  a: TestApp;
  b: TestApp;
  key: string;
  agent: string;
}

const test = anyTest as TestFn<Ctx>;

const SUB = `subscription($after: ID) { events(kinds: ["payment_link.created"], after: $after) { id kind network metadata } }`;

test.before(async (t) => {
  const { a, b } = await startTwoInstances();
  const key = await issueKey(a);
  const { mint } = await recordAgent(a, key, { name: 'Streams' });
  // the first event to subscribe after
  await http(a, 'POST', '/v1/payment-links', { key, body: linkBody(mint, { label: 'first' }) });
  t.context = { a, b, key, agent: mint };
});

async function streamToken(t: ExecutionContext<Ctx>, app = t.context.a, key = t.context.key): Promise<string> {
  const res = await http(app, 'POST', '/v1/auth/stream-token', { key });
  t.is(res.status, 201, JSON.stringify(res.body));
  return res.body.token as string;
}

async function createLink(t: ExecutionContext<Ctx>, label: string): Promise<string> {
  const res = await http(t.context.a, 'POST', '/v1/payment-links', { key: t.context.key, body: linkBody(t.context.agent, { label }) });
  t.is(res.status, 201, JSON.stringify(res.body));
  return res.body.id as string;
}

/** The newest event id: subscribing `after` it replays what follows, so no event is missed while the stream attaches. */
async function anchor(t: ExecutionContext<Ctx>): Promise<string> {
  const res = await http(t.context.a, 'GET', '/v1/events?limit=1', { key: t.context.key });
  return res.body.data[0].id as string;
}

/** An EventSource-like GET (no Authorization unless given). */
const sseGet = (app: TestApp, query: string, headers: Record<string, string> = {}) => openSse(`${app.url}/graphql?${query}`, { headers });

function sseQuery(token: string | undefined, after: string): string {
  const params = new URLSearchParams({ query: SUB, variables: JSON.stringify({ after }) });
  if (token !== undefined) params.set('token', token);
  return params.toString();
}

test.serial('a stream token is issued for 60 s and opens an SSE subscription with ?token=, once', async (t) => {
  const issued = await http(t.context.a, 'POST', '/v1/auth/stream-token', { key: t.context.key });
  t.is(issued.status, 201);
  t.regex(issued.body.token, /^svc_stream_test_[0-9A-Za-z]{32}$/);
  t.is(issued.body.network, 'chain-devnet');
  t.is(issued.body.expires_in, 60);
  const lifetime = Date.parse(issued.body.expires_at) - Date.now();
  t.true(lifetime > 50_000 && lifetime <= 60_000, `expires in ${lifetime} ms`);

  const after = await anchor(t);
  const stream = await sseGet(t.context.a, sseQuery(issued.body.token, after));
  try {
    t.is(stream.status, 200);
    t.regex(String(stream.headers['content-type']), /^text\/event-stream/);
    const id = await createLink(t, 'via token');
    const payload = await stream.waitFor((m) => m.data?.data?.events?.metadata?.payment_link_id === id);
    t.is(payload.data.data.events.network, 'CHAIN_DEVNET');
  } finally {
    stream.close();
  }

  // Used: on this node and on the other node of the same database.
  for (const app of [t.context.a, t.context.b]) {
    const again = await sseGet(app, sseQuery(issued.body.token, after));
    t.is(again.status, 401);
    t.like(JSON.parse(again.body), { error: 'invalid_api_key' });
  }
});

test.serial('two nodes redeeming one token at once: exactly one accepts it', async (t) => {
  const token = await streamToken(t);
  const after = await anchor(t);
  const [one, two] = await Promise.all([sseGet(t.context.a, sseQuery(token, after)), sseGet(t.context.b, sseQuery(token, after))]);
  one.close();
  two.close();
  t.deepEqual([one.status, two.status].sort(), [200, 401]);
});

test.serial('SSE without credentials, with a bad key, a bad, expired or re-prefixed token: HTTP 401 in the envelope, no stream', async (t) => {
  const after = await anchor(t);
  const expired = await new AccessService({
    store: t.context.a.database.store,
    clock: { now: () => new Date(Date.now() - 61_000) } as never,
  }).issueStreamToken(await t.context.a.services.access.authenticate(`Bearer ${t.context.key}`));
  const mainnetToken = (await streamToken(t)).replace('svc_stream_test_', 'svc_stream_live_');
  const cases: [string, string | undefined, Record<string, string>, string][] = [
    ['no credentials', undefined, {}, 'missing_api_key'],
    ['a bad key', undefined, { authorization: 'Bearer svc_test_nope' }, 'invalid_api_key'],
    ['a malformed token', 'nope', {}, 'invalid_api_key'],
    ['an unknown token', `svc_stream_test_${'x'.repeat(32)}`, {}, 'invalid_api_key'],
    ['an expired token', expired.token, {}, 'invalid_api_key'],
    ['a token re-prefixed for another network', mainnetToken, {}, 'invalid_api_key'],
  ];
  for (const [name, token, headers, code] of cases) {
    const res = await sseGet(t.context.a, sseQuery(token, after), headers);
    t.is(res.status, 401, name);
    t.regex(String(res.headers['content-type']), /^application\/json/, name);
    const body = JSON.parse(res.body);
    t.like(body, { error: code }, name);
    t.is(typeof body.request_id, 'string', name);
  }
  // The key itself still works on SSE (Authorization header).
  const ok = await sseGet(t.context.a, sseQuery(undefined, after), { authorization: `Bearer ${t.context.key}` });
  ok.close();
  t.is(ok.status, 200);
});

test.serial('the token is the principal of its key: mutation createStreamToken over GraphQL, refused without a key', async (t) => {
  const res = await http(t.context.a, 'POST', '/graphql', {
    key: t.context.key,
    body: { query: 'mutation { createStreamToken { token network expiresIn expiresAt } }' },
  });
  t.is(res.status, 200, JSON.stringify(res.body));
  t.regex(res.body.data.createStreamToken.token, /^svc_stream_test_/);
  t.is(res.body.data.createStreamToken.expiresIn, 60);
  t.is(res.body.data.createStreamToken.network, 'CHAIN_DEVNET');
  const anonymous = await http(t.context.a, 'POST', '/v1/auth/stream-token', {});
  t.is(anonymous.status, 401);
  t.is(anonymous.body.error, 'missing_api_key');
  const mainnetKey = await issueKey(t.context.a, 'chain-mainnet');
  const mainnet = await http(t.context.a, 'POST', '/v1/auth/stream-token', { key: mainnetKey });
  t.regex(mainnet.body.token, /^svc_stream_live_/);
  t.is(mainnet.body.network, 'chain-mainnet');
});

test.serial(
  'graphql-ws with connectionParams.token receives events (and may not run queries or mutations); the spent token is refused with 4401',
  async (t) => {
    const token = await streamToken(t);
    const after = await anchor(t);
    const url = `${t.context.a.url.replace(/^http/, 'ws')}/graphql`;
    const client = createWsClient({ url, webSocketImpl: WebSocket, connectionParams: { token }, retryAttempts: 0, lazy: true });
    const payloads: any[] = [];
    let wake = () => {};
    const unsubscribe = client.subscribe(
      { query: SUB, variables: { after } },
      {
        next: (p) => {
          payloads.push(p);
          wake();
        },
        error: () => wake(),
        complete: () => {},
      },
    );
    try {
      const id = await createLink(t, 'via ws token');
      // no deadline of its own: an event that never comes is AVA's timeout to report
      await new Promise<void>((resolve) => {
        wake = () => {
          if (payloads.some((p) => p.data?.events?.metadata?.payment_link_id === id)) resolve();
        };
        wake();
      });
      // The token opened a subscription connection, not the key's powers: a mutation or a query on it is refused.
      for (const query of ['mutation { createStreamToken { token } }', '{ paymentLinks { data { id } } }']) {
        const refused = await new Promise<any>((resolve) => {
          const results: any[] = [];
          client.subscribe({ query }, { next: (r) => results.push(r), error: (e) => resolve({ errors: e }), complete: () => resolve(results[0]) });
        });
        t.is(refused?.errors?.[0]?.extensions?.code, 'forbidden', `${query}: ${JSON.stringify(refused)}`);
        t.falsy(refused?.data?.createStreamToken);
      }
    } finally {
      unsubscribe();
      await client.dispose();
    }

    const closed = await new Promise<{ code: number; reason: string }>((resolve) => {
      const socket = new WebSocket(url, 'graphql-transport-ws');
      socket.on('open', () => socket.send(JSON.stringify({ type: 'connection_init', payload: { token } })));
      socket.on('close', (code, reason) => resolve({ code, reason: reason.toString() }));
    });
    t.deepEqual(closed, { code: 4401, reason: 'invalid_api_key' });
  },
);

async function singleConnectionEvent(t: ExecutionContext<Ctx>, options: { url: string; headers?: Record<string, string> }): Promise<void> {
  const client = createSseClient({ ...options, singleConnection: true, retryAttempts: 0 });
  const after = await anchor(t);
  const payloads: any[] = [];
  let wake = () => {};
  let failed: unknown;
  const unsubscribe = client.subscribe(
    { query: SUB, variables: { after } },
    {
      next: (p) => {
        payloads.push(p);
        wake();
      },
      error: (e) => {
        failed = e;
        wake();
      },
      complete: () => {},
    },
  );
  try {
    const id = await createLink(t, 'via graphql-sse');
    // no deadline of its own: an event that never comes is AVA's timeout to report
    await new Promise<void>((resolve, reject) => {
      wake = () => {
        if (failed !== undefined) reject(failed instanceof Error ? failed : new Error(String((failed as Response)?.status ?? JSON.stringify(failed))));
        else if (payloads.some((p) => p.data?.events?.metadata?.payment_link_id === id)) resolve();
      };
      wake();
    });
    t.pass();
  } finally {
    unsubscribe();
    client.dispose();
  }
}

test.serial('graphql-sse single connection mode: PUT reserves (key or ?token=), the stream receives the subscription’s events', async (t) => {
  await singleConnectionEvent(t, { url: `${t.context.a.url}/graphql`, headers: { authorization: `Bearer ${t.context.key}` } });
  const token = await streamToken(t);
  await singleConnectionEvent(t, { url: `${t.context.a.url}/graphql?token=${token}` });

  // PUT without credentials or with the spent token: 401 in the envelope; an unknown reservation: 404.
  for (const [path, code] of [
    ['/graphql', 'missing_api_key'],
    [`/graphql?token=${token}`, 'invalid_api_key'],
  ] as const) {
    const res = await http(t.context.a, 'PUT', path);
    t.is(res.status, 401);
    t.is(res.body.error, code);
  }
  const unknown = await http(t.context.a, 'GET', '/graphql', { headers: { accept: 'text/event-stream', 'x-graphql-event-stream-token': 'nope' } });
  t.is(unknown.status, 404);
  t.is(unknown.body.error, 'not_found');
});

test.serial('a key disabled after issuing: its unused token is refused, and its open single-connection stream ends', async (t) => {
  const { a } = t.context;
  const admin = await issueKey(a, 'chain-devnet', 'admin');
  const created = await a.services.access.issueKey({ network: 'chain-devnet', role: 'user' });
  const { mint } = await recordAgent(a, created.key);
  await http(a, 'POST', '/v1/payment-links', { key: created.key, body: linkBody(mint, { label: 'anchor' }) });
  const unused = await streamToken(t, a, created.key);
  const used = await streamToken(t, a, created.key);

  const client = createSseClient({ url: `${a.url}/graphql?token=${used}`, singleConnection: true, retryAttempts: 0 });
  let ended: string | undefined;
  const received: any[] = [];
  const after = (await http(a, 'GET', '/v1/events?limit=1', { key: created.key })).body.data[0].id;
  client.subscribe(
    { query: SUB, variables: { after } },
    { next: (p) => void received.push(p), error: () => (ended = 'error'), complete: () => (ended ??= 'complete') },
  );
  try {
    const id = (await http(a, 'POST', '/v1/payment-links', { key: created.key, body: linkBody(mint, { label: 'seen' }) })).body.id;
    await until('the event on the stream', () => received.some((p) => p.data?.events?.metadata?.payment_link_id === id));
    const disabled = await http(a, 'POST', `/v1/admin/api-keys/${created.id}/disable`, { key: admin, body: {} });
    t.is(disabled.status, 200, JSON.stringify(disabled.body));
    await until('the stream ended', () => ended !== undefined);
    t.truthy(ended);
  } finally {
    client.dispose();
  }
  const refused = await sseGet(a, sseQuery(unused, after));
  t.is(refused.status, 401);
  t.like(JSON.parse(refused.body), { error: 'invalid_api_key' });
});

/** Polls `done` (events arrive on their own; this only waits for them), failing after 15 s. */
test.serial('graphql-sse single connection mode by hand: PUT, GET stream, POST operation (202), a second GET 409, DELETE completes', async (t) => {
  const { a, key } = t.context;
  const put = await fetch(`${a.url}/graphql`, { method: 'PUT', headers: { authorization: `Bearer ${key}` } });
  t.is(put.status, 201);
  const reservation = await put.text();
  const header = { 'x-graphql-event-stream-token': reservation };
  const stream = await sseGet(a, '', header);
  try {
    t.is(stream.status, 200);
    const second = await sseGet(a, '', header);
    t.is(second.status, 409);
    t.like(JSON.parse(second.body), { error: 'conflict' });
    // an EventSource names the reservation as ?token= (it cannot send the header): the same stream, so the same 409
    const byQuery = await sseGet(a, `token=${reservation}`);
    t.is(byQuery.status, 409, byQuery.body);
    t.like(JSON.parse(byQuery.body), { error: 'conflict' });

    const after = await anchor(t);
    const op = await http(a, 'POST', '/graphql', {
      headers: { ...header, accept: 'application/json' },
      body: { query: SUB, variables: { after }, extensions: { operationId: 'op1' } },
    });
    t.is(op.status, 202);
    const id = await createLink(t, 'single connection by hand');
    const message = await stream.waitFor((m) => m.data?.payload?.data?.events?.metadata?.payment_link_id === id);
    t.is(message.data.id, 'op1');
    const done = await fetch(`${a.url}/graphql?operationId=op1`, { method: 'DELETE', headers: header });
    t.is(done.status, 200);
    await stream.waitFor((m) => m.data?.id === 'op1' && m.data?.payload === undefined);
  } finally {
    stream.close();
  }
});
