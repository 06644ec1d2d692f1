import anyTest, { type ExecutionContext, type TestFn } from 'ava';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import Fastify from 'fastify';
import { HttpFacilitator } from '../../adapters/facilitator/http.ts';
import { InProcessFacilitator } from '../../adapters/facilitator/in-process.ts';
import type { FacilitatorService } from '../../domain/facilitator/service.ts';
import type { FacilitatorRequest } from '../../domain/facilitator/wire.ts';
import type { Facilitator } from '../../domain/ports/facilitator.ts';
import { DomainError } from '../../domain/shared/errors.ts';
import { type FacilitatorRoutesOptions, registerFacilitatorRoutes } from '../../interfaces/facilitator/routes.ts';
import { http, startTestApp, type TestApp } from '../support/app.ts';
import { settlesBefore } from '../support/until.ts';
import { facilitatorContract, type FacilitatorHarness } from './facilitator-contract.ts';

// The Facilitator port's two adapters against one gateway: InProcessFacilitator over app.services.facilitator, and
// HttpFacilitator over the routes the gateway mounts at /facilitator. Then what only HTTP has: the routes' error
// envelope (also mounted standalone at the root), and the adapter's throw rules when the facilitator misbehaves.

interface Context {
  app: TestApp;
  facilitator: FacilitatorService;
  harnesses: { inProcess: FacilitatorHarness; http: FacilitatorHarness };
}

const test = anyTest as TestFn<Context>;

const ACCOUNTS_SECRET = 'contract-accounts-secret-0123456789';

test.before(async (t) => {
  const app = await startTestApp({ env: { SVC_FACILITATOR_ACCOUNTS_SECRET: ACCOUNTS_SECRET } });
  const facilitator = app.services.facilitator;
  if (!facilitator) throw new Error('the test app runs no facilitator');
  const { fee } = app.services.settings;
  const common = {
    ledger: app.services.ledgers['chain-devnet']!,
    fund: async (owner: string, funds: { usdc?: string; sol?: string }) => {
      if (funds.sol) await app.services.dev.fund('chain-devnet', { address: owner, sol: funds.sol });
      if (funds.usdc) await app.services.dev.fund('chain-devnet', { address: owner, token: 'USDC', amount: funds.usdc });
    },
    fee: { bps: fee.bps, enforcement: fee.enforcement, authority: fee.authorities['chain-devnet'] },
  };
  t.context = {
    app,
    facilitator,
    harnesses: {
      inProcess: { ...common, facilitator: new InProcessFacilitator(facilitator), malformed: 'result' },
      http: { ...common, facilitator: new HttpFacilitator({ url: `${app.url}/facilitator`, token: ACCOUNTS_SECRET }), malformed: 'throws' },
    },
  };
});

facilitatorContract(test, { name: 'in-process', harness: (t) => (t.context as Context).harnesses.inProcess });
facilitatorContract(test, { name: 'http', harness: (t) => (t.context as Context).harnesses.http });

// --- the routes -------------------------------------------------------------------------------------------------

test('routes: a body that is not a verify/settle request is a 400 invalid_request envelope naming the fields, never a 500', async (t) => {
  const { app } = t.context;
  for (const path of ['/facilitator/verify', '/facilitator/settle']) {
    const empty = await http(app, 'POST', path, { body: {} });
    t.is(empty.status, 400, path);
    t.like(empty.body, { error: 'invalid_request', details: { issues: [{ path: 'x402Version' }] } });
    t.is(typeof empty.body.message, 'string');
    t.is(empty.body.request_id, empty.headers.get('x-svc-request-id'));

    const partial = await http(app, 'POST', path, { body: { x402Version: 2, paymentRequirements: { scheme: 'exact' } } });
    t.is(partial.status, 400);
    t.is(partial.body.error, 'invalid_request');
    const paths = (partial.body.details.issues as { path: string }[]).map((i) => i.path);
    t.true(paths.includes('paymentPayload'), paths.join(', '));
    t.true(paths.includes('paymentRequirements.network'), paths.join(', '));

    for (const raw of ['{', '[]', '"text"', 'null']) {
      const res = await http(app, 'POST', path, { body: raw });
      t.is(res.status, 400, `${path} ${raw}`);
      t.is(res.body.error, 'invalid_request');
    }
    const noType = await fetch(`${app.url}${path}`, { method: 'POST', body: 'x', headers: { 'content-type': 'application/x-www-form-urlencoded' } });
    t.is(noType.status, 400);
    t.is(((await noType.json()) as { error: string }).error, 'invalid_request');
  }
});

test('routes: a refused payment is a 200 with the x402 body', async (t) => {
  const { app } = t.context;
  const offer = {
    scheme: 'exact',
    network: 'solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1',
    asset: '4zMMC9srt5Ri5X14GAgXhaHii3GnPAEERYPJgZJDncDU',
    amount: '10000',
    payTo: (await t.context.facilitator.health()).fee_payer,
    maxTimeoutSeconds: 60,
    extra: {},
  };
  const body = { x402Version: 2, paymentPayload: { x402Version: 2, accepted: offer, payload: { transaction: 'AAAA' } }, paymentRequirements: offer };
  const verify = await http(app, 'POST', '/facilitator/verify', { body });
  t.is(verify.status, 200);
  t.like(verify.body, { isValid: false, invalidReason: 'invalid_transaction' });
  const settle = await http(app, 'POST', '/facilitator/settle', { body });
  t.is(settle.status, 200);
  t.like(settle.body, { success: false, errorReason: 'invalid_transaction', transaction: '', network: offer.network });
  const unsupported = await http(app, 'POST', '/facilitator/verify', {
    body: {
      ...body,
      paymentRequirements: { ...offer, network: 'eip155:1' },
      paymentPayload: { ...body.paymentPayload, accepted: { ...offer, network: 'eip155:1' } },
    },
  });
  t.is(unsupported.status, 200);
  t.like(unsupported.body, { isValid: false, invalidReason: 'unsupported_network' });
});

test('routes: POST /accounts spends rent, so it answers only the SVC_FACILITATOR_ACCOUNTS_SECRET bearer; a bad body is 400', async (t) => {
  const { app } = t.context;
  const owner = (await t.context.facilitator.health()).fee_payer;
  const body = { network: 'solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1', owner, assets: ['4zMMC9srt5Ri5X14GAgXhaHii3GnPAEERYPJgZJDncDU'] };
  for (const authorization of [undefined, 'Bearer wrong-secret-wrong-secret', ACCOUNTS_SECRET.slice(1)]) {
    const res = await fetch(`${app.url}/facilitator/accounts`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(authorization ? { authorization } : {}) },
      body: JSON.stringify(body),
    });
    const answer = (await res.json()) as Record<string, any>;
    t.is(res.status, 403, `${authorization}: ${JSON.stringify(answer)}`);
    t.is(answer.error, 'forbidden');
  }
  const allowed = await fetch(`${app.url}/facilitator/accounts`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${ACCOUNTS_SECRET}` },
    body: JSON.stringify(body),
  });
  t.is(allowed.status, 200);
  t.like(await allowed.json(), { network: body.network, owner, accounts: [{ asset: body.assets[0], ready: true }] });
  const bad = await fetch(`${app.url}/facilitator/accounts`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${ACCOUNTS_SECRET}` },
    body: JSON.stringify({ ...body, assets: [] }),
  });
  t.is(bad.status, 400);
  t.like(await bad.json(), { error: 'invalid_request', details: { issues: [{ path: 'assets' }] } });
  // Without the bearer the HTTP adapter is refused, and says so as facilitator_unavailable.
  const anonymous = new HttpFacilitator({ url: `${app.url}/facilitator` });
  const refused = await t.throwsAsync(anonymous.prepareAccounts(body), { instanceOf: DomainError });
  t.is(refused?.code, 'facilitator_unavailable');
  t.regex(refused?.message ?? '', /403/);
});

/** A fake facilitator: fault injection for what the real one does not do on demand. */
function fakeFacilitator(over: Partial<Facilitator>): FacilitatorRoutesOptions['facilitator'] {
  const never = () => Promise.reject(new Error('not used'));
  return {
    supported: never,
    health: never,
    verify: never,
    settle: never,
    prepareAccounts: never,
    mppSettle: never,
    cosign: never,
    accepts: never,
    status: never,
    ...over,
  };
}

test('routes standalone at the root (prefix ""): same paths without a prefix, same envelope, thrown errors mapped and masked', async (t) => {
  const fastify = Fastify();
  registerFacilitatorRoutes(fastify, {
    prefix: '',
    facilitator: fakeFacilitator({
      health: () => t.context.facilitator.health(),
      supported: () => Promise.reject(new DomainError('facilitator_unavailable', 'the ledger is down')),
      verify: () => Promise.reject(new Error('secret internals')),
      settle: () => Promise.reject(new DomainError('payment_pending', 'sent, not confirmed', { signature: null })),
    }),
  });
  await fastify.listen({ port: 0, host: '127.0.0.1' });
  t.teardown(() => fastify.close());
  const base = `http://127.0.0.1:${(fastify.server.address() as AddressInfo).port}`;
  const call = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${base}${path}`, {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as Record<string, any> };
  };

  const health = await call('GET', '/health');
  t.is(health.status, 200);
  t.is(health.body.fee_payer, (await t.context.facilitator.health()).fee_payer);

  const empty = await call('POST', '/verify', {});
  t.is(empty.status, 400);
  t.like(empty.body, { error: 'invalid_request', details: { issues: [{ path: 'x402Version' }] } });
  t.is(typeof empty.body.request_id, 'string');
  const badJson = await fetch(`${base}/settle`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{' });
  t.is(badJson.status, 400);
  t.like(await badJson.json(), { error: 'invalid_request' });

  t.like(await call('GET', '/supported'), { status: 502, body: { error: 'facilitator_unavailable', message: 'the ledger is down' } });
  const request = {
    x402Version: 1,
    paymentPayload: { x402Version: 1, scheme: 'exact', network: 'solana-devnet', payload: { transaction: 'AAAA' } },
    paymentRequirements: {
      scheme: 'exact',
      network: 'solana-devnet',
      maxAmountRequired: '1',
      resource: 'r',
      payTo: health.body.fee_payer,
      maxTimeoutSeconds: 5,
      asset: health.body.fee_payer,
    },
  };
  const masked = await call('POST', '/verify', request);
  t.is(masked.status, 500);
  t.is(masked.body.error, 'internal_error');
  t.false(JSON.stringify(masked.body).includes('secret internals'));
  t.like(await call('POST', '/settle', request), { status: 504, body: { error: 'payment_pending', details: { signature: null } } });
  t.is((await call('GET', '/facilitator/health')).status, 404, 'nothing under a prefix');
});

// --- HttpFacilitator's throw rules --------------------------------------------------------------------------------

const someRequest = { x402Version: 2 } as unknown as FacilitatorRequest;

async function serve(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<{ url: string; server: Server }> {
  const server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

function stop(server: Server): Promise<void> {
  server.closeAllConnections();
  return new Promise((resolve) => server.close(() => resolve()));
}

async function code(t: ExecutionContext, promise: Promise<unknown>): Promise<DomainError> {
  const error = await t.throwsAsync(promise, { instanceOf: DomainError });
  if (!error) throw new Error('expected a DomainError');
  return error;
}

test('http adapter: nobody listening → facilitator_unavailable everywhere, settle included (nothing was sent)', async (t) => {
  const { url, server } = await serve(() => {});
  await stop(server);
  const facilitator = new HttpFacilitator({ url });
  for (const call of [
    () => facilitator.supported(),
    () => facilitator.health(),
    () => facilitator.verify(someRequest),
    () => facilitator.settle(someRequest),
  ]) {
    const error = await code(t, call());
    t.is(error.code, 'facilitator_unavailable');
    t.regex(error.message, /ECONNREFUSED/);
  }
  const dns = await code(t, new HttpFacilitator({ url: 'http://facilitator.invalid' }).settle(someRequest));
  t.is(dns.code, 'facilitator_unavailable');
});

test('http adapter: no answer in time → facilitator_unavailable for verify, payment_pending { signature: null } for settle', async (t) => {
  const { url, server } = await serve(() => {}); // reads the request, never answers
  t.teardown(() => stop(server));
  const facilitator = new HttpFacilitator({ url, timeoutMs: 200, settleTimeoutMs: 300 });
  // the configured deadlines, not the defaults (10 s, and 60 s for settle): each answers before a 10 s timer
  const verify = await code(t, settlesBefore(facilitator.verify(someRequest), 10_000, 'verify'));
  t.is(verify.code, 'facilitator_unavailable');
  t.regex(verify.message, /no answer in time/);
  const health = await code(t, settlesBefore(facilitator.health(), 10_000, 'health'));
  t.is(health.code, 'facilitator_unavailable');
  const settle = await code(t, settlesBefore(facilitator.settle(someRequest), 10_000, 'settle'));
  t.is(settle.code, 'payment_pending');
  t.deepEqual(settle.details, { signature: null });
});

test('http adapter: connection lost after the settle was sent → payment_pending; the same on verify → facilitator_unavailable', async (t) => {
  const { url, server } = await serve((req) => {
    req.on('data', () => req.socket.destroy());
  });
  t.teardown(() => stop(server));
  const facilitator = new HttpFacilitator({ url });
  t.is((await code(t, facilitator.verify(someRequest))).code, 'facilitator_unavailable');
  const settle = await code(t, facilitator.settle(someRequest));
  t.is(settle.code, 'payment_pending');
  t.deepEqual(settle.details, { signature: null });
});

test('http adapter: status and shape of the answers', async (t) => {
  let answer: { status: number; body: string } = { status: 200, body: '' };
  const seen: string[] = [];
  const { url, server } = await serve((req, res) => {
    seen.push(`${req.method} ${req.url} ${req.headers['content-type'] ?? ''}`);
    req.resume();
    req.on('end', () => res.writeHead(answer.status, { 'content-type': 'application/json' }).end(answer.body));
  });
  t.teardown(() => stop(server));
  const facilitator = new HttpFacilitator({ url: `${url}/facilitator/` });
  const set = (status: number, body: unknown) => (answer = { status, body: typeof body === 'string' ? body : JSON.stringify(body) });

  set(200, { isValid: false, invalidReason: 'wrong_amount', payer: 'x', somethingNew: 1 });
  t.deepEqual(await facilitator.verify(someRequest), { isValid: false, invalidReason: 'wrong_amount', payer: 'x', somethingNew: 1 });
  t.is(seen.at(-1), 'POST /facilitator/verify application/json');
  set(200, { success: false, errorReason: 'duplicate_settlement', transaction: '', network: 'solana-devnet' });
  t.like(await facilitator.settle(someRequest), { success: false, errorReason: 'duplicate_settlement' });
  t.is(seen.at(-1), 'POST /facilitator/settle application/json');

  // garbage: not JSON, or JSON of another shape
  for (const body of ['<html>oops</html>', { ok: true }]) {
    set(200, body);
    for (const call of [() => facilitator.supported(), () => facilitator.health(), () => facilitator.verify(someRequest)]) {
      t.is((await code(t, call())).code, 'facilitator_unavailable');
    }
    const settle = await code(t, facilitator.settle(someRequest));
    t.is(settle.code, 'payment_pending', 'an answer that is not a settle response may hide a landed payment');
    t.deepEqual(settle.details, { signature: null });
  }
  t.is(seen.at(-4)?.split(' ')[1], '/facilitator/supported');
  t.is(seen.at(-3)?.split(' ')[1], '/facilitator/health');

  // 4xx: the facilitator refused the request, nothing was settled; its message is kept
  set(400, { error: 'invalid_request', message: 'Invalid request at paymentPayload: expected object', request_id: 'r1' });
  for (const call of [() => facilitator.verify(someRequest), () => facilitator.settle(someRequest)]) {
    const error = await code(t, call());
    t.is(error.code, 'facilitator_unavailable');
    t.regex(error.message, /400: invalid_request: Invalid request at paymentPayload/);
  }
  // 5xx: verify is unavailable; a settle may have been broadcast before the failure
  set(500, { error: 'internal_error', message: 'An unexpected error occurred.' });
  t.is((await code(t, facilitator.verify(someRequest))).code, 'facilitator_unavailable');
  t.is((await code(t, facilitator.supported())).code, 'facilitator_unavailable');
  const settle = await code(t, facilitator.settle(someRequest));
  t.is(settle.code, 'payment_pending');
  t.deepEqual(settle.details, { signature: null });
});

test('http adapter: the injected fetch is used, with the timeout signal', async (t) => {
  const calls: { url: string; init: RequestInit | undefined }[] = [];
  const fetch: typeof globalThis.fetch = async (input, init) => {
    calls.push({ url: String(input), init });
    return new Response(JSON.stringify({ kinds: [], extensions: [], signers: {} }), { status: 200 });
  };
  const facilitator = new HttpFacilitator({ url: 'http://facilitator.example//', fetch });
  t.deepEqual(await facilitator.supported(), { kinds: [], extensions: [], signers: {} });
  t.is(calls[0]?.url, 'http://facilitator.example/supported');
  t.is(calls[0]?.init?.method, 'GET');
  t.true(calls[0]?.init?.signal instanceof AbortSignal);
});
