import test from 'ava';
import { startTestApp, type TestApp } from '../support/app.ts';

// DECISIONS "Wire conventions": the public paywall has a per-client-IP bucket (600 per 60 s; here overridden to 3),
// a sliding log shared by every node on the database, with the standard RateLimit-* headers and a 429 in the
// envelope once spent.

let app: TestApp;
/** a second node on the same database */
let other: TestApp;

test.before(async () => {
  const env = { SVC_RATE_LIMITS: '{"paywall":3}' };
  app = await startTestApp({ env });
  other = await startTestApp({ databaseUrl: app.database.url, env: { ...env, SVC_JOBS: 'off' } });
});

test('the paywall counts every /x request per client IP on every node; the request over the limit is 429 rate_limited with Retry-After', async (t) => {
  const answers = [];
  // one client alternating between two nodes: one window
  for (let i = 0; i < 4; i++) answers.push(await fetch(`${[app, other][i % 2]!.url}/x/no-such-link-${i}?network=chain-devnet`));
  t.deepEqual(
    answers.map((r) => r.status),
    [404, 404, 404, 429],
  );
  t.deepEqual(
    answers.map((r) => r.headers.get('ratelimit-remaining')),
    ['2', '1', '0', '0'],
  );
  t.is(answers[0]!.headers.get('ratelimit-policy'), '3;w=60');
  const refused = answers[3]!;
  t.truthy(Number(refused.headers.get('retry-after')) > 0);
  const body = (await refused.json()) as { error: string; retry_after_ms: number; details: { retry_after_ms: number; bucket: string }; request_id: string };
  t.is(body.error, 'rate_limited');
  t.true(body.details.retry_after_ms > 0);
  t.is(body.retry_after_ms, body.details.retry_after_ms, 'hosted-api §7: retry_after_ms at the top level too');
  t.is(body.details.bucket, 'paywall');
  t.is(refused.headers.get('x-svc-request-id'), body.request_id);
  // /v1 is a different bucket: the paywall's window does not spend it.
  t.not((await fetch(`${app.url}/v1/version`)).status, 429);
});
