import anyTest, { type TestFn } from 'ava';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import pg from 'pg';
import { createClient, errorCode } from '../../interfaces/client/index.ts';
import { verifyWebhook, WebhookVerificationError } from '../../interfaces/client/webhooks.ts';
import { newId } from '../../domain/shared/ids.ts';
import { RETRY_SCHEDULE_MS } from '../../domain/webhooks/delivery.ts';
import { http, insertProvenAgent, linkBody, removeDataDir, startTestApp, type TestApp, syntheticEvent } from '../support/app.ts';
import { TestClock } from '../support/clock.ts';
import { startReceiver, type Receiver } from '../support/receiver.ts';
import { until } from '../support/until.ts';

// DECISIONS "Webhooks" (hosted-api §5.8, §6): subscriptions owned per principal on REST, tRPC and GraphQL;
// one delivery per (webhook, event, phase) made in the event's own transaction; signed so that the Standard Webhooks
// library and the client kit's verifyWebhook accept it; the retry schedule driven by a test clock; 410 disables.
// Tests share one app and run concurrently: each makes its own principals (admin subscriptions see the whole network,
// so theirs use kinds no other test appends).

interface Side {
  key: string;
  principal: string;
}

interface Ctx {
  app: TestApp;
  receiver: Receiver;
}

const test = anyTest as TestFn<Ctx>;

async function issue(app: TestApp, role: 'user' | 'admin' = 'user'): Promise<Side> {
  const created = await app.services.access.issueKey({ network: 'chain-devnet', role });
  return { key: created.key, principal: `key:${created.id}` };
}

/** Paths of the shared receiver decide its answer: /gone answers 410, /fail 500, anything else 204. */
function answerByPath(hook: { url: string }) {
  if (hook.url.startsWith('/gone')) return { status: 410 };
  if (hook.url.startsWith('/fail')) return { status: 500 };
  return { status: 204 };
}

test.before(async (t) => {
  const receiver = await startReceiver(answerByPath);
  const app = await startTestApp({ env: { SVC_OUTBOUND_ALLOW: receiver.allow }, appOptions: { ledgers: false } });
  t.context = { app, receiver };
});

test.after.always(async (t) => {
  await t.context.receiver?.close();
});

async function createHook(app: TestApp, key: string, body: Record<string, unknown>): Promise<{ id: string; secret: string; [k: string]: unknown }> {
  const res = await http(app, 'POST', '/v1/webhooks', { key, body });
  if (res.status !== 201) throw new Error(`create webhook: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

async function deliveriesOf(app: TestApp, key: string, webhookId: string): Promise<any[]> {
  const res = await http(app, 'GET', `/v1/webhooks/${webhookId}/deliveries?limit=200`, { key });
  if (res.status !== 200) throw new Error(`deliveries: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.data;
}

/** Appends an event as a service would, in its own transaction. */
async function append(app: TestApp, fields: { owner: string | null; kind: string }): Promise<string> {
  const now = new Date();
  const id = newId();
  await app.database.store.transaction((tx) =>
    tx.events.append(
      syntheticEvent({
        id,
        kind: fields.kind,
        phase: 'confirmed',
        network: 'chain-devnet',
        agentAsset: null,
        owner: fields.owner,
        metadata: {},
        createdAt: now,
        confirmedAt: now,
      }),
    ),
  );
  return id;
}

async function sql<T = any>(app: TestApp, text: string, params: unknown[] = []): Promise<T[]> {
  return (await app.database.orm.em.fork().execute(text, params)) as T[];
}

test('create answers 201 with a whsec_ secret once; reads, lists, rotation and delete are the owner’s alone (404 for another principal)', async (t) => {
  const { app, receiver } = t.context;
  const [a, b, admin] = [await issue(app), await issue(app), await issue(app, 'admin')];
  const created = await http(app, 'POST', '/v1/webhooks', {
    key: a.key,
    body: { url: `${receiver.url}/crud`, description: 'Orders' },
    headers: { 'idempotency-key': 'crud-create' },
  });
  t.is(created.status, 201, JSON.stringify(created.body));
  t.regex(created.body.secret, /^whsec_[0-9A-Za-z]{32}$/);
  t.like(created.body, { url: `${receiver.url}/crud`, events: ['*'], description: 'Orders', disabled: false, disabled_reason: null, network: 'chain-devnet' });
  const id = created.body.id as string;

  const replay = await http(app, 'POST', '/v1/webhooks', {
    key: a.key,
    body: { url: `${receiver.url}/crud`, description: 'Orders' },
    headers: { 'idempotency-key': 'crud-create' },
  });
  t.is(replay.headers.get('idempotent-replayed'), 'true');
  t.false('secret' in replay.body, 'an Idempotency-Key replay does not carry the secret');
  t.is(replay.body.id, id);

  const read = await http(app, 'GET', `/v1/webhooks/${id}`, { key: a.key });
  t.is(read.status, 200);
  t.false('secret' in read.body);
  t.is((await http(app, 'GET', `/v1/webhooks/${id}`, { key: admin.key })).status, 200, 'an admin reads its network’s');

  // Another principal: 404 everywhere, exactly like a missing webhook.
  for (const [method, path] of [
    ['GET', `/v1/webhooks/${id}`],
    ['GET', `/v1/webhooks/${id}/deliveries`],
    ['POST', `/v1/webhooks/${id}/secret/rotate`],
    ['POST', `/v1/webhooks/${id}/deliveries/${newId()}/retry`],
    ['DELETE', `/v1/webhooks/${id}`],
  ] as const) {
    const res = await http(app, method, path, { key: b.key });
    t.is(res.status, 404, `${method} ${path}`);
    t.is(res.body.error, 'webhook_not_found');
  }
  t.false((await http(app, 'GET', '/v1/webhooks?limit=200', { key: b.key })).body.data.some((w: { id: string }) => w.id === id));

  // Lists: the caller's, newest first, with a cursor.
  const more = [];
  for (let i = 0; i < 3; i++) more.push((await createHook(app, a.key, { url: `${receiver.url}/crud${i}`, events: ['receipt.published'] })).id);
  const first = await http(app, 'GET', '/v1/webhooks?limit=2', { key: a.key });
  t.deepEqual(
    first.body.data.map((w: { id: string }) => w.id),
    [more[2], more[1]],
  );
  t.true(first.body.has_more);
  const second = await http(app, 'GET', `/v1/webhooks?limit=2&cursor=${first.body.next_cursor}`, { key: a.key });
  t.deepEqual(
    second.body.data.map((w: { id: string }) => w.id),
    [more[0], id],
  );
  t.true((await http(app, 'GET', '/v1/webhooks?limit=200', { key: admin.key })).body.data.some((w: { id: string }) => w.id === id));

  const rotated = await http(app, 'POST', `/v1/webhooks/${id}/secret/rotate`, { key: a.key });
  t.is(rotated.status, 200);
  t.regex(rotated.body.secret, /^whsec_/);
  t.not(rotated.body.secret, created.body.secret);

  const deleted = await http(app, 'DELETE', `/v1/webhooks/${id}`, { key: a.key });
  t.is(deleted.status, 204);
  t.is((await http(app, 'GET', `/v1/webhooks/${id}`, { key: a.key })).status, 404);
});

test('bad input is a 400 naming the field: not http(s), a bad kind pattern, a target the outbound guard refuses', async (t) => {
  const { app } = t.context;
  const a = await issue(app);
  const cases: [Record<string, unknown>, string][] = [
    [{ url: 'ftp://example.com/hook' }, 'url'],
    [{ url: 'https://example.com/hook', events: ['Not A Kind!'] }, 'events.0'],
    [{ url: 'https://example.com/hook', events: [] }, 'events'],
    [{ url: 'https://example.com/hook', secret: 'whsec_mine' }, ''],
    // plain http to a public name, and a loopback port nobody allow-listed
    [{ url: 'http://example.com/hook' }, 'url'],
    [{ url: 'http://127.0.0.1:9/hook' }, 'url'],
  ];
  for (const [body, path] of cases) {
    const res = await http(app, 'POST', '/v1/webhooks', { key: a.key, body });
    t.is(res.status, 400, JSON.stringify(body));
    t.is(res.body.error, 'invalid_request');
    if (path)
      t.true(
        res.body.details.issues.some((i: { path: string }) => i.path === path),
        `${JSON.stringify(res.body.details)} names ${path}`,
      );
  }
  const refused = await http(app, 'POST', '/v1/webhooks', { key: a.key, body: { url: 'http://127.0.0.1:9/hook' } });
  t.is(refused.body.details.issues[0].code, 'url_refused');
});

test('tRPC and GraphQL reach the same subscriptions: create with a secret, reads without, rotate, delete', async (t) => {
  const { app, receiver } = t.context;
  const [a, b] = [await issue(app), await issue(app)];
  const trpc = createClient({ url: app.url, apiKey: a.key });
  const made = await trpc.webhooks.create.mutate({ url: `${receiver.url}/trpc`, events: ['payment_link.*', 'receipt.published'] });
  t.regex(made.secret, /^whsec_/);
  t.deepEqual(made.events, ['payment_link.*', 'receipt.published']);
  t.false('secret' in (await trpc.webhooks.get.query({ id: made.id })));
  t.true((await trpc.webhooks.list.query({})).data.some((w) => w.id === made.id));
  const other = createClient({ url: app.url, apiKey: b.key });
  t.is(await other.webhooks.get.query({ id: made.id }).then(() => 'found', errorCode), 'webhook_not_found');

  const gql = async (key: string, query: string, variables: Record<string, unknown> = {}) =>
    (await http(app, 'POST', '/graphql', { key, body: { query, variables } })).body;
  const created = await gql(a.key, 'mutation($input: CreateWebhookInput!) { createWebhook(input: $input) { id url events secret disabled } }', {
    input: { url: `${receiver.url}/graphql`, events: ['receipt.published'], description: 'via graphql' },
  });
  const hook = created.data.createWebhook;
  t.regex(hook.secret, /^whsec_/);
  t.deepEqual(hook.events, ['receipt.published']);
  const read = await gql(a.key, 'query($id: ID!) { webhook(id: $id) { id secret description } webhooks(first: 200) { data { id } } }', { id: hook.id });
  t.deepEqual(read.data.webhook, { id: hook.id, secret: null, description: 'via graphql' });
  t.true(
    read.data.webhooks.data.some((w: { id: string }) => w.id === made.id),
    'the tRPC-made one is in the GraphQL list',
  );
  const hidden = await gql(b.key, 'query($id: ID!) { webhook(id: $id) { id } }', { id: hook.id });
  t.is(hidden.errors[0].extensions.code, 'webhook_not_found');
  const rotated = await gql(a.key, 'mutation($id: ID!) { rotateWebhookSecret(id: $id) { secret } }', { id: hook.id });
  t.regex(rotated.data.rotateWebhookSecret.secret, /^whsec_/);
  t.not(rotated.data.rotateWebhookSecret.secret, hook.secret);
  const deliveries = await gql(a.key, 'query($id: ID!) { webhookDeliveries(webhookId: $id) { data { id } hasMore } }', { id: hook.id });
  t.deepEqual(deliveries.data.webhookDeliveries, { data: [], hasMore: false });
  t.true((await gql(a.key, 'mutation($id: ID!) { deleteWebhook(id: $id) }', { id: hook.id })).data.deleteWebhook);
  await trpc.webhooks.delete.mutate({ id: made.id });
  t.is(await trpc.webhooks.get.query({ id: made.id }).then(() => 'found', errorCode), 'webhook_not_found');
});

test('an event reaches each subscription that sees it once, signed: Standard Webhooks, verifyWebhook and X-Svc-Signature verify the raw body', async (t) => {
  const { app, receiver } = t.context;
  const [a, b, admin] = [await issue(app), await issue(app), await issue(app, 'admin')];
  const mine = await createHook(app, a.key, { url: `${receiver.url}/deliver-a`, events: ['payment_link.*'] });
  const notThisKind = await createHook(app, a.key, { url: `${receiver.url}/deliver-kind`, events: ['receipt.published'] });
  const others = await createHook(app, b.key, { url: `${receiver.url}/deliver-b`, events: ['*'] });
  const network = await createHook(app, admin.key, { url: `${receiver.url}/deliver-admin`, events: ['payment_link.created'] });

  // no ledgers in this app: the agent's row is written as recording would leave it
  const { mint: agent } = await insertProvenAgent(app, a.principal);
  const link = await http(app, 'POST', '/v1/payment-links', { key: a.key, body: linkBody(agent, { id: 'hooked-a' }) });
  t.is(link.status, 201, JSON.stringify(link.body));
  const event = (await http(app, 'GET', '/v1/events?kind=payment_link.created&limit=1', { key: a.key })).body.data[0];
  t.is(event.metadata.payment_link.id, 'hooked-a');

  const atMine = await until('the delivery to a', () => receiver.received.find((h) => h.url === '/deliver-a'));
  // The admin subscription sees every principal's links (other tests' too): the one of this event.
  const atAdmin = await until('the delivery to the admin subscription', () =>
    receiver.received.find((h) => h.url === '/deliver-admin' && (JSON.parse(h.body) as { data: { id: string } }).data.id === event.id),
  );

  // Verified with the Standard Webhooks library, the client kit, and by hand.
  const payload = new StandardWebhook(mine.secret).verify(atMine.body, atMine.headers as Record<string, string>) as any;
  t.like(payload, { type: 'payment_link.created', phase: 'confirmed', data: { id: event.id, kind: 'payment_link.created', metadata: event.metadata } });
  t.deepEqual(verifyWebhook(mine.secret, atMine.headers, atMine.body), payload);
  t.deepEqual(verifyWebhook(mine.secret, new Headers(atMine.headers as Record<string, string>), Buffer.from(atMine.body)), payload);
  t.is(atMine.headers['x-svc-event'], 'payment_link.created');
  t.is(atMine.headers['x-svc-delivery'], payload.id);
  t.is(atMine.headers['webhook-id'], payload.id);
  t.is(atMine.headers['content-type'], 'application/json');
  t.throws(() => verifyWebhook(network.secret, atMine.headers, atMine.body), { instanceOf: WebhookVerificationError }, 'another subscription’s secret');
  t.throws(() => verifyWebhook(mine.secret, atMine.headers, `${atMine.body} `), { instanceOf: WebhookVerificationError }, 'other bytes');
  t.throws(() => new StandardWebhook(network.secret).verify(atMine.body, atMine.headers as Record<string, string>));
  t.throws(
    () => verifyWebhook(mine.secret, atMine.headers, atMine.body, { now: new Date(Date.now() + 301_000) }),
    { instanceOf: WebhookVerificationError },
    'stale',
  );
  t.is((new StandardWebhook(network.secret).verify(atAdmin.body, atAdmin.headers as Record<string, string>) as any).data.id, event.id);

  // The delivery as recorded: delivered once, on the first attempt.
  const [delivery, ...rest] = await until('the delivery recorded as delivered', async () => {
    const list = await deliveriesOf(app, a.key, mine.id);
    return list.length && list.every((d) => d.status === 'delivered') ? list : undefined;
  });
  t.is(rest.length, 0);
  t.like(delivery, {
    id: payload.id,
    webhook_id: mine.id,
    event_id: event.id,
    type: 'payment_link.created',
    phase: 'confirmed',
    attempts: 1,
    last_status: 204,
    last_error: null,
    next_attempt_at: null,
  });
  t.truthy(delivery.delivered_at);

  // B's subscription sees B's events only; a pattern that does not match gets nothing.
  await append(app, { owner: b.principal, kind: 'payment_link.deleted' });
  await until('B’s own event at B’s subscription', () => receiver.received.find((h) => h.url === '/deliver-b'));
  // A webhook is sent only from its delivery row; once every row of these subscriptions is delivered (terminal, and
  // recorded after the receiver had the request) nothing more can arrive: the counts below are final, not sampled.
  await until('every delivery of the three subscriptions recorded', async () => {
    const rows = await sql<{ status: string }>(app, 'select status from webhook_deliveries where webhook_id in (?, ?, ?)', [
      mine.id,
      notThisKind.id,
      others.id,
    ]);
    return rows.every((r) => r.status === 'delivered');
  });
  t.is(receiver.received.filter((h) => h.url === '/deliver-a').length, 1, 'one delivery per (webhook, event, phase)');
  t.is(receiver.received.filter((h) => h.url === '/deliver-kind').length, 0);
  t.is(receiver.received.filter((h) => h.url === '/deliver-b').length, 1, 'A’s event never reaches B');
  t.deepEqual(await deliveriesOf(app, a.key, notThisKind.id), []);
  t.is((await deliveriesOf(app, b.key, others.id)).length, 1);
});

test('the outbox: a rolled-back event leaves no delivery and no job; a committed one one per subscription, admin-only events to network subscriptions only', async (t) => {
  const { app, receiver } = t.context;
  const [a, admin] = [await issue(app), await issue(app, 'admin')];
  const mine = await createHook(app, a.key, { url: `${receiver.url}/outbox-a`, events: ['test.outbox.*'] });
  const network = await createHook(app, admin.key, { url: `${receiver.url}/outbox-admin`, events: ['test.outbox.*'] });

  const rolledBack = newId();
  await t.throwsAsync(
    app.database.store.transaction(async (tx) => {
      await tx.events.append(
        syntheticEvent({
          id: rolledBack,
          kind: 'test.outbox.rollback',
          phase: 'confirmed',
          network: 'chain-devnet',
          agentAsset: null,
          owner: a.principal,
          metadata: {},
          createdAt: new Date(),
        }),
      );
      throw new Error('the change fails after its event was appended');
    }),
    { message: /the change fails/ },
  );
  t.deepEqual(await sql(app, 'select id from webhook_deliveries where event_id = ?', [rolledBack]), []);

  const committed = await append(app, { owner: a.principal, kind: 'test.outbox.committed' });
  const adminOnly = await append(app, { owner: null, kind: 'test.outbox.admin_only' });
  const rows = await sql<{ webhook_id: string; event_id: string; id: string }>(
    app,
    'select webhook_id, event_id, id from webhook_deliveries where event_id in (?, ?) order by webhook_id, event_id',
    [committed, adminOnly],
  );
  t.deepEqual(
    rows.map((r) => [r.webhook_id, r.event_id]).sort(),
    [
      [mine.id, committed],
      [network.id, committed],
      [network.id, adminOnly],
    ].sort(),
  );
  // Each has its job, keyed by the delivery (committed with the event).
  const jobs = await sql<{ key: string }>(app, `select key from graphile_worker.jobs where key = any(array(select jsonb_array_elements_text(?::jsonb)))`, [
    JSON.stringify(rows.map((r) => `webhook-delivery:${r.id}`)),
  ]);
  const arrived = receiver.received.filter((h) => h.url.startsWith('/outbox')).length;
  t.is(jobs.length + arrived >= rows.length, true, 'every delivery was queued (or already made)');
  await until('the three deliveries', () => receiver.received.filter((h) => h.url.startsWith('/outbox')).length >= 3 || undefined);

  // Fanning the same event out again (a retried append, a phase reported twice) makes nothing new.
  const again = await app.database.store.transaction(async (tx) =>
    tx.webhookDeliveries.fanOut({
      id: committed,
      kind: 'test.outbox.committed',
      phase: 'confirmed',
      network: 'chain-devnet',
      owner: a.principal,
      createdAt: new Date(),
    }),
  );
  t.is(again, 0);
  // the three rows delivered (terminal): no further request can come from them
  await until('the three deliveries recorded', async () => {
    const recorded = await sql<{ status: string }>(app, 'select status from webhook_deliveries where event_id in (?, ?)', [committed, adminOnly]);
    return recorded.length === 3 && recorded.every((r) => r.status === 'delivered');
  });
  t.is(receiver.received.filter((h) => h.url.startsWith('/outbox')).length, 3);
});

test('a receiver answering 410 disables the subscription: the delivery fails, later events make none, a manual retry is 409', async (t) => {
  const { app, receiver } = t.context;
  const a = await issue(app);
  const hook = await createHook(app, a.key, { url: `${receiver.url}/gone`, events: ['test.gone'] });
  await append(app, { owner: a.principal, kind: 'test.gone' });
  const [failed] = await until('the failed delivery', async () => {
    const list = await deliveriesOf(app, a.key, hook.id);
    return list[0]?.status === 'failed' ? list : undefined;
  });
  t.like(failed, { attempts: 1, last_status: 410, next_attempt_at: null });
  const read = (await http(app, 'GET', `/v1/webhooks/${hook.id}`, { key: a.key })).body;
  t.like(read, { disabled: true, disabled_reason: 'the receiver answered 410 Gone' });

  await append(app, { owner: a.principal, kind: 'test.gone' });
  t.is((await deliveriesOf(app, a.key, hook.id)).length, 1, 'a disabled subscription gets no new deliveries');
  const retry = await http(app, 'POST', `/v1/webhooks/${hook.id}/deliveries/${failed.id}/retry`, { key: a.key });
  t.is(retry.status, 409);
  t.is(retry.body.error, 'conflict');
});

test.serial('the retry schedule (5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h, then failed) follows the clock; a manual retry delivers', async (t) => {
  // Its own app on a test clock that stands still until moved: due times come from it, not from waiting.
  let failing = true;
  const receiver = await startReceiver(() => ({ status: failing ? 503 : 200 }));
  const clock = new TestClock();
  const app = await startTestApp({ env: { SVC_OUTBOUND_ALLOW: receiver.allow }, appOptions: { ledgers: false, clock } });
  t.teardown(async () => {
    await app.close();
    await receiver.close();
    await removeDataDir(app.dataDir);
  });
  const a = await issue(app);
  const hook = await createHook(app, a.key, { url: `${receiver.url}/schedule`, events: ['test.schedule'] });
  const created = clock.now();
  await app.database.store.transaction((tx) =>
    tx.events.append(
      syntheticEvent({
        id: newId(),
        kind: 'test.schedule',
        phase: 'confirmed',
        network: 'chain-devnet',
        agentAsset: null,
        owner: a.principal,
        metadata: {},
        createdAt: created,
      }),
    ),
  );
  const attempted = (n: number) =>
    until(`attempt ${n}`, async () => {
      const [d] = await deliveriesOf(app, a.key, hook.id);
      return d && d.attempts === n ? d : undefined;
    });

  let delivery = await attempted(1);
  for (const [i, wait] of RETRY_SCHEDULE_MS.entries()) {
    t.like(delivery, { status: 'pending', attempts: i + 1, last_status: 503, last_error: 'the receiver answered 503' });
    t.is(new Date(delivery.next_attempt_at).getTime() - clock.now().getTime(), wait, `wait after attempt ${i + 1}`);
    // Not due yet: a sweep a millisecond early enqueues nothing.
    clock.advance(wait - 1);
    t.is(await app.services.webhooks.sweep(), 0);
    clock.advance(1);
    t.is(await app.services.webhooks.sweep(), 1);
    delivery = await attempted(i + 2);
  }
  t.like(delivery, { status: 'failed', attempts: 8, next_attempt_at: null, last_status: 503 });
  t.is(receiver.received.length, 8);
  t.is(new Set(receiver.received.map((h) => h.headers['x-svc-delivery'])).size, 1, 'every attempt is the same delivery');
  clock.advance(RETRY_SCHEDULE_MS[6]);
  t.is(await app.services.webhooks.sweep(), 0, 'a failed delivery is not attempted again by itself');

  failing = false;
  const retried = await http(app, 'POST', `/v1/webhooks/${hook.id}/deliveries/${delivery.id}/retry`, { key: a.key });
  t.is(retried.status, 200, JSON.stringify(retried.body));
  t.like(retried.body, { id: delivery.id, status: 'pending' });
  const done = await until('the manual retry delivered', async () => {
    const [d] = await deliveriesOf(app, a.key, hook.id);
    return d?.status === 'delivered' ? d : undefined;
  });
  t.like(done, { attempts: 9, last_status: 200, last_error: null });
  t.is(receiver.received.length, 9);
});

test('a payment link’s webhook_url is a delivery like any other: a row, the retry schedule, signed with the link’s secret at attempt time', async (t) => {
  const { app, receiver } = t.context;
  const a = await issue(app);
  // no ledgers in this app: the agent's row is written as recording would leave it
  const { mint: agent } = await insertProvenAgent(app, a.principal);
  // /fail answers 500 until the link is pointed elsewhere.
  const link = await http(app, 'POST', '/v1/payment-links', {
    key: a.key,
    body: linkBody(agent, { id: 'link-hook', webhook_url: `${receiver.url}/fail/link` }),
  });
  t.is(link.status, 201, JSON.stringify(link.body));
  const [row] = await sql<{ pk: string }>(app, `select pk from payment_links where network = 'chain-devnet' and id = 'link-hook'`);
  const data = { payment_link_id: 'link-hook', payment: { success: true, transaction: 'sig' }, receipt: {}, response: { status: 200, headers: {}, body: '' } };

  // As the paywall's record transaction makes it (domain/paywall/service.ts webhook()).
  const { enqueueLinkDelivery } = await import('../../domain/webhooks/service.ts');
  const id = await app.database.store.transaction((tx) =>
    enqueueLinkDelivery(tx, { network: 'chain-devnet', linkPk: row!.pk, kind: 'payment_link.settled', data, now: new Date() }),
  );
  const first = await until('the first attempt', () => receiver.received.find((h) => h.headers['x-svc-delivery'] === id));
  t.true(verifyWebhook(link.body.webhook_secret, first.headers, first.body).id === id);
  t.like(JSON.parse(first.body), { id, type: 'payment_link.settled', phase: 'confirmed', data });
  const failed = await until('the failure recorded', async () => {
    const [d] = await sql(app, 'select * from webhook_deliveries where id = ?', [id]);
    return d?.attempts === 1 ? d : undefined;
  });
  t.like(failed, { status: 'pending', last_status: 500, link_pk: row!.pk, webhook_id: null });
  t.is(new Date(failed.next_attempt_at).getTime() - new Date(failed.updated_at).getTime(), RETRY_SCHEDULE_MS[0]);

  // The retry goes to the link's URL and secret as they are then.
  t.is((await http(app, 'PATCH', '/v1/payment-links/link-hook', { key: a.key, body: { webhook_url: `${receiver.url}/link-fixed` } })).status, 200);
  const rotated = await http(app, 'POST', '/v1/payment-links/link-hook/webhook-secret/rotate', { key: a.key });
  const retried = await until('the retry', () => receiver.received.find((h) => h.url === '/link-fixed' && h.headers['x-svc-delivery'] === id));
  t.is(verifyWebhook(rotated.body.webhook_secret, retried.headers, retried.body).id, id);
  t.throws(() => verifyWebhook(link.body.webhook_secret, retried.headers, retried.body), { instanceOf: WebhookVerificationError });
  const done = await until('delivered', async () => {
    const [d] = await sql(app, 'select * from webhook_deliveries where id = ?', [id]);
    return d?.status === 'delivered' ? d : undefined;
  });
  t.like(done, { attempts: 2, last_status: 204 });
});

test('no subscription secret appears in a delivery body, the warning logged for a failed attempt, or a read', async (t) => {
  const { app, receiver } = t.context;
  const a = await issue(app);
  const hook = await createHook(app, a.key, { url: `${receiver.url}/fail/secretless`, events: ['test.secretless'] });
  await append(app, { owner: a.principal, kind: 'test.secretless' });
  const warned: Record<string, unknown>[] = [];
  // The service's warnings as the app logs them (interfaces/services.ts passes onWarning to the log).
  const original = (app.services.webhooks as unknown as { deps: { onWarning?: (m: string, c: Record<string, unknown>) => void } }).deps;
  const before = original.onWarning;
  original.onWarning = (message, context) => {
    warned.push({ message, ...context });
    before?.(message, context);
  };
  t.teardown(() => {
    original.onWarning = before;
  });
  await until('the failed attempt', async () => ((await deliveriesOf(app, a.key, hook.id))[0]?.attempts === 1 ? true : undefined));
  await until('its warning', () => warned.some((w) => w.webhook_id === hook.id) || undefined);
  const hooks = receiver.received.filter((h) => h.url === '/fail/secretless');
  const haystack = JSON.stringify([
    warned,
    hooks.map((h) => [h.headers, h.body]),
    (await http(app, 'GET', `/v1/webhooks/${hook.id}`, { key: a.key })).body,
    await deliveriesOf(app, a.key, hook.id),
  ]);
  t.true(hooks.length >= 1);
  t.false(haystack.includes(hook.secret));
  t.false(haystack.includes(hook.secret.slice('whsec_'.length)));
});

test('one outbound rule at every entry: a link’s webhook_url the guard refuses is 400 url_refused at create and update; a stored one it refuses at send time fails at once', async (t) => {
  const { app, receiver } = t.context;
  const a = await issue(app);
  const { mint: agent } = await insertProvenAgent(app, a.principal);
  // the cases POST /v1/webhooks refuses: plain http to a public name, a loopback port and a private address nobody allow-listed
  for (const url of ['http://example.com/hook', 'http://127.0.0.1:9/hook', 'https://10.0.0.1/hook']) {
    const created = await http(app, 'POST', '/v1/payment-links', { key: a.key, body: linkBody(agent, { webhook_url: url }) });
    t.is(created.status, 400, url);
    t.like(created.body, { error: 'invalid_request', details: { issues: [{ path: 'webhook_url', code: 'url_refused' }] } }, url);
    const hook = await http(app, 'POST', '/v1/webhooks', { key: a.key, body: { url } });
    t.like(hook.body, { error: 'invalid_request', details: { issues: [{ path: 'url', code: 'url_refused' }] } }, url);
  }
  const link = await http(app, 'POST', '/v1/payment-links', {
    key: a.key,
    body: linkBody(agent, { id: 'link-guarded', webhook_url: `${receiver.url}/guarded` }),
  });
  t.is(link.status, 201, JSON.stringify(link.body));
  const patched = await http(app, 'PATCH', '/v1/payment-links/link-guarded', { key: a.key, body: { webhook_url: 'http://127.0.0.1:9/hook' } });
  t.is(patched.status, 400);
  t.like(patched.body, { error: 'invalid_request', details: { issues: [{ path: 'webhook_url', code: 'url_refused' }] } });
  t.is((await http(app, 'GET', '/v1/payment-links/link-guarded', { key: a.key })).body.webhook_url, `${receiver.url}/guarded`, 'the link is unchanged');

  // A URL stored before the rule (or a name that now resolves to a private address): the guard refuses it at send
  // time, and no later attempt can do better — the delivery fails on its first attempt with the reason, no retry.
  const [row] = await sql<{ pk: string }>(app, `select pk from payment_links where network = 'chain-devnet' and id = 'link-guarded'`);
  await sql(app, `update payment_links set webhook_url = 'http://127.0.0.1:9/hook' where pk = ?`, [row!.pk]);
  const { enqueueLinkDelivery } = await import('../../domain/webhooks/service.ts');
  const data = {
    payment_link_id: 'link-guarded',
    payment: { success: true, transaction: 'sig' },
    receipt: {},
    response: { status: 200, headers: {}, body: '' },
  };
  const id = await app.database.store.transaction((tx) =>
    enqueueLinkDelivery(tx, { network: 'chain-devnet', linkPk: row!.pk, kind: 'payment_link.settled', data, now: new Date() }),
  );
  const failed = await until('the refused delivery', async () => {
    const [d] = await sql(app, 'select * from webhook_deliveries where id = ?', [id]);
    return d?.status === 'failed' ? d : undefined;
  });
  t.like(failed, { attempts: 1, next_attempt_at: null, last_status: null });
  t.regex(failed.last_error, /^url_refused: /);
});

test('a webhook deleted while an event it matched is being written: the event commits, with no delivery for the deleted webhook', async (t) => {
  const { app, receiver } = t.context;
  const a = await issue(app);
  const hook = await createHook(app, a.key, { url: `${receiver.url}/deleted-midway` });
  // DELETE /v1/webhooks in another transaction, not yet committed: the event's write matches the webhook meanwhile
  const deleting = new pg.Client({ connectionString: app.database.url });
  await deleting.connect();
  t.teardown(() => deleting.end());
  await deleting.query('begin');
  await deleting.query('delete from webhooks where id = $1', [hook.id]);
  const writing = append(app, { owner: a.principal, kind: 'payment_link.created' });
  writing.catch(() => {}); // awaited below
  await until(
    "the event's deliveries wait on the deleting transaction",
    async () => (await sql(app, `select 1 from pg_stat_activity where wait_event_type = 'Lock' and query like '%insert into webhook_deliveries%'`)).length > 0,
  );
  await deleting.query('commit');
  const id = await writing;
  t.is((await sql(app, 'select 1 from events where id = ?', [id])).length, 1, 'the event committed');
  // the deleted webhook's own deliveries: a network subscription of a test running beside this one may match the event
  t.deepEqual(
    await sql(app, 'select id from webhook_deliveries where event_id = ? and webhook_id = ?', [id, hook.id]),
    [],
    'no delivery for the deleted webhook',
  );
});
