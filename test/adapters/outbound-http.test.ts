import test from 'ava';
import type { ExecutionContext } from 'ava';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { createServer as createTcpServer } from 'node:net';
import type { AddressInfo, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { GuardedOutboundHttp, isPublicAddress } from '../../adapters/http/outbound.ts';
import type { OutboundFailure, OutboundResponse } from '../../domain/ports/outbound-http.ts';

// DECISIONS "Webhooks": https only, public addresses only, unless the development setting allows private targets.

const guarded = new GuardedOutboundHttp({ allowPrivate: false });
const open = new GuardedOutboundHttp({ allowPrivate: true });

/** A real server on 127.0.0.1, port 0, closed when the test ends (open sockets included). */
async function serve(t: ExecutionContext, handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<{ server: Server; base: string }> {
  const server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  }));
  return { server, base: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

/** A TCP listener on every interface that counts the connections it receives: refusals must never reach it. */
async function tcpCounter(t: ExecutionContext): Promise<{ port: number; connections: () => number }> {
  let count = 0;
  const sockets = new Set<Socket>();
  const server = createTcpServer((socket) => {
    count++;
    sockets.add(socket);
    socket.destroy();
  });
  await new Promise<void>((resolve) => server.listen(0, resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { port: (server.address() as AddressInfo).port, connections: () => count };
}

function expectFailure(t: ExecutionContext, result: OutboundResponse | OutboundFailure, reason: OutboundFailure['reason']): OutboundFailure {
  if (result.ok) {
    t.fail(`expected ${reason}, got status ${result.status}`);
    throw new Error('unreachable');
  }
  t.is(result.reason, reason, result.message);
  t.true(result.message.length > 0);
  return result;
}

function expectResponse(t: ExecutionContext, result: OutboundResponse | OutboundFailure): OutboundResponse {
  if (!result.ok) {
    t.fail(`expected a response, got ${result.reason}: ${result.message}`);
    throw new Error('unreachable');
  }
  return result;
}

const text = (body: Uint8Array) => Buffer.from(body).toString('utf8');

// ---------------------------------------------------------------------------------------------------------------------
// Address classifier

const ADDRESSES: ReadonlyArray<readonly [string, boolean]> = [
  // public
  ['8.8.8.8', true],
  ['1.1.1.1', true],
  ['93.184.216.34', true],
  ['100.63.255.255', true],
  ['100.128.0.0', true],
  ['172.15.255.255', true],
  ['172.32.0.0', true],
  ['192.167.255.255', true],
  ['223.255.255.255', true],
  ['2606:4700::1111', true],
  ['2001:4860:4860::8888', true],
  ['2a00:1450:4001:81c::200e', true],
  ['::ffff:8.8.8.8', true],
  ['::ffff:808:808', true],
  ['64:ff9b::808:808', true], // NAT64 of 8.8.8.8
  ['2002:808:808::1', true], // 6to4 of 8.8.8.8
  ['[2606:4700::1111]', true],
  // IPv4 special purpose
  ['0.0.0.0', false],
  ['0.1.2.3', false],
  ['10.0.0.1', false],
  ['10.255.255.255', false],
  ['100.64.0.1', false],
  ['100.127.255.255', false],
  ['127.0.0.1', false],
  ['127.255.255.254', false],
  ['169.254.169.254', false],
  ['172.16.0.1', false],
  ['172.31.255.255', false],
  ['192.0.0.8', false],
  ['192.0.2.1', false],
  ['192.88.99.1', false],
  ['192.168.1.1', false],
  ['198.18.0.1', false],
  ['198.19.255.255', false],
  ['198.51.100.7', false],
  ['203.0.113.9', false],
  ['224.0.0.1', false],
  ['239.255.255.250', false],
  ['240.0.0.1', false],
  ['255.255.255.255', false],
  // IPv6 special purpose
  ['::', false],
  ['::1', false],
  ['[::1]', false],
  ['0:0:0:0:0:0:0:1', false],
  ['fe80::1', false],
  ['fe80::1%eth0', false],
  ['febf:ffff::1', false],
  ['fec0::1', false],
  ['fc00::1', false],
  ['fd12:3456:789a::1', false],
  ['ff02::1', false],
  ['ff0e::1', false],
  ['100::1', false],
  ['2001:db8::1', false],
  ['2001::1', false], // Teredo
  ['2001:2::1', false], // benchmarking
  ['3fff::1', false],
  ['::ffff:127.0.0.1', false],
  ['::ffff:7f00:1', false],
  ['::ffff:10.0.0.1', false],
  ['::ffff:169.254.169.254', false],
  ['::ffff:0.0.0.0', false],
  ['::127.0.0.1', false], // deprecated IPv4-compatible
  ['::a00:1', false],
  ['64:ff9b::a00:1', false], // NAT64 of 10.0.0.1
  ['64:ff9b::7f00:1', false], // NAT64 of 127.0.0.1
  ['64:ff9b::169.254.169.254', false],
  ['64:ff9b:1::808:808', false], // local-use NAT64
  ['2002:7f00:1::1', false], // 6to4 of 127.0.0.1
  ['2002:c0a8:101::1', false], // 6to4 of 192.168.1.1
  // not addresses
  ['', false],
  ['localhost', false],
  ['example.com', false],
  ['127.1', false],
  ['2130706433', false],
  ['0x7f000001', false],
  ['256.1.1.1', false],
  ['1.2.3.4.5', false],
  ['::ffff:1.2.3', false],
  ['1:2:3:4:5:6:7:8:9', false],
];

test('isPublicAddress classifies the special-purpose registries', (t) => {
  for (const [address, expected] of ADDRESSES) t.is(isPublicAddress(address), expected, address);
});

// ---------------------------------------------------------------------------------------------------------------------
// allowPrivate = false: refusals, none of which may reach a listener

test('loopback and private targets are refused before any connection', async (t) => {
  const { port, connections } = await tcpCounter(t);
  const urls = [
    `http://127.0.0.1:${port}/`,
    `https://127.0.0.1:${port}/`,
    `https://[::1]:${port}/`,
    `https://[::ffff:127.0.0.1]:${port}/`,
    `https://[::ffff:7f00:1]:${port}/`,
    `https://127.1:${port}/`, // WHATWG URL normalises to 127.0.0.1
    `https://2130706433:${port}/`,
    `https://0x7f.0.0.1:${port}/`,
    `https://0.0.0.0:${port}/`,
    `https://10.0.0.1:${port}/`,
    'https://169.254.169.254/latest/meta-data/',
    'https://192.168.1.1/',
    'https://100.64.0.1/',
    'https://[fe80::1]/',
    'https://[fd00::1]/',
    'https://[64:ff9b::a00:1]/',
    'https://224.0.0.1/',
    'https://255.255.255.255/',
  ];
  for (const url of urls) {
    const result = await guarded.request({ url, method: 'GET', timeoutMs: 2000 });
    t.false(result.ok, url);
    if (!result.ok) t.is(result.reason, 'url_refused', `${url}: ${result.message}`);
  }
  t.is(connections(), 0);
});

test('a host name resolving to loopback is refused by the connection-time lookup', async (t) => {
  const { port, connections } = await tcpCounter(t);
  for (const host of ['localhost']) {
    const failure = expectFailure(t, await guarded.request({ url: `https://${host}:${port}/hook`, method: 'POST', body: '{}', timeoutMs: 5000 }), 'url_refused');
    t.regex(failure.message, /not public/);
  }
  t.is(connections(), 0);
});

test('http: is refused when private targets are not allowed', async (t) => {
  const failure = expectFailure(t, await guarded.request({ url: 'http://example.com/hook', method: 'GET' }), 'url_refused');
  t.regex(failure.message, /http:/);
});

test('credentials in the URL are refused, and not echoed', async (t) => {
  for (const url of ['https://user:hunter2@example.com/', 'https://user@example.com/', 'https://:hunter2@example.com/']) {
    const failure = expectFailure(t, await guarded.request({ url, method: 'GET' }), 'url_refused');
    t.false(failure.message.includes('hunter2'));
  }
});

test('other schemes and malformed URLs are refused in both modes', async (t) => {
  for (const client of [guarded, open]) {
    for (const url of ['ftp://example.com/file', 'file:///etc/passwd', 'data:text/plain,hi', 'ws://example.com/', 'gopher://x/', 'not a url', '']) {
      expectFailure(t, await client.request({ url, method: 'GET' }), 'url_refused');
    }
  }
});

// ---------------------------------------------------------------------------------------------------------------------
// allowPrivate = true: the real exchange

async function echoServer(t: ExecutionContext) {
  return serve(t, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      res.setHeader('content-type', 'application/json');
      res.setHeader('x-multi', ['a', 'b']);
      res.setHeader('set-cookie', ['one=1', 'two=2']);
      res.end(JSON.stringify({ method: req.method, url: req.url, headers: req.headers, body: Buffer.concat(chunks).toString('utf8') }));
    });
  });
}

test('GET round trip: path and query kept, default user-agent, response headers lower-case and joined', async (t) => {
  const { base } = await echoServer(t);
  const res = expectResponse(t, await open.request({ url: `${base}/v1/weather?city=Paris&x=1`, method: 'GET', headers: { Accept: 'application/json' } }));
  t.is(res.status, 200);
  const echo = JSON.parse(text(res.body)) as { method: string; url: string; headers: Record<string, string>; body: string };
  t.is(echo.method, 'GET');
  t.is(echo.url, '/v1/weather?city=Paris&x=1');
  t.is(echo.headers['user-agent'], 'svc-gateway');
  t.is(echo.headers.accept, 'application/json');
  t.is(echo.headers['content-length'], undefined);
  t.is(res.headers['content-type'], 'application/json');
  t.is(res.headers['x-multi'], 'a, b');
  t.is(res.headers['set-cookie'], 'one=1, two=2');
  for (const name of Object.keys(res.headers)) t.is(name, name.toLowerCase());
  t.true(res.body instanceof Uint8Array);
});

test('POST round trip with a string body and a byte body; content-length set', async (t) => {
  const { base } = await echoServer(t);
  const payload = '{"type":"payment.settled","amount":"1.50","note":"café"}';
  for (const body of [payload, new TextEncoder().encode(payload)]) {
    const res = expectResponse(t, await open.request({
      url: `${base}/hook`,
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-svc-signature': 't=1,v1=ab', 'content-length': '1' },
      body,
    }));
    const echo = JSON.parse(text(res.body)) as { method: string; headers: Record<string, string>; body: string };
    t.is(echo.method, 'POST');
    t.is(echo.body, payload);
    t.is(echo.headers['content-length'], String(Buffer.byteLength(payload)));
    t.is(echo.headers['content-type'], 'application/json');
    t.is(echo.headers['x-svc-signature'], 't=1,v1=ab');
    t.is(echo.headers['transfer-encoding'], undefined);
  }
});

test('user-agent: constructor option, then the request header, win over the default', async (t) => {
  const { base } = await echoServer(t);
  const custom = new GuardedOutboundHttp({ allowPrivate: true, userAgent: 'svc-gateway/1.2 (+webhooks)' });
  const a = JSON.parse(text(expectResponse(t, await custom.request({ url: base, method: 'GET' })).body)) as { headers: Record<string, string> };
  t.is(a.headers['user-agent'], 'svc-gateway/1.2 (+webhooks)');
  const b = JSON.parse(text(expectResponse(t, await custom.request({ url: base, method: 'GET', headers: { 'user-agent': 'x' } })).body)) as { headers: Record<string, string> };
  t.is(b.headers['user-agent'], 'x');
});

test('POST without a body sends content-length 0', async (t) => {
  const { base } = await echoServer(t);
  const echo = JSON.parse(text(expectResponse(t, await open.request({ url: base, method: 'post' })).body)) as { method: string; headers: Record<string, string> };
  t.is(echo.method, 'POST');
  t.is(echo.headers['content-length'], '0');
});

test('any status is an answer: 418, 500, 204', async (t) => {
  const { base } = await serve(t, (req, res) => {
    const status = Number(req.url?.slice(1));
    res.statusCode = status;
    res.end(status === 204 ? undefined : `status ${status}`);
  });
  const teapot = expectResponse(t, await open.request({ url: `${base}/418`, method: 'GET' }));
  t.is(teapot.status, 418);
  t.is(text(teapot.body), 'status 418');
  t.is(expectResponse(t, await open.request({ url: `${base}/500`, method: 'GET' })).status, 500);
  const empty = expectResponse(t, await open.request({ url: `${base}/204`, method: 'GET' }));
  t.is(empty.status, 204);
  t.is(empty.body.length, 0);
});

test('redirects are not followed: the 3xx is the answer', async (t) => {
  let followed = 0;
  const { base } = await serve(t, (req, res) => {
    if (req.url === '/target') {
      followed++;
      res.end('target');
      return;
    }
    res.writeHead(302, { location: '/target' });
    res.end();
  });
  const res = expectResponse(t, await open.request({ url: `${base}/start`, method: 'GET' }));
  t.is(res.status, 302);
  t.is(res.headers.location, '/target');
  t.is(followed, 0);
});

test('a server that never answers → timeout, promptly, and the socket is aborted', async (t) => {
  let serverSideClosed!: () => void;
  const closed = new Promise<void>((resolve) => (serverSideClosed = resolve));
  const { base } = await serve(t, (req) => {
    req.socket.on('close', () => serverSideClosed());
  });
  const started = performance.now();
  expectFailure(t, await open.request({ url: base, method: 'GET', timeoutMs: 150 }), 'timeout');
  const elapsed = performance.now() - started;
  t.true(elapsed >= 140 && elapsed < 2000, `${elapsed} ms`);
  await closed; // the server sees the connection go away
  t.pass();
});

test('the timeout covers the whole body, not just the headers', async (t) => {
  const { base } = await serve(t, (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.write('first chunk, then silence');
  });
  const started = performance.now();
  expectFailure(t, await open.request({ url: base, method: 'GET', timeoutMs: 200 }), 'timeout');
  t.true(performance.now() - started < 2000);
});

test('a response above maxResponseBytes → too_large; exactly at the limit is fine', async (t) => {
  const { base } = await serve(t, (req, res) => {
    const size = Number(new URL(req.url ?? '/', 'http://x').searchParams.get('size'));
    if (req.url?.startsWith('/streamed')) {
      // no content-length: the limit must hold while counting
      res.writeHead(200, { 'transfer-encoding': 'chunked' });
      for (let sent = 0; sent < size; sent += 100) res.write('x'.repeat(Math.min(100, size - sent)));
      res.end();
    } else {
      res.end('x'.repeat(size));
    }
  });
  expectFailure(t, await open.request({ url: `${base}/declared?size=2000`, method: 'GET', maxResponseBytes: 1000 }), 'too_large');
  expectFailure(t, await open.request({ url: `${base}/streamed?size=5000`, method: 'GET', maxResponseBytes: 1000 }), 'too_large');
  t.is(expectResponse(t, await open.request({ url: `${base}/declared?size=1000`, method: 'GET', maxResponseBytes: 1000 })).body.length, 1000);
  t.is(expectResponse(t, await open.request({ url: `${base}/streamed?size=1000`, method: 'GET', maxResponseBytes: 1000 })).body.length, 1000);
  // default limit: 1 MiB
  expectFailure(t, await open.request({ url: `${base}/streamed?size=${1024 * 1024 + 100}`, method: 'GET' }), 'too_large');
});

test('connection refused → network', async (t) => {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  const failure = expectFailure(t, await open.request({ url: `http://127.0.0.1:${port}/`, method: 'GET', timeoutMs: 5000 }), 'network');
  t.regex(failure.message, /ECONNREFUSED/);
});

test('a connection reset before the response ends → network', async (t) => {
  const { base } = await serve(t, (req, res) => {
    res.writeHead(200, { 'content-length': '1000' });
    res.write('partial');
    setTimeout(() => req.socket.destroy(), 20);
  });
  expectFailure(t, await open.request({ url: base, method: 'GET', timeoutMs: 5000 }), 'network');
});

test('an unknown host → network', async (t) => {
  expectFailure(t, await open.request({ url: 'http://does-not-exist.invalid/', method: 'GET', timeoutMs: 5000 }), 'network');
});

test('header values node refuses become a refusal, not a throw', async (t) => {
  const { base } = await echoServer(t);
  expectFailure(t, await open.request({ url: base, method: 'GET', headers: { 'x-bad': 'a\r\nInjected: yes' } }), 'url_refused');
  expectFailure(t, await open.request({ url: base, method: 'GE T' }), 'url_refused');
});

test('https: certificates are verified (a self-signed server → network)', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'outbound-tls-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  try {
    await promisify(execFile)('openssl', [
      'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=localhost',
      '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem'),
    ]);
  } catch {
    t.log('openssl not available: https handshake path not exercised');
    t.pass();
    return;
  }
  let requests = 0;
  const server = createHttpsServer({ key: await readFile(join(dir, 'key.pem')), cert: await readFile(join(dir, 'cert.pem')) }, (_req, res) => {
    requests++;
    res.end('secret');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  }));
  const port = (server.address() as AddressInfo).port;
  const failure = expectFailure(t, await open.request({ url: `https://localhost:${port}/`, method: 'GET', timeoutMs: 5000 }), 'network');
  t.regex(failure.message, /self[- ]signed|certificate/i);
  t.is(requests, 0);
  // and with private targets refused, the same server is never dialled at all
  expectFailure(t, await guarded.request({ url: `https://localhost:${port}/`, method: 'GET', timeoutMs: 5000 }), 'url_refused');
  expectFailure(t, await guarded.request({ url: `https://127.0.0.1:${port}/`, method: 'GET', timeoutMs: 5000 }), 'url_refused');
});

test('check(): the same refusals without connecting, resolving host names; null when allowed', async (t) => {
  for (const url of ['https://127.0.0.1/x', 'https://[::1]/', 'https://169.254.169.254/latest', 'https://localhost/', 'http://example.com/', 'https://u:p@example.com/', 'ftp://example.com/', 'not a url']) {
    const refused = await guarded.check(url);
    t.is(refused?.reason, 'url_refused', url);
  }
  t.is((await guarded.check('https://no-such-host.invalid/'))?.reason, 'network');
  t.is(await guarded.check('https://8.8.8.8/'), null);
  t.is(await open.check('http://127.0.0.1:1/'), null);
  t.is((await open.check('ftp://127.0.0.1/'))?.reason, 'url_refused');
});
