import test from 'ava';
import type { ExecutionContext } from 'ava';
import { createServer as createTcpServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { Keypair } from '@solana/web3.js';
import { createPayingFetch } from '../../interfaces/client/paying-fetch.ts';
import { findStable } from '../../domain/shared/network.ts';
import { treasuryOf } from '../../domain/treasury/derive.ts';
import { http, issueKey, linkBody, recordAgent, removeDataDir, startTestApp, type TestApp } from '../support/app.ts';

// DECISIONS "Webhooks" applied to the paywall: with the default settings (embedded ledgers, nothing opened), an
// upstream_url on a loopback/private/link-local address is never called; the gateway's own listeners (its HTTP port,
// the embedded ledger's JSON-RPC, where `svc_mintStable` lives) are refused even when SVC_OUTBOUND_ALLOW names them;
// an upstream whose name does not resolve is found before any money moves. Every time: 502 upstream_failed and the
// buyer is not charged, under both settle policies.

const USDC = findStable('chain-devnet', 'USDC')!;
const POLICIES = ['before_forward', 'on_success'] as const;

let app: TestApp;
/** a TCP listener that counts connections: the allow-listed upstreams that do not resolve name its port */
let counter: { port: number; connections: number; close(): Promise<void> };
let ports: { http: number; rpc: number };

/** A port free right now (the app binds it a moment later: outbound targets are fixed at start). */
async function freePort(): Promise<number> {
  const server = createTcpServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

test.before(async () => {
  const server = createTcpServer((socket) => {
    counter.connections++;
    socket.destroy();
  });
  await new Promise<void>((resolve) => server.listen(0, resolve));
  counter = { port: (server.address() as AddressInfo).port, connections: 0, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
  ports = { http: await freePort(), rpc: await freePort() };
  app = await startTestApp({
    env: {
      PORT: String(ports.http),
      SVC_DEVNET_RPC_PORT: String(ports.rpc),
      // The gateway's own listeners, listed on purpose: listing must not open them.
      SVC_OUTBOUND_ALLOW: [
        `127.0.0.1:${ports.http}`,
        `127.0.0.1:${ports.rpc}`,
        `localhost:${ports.rpc}`,
        `127.0.0.1:${ports.rpc + 1}`,
        `localhost.:${counter.port}`,
        `does-not-resolve.invalid:${counter.port}`,
      ].join(','),
    },
  });
});

test.after.always(async () => {
  await counter?.close();
});

async function usdcOf(owner: string): Promise<bigint> {
  const balances = await app.services.ledgers['chain-devnet']!.getTokenBalances(owner, { mint: USDC.mint });
  return balances.reduce((sum, b) => sum + b.amount, 0n);
}

/** A link forwarding to `upstream`, a buyer holding 1 USDC paying it; asserts 502 upstream_failed and nothing charged. */
async function paidCallRefused(
  t: ExecutionContext,
  policy: (typeof POLICIES)[number],
  upstream: string,
  expected: { reason: string; message: RegExp; body?: string },
): Promise<void> {
  const key = await issueKey(app);
  const { mint: agent } = await recordAgent(app, key);
  const method = expected.body === undefined ? 'GET' : 'POST';
  const created = await http(app, 'POST', '/v1/payment-links', {
    key,
    body: linkBody(agent, { method, settle_policy: policy, metadata: { upstream_url: upstream } }),
  });
  t.is(created.status, 201, JSON.stringify(created.body));
  const link = created.body as { id: string; share_url: string };
  const buyer = Keypair.generate();
  await app.services.dev.fund('chain-devnet', { address: buyer.publicKey.toBase58(), token: 'USDC', amount: '1' });
  const pay = createPayingFetch({ signer: buyer, rpcUrl: app.ledgers.rpcUrls['chain-devnet']! });

  const res = await pay(
    link.share_url,
    expected.body === undefined ? {} : { method: 'POST', headers: { 'content-type': 'application/json' }, body: expected.body },
  );
  const body = (await res.json()) as { error: string; message: string; details: { reason: string } };
  t.is(res.status, 502, `${upstream}: ${JSON.stringify(body)}`);
  t.is(body.error, 'upstream_failed');
  t.is(body.details.reason, expected.reason, body.message);
  t.regex(body.message, expected.message);
  t.is(await usdcOf(buyer.publicKey.toBase58()), 1_000_000n, `${upstream}: nothing left the buyer`);
  t.is(await usdcOf(treasuryOf(agent)), 0n);
  const after = await http(app, 'GET', `/v1/payment-links/${link.id}`, { key });
  t.is((after.body as { counters: { settled_count: number } }).counters.settled_count, 0);
}

for (const policy of POLICIES) {
  test(`${policy}: upstreams on loopback and on the metadata address are refused with 502 upstream_failed and the buyer is not charged`, async (t) => {
    await paidCallRefused(t, policy, 'http://127.0.0.1:9/private', { reason: 'url_refused', message: /127\.0\.0\.1 is not a public address \(loopback\)/ });
    await paidCallRefused(t, policy, 'http://169.254.169.254/latest/meta-data/', { reason: 'url_refused', message: /not a public address \(link-local\)/ });
    await paidCallRefused(t, policy, 'http://0x7f000001:9/', { reason: 'url_refused', message: /not a public address \(loopback\)/ });
  });

  test(`${policy}: the gateway's own listeners are refused even when SVC_OUTBOUND_ALLOW names them (no svc_mintStable through the paywall)`, async (t) => {
    const target = Keypair.generate().publicKey.toBase58();
    const mint = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'svc_mintStable', params: [target, 'USDC', '1000000'] });
    t.is(app.ledgers.rpcUrls['chain-devnet'], `http://127.0.0.1:${ports.rpc}`);
    for (const upstream of [`http://127.0.0.1:${ports.rpc}/`, `http://localhost:${ports.rpc}/`]) {
      await paidCallRefused(t, policy, upstream, { reason: 'url_refused', message: /own listeners/, body: mint });
    }
    t.is(await usdcOf(target), 0n, 'nothing was minted');
    await paidCallRefused(t, policy, `http://127.0.0.1:${ports.http}/v1/health`, { reason: 'url_refused', message: /own listeners/ });
    // the ledger's PubSub WebSocket port (port + 1)
    await paidCallRefused(t, policy, `http://127.0.0.1:${ports.rpc + 1}/`, { reason: 'url_refused', message: /own listeners/ });
  });

  test(`${policy}: an upstream whose name does not resolve ("localhost.", .invalid) answers 502 upstream_failed before any money moves`, async (t) => {
    for (const host of ['localhost.', 'does-not-resolve.invalid']) {
      await paidCallRefused(t, policy, `http://${host}:${counter.port}/`, { reason: 'network', message: /does not resolve|ENOTFOUND|EAI_AGAIN/ });
    }
    t.is(counter.connections, 0);
  });
}

test('every listener of the gateway is registered as its own: HTTP, ledger JSON-RPC and WebSocket, facilitator, embedded PostgreSQL', async (t) => {
  const pg = Number(new URL(app.database.url).port);
  t.true(pg > 0);
  const own = [ports.http, ports.rpc, ports.rpc + 1, app.config.facilitator.port, pg];
  for (const port of own) {
    for (const url of [`http://127.0.0.1:${port}/`, `https://localhost:${port}/`, `http://[::1]:${port}/`]) {
      const refused = await app.outbound.check(url);
      t.is(refused?.reason, 'url_refused', url);
      t.regex(refused?.message ?? '', /own listeners/, url);
    }
  }
  // another loopback port is refused for its address, not as ours: the registration is what names the ones above
  const other = await freePort();
  t.regex((await app.outbound.check(`http://127.0.0.1:${other}/`))?.message ?? '', /not a public address \(loopback\)/);
});

test('listeners on port 0 are registered with the port they were assigned, after listen', async (t) => {
  // A second instance on the same database (no cluster of its own): HTTP and ledger JSON-RPC on port 0.
  const second = await startTestApp({ databaseUrl: app.database.url });
  try {
    const http = Number(new URL(second.url).port);
    const rpc = Number(new URL(second.ledgers.rpcUrls['chain-devnet']!).port);
    t.true(http > 0 && rpc > 0);
    t.is(second.config.port, 0);
    for (const port of [http, rpc, rpc + 1]) {
      t.regex((await second.outbound.check(`http://127.0.0.1:${port}/`))?.message ?? '', /own listeners/, String(port));
    }
  } finally {
    await second.close();
    await removeDataDir(second.dataDir);
  }
});
