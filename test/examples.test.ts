import anyTest, { type TestFn } from 'ava';
import { http, issueKey, linkBody, recordAgent, startTestApp, type TestApp } from './support/app.ts';
import { freePort, start, type Finished } from './support/commands.ts';
import { metaplexTest } from './support/programs.ts';

// Each file of examples/ runs as a reader runs it — `node --import tsx examples/<file>.ts` with SVC_URL and
// SVC_API_KEY — against one real gateway, and its effect is checked through the API. In this repository the package's
// own entries (svc-gateway/client, /client/pay, /x402) resolve to their TypeScript source under the
// `svc-gateway-source` condition, so no build is needed; an installed package resolves them to dist/.

interface Context {
  app: TestApp;
  key: string;
  /** where examples/webhook-receiver.ts listens: the gateway may call it (SVC_OUTBOUND_ALLOW) */
  hookPort: number;
}
const test = anyTest as TestFn<Context>;

test.before(async (t) => {
  const hookPort = await freePort();
  const app = await startTestApp({ env: { SVC_OUTBOUND_ALLOW: `127.0.0.1:${hookPort}` } });
  t.context = { app, key: await issueKey(app), hookPort };
});

function env(t: { context: Context }, extra: Record<string, string> = {}): Record<string, string> {
  return { SVC_URL: t.context.app.url, SVC_API_KEY: t.context.key, SVC_RPC_URL: t.context.app.ledgers.rpcUrls['chain-devnet']!, ...extra };
}

const example = (t: { context: Context }, file: string, args: string[] = [], extra: Record<string, string> = {}) =>
  start(process.execPath, ['--conditions=svc-gateway-source', '--import', 'tsx', `examples/${file}`, ...args], env(t, extra));

const shown = (f: Finished) => `exit ${f.code}\n${f.stdout}\n${f.stderr}`;

async function createLink(t: { context: Context }): Promise<{ id: string; share_url: string }> {
  const agent = await recordAgent(t.context.app, t.context.key);
  const link = await http(t.context.app, 'POST', '/v1/payment-links', { key: t.context.key, body: linkBody(agent.mint) });
  if (link.status !== 201) throw new Error(JSON.stringify(link.body));
  return link.body;
}

for (const file of ['sign-and-submit-web3.ts', 'sign-and-submit-kit.ts']) {
  metaplexTest(test, `examples/${file} mints an agent: prepare → sign keeping the gateway's signature → submit → confirmed`, async (t) => {
    const out = await example(t, file).exited;
    t.is(out.code, 0, shown(out));
    const [, eventId, mint] = /prepared event (\w+): asset (\w+)/.exec(out.stdout) ?? [];
    const signature = /submitted (\w+)/.exec(out.stdout)?.[1];
    t.regex(out.stdout, new RegExp(`confirmed in slot \\d+: agent ${mint}`));
    const event = await http(t.context.app, 'GET', `/v1/events/${eventId}`, { key: t.context.key });
    t.like(event.body, { kind: 'agent.create', phase: 'confirmed', signature });
    const agent = await http(t.context.app, 'GET', `/v1/agents/${mint}`, { key: t.context.key });
    t.like(agent.body, { mint, source: 'prepared' });
  });
}

test('examples/seller.ts creates a payment link for the agent it is given', async (t) => {
  const agent = await recordAgent(t.context.app, t.context.key);
  const out = await example(t, 'seller.ts', [], { SVC_AGENT_MINT: agent.mint }).exited;
  t.is(out.code, 0, shown(out));
  const id = /Created (\w+):/.exec(out.stdout)?.[1];
  const link = await http(t.context.app, 'GET', `/v1/payment-links/${id}`, { key: t.context.key });
  t.is(link.status, 200);
  t.like(link.body, { owner_agent: agent.mint, label: 'Weather report', price: '$0.01' });
  t.regex(out.stdout, new RegExp(`Share URL: ${link.body.share_url.replace(/[?]/g, '\\?')}`));
});

test('examples/buyer.ts (the buyer kit) and examples/buyer-x402.ts (@x402/fetch + ExactSvmFeeScheme) each pay a link once', async (t) => {
  const link = await createLink(t);
  for (const [file, paid] of [
    ['buyer.ts', 1],
    ['buyer-x402.ts', 2],
  ] as const) {
    const out = await example(t, file, [link.share_url]).exited;
    t.is(out.code, 0, `${file}: ${shown(out)}`);
    t.regex(out.stdout, /^200 \{"forecast":"sunny"\}/m, file);
    const signature = /Paid in transaction (\w+)/.exec(out.stdout)?.[1];
    const read = await http(t.context.app, 'GET', `/v1/payment-links/${link.id}`, { key: t.context.key });
    t.like(read.body.counters, { settled_count: paid, last_tx_sig: signature }, file);
  }
});

test('examples/subscribe.ts prints events live over graphql-ws and ends after the count it was given', async (t) => {
  // A key of its own: a principal sees only its events, not the links the other tests create meanwhile.
  const key = await issueKey(t.context.app);
  const agent = await recordAgent(t.context.app, key);
  const child = example(t, 'subscribe.ts', ['1'], { SVC_EVENT_KINDS: 'payment_link.*', SVC_API_KEY: key });
  await child.printed(/Subscribed/);
  // "connected" precedes the subscription's registration by a moment: create links until one is delivered.
  let done: Finished | undefined;
  void child.exited.then((f) => (done = f));
  while (!done) {
    await http(t.context.app, 'POST', '/v1/payment-links', { key, body: linkBody(agent.mint) });
    await Promise.race([child.exited, new Promise((r) => setTimeout(r, 200))]);
  }
  t.is(done.code, 0, shown(done));
  t.regex(done.stdout, new RegExp(`payment_link\\.created CONFIRMED ${agent.mint}`));
});

test('examples/webhook-receiver.ts registers itself, verifies a delivery with standardwebhooks and cleans up', async (t) => {
  const key = await issueKey(t.context.app); // its own principal: deliveries of this test's links only
  const agent = await recordAgent(t.context.app, key);
  const child = example(t, 'webhook-receiver.ts', ['1'], { PORT: String(t.context.hookPort), SVC_API_KEY: key });
  await child.printed(/Registered webhook/);
  const id = /Registered webhook (\w+)/.exec(child.output().stdout)?.[1];
  const hooks = await http(t.context.app, 'GET', '/v1/webhooks', { key });
  t.true(hooks.body.data.some((h: { id: string }) => h.id === id));
  await http(t.context.app, 'POST', '/v1/payment-links', { key, body: linkBody(agent.mint) });
  const out = await child.exited;
  t.is(out.code, 0, shown(out));
  t.regex(out.stdout, /verified payment_link\.created \(delivery \w+\)/);
  t.notRegex(out.stderr, /refused/);
  const after = await http(t.context.app, 'GET', `/v1/webhooks/${id}`, { key });
  t.is(after.status, 404, 'the example deleted its subscription');
});
