import test from 'ava';
import type { ExecutionContext } from 'ava';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { createServer as createTcpServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { hostname, networkInterfaces } from 'node:os';
import { GuardedOutboundHttp, addressClass, isPublicAddress, type Resolver } from '../../adapters/http/outbound.ts';
import type { OutboundFailure, OutboundResponse } from '../../domain/ports/outbound-http.ts';
import { ConfigError, loadConfig } from '../../interfaces/config.ts';

// DECISIONS "Webhooks": https to public addresses only; SVC_OUTBOUND_ALLOW=host:port is the one opening
// (plain http, private addresses) for exactly the targets it names; the gateway's own listeners never, listed or not.

/** The default: nothing allow-listed. */
const guarded = new GuardedOutboundHttp();
const allowing = (...entries: string[]) => new GuardedOutboundHttp({ allow: entries });

/** A real server on 127.0.0.1, port 0, closed when the test ends (open sockets included); `client` allow-lists it. */
async function serve(
  t: ExecutionContext,
  handler: (req: IncomingMessage, res: ServerResponse) => void,
): Promise<{ server: Server; base: string; port: number; client: GuardedOutboundHttp }> {
  const server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  const port = (server.address() as AddressInfo).port;
  return { server, base: `http://127.0.0.1:${port}`, port, client: allowing(`127.0.0.1:${port}`) };
}

/** A TCP listener on every interface that counts the connections it receives: refusals must never reach it. */
async function tcpCounter(t: ExecutionContext): Promise<{ port: number; connections: () => number }> {
  let count = 0;
  const server = createTcpServer((socket) => {
    count++;
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

test('addressClass names what an address is, for the refusal message', (t) => {
  t.is(addressClass('8.8.8.8'), null);
  t.is(addressClass('127.0.0.1'), 'loopback');
  t.is(addressClass('0.0.0.0'), 'unspecified');
  t.is(addressClass('10.1.2.3'), 'private');
  t.is(addressClass('100.64.0.1'), 'CGNAT shared');
  t.is(addressClass('169.254.169.254'), 'link-local');
  t.is(addressClass('224.0.0.1'), 'multicast');
  t.is(addressClass('255.255.255.255'), 'broadcast');
  t.is(addressClass('::'), 'unspecified');
  t.is(addressClass('::1'), 'loopback');
  t.is(addressClass('fe80::1'), 'link-local');
  t.is(addressClass('fd00::1'), 'unique-local (private)');
  t.is(addressClass('::ffff:127.0.0.1'), 'IPv4-mapped loopback');
  t.is(addressClass('64:ff9b::a9fe:a9fe'), 'NAT64-embedded link-local');
  t.is(addressClass('2002:7f00:1::1'), '6to4-embedded loopback');
  t.is(addressClass('::7f00:1'), 'IPv4-compatible (deprecated)');
  t.is(addressClass('::ffff:8.8.8.8'), null);
  t.is(addressClass('localhost'), 'not an IP');
});

// ---------------------------------------------------------------------------------------------------------------------
// The default (nothing allow-listed): every loopback/private/link-local spelling refused, none reaching a listener

type Expect = 'address' | 'resolves' | 'dns' | 'credentials' | 'name';
const HOSTNAME = hostname();

/**
 * Authority spellings (the port is appended) and what refuses them over https; over plain http every one is refused
 * too (an IP literal for its address, a name for the scheme). "name": resolution depends on the machine (refused for
 * its address or for not resolving). Without these refusals, 48 of 64 such spellings reached a local service.
 */
const SPELLINGS: ReadonlyArray<readonly [host: string, expect: Expect]> = [
  // IPv4 loopback, every way WHATWG URL accepts it
  ['127.0.0.1', 'address'],
  ['127.1', 'address'],
  ['127.0.1', 'address'],
  ['2130706433', 'address'],
  ['0x7f000001', 'address'],
  ['0X7F000001', 'address'],
  ['0x7f.0.0.1', 'address'],
  ['0x7f.1', 'address'],
  ['0x7F.0x00.0x00.0x01', 'address'],
  ['0177.0.0.1', 'address'],
  ['0177.1', 'address'],
  ['017700000001', 'address'],
  ['127.000.000.001', 'address'],
  ['127.0.0.1.', 'address'],
  ['127.0.0.1%2e', 'address'],
  ['%31%32%37.0.0.1', 'address'],
  ['１２７．０．０．１', 'address'],
  ['①②⑦.0.0.1', 'address'],
  ['127。0。0。1', 'address'],
  ['12\t7.0.0.1', 'address'],
  ['127.255.255.254', 'address'],
  ['127.1.2.3', 'address'],
  // unspecified / "this network"
  ['0.0.0.0', 'address'],
  ['0', 'address'],
  ['0x0', 'address'],
  ['00.0.0.0', 'address'],
  ['0.0.0.0.', 'address'],
  ['0.1.2.3', 'address'],
  // private, CGNAT, link-local (cloud metadata), multicast, broadcast, benchmarking
  ['10.0.0.1', 'address'],
  ['10.1', 'address'],
  ['172.16.0.1', 'address'],
  ['192.168.0.1', 'address'],
  ['0300.0250.0.1', 'address'],
  ['3232235521', 'address'],
  ['169.254.169.254', 'address'],
  ['0xa9fea9fe', 'address'],
  ['2852039166', 'address'],
  ['0251.0376.0251.0376', 'address'],
  ['100.64.0.1', 'address'],
  ['224.0.0.1', 'address'],
  ['255.255.255.255', 'address'],
  ['198.18.0.1', 'address'],
  // IPv6: loopback, unspecified, IPv4-mapped/compatible, NAT64, 6to4, link-local, unique-local, multicast
  ['[::1]', 'address'],
  ['[0:0:0:0:0:0:0:1]', 'address'],
  ['[0000:0000:0000:0000:0000:0000:0000:0001]', 'address'],
  ['[::0:1]', 'address'],
  ['[::]', 'address'],
  ['[::ffff:127.0.0.1]', 'address'],
  ['[::ffff:7f00:1]', 'address'],
  ['[::FFFF:7F00:1]', 'address'],
  ['[::ffff:0.0.0.0]', 'address'],
  ['[::ffff:169.254.169.254]', 'address'],
  ['[::ffff:a00:1]', 'address'],
  ['[::127.0.0.1]', 'address'],
  ['[64:ff9b::127.0.0.1]', 'address'],
  ['[64:ff9b::a9fe:a9fe]', 'address'],
  ['[2002:7f00:1::]', 'address'],
  ['[fe80::1]', 'address'],
  ['[fc00::1]', 'address'],
  ['[fd00::2]', 'address'],
  ['[ff02::1]', 'address'],
  // names: resolved, every address judged
  ['localhost', 'resolves'],
  ['LOCALHOST', 'resolves'],
  ['LocalHost', 'resolves'],
  ['ⓛⓞⓒⓐⓛⓗⓞⓢⓣ', 'resolves'],
  ['ｌｏｃａｌｈｏｓｔ', 'resolves'],
  ['loc%61lhost', 'resolves'],
  ['localhost.', 'dns'],
  ['LOCALHOST.', 'dns'],
  ['localhost%2e', 'dns'],
  ['no-such-host.invalid', 'dns'],
  [HOSTNAME, 'name'],
  ['ip6-localhost', 'name'],
  ['foo.localhost', 'name'],
  // credentials
  ['user:pass@127.0.0.1', 'credentials'],
  ['user@127.0.0.1', 'credentials'],
  [':pass@[::1]', 'credentials'],
  ['user:pass@localhost', 'credentials'],
  ['user:pass@localhost.', 'credentials'],
  ['evil.example@2130706433', 'credentials'],
];

/** Whole-URL spellings WHATWG URL reads as http://127.0.0.1:PORT/. */
const URL_SPELLINGS = (port: number) => [`http:\\\\127.0.0.1:${port}\\`, `http:/127.0.0.1:${port}/`, `http:127.0.0.1:${port}`, `HTTP://127.0.0.1:0${port}/`];

const MESSAGES: Record<Expect, RegExp> = {
  address: /is not a public address \(/,
  resolves: /resolves to 127\.0\.0\.1, not a public address \(loopback\)/,
  dns: /does not resolve|ENOTFOUND|EAI_AGAIN/,
  credentials: /credentials/,
  name: /not a public address|does not resolve|ENOTFOUND|EAI_AGAIN/,
};
const REASONS: Record<Expect, ReadonlyArray<OutboundFailure['reason']>> = {
  address: ['url_refused'],
  resolves: ['url_refused'],
  dns: ['network'],
  credentials: ['url_refused'],
  name: ['url_refused', 'network'],
};

test(`the default refuses ${SPELLINGS.length} × 2 loopback/private/link-local spellings with a clear reason, and none connects`, async (t) => {
  const { port, connections } = await tcpCounter(t);
  t.true(SPELLINGS.length >= 64);
  const body = '{"jsonrpc":"2.0","id":1,"method":"svc_mintStable","params":["11111111111111111111111111111111","USDC","1000000"]}';
  const refusedBoth = async (url: string, reasons: ReadonlyArray<OutboundFailure['reason']>, message: RegExp) => {
    const checked = await guarded.check(url);
    t.truthy(checked, `check allowed ${JSON.stringify(url)}`);
    if (checked) {
      t.true(reasons.includes(checked.reason), `check ${JSON.stringify(url)}: ${checked.reason} ${checked.message}`);
      t.regex(checked.message, message, JSON.stringify(url));
      t.false(checked.message.includes('pass'), 'credentials are never echoed');
    }
    const result = await guarded.request({ url, method: 'POST', headers: { 'content-type': 'application/json' }, body, timeoutMs: 15_000 });
    t.false(result.ok, `request reached ${JSON.stringify(url)}`);
    if (!result.ok) {
      t.true(reasons.includes(result.reason), `request ${JSON.stringify(url)}: ${result.reason} ${result.message}`);
      t.regex(result.message, message, JSON.stringify(url));
    }
  };
  let tried = 0;
  for (const [host, expect] of SPELLINGS) {
    await refusedBoth(`https://${host}:${port}/`, REASONS[expect], MESSAGES[expect]);
    // plain http: an IP literal is refused for its address, a name for the scheme (before any DNS), credentials first
    const overHttp = expect === 'address' || expect === 'credentials' ? MESSAGES[expect] : /plain http is not allowed/;
    await refusedBoth(`http://${host}:${port}/`, ['url_refused'], overHttp);
    tried += 2;
  }
  for (const url of URL_SPELLINGS(port)) {
    await refusedBoth(url, ['url_refused'], MESSAGES.address);
    tried++;
  }
  await refusedBoth('http://169.254.169.254/latest/meta-data/', ['url_refused'], /169\.254\.169\.254 is not a public address \(link-local\)/);
  t.is(connections(), 0, `none of ${tried} spellings connected`);

  // The counter does see connections: the same listener, once allow-listed (by address, then by name).
  await allowing(`127.0.0.1:${port}`).request({ url: `http://127.0.0.1:${port}/`, method: 'GET', timeoutMs: 3000 });
  await allowing(`localhost:${port}`).request({ url: `http://localhost:${port}/`, method: 'GET', timeoutMs: 3000 });
  t.is(connections(), 2);
});

test('a host name resolving to loopback is refused by the connection-time lookup', async (t) => {
  const { port, connections } = await tcpCounter(t);
  const failure = expectFailure(
    t,
    await guarded.request({ url: `https://localhost:${port}/hook`, method: 'POST', body: '{}', timeoutMs: 5000 }),
    'url_refused',
  );
  t.regex(failure.message, /not a public address/);
  t.is(connections(), 0);
});

test('http: is refused for a target not on the allow-list', async (t) => {
  const failure = expectFailure(t, await guarded.request({ url: 'http://example.com/hook', method: 'GET' }), 'url_refused');
  t.regex(failure.message, /plain http/);
  t.regex(failure.message, /SVC_OUTBOUND_ALLOW/);
});

test('credentials in the URL are refused, allow-listed or not, and not echoed', async (t) => {
  for (const client of [guarded, allowing('example.com:443', '127.0.0.1:8080')]) {
    for (const url of ['https://user:hunter2@example.com/', 'https://user@example.com/', 'https://:hunter2@example.com/', 'http://u:hunter2@127.0.0.1:8080/']) {
      const failure = expectFailure(t, await client.request({ url, method: 'GET' }), 'url_refused');
      t.false(failure.message.includes('hunter2'));
    }
  }
});

test('other schemes and malformed URLs are refused, allow-listed or not', async (t) => {
  for (const client of [guarded, allowing('example.com:80', 'example.com:21', 'x:70')]) {
    for (const url of ['ftp://example.com/file', 'file:///etc/passwd', 'data:text/plain,hi', 'ws://example.com/', 'gopher://x/', 'not a url', '']) {
      expectFailure(t, await client.request({ url, method: 'GET' }), 'url_refused');
      t.is((await client.check(url))?.reason, 'url_refused', url);
    }
  }
});

// ---------------------------------------------------------------------------------------------------------------------
// SVC_OUTBOUND_ALLOW: exactly the named host:port

test('the allow-list opens exactly the named host and port: every spelling of that URL, nothing else', async (t) => {
  const { port, server, client } = await serve(t, (req, res) => res.end(req.url));
  let received = 0;
  server.on('request', () => received++);
  const other = await tcpCounter(t);

  for (const url of [`http://127.0.0.1:${port}/a`, `http://2130706433:${port}/b`, `http://127.1:${port}/c`, `https://127.0.0.1:${port}/`]) {
    t.is(await client.check(url), null, url);
  }
  t.is(expectResponse(t, await client.request({ url: `http://127.0.0.1:${port}/a`, method: 'GET' })).status, 200);
  t.is(text(expectResponse(t, await client.request({ url: `http://2130706433:${port}/b`, method: 'GET' })).body), '/b');
  t.is(text(expectResponse(t, await client.request({ url: `http://127.1:${port}/c`, method: 'GET' })).body), '/c');
  t.is(received, 3);

  const refused = [
    `http://localhost:${port}/`, // another name for the same address is another target
    `https://localhost:${port}/`,
    `http://[::1]:${port}/`,
    `http://[::ffff:127.0.0.1]:${port}/`,
    `http://127.0.0.2:${port}/`,
    `http://0.0.0.0:${port}/`,
    `http://127.0.0.1:${other.port}/`, // another port
    `http://127.0.0.1/`,
  ];
  for (const url of refused) {
    t.is((await client.check(url))?.reason, 'url_refused', url);
    expectFailure(t, await client.request({ url, method: 'GET', timeoutMs: 3000 }), 'url_refused');
  }
  t.is(received, 3, 'no refused spelling reached the listed server');
  t.is(other.connections(), 0);

  // A name entry: that name (any case, any IDN spelling) and port; not the address it resolves to, not "localhost."
  const byName = allowing(`localhost:${port}`);
  t.is(expectResponse(t, await byName.request({ url: `http://LOCALHOST:${port}/n`, method: 'GET' })).status, 200);
  t.is(received, 4);
  for (const url of [`http://127.0.0.1:${port}/`, `http://localhost.:${port}/`, `http://localhost:${other.port}/`]) {
    expectFailure(t, await byName.request({ url, method: 'GET', timeoutMs: 3000 }), 'url_refused');
  }
  t.is(received, 4);
  t.is(other.connections(), 0);
});

test('own listeners are refused even when allow-listed, on every local address and through names', async (t) => {
  const { port, connections } = await tcpCounter(t);
  const external = Object.values(networkInterfaces())
    .flat()
    .find((i) => i && !i.internal && i.family === 'IPv4')?.address;
  const entries = [`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`, `0.0.0.0:${port}`, `[::ffff:7f00:1]:${port}`, `127.0.0.2:${port}`];
  if (external) entries.push(`${external}:${port}`);
  const client = allowing(...entries);
  // Listed, it connects…
  await client.request({ url: `http://127.0.0.1:${port}/`, method: 'GET', timeoutMs: 3000 });
  t.is(connections(), 1);
  // …until the gateway registers the port as its own listener (as app.ts does after listen).
  client.refuse(`0.0.0.0:${port}`);
  for (const entry of entries) {
    for (const url of [`http://${entry}/`, `https://${entry}/`]) {
      const checked = await client.check(url);
      t.is(checked?.reason, 'url_refused', url);
      t.regex(checked?.message ?? '', /own listeners/, url);
      const failure = expectFailure(t, await client.request({ url, method: 'POST', body: '{}', timeoutMs: 3000 }), 'url_refused');
      t.regex(failure.message, /own listeners/);
    }
  }
  t.is(connections(), 1, 'nothing connected after the refusal');
  t.throws(() => client.refuse('no port'), { message: /host:port/ });
});

test('DNS rebinding: the addresses judged are the ones dialled — a name public at check() and loopback at connect is refused', async (t) => {
  const { port, connections } = await tcpCounter(t);
  const answers: Record<string, string[][]> = {
    'rebind.example': [['8.8.8.8'], ['127.0.0.1']],
    'mixed.example': [['8.8.8.8', '127.0.0.1']],
    'listed.example': [['127.0.0.1'], ['127.0.0.1']],
  };
  const calls: string[] = [];
  const resolve: Resolver = (hostname, _options, callback) => {
    calls.push(hostname);
    const next = answers[hostname]?.shift();
    if (!next) return callback(Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' }), []);
    callback(
      null,
      next.map((address) => ({ address, family: address.includes(':') ? 6 : 4 })),
    );
  };
  const client = new GuardedOutboundHttp({ resolve, allow: [`listed.example:${port}`] });

  t.is(await client.check(`https://rebind.example:${port}/`), null, 'public when checked');
  const rebound = expectFailure(t, await client.request({ url: `https://rebind.example:${port}/`, method: 'GET', timeoutMs: 3000 }), 'url_refused');
  t.regex(rebound.message, /rebind\.example resolves to 127\.0\.0\.1, not a public address \(loopback\)/);

  // one private answer among public ones refuses the name (happy eyeballs could fall back to it)
  t.regex((await client.check(`https://mixed.example:${port}/`))?.message ?? '', /127\.0\.0\.1, not a public address/);

  // listed, then registered as our own between check and connect: the connect-time answer is judged again
  t.is(await client.check(`http://listed.example:${port}/`), null);
  client.refuse(`127.0.0.1:${port}`);
  t.regex(
    expectFailure(t, await client.request({ url: `http://listed.example:${port}/`, method: 'GET', timeoutMs: 3000 }), 'url_refused').message,
    /own listeners/,
  );

  t.deepEqual(calls, ['rebind.example', 'rebind.example', 'mixed.example', 'listed.example', 'listed.example']);
  t.is(connections(), 0);
});

test('check() resolves names: an allow-listed name that does not resolve ("localhost.", .invalid) is a network failure', async (t) => {
  const { port, connections } = await tcpCounter(t);
  const client = allowing(`localhost.:${port}`, `does-not-resolve.invalid:${port}`, `localhost:${port}`);
  for (const host of ['localhost.', 'does-not-resolve.invalid']) {
    const url = `http://${host}:${port}/`;
    const checked = await client.check(url);
    t.is(checked?.reason, 'network', url);
    t.regex(checked?.message ?? '', new RegExp(`${host.replace(/\./g, '\\.')} does not resolve`));
    expectFailure(t, await client.request({ url, method: 'GET', timeoutMs: 15_000 }), 'network');
  }
  t.is(await client.check(`http://localhost:${port}/`), null, 'a listed name that resolves is allowed');
  t.is((await guarded.check('https://no-such-host.invalid/'))?.reason, 'network');
  t.is(connections(), 0);
});

test('check(): the same refusals without connecting, resolving host names; null when allowed', async (t) => {
  for (const url of [
    'https://127.0.0.1/x',
    'https://[::1]/',
    'https://169.254.169.254/latest',
    'https://localhost/',
    'http://example.com/',
    'https://u:p@example.com/',
    'ftp://example.com/',
    'not a url',
  ]) {
    const refused = await guarded.check(url);
    t.is(refused?.reason, 'url_refused', url);
  }
  t.is(await guarded.check('https://8.8.8.8/'), null);
  t.is(await allowing('127.0.0.1:1').check('http://127.0.0.1:1/'), null);
  t.is((await allowing('127.0.0.1:21').check('ftp://127.0.0.1/'))?.reason, 'url_refused');
});

test('a bad allow-list entry is refused when the adapter is built', (t) => {
  t.throws(() => allowing('localhost'), { message: /host:port/ });
  t.throws(() => allowing('localhost:0'), { message: /1–65535/ });
});

// ---------------------------------------------------------------------------------------------------------------------
// Configuration

test('SVC_OUTBOUND_ALLOW: host:port entries, normalised like URLs; empty by default in every setup', (t) => {
  t.deepEqual(loadConfig({}).outbound.allow, []);
  t.deepEqual(loadConfig({ SVC_DEVNET_LEDGER: 'https://api.devnet.solana.com' }).outbound.allow, []);
  t.deepEqual(loadConfig({ SVC_OUTBOUND_ALLOW: '' }).outbound.allow, []);
  t.deepEqual(loadConfig({ SVC_OUTBOUND_ALLOW: ' localhost:3000 , 127.1:8080,[::FFFF:127.0.0.1]:4000,LOCALHOST:3000,ⓐpi.dev:443,' }).outbound.allow, [
    'localhost:3000',
    '127.0.0.1:8080',
    '[::ffff:7f00:1]:4000',
    'api.dev:443',
  ]);
});

test('SVC_OUTBOUND_ALLOW: a bad entry stops start-up naming it', (t) => {
  for (const bad of [
    'localhost',
    'localhost:0',
    'localhost:65536',
    'http://localhost:3000',
    '*:80',
    'localhost:3000/path',
    'user@localhost:3000',
    '[::1]',
    '::1:80',
    'a b:1',
    '[zz::1]:80',
  ]) {
    const error = t.throws(() => loadConfig({ SVC_OUTBOUND_ALLOW: `localhost:3000,${bad}` }), { instanceOf: ConfigError });
    t.regex(error?.message ?? '', /SVC_OUTBOUND_ALLOW/, bad);
    t.true(error?.message.includes(JSON.stringify(bad)) || error?.message.includes(bad), `${bad}: ${error?.message}`);
  }
});

test('SVC_OUTBOUND_ALLOW_PRIVATE was removed: "true" stops start-up pointing to SVC_OUTBOUND_ALLOW; "false" is harmless', (t) => {
  for (const value of ['true', '1']) {
    t.throws(() => loadConfig({ SVC_OUTBOUND_ALLOW_PRIVATE: value }), {
      instanceOf: ConfigError,
      message: /SVC_OUTBOUND_ALLOW_PRIVATE.*removed.*SVC_OUTBOUND_ALLOW=host:port/s,
    });
  }
  for (const value of ['false', '0', '']) t.deepEqual(loadConfig({ SVC_OUTBOUND_ALLOW_PRIVATE: value }).outbound.allow, []);
});

// ---------------------------------------------------------------------------------------------------------------------
// Allow-listed targets: the real exchange

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
  const { base, client } = await echoServer(t);
  const res = expectResponse(t, await client.request({ url: `${base}/v1/weather?city=Paris&x=1`, method: 'GET', headers: { Accept: 'application/json' } }));
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
  const { base, client } = await echoServer(t);
  const payload = '{"type":"payment.settled","amount":"1.50","note":"café"}';
  for (const body of [payload, new TextEncoder().encode(payload)]) {
    const res = expectResponse(
      t,
      await client.request({
        url: `${base}/hook`,
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-svc-signature': 't=1,v1=ab', 'content-length': '1' },
        body,
      }),
    );
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
  const { base, port } = await echoServer(t);
  const custom = new GuardedOutboundHttp({ allow: [`127.0.0.1:${port}`], userAgent: 'svc-gateway/1.2 (+webhooks)' });
  const a = JSON.parse(text(expectResponse(t, await custom.request({ url: base, method: 'GET' })).body)) as { headers: Record<string, string> };
  t.is(a.headers['user-agent'], 'svc-gateway/1.2 (+webhooks)');
  const b = JSON.parse(text(expectResponse(t, await custom.request({ url: base, method: 'GET', headers: { 'user-agent': 'x' } })).body)) as {
    headers: Record<string, string>;
  };
  t.is(b.headers['user-agent'], 'x');
});

test('POST without a body sends content-length 0', async (t) => {
  const { base, client } = await echoServer(t);
  const echo = JSON.parse(text(expectResponse(t, await client.request({ url: base, method: 'post' })).body)) as {
    method: string;
    headers: Record<string, string>;
  };
  t.is(echo.method, 'POST');
  t.is(echo.headers['content-length'], '0');
});

test('any status is an answer: 418, 500, 204', async (t) => {
  const { base, client } = await serve(t, (req, res) => {
    const status = Number(req.url?.slice(1));
    res.statusCode = status;
    res.end(status === 204 ? undefined : `status ${status}`);
  });
  const teapot = expectResponse(t, await client.request({ url: `${base}/418`, method: 'GET' }));
  t.is(teapot.status, 418);
  t.is(text(teapot.body), 'status 418');
  t.is(expectResponse(t, await client.request({ url: `${base}/500`, method: 'GET' })).status, 500);
  const empty = expectResponse(t, await client.request({ url: `${base}/204`, method: 'GET' }));
  t.is(empty.status, 204);
  t.is(empty.body.length, 0);
});

test('redirects are not followed: the 3xx is the answer', async (t) => {
  let followed = 0;
  const { base, client } = await serve(t, (req, res) => {
    if (req.url === '/target') {
      followed++;
      res.end('target');
      return;
    }
    res.writeHead(302, { location: '/target' });
    res.end();
  });
  const res = expectResponse(t, await client.request({ url: `${base}/start`, method: 'GET' }));
  t.is(res.status, 302);
  t.is(res.headers.location, '/target');
  t.is(followed, 0);
});

test('a server that never answers → timeout, promptly, and the socket is aborted', async (t) => {
  const { server, base, client } = await serve(t, () => {});
  // Watched from the connection, not the request handler: on a loaded machine the timeout can fire before the
  // server has parsed the request, and the handler would never run.
  const closed = new Promise<void>((resolve) => server.on('connection', (socket) => socket.on('close', () => resolve())));
  const started = performance.now();
  const failure = expectFailure(t, await client.request({ url: base, method: 'GET', timeoutMs: 150 }), 'timeout');
  const elapsed = performance.now() - started;
  // promptly: the 150 ms deadline, not the 15 s default (its message names it; a lower bound load cannot break)
  t.regex(failure.message, /within 150 ms/);
  t.true(elapsed >= 140, `${elapsed} ms`);
  await closed; // the server sees the connection go away
  t.pass();
});

test('the timeout covers the whole body, not just the headers', async (t) => {
  const { base, client } = await serve(t, (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.write('first chunk, then silence');
  });
  const failure = expectFailure(t, await client.request({ url: base, method: 'GET', timeoutMs: 200 }), 'timeout');
  t.regex(failure.message, /no complete answer within 200 ms/, 'the 200 ms deadline, not the 15 s default');
});

test('a response above maxResponseBytes → too_large; exactly at the limit is fine', async (t) => {
  const { base, client } = await serve(t, (req, res) => {
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
  expectFailure(t, await client.request({ url: `${base}/declared?size=2000`, method: 'GET', maxResponseBytes: 1000 }), 'too_large');
  expectFailure(t, await client.request({ url: `${base}/streamed?size=5000`, method: 'GET', maxResponseBytes: 1000 }), 'too_large');
  t.is(expectResponse(t, await client.request({ url: `${base}/declared?size=1000`, method: 'GET', maxResponseBytes: 1000 })).body.length, 1000);
  t.is(expectResponse(t, await client.request({ url: `${base}/streamed?size=1000`, method: 'GET', maxResponseBytes: 1000 })).body.length, 1000);
  // default limit: 1 MiB
  expectFailure(t, await client.request({ url: `${base}/streamed?size=${1024 * 1024 + 100}`, method: 'GET' }), 'too_large');
});

test('connection refused → network', async (t) => {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  const failure = expectFailure(
    t,
    await allowing(`127.0.0.1:${port}`).request({ url: `http://127.0.0.1:${port}/`, method: 'GET', timeoutMs: 5000 }),
    'network',
  );
  t.regex(failure.message, /ECONNREFUSED/);
});

test('a connection reset before the response ends → network', async (t) => {
  const { base, client } = await serve(t, (req, res) => {
    res.writeHead(200, { 'content-length': '1000' });
    res.write('partial');
    setTimeout(() => req.socket.destroy(), 20);
  });
  expectFailure(t, await client.request({ url: base, method: 'GET', timeoutMs: 5000 }), 'network');
});

test('an unknown host → network', async (t) => {
  expectFailure(t, await guarded.request({ url: 'https://does-not-exist.invalid/', method: 'GET', timeoutMs: 15_000 }), 'network');
  expectFailure(t, await allowing('does-not-exist.invalid:80').request({ url: 'http://does-not-exist.invalid/', method: 'GET', timeoutMs: 15_000 }), 'network');
});

test('header values node refuses become a refusal, not a throw', async (t) => {
  const { base, client } = await echoServer(t);
  expectFailure(t, await client.request({ url: base, method: 'GET', headers: { 'x-bad': 'a\r\nInjected: yes' } }), 'url_refused');
  expectFailure(t, await client.request({ url: base, method: 'GE T' }), 'url_refused');
});

test('https: certificates are verified (a self-signed server → network)', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'outbound-tls-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  try {
    await promisify(execFile)('openssl', [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-days',
      '1',
      '-subj',
      '/CN=localhost',
      '-keyout',
      join(dir, 'key.pem'),
      '-out',
      join(dir, 'cert.pem'),
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
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  const port = (server.address() as AddressInfo).port;
  const failure = expectFailure(
    t,
    await allowing(`localhost:${port}`).request({ url: `https://localhost:${port}/`, method: 'GET', timeoutMs: 5000 }),
    'network',
  );
  t.regex(failure.message, /self[- ]signed|certificate/i);
  t.is(requests, 0);
  // and not allow-listed, the same server is never dialled at all
  expectFailure(t, await guarded.request({ url: `https://localhost:${port}/`, method: 'GET', timeoutMs: 5000 }), 'url_refused');
  expectFailure(t, await guarded.request({ url: `https://127.0.0.1:${port}/`, method: 'GET', timeoutMs: 5000 }), 'url_refused');
});
