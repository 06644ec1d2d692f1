import test from 'ava';
import pino from 'pino';
import { createClient, type Client } from '../../interfaces/client/index.ts';
import { verifyWebhookSignature } from '../../domain/webhooks/signature.ts';
import { http, insertProvenAgent, issueKey, linkBody, recordAgent, removeDataDir, startTestApp } from '../support/app.ts';
import { until } from '../support/until.ts';
import { fundBuyer, payingFetch, startLocalServer } from '../support/paywall.ts';

// Secrets: a link's webhook_secret is answered once — by the create call, by the rotate route (and by the
// PATCH that makes a first one) — reads say webhook_secret_set, and no event, log line, error or other stored record
// of a full flow carries it. The app logs at trace level into memory; everything is grepped for every secret made.

test("a link's webhook secret is answered once and appears in no event, log line, error, webhook body or idempotency record", async (t) => {
  const lines: string[] = [];
  const logger = pino({ level: 'trace' }, { write: (line: string) => void lines.push(line) });
  let failing = true;
  const receiver = await startLocalServer(() => ({ status: failing ? 500 : 204 }));
  // The loopback receiver is reached as in development: named by the allow-list (outbound calls reach only
  // SVC_OUTBOUND_ALLOW's targets).
  const app = await startTestApp({ env: { SVC_OUTBOUND_ALLOW: new URL(receiver.url).host }, appOptions: { logger } });
  t.teardown(async () => {
    await receiver.close();
    await app.close();
    await removeDataDir(app.dataDir);
  });
  const key = await issueKey(app);
  const admin = await issueKey(app, 'chain-devnet', 'admin');
  const trpc: Client = createClient({ url: app.url, apiKey: key });
  const { mint } = await recordAgent(app, key);
  /** every answer body of the flow but the three that hand a secret out */
  const answers: unknown[] = [];
  const call = async (method: string, path: string, body?: unknown, headers?: Record<string, string>) => {
    const res = await http(app, method, path, { key, body, headers });
    answers.push(res.body);
    return res;
  };
  const gql = async (query: string, variables: Record<string, unknown> = {}) => (await http(app, 'POST', '/graphql', { key, body: { query, variables } })).body;

  // Create, with an Idempotency-Key: the secret once; the replay does not carry it (it was never stored).
  const body = linkBody(mint, { id: 'secret-link', webhook_url: `${receiver.url}/hook` });
  const created = await http(app, 'POST', '/v1/payment-links', { key, body, headers: { 'idempotency-key': 'create-secret-link' } });
  t.is(created.status, 201, JSON.stringify(created.body));
  const first = created.body.webhook_secret as string;
  t.regex(first, /^whsec_[0-9A-Za-z]{32}$/);
  t.true(created.body.webhook_secret_set);
  const replay = await call('POST', '/v1/payment-links', body, { 'idempotency-key': 'create-secret-link' });
  t.is(replay.headers.get('idempotent-replayed'), 'true');
  t.false('webhook_secret' in replay.body);
  const { webhook_secret: _shown, ...withoutSecret } = created.body;
  t.deepEqual(replay.body, withoutSecret);

  // Reads over the three doors: webhook_secret_set, never the secret.
  const read = await call('GET', '/v1/payment-links/secret-link');
  t.is(read.body.webhook_secret_set, true);
  t.false('webhook_secret' in read.body);
  await call('GET', '/v1/payment-links?limit=200');
  const viaTrpc = await trpc.paymentLinks.get.query({ id: 'secret-link' });
  answers.push(viaTrpc);
  t.false('webhook_secret' in viaTrpc);
  const viaGraphql = await gql('query { paymentLink(id: "secret-link") { webhookSecret webhookSecretSet } }');
  answers.push(viaGraphql);
  t.deepEqual(viaGraphql.data.paymentLink, { webhookSecret: null, webhookSecretSet: true });

  // Updates and refusals: no secret in the answer, the event or the error.
  const patched = await call('PATCH', '/v1/payment-links/secret-link', { label: 'Renamed', webhook_url: `${receiver.url}/hook2` });
  t.is(patched.status, 200);
  t.false('webhook_secret' in patched.body, 'a PATCH that keeps the secret does not show it');
  t.is((await call('PATCH', '/v1/payment-links/secret-link', { webhook_url: 'ftp://nope' })).status, 400);
  t.is((await call('PATCH', '/v1/payment-links/secret-link', { webhook_secret: 'whsec_mine' })).status, 400);

  // A paid call whose webhook delivery fails: a warning is logged (without the secret).
  const world = { app, key, rpcUrl: app.ledgers.rpcUrls['chain-devnet']! };
  const buyer = await fundBuyer(world, '2');
  const pay = payingFetch(world, buyer);
  const paid = await pay(created.body.share_url);
  t.is(paid.status, 200, await paid.text());
  await receiver.waitFor(1);
  await until('the failed delivery logged', () => lines.some((l) => l.includes('webhook not delivered')));

  // Rotate over REST, then over GraphQL: a new secret each time, answered once; the latest signs the next webhook.
  const rotated = await http(app, 'POST', '/v1/payment-links/secret-link/webhook-secret/rotate', { key });
  t.is(rotated.status, 200, JSON.stringify(rotated.body));
  const second = rotated.body.webhook_secret as string;
  t.regex(second, /^whsec_/);
  t.not(second, first);
  const viaGraphqlRotate = await gql('mutation { rotatePaymentLinkWebhookSecret(id: "secret-link") { webhookSecret webhookSecretSet } }');
  const third = viaGraphqlRotate.data.rotatePaymentLinkWebhookSecret.webhookSecret as string;
  t.regex(third, /^whsec_/);
  t.not(third, second);
  failing = false;
  const paidAgain = await pay(created.body.share_url);
  t.is(paidAgain.status, 200, await paidAgain.text());
  const hook = await receiver.waitFor(2);
  const header = hook.headers['x-svc-signature'] as string;
  const now = Math.floor(Date.now() / 1000);
  t.true(verifyWebhookSignature({ secret: third, body: hook.body.toString('utf8'), header, now }), 'the newest secret signs');
  t.false(verifyWebhookSignature({ secret: second, body: hook.body.toString('utf8'), header, now }), 'a rotated-out secret does not');

  // A link without a webhook has no secret; the PATCH that sets its first webhook_url answers the one it made.
  const plain = await call('POST', '/v1/payment-links', linkBody(mint, { id: 'plain-link' }));
  t.is(plain.body.webhook_secret_set, false);
  t.false('webhook_secret' in plain.body);
  const hooked = await http(app, 'PATCH', '/v1/payment-links/plain-link', { key, body: { webhook_url: `${receiver.url}/plain` } });
  const fourth = hooked.body.webhook_secret as string;
  t.regex(fourth, /^whsec_/);
  t.true(hooked.body.webhook_secret_set);
  t.false('webhook_secret' in (await call('GET', '/v1/payment-links/plain-link')).body);
  await call('DELETE', '/v1/payment-links/plain-link');

  // The grep: every event of the network (as admin), every log line, every other answer, every webhook body, and the
  // idempotency records hold none of the secrets.
  const secrets = [first, second, third, fourth];
  const events: { kind: string; metadata: unknown }[] = [];
  for (let cursor: string | null = null; ; ) {
    const page: { status: number; body: { data: { kind: string; metadata: unknown }[]; next_cursor: string | null } } = await http(
      app,
      'GET',
      `/v1/events?limit=200${cursor ? `&cursor=${cursor}` : ''}`,
      { key: admin },
    );
    events.push(...page.body.data);
    if (!page.body.next_cursor) break;
    cursor = page.body.next_cursor;
  }
  const kinds = new Set(events.map((e) => e.kind));
  for (const kind of [
    'payment_link.created',
    'payment_link.updated',
    'payment_link.deleted',
    'payment_link.settled',
    'payment_link.served',
    'receipt.published',
  ]) {
    t.true(kinds.has(kind), `the flow produced ${kind}`);
  }
  const haystacks: [string, string][] = [
    ['events', JSON.stringify(events.map((e) => e.metadata))],
    ['log lines', lines.join('\n')],
    ['answers', JSON.stringify(answers)],
    ['webhook bodies', receiver.received.map((r) => `${JSON.stringify(r.headers)} ${r.body.toString('utf8')}`).join('\n')],
    ['idempotency records', JSON.stringify(await app.database.orm.em.fork().execute('select * from idempotency_records'))],
    ['event rows', JSON.stringify(await app.database.orm.em.fork().execute('select * from events'))],
  ];
  t.true(lines.length > 20, `logs were captured (${lines.length} lines)`);
  // The grep finds a secret where one is stored: the link's own row.
  t.true(JSON.stringify(await app.database.orm.em.fork().execute('select * from payment_links')).includes(third));
  for (const [name, text] of haystacks) {
    for (const secret of secrets) t.false(text.includes(secret), `${name} carry no secret`);
    // Nor its signing key material in another spelling (the part after whsec_).
    for (const secret of secrets) t.false(text.includes(secret.slice('whsec_'.length)), `${name} carry no secret body`);
  }
});

test("a disclosure link's token (a bearer secret in a URL path) is answered once and appears in no log line", async (t) => {
  const lines: string[] = [];
  const logger = pino({ level: 'trace' }, { write: (line: string) => void lines.push(line) });
  const app = await startTestApp({ appOptions: { logger, ledgers: false } });
  t.teardown(async () => {
    await app.close();
    await removeDataDir(app.dataDir);
  });
  const issued = await app.services.access.issueKey({ network: 'chain-devnet', role: 'user' });
  const key = issued.key;
  // no ledgers in this app: the agent's row is written as recording would leave it
  const { mint } = await insertProvenAgent(app, `key:${issued.id}`);
  const created = await http(app, 'POST', `/v1/identity/${mint}/disclosures`, { key, body: { fields: ['profile'], expires_in: 600 } });
  t.is(created.status, 200, JSON.stringify(created.body));
  const token = created.body.token as string;
  t.regex(token, /^svc_dl_/);
  const read = await http(app, 'GET', `/v1/identity/disclosures/${token}`, { key });
  t.is(read.status, 200, JSON.stringify(read.body));
  t.true(
    lines.some((l) => l.includes('/v1/identity/disclosures/[redacted]')),
    'the read was logged, its token redacted',
  );
  t.false(lines.join('\n').includes(token.slice('svc_dl_'.length)), 'no log line carries the token');
});
