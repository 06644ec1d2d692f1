import test from 'ava';
import { connect } from 'node:net';
import pino from 'pino';
import { ConfigError, loadConfig } from '../../interfaces/config.ts';
import { createFacilitatorApp, type FacilitatorApp } from '../../interfaces/app.ts';
import { http, issueKey, startTestApp, testConfig, type TestApp } from '../support/app.ts';
import { afterAll } from '../support/teardown.ts';

// A client that never finishes its request holds no socket: every listener (the gateway, with the paywall's
// before-fastify path; each embedded ledger's JSON-RPC and WebSocket ports; `npm run facilitator`) closes an unfinished
// head after SVC_HTTP_HEADERS_TIMEOUT_MS and an unfinished body after SVC_HTTP_REQUEST_TIMEOUT_MS, answering 408 in
// its error shape where the head arrived, while other clients are served meanwhile. One app with short bounds; every
// wait is on the socket's close.

const BOUNDS = { SVC_HTTP_HEADERS_TIMEOUT_MS: '1000', SVC_HTTP_REQUEST_TIMEOUT_MS: '2000' };

let app: TestApp;
let facilitator: FacilitatorApp;
let key: string;

test.before(async () => {
  // no job runner and no Metaplex programs: nothing here runs a job or builds an agent transaction
  app = await startTestApp({ env: { ...BOUNDS, SVC_JOBS: 'off', SVC_LEDGER_PROGRAMS: '' } });
  key = await issueKey(app);
  facilitator = await createFacilitatorApp(
    testConfig({
      ...BOUNDS,
      SVC_DATA_DIR: app.dataDir,
      DATABASE_URL: app.database.url,
      SVC_FACILITATOR_PORT: '0',
      SVC_FACILITATOR_HOST: '127.0.0.1',
      SVC_FACILITATOR_NETWORKS: 'devnet',
    }),
    { logger: pino({ level: 'silent' }) },
  );
  afterAll(() => facilitator.close()); // before the app, whose database it uses
});

/**
 * Opens a raw connection to `url`, sends `data` and never more; resolves when the server closes it, with everything
 * the server sent.
 */
function holdOpen(url: string, data: string): { opened: Promise<void>; closed: Promise<string> } {
  const { hostname, port } = new URL(url);
  const socket = connect(Number(port), hostname);
  const chunks: Buffer[] = [];
  const opened = new Promise<void>((resolve) => socket.once('connect', () => (data ? socket.write(data, () => resolve()) : resolve())));
  const closed = new Promise<string>((resolve) => {
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', () => {}); // a reset after the answer is a close too
    socket.once('close', () => resolve(Buffer.concat(chunks).toString('utf8')));
  });
  return { opened, closed };
}

/** The status and the JSON body of the one HTTP answer in `raw` (and how many answers it holds). */
function answer(raw: string): { status: number; headers: string; body: any; answers: number } {
  const [head = '', body = ''] = raw.split('\r\n\r\n', 2);
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0);
  let json: unknown = null;
  try {
    json = JSON.parse(body);
  } catch {
    json = body;
  }
  return { status, headers: head, body: json, answers: raw.match(/HTTP\/1\.1 \d{3} /g)?.length ?? 0 };
}

test('the bounds are settings: 10 s for the headers and 30 s for the whole request by default; the headers bound cannot exceed the other', (t) => {
  t.deepEqual(loadConfig({}).http, { headersMs: 10_000, requestMs: 30_000 });
  t.deepEqual(loadConfig(BOUNDS).http, { headersMs: 1000, requestMs: 2000 });
  const error = t.throws(() => loadConfig({ SVC_HTTP_HEADERS_TIMEOUT_MS: '40000' }), { instanceOf: ConfigError });
  t.regex(error?.message ?? '', /SVC_HTTP_HEADERS_TIMEOUT_MS="40000": must not exceed SVC_HTTP_REQUEST_TIMEOUT_MS/);
});

test('gateway: an unfinished body answers 408 request_timeout in the envelope and is closed; a silent or slow head is closed; others are served meanwhile', async (t) => {
  const { port } = new URL(app.url);
  const body = holdOpen(
    app.url,
    `POST /v1/seller/parse-price HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"price":`,
  );
  const head = holdOpen(app.url, `GET /v1/version HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n`);
  const silent = holdOpen(app.url, '');
  // the paywall's public route, no key: the answer (here a 404) may go out before the body, which then never ends
  const paywall = holdOpen(
    app.url,
    `POST /x/no-such-link HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{`,
  );
  await Promise.all([body.opened, head.opened, silent.opened, paywall.opened]);

  const served = await http(app, 'POST', '/v1/seller/parse-price', { key, body: { price: '$0.01' } });
  t.is(served.status, 200);
  t.is(served.body.amount_atomic, '10000');

  const timedOut = answer(await body.closed);
  t.is(timedOut.status, 408);
  t.is(timedOut.body.error, 'request_timeout');
  t.regex(timedOut.body.request_id, /^[0-9A-Z]{26}$/);
  t.regex(timedOut.headers, /X-Svc-Request-Id: [0-9A-Z]{26}/);
  t.regex(timedOut.headers, /Connection: close/);
  const slowHead = answer(await head.closed);
  t.is(slowHead.status, 408);
  t.is(slowHead.body.error, 'request_timeout');
  t.is(answer(await silent.closed).status, 408); // a connection that never sent a byte, like Node's own answer
  const x = answer(await paywall.closed);
  t.true(x.answers <= 1, 'never a second answer to one request');
  t.not(x.status, 200);
});

test('embedded ledger: its JSON-RPC port and its WebSocket port close unfinished requests (408 with a JSON-RPC error) and serve others meanwhile', async (t) => {
  const rpc = app.ledgers.rpcUrls['chain-devnet']!;
  const ws = `http://127.0.0.1:${Number(new URL(rpc).port) + 1}`;
  const post = (url: string) => `POST / HTTP/1.1\r\nHost: ${new URL(url).host}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"jsonrpc":`;
  const body = holdOpen(rpc, post(rpc));
  const wsBody = holdOpen(ws, post(ws));
  const upgrade = holdOpen(ws, `GET / HTTP/1.1\r\nHost: ${new URL(ws).host}\r\nUpgrade: websocket\r\n`);
  await Promise.all([body.opened, wsBody.opened, upgrade.opened]);

  const served = await fetch(rpc, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'getHealth' }),
  });
  t.deepEqual(await served.json(), { jsonrpc: '2.0', id: 1, result: 'ok' });

  for (const closed of [body.closed, wsBody.closed]) {
    const timedOut = answer(await closed);
    t.is(timedOut.status, 408);
    t.is(timedOut.body.error.code, -32600);
    t.is(timedOut.body.id, null);
  }
  t.is(answer(await upgrade.closed).status, 408);
});

test('facilitator: an unfinished body answers 408 request_timeout in the envelope and is closed; others are served meanwhile', async (t) => {
  const { host } = new URL(facilitator.url);
  const body = holdOpen(
    facilitator.url,
    `POST /verify HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"x402Version":`,
  );
  const head = holdOpen(facilitator.url, `GET /health HTTP/1.1\r\nHost: ${host}\r\n`);
  await Promise.all([body.opened, head.opened]);

  const served = await fetch(`${facilitator.url}/health`);
  t.is(served.status, 200);
  t.true(((await served.json()) as { ok: boolean }).ok);

  const timedOut = answer(await body.closed);
  t.is(timedOut.status, 408);
  t.is(timedOut.body.error, 'request_timeout');
  t.regex(timedOut.headers, /X-Svc-Request-Id: [0-9A-Z]{26}/);
  t.is(answer(await head.closed).status, 408);
});
