import anyTest, { type TestFn } from 'ava';
import { createClient, type Client } from 'graphql-ws';
import WebSocket from 'ws';
import { fanOutCounters } from '../../interfaces/graphql/fanout.ts';
import { http, issueKey, linkBody, recordAgent, startTestApp, type TestApp } from '../support/app.ts';
import { until } from '../support/until.ts';
import { graphqlSse } from '../support/sse.ts';

// Live fan-out. Many subscriptions with different scopes and filters, multiplexed over graphql-ws
// sockets and SSE, each get exactly the events REST lists for the same key and filter (no leak, no miss, in order);
// one distinct subscription (document, variables, principal scope) is executed once per event however many sockets
// hold it; 1,000 subscriptions miss nothing and end on shutdown through one registry (no abort listener each).

const test = anyTest as TestFn<{ apps: TestApp[] }>;
// Hundreds of subscriptions of one key: its rate-limit buckets are raised (each subscription counts once).
const LIMITS = { SVC_RATE_LIMITS: JSON.stringify({ 'events.read': 100_000, graphql: 100_000, default: 100_000 }) };
test.serial.before((t) => {
  t.context = { apps: [] };
});

const DOC_FULL = `subscription($kinds: [String!], $agent: String, $after: ID) {
  events(kinds: $kinds, agent: $agent, after: $after) { id kind agentAsset metadata }
}`;
const DOC_SHORT = `subscription($kinds: [String!], $agent: String, $after: ID) { events(kinds: $kinds, agent: $agent, after: $after) { id kind } }`;

interface Received {
  id: string;
  kind: string;
  agentAsset?: string | null;
  metadata?: { payment_link_id?: string };
}

interface Sub {
  events: Received[];
  errors: unknown[];
  completed: boolean;
}

function wsClient(app: TestApp, key: string): Client {
  return createClient({
    url: `${app.url.replace(/^http/, 'ws')}/graphql`,
    webSocketImpl: WebSocket,
    connectionParams: { authorization: key },
    retryAttempts: 0,
    lazy: false,
    onNonLazyError: () => {},
  });
}

function subscribeOn(client: Client, query: string, variables: Record<string, unknown>): Sub {
  const sub: Sub = { events: [], errors: [], completed: false };
  client.subscribe<{ events: Received }>(
    { query, variables },
    {
      next: (r) => {
        if (r.errors) sub.errors.push(...r.errors);
        if (r.data?.events) sub.events.push(r.data.events);
      },
      error: (e) => sub.errors.push(e),
      complete: () => (sub.completed = true),
    },
  );
  return sub;
}

/** An SSE subscription; `events` fills as `next` messages arrive. */
function sse(app: TestApp, key: string, query: string, variables: Record<string, unknown>): Sub & { close(): void } {
  const sub: Sub & { close(): void } = { events: [], errors: [], completed: false, close: () => stream.close() };
  const stream = graphqlSse(app, {
    key,
    query,
    variables,
    onMessage: (m) => {
      if (m.event !== 'next' || !m.data) return;
      const r = m.data as { data?: { events?: Received }; errors?: unknown[] };
      if (r.errors) sub.errors.push(...r.errors);
      if (r.data?.events) sub.events.push(r.data.events);
    },
  });
  void stream.closed.then(() => (sub.completed = true));
  return sub;
}

async function createLink(app: TestApp, key: string, agent: string, label: string): Promise<string> {
  const res = await http(app, 'POST', '/v1/payment-links', { key, body: linkBody(agent, { label }) });
  if (res.status !== 201) throw new Error(`create failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.id as string;
}

/** The newest event the key may read (the `after` every subscription of that key starts from). */
async function newestEvent(app: TestApp, key: string, agent: string): Promise<string> {
  await createLink(app, key, agent, 'start');
  const res = await http(app, 'GET', '/v1/events?limit=1', { key });
  return res.body.data[0].id as string;
}

/** What REST lists for the key and filter after the event `after`, oldest first. */
async function expected(app: TestApp, key: string, filter: { kinds?: string[]; agent?: string }, after: string): Promise<string[]> {
  const q = new URLSearchParams({ limit: '100' });
  if (filter.kinds) q.set('kind', filter.kinds.join(','));
  if (filter.agent) q.set('agent', filter.agent);
  const res = await http(app, 'GET', `/v1/events?${q}`, { key });
  if (res.status !== 200) throw new Error(`list failed: ${res.status}`);
  const ids = (res.body.data as { id: string }[]).map((e) => e.id).filter((id) => id > after);
  return ids.reverse();
}

test.serial('many subscriptions with different scopes and filters each get exactly their events, over graphql-ws and SSE', async (t) => {
  const app = await startTestApp({ env: LIMITS });
  t.context.apps.push(app);
  const keyA = await issueKey(app);
  const keyB = await issueKey(app);
  const admin = await issueKey(app, 'chain-devnet', 'admin');
  const a1 = (await recordAgent(app, keyA)).mint;
  const a2 = (await recordAgent(app, keyA)).mint;
  const b1 = (await recordAgent(app, keyB)).mint;
  const after = { A: await newestEvent(app, keyA, a1), B: await newestEvent(app, keyB, b1), admin: await newestEvent(app, admin, a1) };
  const keys = { A: keyA, B: keyB, admin };

  type Who = keyof typeof keys;
  const variants: { who: Who; filter: { kinds?: string[]; agent?: string } }[] = [
    { who: 'A', filter: {} },
    { who: 'A', filter: { kinds: ['payment_link.created'] } },
    { who: 'A', filter: { kinds: ['payment_link.*'] } },
    { who: 'A', filter: { kinds: ['payment_link.created', 'payment_link.deleted'] } },
    { who: 'A', filter: { agent: a1 } },
    { who: 'A', filter: { agent: a2, kinds: ['payment_link.updated'] } },
    { who: 'A', filter: { agent: b1 } }, // another principal's agent: nothing
    { who: 'B', filter: {} },
    { who: 'B', filter: { kinds: ['payment_link.deleted'] } },
    { who: 'B', filter: { agent: b1 } },
    { who: 'admin', filter: {} },
    { who: 'admin', filter: { kinds: ['payment_link.updated', 'payment_link.deleted'] } },
  ];

  // 20 sockets per principal, each holding every variant of its principal, in two documents: 240 subscriptions in
  // 24 groups, plus one SSE subscription per variant.
  const clients: Client[] = [];
  const subs: { variant: number; sub: Sub; how: string }[] = [];
  for (const who of ['A', 'B', 'admin'] as const) {
    for (let s = 0; s < 20; s++) {
      const client = wsClient(app, keys[who]);
      clients.push(client);
      variants.forEach((v, i) => {
        if (v.who !== who) return;
        const doc = s % 2 ? DOC_SHORT : DOC_FULL;
        subs.push({ variant: i, how: `ws ${who}#${s}`, sub: subscribeOn(client, doc, { ...v.filter, after: after[who] }) });
      });
    }
  }
  const sses = variants.map((v, i) => {
    const sub = sse(app, keys[v.who], DOC_FULL, { ...v.filter, after: after[v.who] });
    subs.push({ variant: i, how: `sse ${v.who}`, sub });
    return sub;
  });

  try {
    // Writes: created, updated and deleted links of both principals on three agents.
    const linksA: string[] = [];
    const linksB: string[] = [];
    for (let i = 0; i < 4; i++) {
      linksA.push(await createLink(app, keyA, i % 2 ? a2 : a1, `a${i}`));
      linksB.push(await createLink(app, keyB, b1, `b${i}`));
    }
    for (const id of linksA.slice(0, 3)) t.is((await http(app, 'PATCH', `/v1/payment-links/${id}`, { key: keyA, body: { label: 'renamed' } })).status, 200);
    t.is((await http(app, 'DELETE', `/v1/payment-links/${linksA[3]}`, { key: keyA })).status, 204);
    const lastB = await createLink(app, keyB, b1, 'b-last');
    t.is((await http(app, 'DELETE', `/v1/payment-links/${lastB}`, { key: keyB })).status, 204);
    // Barriers: the last writes, one each variant's filter matches (but the one that sees nothing), so a subscription
    // that has its last event has everything before it — a group delivers in commit order — and anything extra (a leak,
    // a duplicate) is already in its list, not still on its way. No time is waited.
    await createLink(app, keyA, a1, 'barrier'); // A: all, created, payment_link.*, created|deleted, agent a1; admin
    t.is((await http(app, 'PATCH', `/v1/payment-links/${linksA[1]}`, { key: keyA, body: { label: 'barrier' } })).status, 200); // A: a2 updated
    t.is((await http(app, 'DELETE', `/v1/payment-links/${linksB[0]}`, { key: keyB })).status, 204); // B: all; admin: updated|deleted

    // one list at a time: a principal runs at most SVC_DB_HEAVY_PER_PRINCIPAL heavy reads at once (so no key starves the
    // others)
    const want: Awaited<ReturnType<typeof expected>>[] = [];
    for (const v of variants) want.push(await expected(app, keys[v.who], v.filter, after[v.who]));
    t.log(want.map((w) => w.length).join(' '));
    t.true(want[6]!.length === 0 && want[0]!.length === 10 && want[10]!.length >= 17, 'the writes produced events for the variants');
    await until('every subscription got its events', () =>
      subs.every(({ variant, sub }) => sub.events.length >= want[variant]!.length || sub.errors.length > 0),
    );
    let exact = 0;
    for (const { variant, sub, how } of subs) {
      t.deepEqual(sub.errors, [], `${how} v${variant}: no error`);
      if (JSON.stringify(sub.events.map((e) => e.id)) === JSON.stringify(want[variant])) exact++;
      else t.fail(`${how} v${variant}: got ${JSON.stringify(sub.events.map((e) => e.id))}, want ${JSON.stringify(want[variant])}`);
    }
    t.is(exact, subs.length, 'every subscription got exactly its events, in commit order');
    t.log(`${subs.length} subscriptions (${subs.length - sses.length} graphql-ws on ${clients.length} sockets, ${sses.length} SSE), ${exact} exact`);
  } finally {
    for (const s of sses) s.close();
    await Promise.all(clients.map((c) => c.dispose()));
  }
});

test.serial('a distinct subscription is executed once per event, however many sockets and SSE requests hold it', async (t) => {
  const app = await startTestApp({ env: LIMITS });
  t.context.apps.push(app);
  const keyA = await issueKey(app);
  const keyB = await issueKey(app);
  const a1 = (await recordAgent(app, keyA)).mint;
  const b1 = (await recordAgent(app, keyB)).mint;

  const clients: Client[] = [];
  const groupA1: Sub[] = [];
  const groupA2: Sub[] = [];
  const groupB: Sub[] = [];
  for (let s = 0; s < 8; s++) {
    const a = wsClient(app, keyA);
    const b = wsClient(app, keyB);
    clients.push(a, b);
    groupA1.push(subscribeOn(a, DOC_FULL, { kinds: ['payment_link.*'] }));
    groupA2.push(subscribeOn(a, DOC_SHORT, {}));
    groupB.push(subscribeOn(b, DOC_FULL, { kinds: ['payment_link.*'] }));
  }
  const sseA1 = [sse(app, keyA, DOC_FULL, { kinds: ['payment_link.*'] }), sse(app, keyA, DOC_FULL, { kinds: ['payment_link.*'] })];
  groupA1.push(...sseA1);
  const all = [...groupA1, ...groupA2, ...groupB];
  const stringify = JSON.stringify;
  /** A new event of each principal (a link), once every subscription of that principal has received it. */
  const barrier = async () => {
    const ends = { A: await newestEvent(app, keyA, a1), B: await newestEvent(app, keyB, b1) };
    await until(
      'every subscription got its principal’s newest event',
      () => [...groupA1, ...groupA2].every((s) => s.events.some((e) => e.id === ends.A)) && groupB.every((s) => s.events.some((e) => e.id === ends.B)),
    );
    return ends;
  };
  try {
    // Live only once attached (the protocol does not acknowledge): warm up until every subscription got an event.
    while (!all.every((s) => s.events.length > 0)) {
      await createLink(app, keyA, a1, 'warm-up');
      await createLink(app, keyB, b1, 'warm-up');
      await new Promise((r) => setTimeout(r, 50));
    }
    t.true(
      all.every((s) => s.events.length > 0),
      'every subscription is live',
    );
    // Settled: each principal's newest event reached every subscription of it, so nothing of the warm-up is still on its
    // way (a group delivers in commit order) and the counts below are final — waited on events, not time.
    await barrier();

    const before = fanOutCounters.sharedExecutions;
    const counts = all.map((s) => s.events.length);
    // Serialisations of a result (or of a message carrying one) while the event is fanned out: one per group.
    const serialisedIds: (string | undefined)[] = [];
    JSON.stringify = function (this: unknown, ...args: Parameters<typeof stringify>) {
      const v = args[0] as { data?: { events?: Received }; payload?: { data?: { events?: Received } } } | undefined;
      const event = v?.data?.events ?? v?.payload?.data?.events;
      if (event !== undefined) serialisedIds.push(event.id);
      return stringify.apply(this, args);
    } as typeof stringify;
    const id = await createLink(app, keyA, a1, 'counted');
    const counted = (await http(app, 'GET', '/v1/events?limit=1', { key: keyA })).body.data[0].id as string;
    const isIt = (e: Received) => e.id === counted && e.kind === 'payment_link.created' && (e.metadata === undefined || e.metadata.payment_link_id === id);
    await until('every subscription got its events', () => [...groupA1, ...groupA2].every((s, i) => s.events.length > counts[i]!));
    // Executions are counted as the feed hands the event to each group, before any delivery: final by now.
    const executions = fanOutCounters.sharedExecutions - before;
    // A later event of each principal reached every subscription: anything extra for the counted one is in by now.
    const ends = await barrier();
    JSON.stringify = stringify;
    const serialised = serialisedIds.filter((e) => e === counted).length;
    t.log(`serialisations of the event's results: ${serialised}`);
    t.is(serialised, 2, 'each group serialised its result once, for its graphql-ws and SSE members alike');
    t.log(`${groupA1.length + groupA2.length} subscriptions of A in 2 groups; executions for the event: ${executions}`);
    t.is(executions, 2, 'one execution per matching group (A: two documents); none for B');
    [...groupA1, ...groupA2].forEach((s, i) => {
      t.is(s.events.length, counts[i]! + 2, 'exactly one event before the barrier');
      t.true(isIt(s.events.at(-2)!));
      t.is(s.events.at(-1)!.id, ends.A);
    });
    for (const [i, s] of groupB.entries()) {
      t.is(s.events.length, counts[groupA1.length + groupA2.length + i]! + 1, 'B sees nothing of A');
      t.is(s.events.at(-1)!.id, ends.B);
    }
    t.deepEqual(sseA1[0]!.events.at(-2), groupA1[0]!.events.at(-2), 'SSE and graphql-ws members of a group get the same payload');
  } finally {
    JSON.stringify = stringify;
    for (const s of sseA1) s.close();
    await Promise.all(clients.map((c) => c.dispose()));
  }
});

test.serial('1,000 subscriptions miss nothing, and shutdown ends them all through one registry without a listener warning', async (t) => {
  const app = await startTestApp({ env: LIMITS });
  t.context.apps.push(app);
  const key = await issueKey(app);
  const agent = (await recordAgent(app, key)).mint;
  const after = await newestEvent(app, key, agent);
  const warnings: string[] = [];
  const onWarning = (w: Error) => warnings.push(`${w.name}: ${w.message}`);
  process.on('warning', onWarning);
  const clients: Client[] = [];
  const subs: Sub[] = [];
  try {
    // 50 sockets × 20 operations, in 5 groups (kinds filter variants), all starting after the same event.
    const filters = [{}, { kinds: ['payment_link.*'] }, { kinds: ['payment_link.created'] }, { agent }, { kinds: ['payment_link.created'], agent }];
    for (let s = 0; s < 50; s++) {
      const client = wsClient(app, key);
      clients.push(client);
      for (let i = 0; i < 20; i++) subs.push(subscribeOn(client, DOC_SHORT, { ...filters[i % filters.length], after }));
    }
    const ids: string[] = [];
    for (let i = 0; i < 10; i++) ids.push(await createLink(app, key, agent, `burst ${i}`));
    const want = await expected(app, key, { kinds: ['payment_link.created'] }, after);
    t.is(want.length, 10);
    await until('every subscription got the ten events', () => subs.every((s) => s.events.filter((e) => e.kind === 'payment_link.created').length >= 10));
    let missed = 0;
    for (const s of subs) {
      const got = s.events.filter((e) => e.kind === 'payment_link.created').map((e) => e.id);
      if (JSON.stringify(got) !== JSON.stringify(want)) missed++;
    }
    t.is(missed, 0, 'every one of 1,000 subscriptions got the 10 events, once each, in order');
  } finally {
    // Shutdown with the 1,000 subscriptions open: each completes (graphql-ws `complete`) before the sockets close.
    await app.close();
    await until('every subscription completed', () => subs.every((s) => s.completed || s.errors.length > 0)).catch((e) => t.fail(String(e)));
    await Promise.all(clients.map((c) => c.dispose()));
    process.off('warning', onWarning);
  }
  t.true(
    subs.every((s) => s.completed),
    'every subscription completed at shutdown',
  );
  t.deepEqual(
    warnings.filter((w) => /MaxListeners/.test(w)),
    [],
    'no MaxListenersExceededWarning',
  );
});
