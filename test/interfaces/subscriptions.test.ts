import anyTest, { type ExecutionContext, type TestFn } from 'ava';
import { createClient, type Client } from 'graphql-ws';
import WebSocket from 'ws';
import { http, issueKey, linkBody, recordAgent, startTestApp, type TestApp, writeAgentAsset } from '../support/app.ts';

// graphql-ws across two API nodes on one database: an event committed through node B reaches a subscriber on node A
// (LISTEN/NOTIFY), a reconnect with `after` replays exactly what was missed, then continues live; networks are
// isolated; a bad key is refused at connect.

interface Ctx {
  a: TestApp;
  b: TestApp;
  key: string;
  mainnetKey: string;
}

const test = anyTest as TestFn<Ctx>;

const SUB = `subscription($kinds: [String!], $agent: String, $after: ID) {
  events(kinds: $kinds, agent: $agent, after: $after) { id kind network agentAsset metadata }
}`;

interface ReceivedEvent {
  id: string;
  kind: string;
  network: string;
  agentAsset: string | null;
  metadata: { payment_link_id?: string };
}

interface Subscriber {
  client: Client;
  events: ReceivedEvent[];
  errors: unknown[];
  /**
   * Resolves with the first event (from index `from`) matching; rejects once the subscription reports an error. No
   * deadline of its own: a delivery that never comes is AVA's timeout to report.
   */
  waitFor(match: (e: ReceivedEvent) => boolean, from?: number): Promise<ReceivedEvent>;
  close(): Promise<void>;
}

function wsUrl(app: TestApp): string {
  return `${app.url.replace(/^http/, 'ws')}/graphql`;
}

function subscribe(app: TestApp, authorization: string | undefined, variables: Record<string, unknown>): Subscriber {
  const client = createClient({
    url: wsUrl(app),
    webSocketImpl: WebSocket,
    connectionParams: authorization === undefined ? {} : { authorization },
    retryAttempts: 0,
  });
  const events: ReceivedEvent[] = [];
  const errors: unknown[] = [];
  const waiters = new Set<() => void>();
  const wake = () => {
    for (const w of waiters) w();
  };
  const unsubscribe = client.subscribe<{ events: ReceivedEvent }>(
    { query: SUB, variables },
    {
      next: (result) => {
        if (result.errors) errors.push(...result.errors);
        if (result.data?.events) events.push(result.data.events);
        wake();
      },
      error: (err) => {
        errors.push(err);
        wake();
      },
      complete: () => wake(),
    },
  );
  return {
    client,
    events,
    errors,
    waitFor(match, from = 0) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const found = events.slice(from).find(match);
          if (found) {
            done();
            resolve(found);
          } else if (errors.length) {
            done();
            reject(new Error(`subscription failed: ${JSON.stringify(errors)}`));
          }
        };
        const done = () => waiters.delete(check);
        waiters.add(check);
        check();
      });
    },
    async close() {
      unsubscribe();
      await client.dispose();
    },
  };
}

async function createLink(app: TestApp, key: string, owner: string, label = 'Weather report'): Promise<string> {
  const res = await http(app, 'POST', '/v1/payment-links', { key, body: linkBody(owner, { label }) });
  if (res.status !== 201) throw new Error(`create failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.id as string;
}

/**
 * A subscription without `after` is live only once the server has attached it, which the protocol does not
 * acknowledge: create warm-up links through node B until one arrives.
 */
async function untilLive(t: ExecutionContext<Ctx>, sub: Subscriber, key: string, owner: string): Promise<void> {
  const warmUps = new Set<unknown>();
  let live = false;
  const arrived = sub
    .waitFor((e) => warmUps.has(e.metadata.payment_link_id), sub.events.length)
    .finally(() => {
      live = true;
    });
  arrived.catch(() => {}); // awaited below; the race must not leave it unhandled
  // one more warm-up link every half second (a pace, not a deadline) until any of them arrives
  while (!live) {
    warmUps.add(await createLink(t.context.b, key, owner, 'warm-up'));
    await Promise.race([arrived, new Promise((r) => setTimeout(r, 500))]);
  }
  await arrived;
}

test.before(async (t) => {
  const a = await startTestApp();
  let b: TestApp | undefined;
  try {
    b = await startTestApp({ databaseUrl: a.database.url });
  } catch (e) {
    await a.close();
    throw e;
  }
  t.context = { a, b, key: await issueKey(a), mainnetKey: await issueKey(a, 'chain-mainnet') };
});

test('an event committed on node B reaches a subscriber on node A; a reconnect with after misses nothing', async (t) => {
  const { a, b, key } = t.context;
  const { mint } = await recordAgent(b, key);

  // The bare key works as connectionParams.authorization.
  const first = subscribe(a, key, { kinds: ['payment_link.*'], agent: mint });
  let lastId: string;
  try {
    await untilLive(t, first, key, mint);
    const from = first.events.length;
    const started = Date.now();
    const id = await createLink(b, key, mint, 'timed');
    const event = await first.waitFor((e) => e.metadata.payment_link_id === id, from);
    // how fast is measured by the benchmarks (test/bench), not asserted here: a loaded machine would only make it flaky
    t.log(`B → A delivery: ${Date.now() - started} ms`);
    t.like(event, { kind: 'payment_link.created', network: 'CHAIN_DEVNET', agentAsset: mint });
    t.is(first.events.length, from + 1, 'exactly one event for one create');
    lastId = event.id;
  } finally {
    await first.close();
  }

  // Disconnected: three links created through B.
  const missed: string[] = [];
  for (let i = 0; i < 3; i++) missed.push(await createLink(b, key, mint, `missed ${i}`));

  // "Bearer <key>" works too.
  const second = subscribe(a, `Bearer ${key}`, { kinds: ['payment_link.*'], agent: mint, after: lastId });
  try {
    await second.waitFor((e) => e.metadata.payment_link_id === missed[2]);
    t.deepEqual(
      second.events.map((e) => e.metadata.payment_link_id),
      missed,
      'exactly the missed events, in commit order',
    );
    // Then live: one more through B arrives after the replay, once.
    const live = await createLink(b, key, mint, 'live again');
    await second.waitFor((e) => e.metadata.payment_link_id === live);
    // Nothing more arrives: a later marker event comes next, with nothing (a late duplicate) before it.
    const marker = await createLink(b, key, mint, 'marker');
    await second.waitFor((e) => e.metadata.payment_link_id === marker);
    t.deepEqual(
      second.events.map((e) => e.metadata.payment_link_id),
      [...missed, live, marker],
    );
    t.is(new Set(second.events.map((e) => e.id)).size, 5, 'no duplicate');
    t.true(second.events.every((e) => e.kind === 'payment_link.created'));
    const ids = second.events.map((e) => e.id);
    t.deepEqual([...ids].sort(), ids, 'ULIDs in order');
    t.deepEqual(second.errors, []);
  } finally {
    await second.close();
  }
});

test('a chain-mainnet subscriber does not receive chain-devnet events', async (t) => {
  const { a, b, key, mainnetKey } = t.context;
  // One agent recorded on both networks, so only the network tells the events apart.
  // recorded through B: its ledgers hold the assets
  const { mint, owner } = await writeAgentAsset(b, 'chain-devnet');
  await writeAgentAsset(b, 'chain-mainnet', { mint, owner });
  for (const k of [key, mainnetKey]) {
    const res = await http(b, 'POST', '/v1/agents/record', { key: k, body: { mint, owner } });
    t.is(res.status, 200);
  }
  const mainnet = subscribe(a, mainnetKey, { agent: mint });
  const devnet = subscribe(a, key, { agent: mint });
  try {
    await untilLive(t, mainnet, mainnetKey, mint);
    await untilLive(t, devnet, key, mint);
    const mainnetBefore = mainnet.events.length;
    const devnetBefore = devnet.events.length;

    const devnetLink = await createLink(b, key, mint, 'devnet only');
    await devnet.waitFor((e) => e.metadata.payment_link_id === devnetLink, devnetBefore);
    const mainnetLink = await createLink(b, mainnetKey, mint, 'mainnet only');
    await mainnet.waitFor((e) => e.metadata.payment_link_id === mainnetLink, mainnetBefore);
    // Nothing else arrives: a later marker on each network comes next, with nothing from the other network before it.
    const devnetMarker = await createLink(b, key, mint, 'devnet marker');
    const mainnetMarker = await createLink(b, mainnetKey, mint, 'mainnet marker');
    await devnet.waitFor((e) => e.metadata.payment_link_id === devnetMarker, devnetBefore);
    await mainnet.waitFor((e) => e.metadata.payment_link_id === mainnetMarker, mainnetBefore);

    t.deepEqual(
      mainnet.events.slice(mainnetBefore).map((e) => e.metadata.payment_link_id),
      [mainnetLink, mainnetMarker],
    );
    t.true(mainnet.events.every((e) => e.network === 'CHAIN_MAINNET'));
    t.deepEqual(
      devnet.events.slice(devnetBefore).map((e) => e.metadata.payment_link_id),
      [devnetLink, devnetMarker],
    );
    t.true(devnet.events.every((e) => e.network === 'CHAIN_DEVNET'));
  } finally {
    await mainnet.close();
    await devnet.close();
  }
});

test('a missing or bad key is refused at connect with close code 4401 and the error code as reason', async (t) => {
  const { a } = t.context;
  const cases: [string | undefined, string][] = [
    [undefined, 'missing_api_key'],
    [`svc_test_${'x'.repeat(32)}`, 'invalid_api_key'],
    ['Bearer not-a-key', 'invalid_api_key'],
  ];
  for (const [authorization, code] of cases) {
    const sub = subscribe(a, authorization, {});
    try {
      const closed = (await sub.waitFor(() => false).catch(() => sub.errors[0])) as { code?: number; reason?: string };
      t.is(closed?.code, 4401, JSON.stringify(closed));
      t.is(closed?.reason, code);
      t.deepEqual(sub.events, []);
    } finally {
      await sub.close();
    }
  }
});

test('subscription errors arrive as GraphQL errors with extensions.code, on an open connection', async (t) => {
  const { a, key } = t.context;
  const badKinds = subscribe(a, key, { kinds: ['NOT A KIND'] });
  const badCursor = subscribe(a, key, { after: 'no-such-event' });
  // the arguments are checked by GET /v1/events' zod schema (ListEventsInput): an agent filter over 64 characters
  const badAgent = subscribe(a, key, { agent: 'x'.repeat(65) });
  try {
    for (const [sub, code, path] of [
      [badKinds, 'invalid_request', 'kinds.0'],
      [badCursor, 'event_not_found', undefined],
      [badAgent, 'invalid_request', 'agent'],
    ] as const) {
      await sub.waitFor(() => false).catch(() => undefined); // resolves once the error has arrived
      const [error] = sub.errors as { extensions?: { code?: string; request_id?: string; details?: { issues?: { path: string }[] } } }[];
      t.is(error?.extensions?.code, code, JSON.stringify(sub.errors));
      t.is(error?.extensions?.request_id?.length, 26);
      if (path) t.is(error?.extensions?.details?.issues?.[0]?.path, path, JSON.stringify(sub.errors));
    }
    // Validation errors come back as the protocol's error message, with the same extensions.
    const invalid = await new Promise<unknown>((resolve) => {
      badKinds.client.subscribe({ query: 'subscription { nope }' }, { next: () => {}, error: resolve, complete: () => resolve(undefined) });
    });
    t.is((invalid as { extensions?: { code?: string } }[])[0]?.extensions?.code, 'invalid_request');
    t.false('http' in ((invalid as { extensions: object }[])[0]?.extensions ?? {}));
  } finally {
    await badKinds.close();
    await badCursor.close();
    await badAgent.close();
  }
});

test('queries and mutations run over graphql-ws too, with the connection key', async (t) => {
  const { a, key } = t.context;
  const { mint } = await recordAgent(a, key);
  const client = createClient({ url: wsUrl(a), webSocketImpl: WebSocket, connectionParams: { authorization: key }, retryAttempts: 0 });
  const once = async (query: string, variables: Record<string, unknown>) => {
    const iterator = client.iterate<any>({ query, variables });
    const { value } = await iterator.next();
    await iterator.return?.();
    return value;
  };
  try {
    const created = await once(`mutation($input: CreatePaymentLinkInput!) { createPaymentLink(input: $input) { id ownerAgent } }`, {
      input: { label: 'over ws', ownerAgent: mint, method: 'GET', price: '$0.02', response: { body: 'ok' } },
    });
    t.is(created.data.createPaymentLink.ownerAgent, mint);
    const read = await once(`query($id: ID!) { paymentLink(id: $id) { id price } }`, { id: created.data.createPaymentLink.id });
    t.deepEqual(read.data.paymentLink, { id: created.data.createPaymentLink.id, price: '$0.02' });
    const missing = await once(`query($id: ID!) { paymentLink(id: $id) { id } }`, { id: 'no-such-link' });
    t.is(missing.errors[0].extensions.code, 'payment_link_not_found');
  } finally {
    await client.dispose();
  }
});
