import test, { type ExecutionContext } from 'ava';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { Keypair } from '@solana/web3.js';
import { createPayingFetch, decodePaymentResponse } from '../../interfaces/client/paying-fetch.ts';
import { createFacilitatorApp, type FacilitatorApp } from '../../interfaces/app.ts';
import { feeFor } from '../../domain/shared/money.ts';
import { findStable } from '../../domain/shared/network.ts';
import { treasuryOf } from '../../domain/treasury/derive.ts';
import { http, issueKey, linkBody, recordAgent, startTestApp, testConfig, type TestApp } from '../support/app.ts';
import { afterAll } from '../support/teardown.ts';
import { until } from '../support/until.ts';

// Paid calls: the same link paid through the facilitator run as its own HTTP service (`npm run facilitator`,
// createFacilitatorApp) as through the gateway's in-process one. Gateway A holds the embedded ledgers and settles
// in-process; the standalone facilitator joins A's database and ledgers (A's JSON-RPC); gateway B serves the same
// links on the same database with SVC_PAYWALL_FACILITATOR_URL pointing at the standalone facilitator.

const USDC = findStable('chain-devnet', 'USDC')!;
const PRICE = 10_000n;

let a: TestApp;
let b: TestApp;
let c: TestApp;
let facilitator: FacilitatorApp;
/** Fault injection between gateway C and the facilitator: `dropSettle` forwards /settle, then cuts the answer. */
const proxy = { server: undefined as Server | undefined, url: '', dropSettle: false, settles: 0 };

test.before(async () => {
  a = await startTestApp();
  const devnet = a.ledgers.rpcUrls['chain-devnet']!;
  const mainnet = a.ledgers.rpcUrls['chain-mainnet']!;
  facilitator = await createFacilitatorApp(
    testConfig({
      SVC_DATA_DIR: a.dataDir,
      DATABASE_URL: a.database.url,
      SVC_FACILITATOR_PORT: '0',
      SVC_FACILITATOR_HOST: '127.0.0.1',
      SVC_FACILITATOR_NETWORKS: 'devnet',
    }),
    { logger: pino({ level: 'silent' }) },
  );
  afterAll(() => facilitator.close()); // before A, whose database and ledgers it uses
  b = await startTestApp({
    dataDir: a.dataDir,
    databaseUrl: a.database.url,
    env: { SVC_DEVNET_LEDGER: devnet, SVC_MAINNET_LEDGER: mainnet, SVC_PAYWALL_FACILITATOR_URL: facilitator.url, SVC_JOBS: 'off' },
  });
  proxy.server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', async () => {
      const body = chunks.length ? Buffer.concat(chunks) : undefined;
      const answer = await fetch(`${facilitator.url}${req.url}`, { method: req.method, headers: { 'content-type': 'application/json' }, body });
      const text = await answer.text();
      if (req.url === '/settle') proxy.settles++;
      if (req.url === '/settle' && proxy.dropSettle) {
        res.destroy(); // the settlement happened; its answer never arrives
        return;
      }
      res.writeHead(answer.status, { 'content-type': 'application/json' }).end(text);
    });
  });
  await new Promise<void>((resolve) => proxy.server!.listen(0, '127.0.0.1', resolve));
  proxy.url = `http://127.0.0.1:${(proxy.server.address() as AddressInfo).port}`;
  afterAll(() => proxy.server?.close());
  c = await startTestApp({
    dataDir: a.dataDir,
    databaseUrl: a.database.url,
    env: { SVC_DEVNET_LEDGER: devnet, SVC_MAINNET_LEDGER: mainnet, SVC_PAYWALL_FACILITATOR_URL: proxy.url, SVC_JOBS: 'off' },
  });
});

async function usdcOf(owner: string): Promise<bigint> {
  const balances = await a.services.ledgers['chain-devnet']!.getTokenBalances(owner, { mint: USDC.mint });
  return balances.reduce((sum, x) => sum + x.amount, 0n);
}

async function payOnce(gateway: TestApp, linkId: string, facilitatorUrl: string) {
  const buyer = Keypair.generate();
  await a.services.dev.fund('chain-devnet', { address: buyer.publicKey.toBase58(), token: 'USDC', amount: '1' });
  const pay = createPayingFetch({ signer: buyer, rpcUrl: a.ledgers.rpcUrls['chain-devnet']!, facilitatorUrl });
  const res = await pay(`${gateway.url}/x/${linkId}?network=chain-devnet`);
  const body = (await res.json()) as unknown;
  return { res, body, buyer: buyer.publicKey.toBase58() };
}

test('the standalone facilitator generated its fee payer under the data directory: the same key, funded, as the gateway’s', async (t) => {
  const standalone = await facilitator.service.health();
  const inProcess = await a.services.facilitator!.health();
  t.is(standalone.fee_payer, inProcess.fee_payer);
  t.deepEqual(standalone.networks, ['chain-devnet']);
  t.true((await a.services.ledgers['chain-devnet']!.getBalance(standalone.fee_payer)) > 1_000_000_000n);
  const res = await fetch(`${facilitator.url}/supported`);
  t.is(res.status, 200);
  t.deepEqual(((await res.json()) as { signers: unknown }).signers, { 'solana:*': [standalone.fee_payer] });
});

test('one link paid through the in-process facilitator (gateway A) and through the HTTP facilitator service (gateway B)', async (t) => {
  const key = await issueKey(a);
  const { mint: agent } = await recordAgent(a, key);
  const created = await http(a, 'POST', '/v1/payment-links', { key, body: linkBody(agent, { response: { status: 200, body: { ok: true } } }) });
  t.is(created.status, 201, JSON.stringify(created.body));
  const id = (created.body as { id: string }).id;
  const treasury = treasuryOf(agent);
  const fee = feeFor(PRICE, 100);

  const viaA = await payOnce(a, id, `${a.url}/facilitator`);
  t.is(viaA.res.status, 200, JSON.stringify(viaA.body));
  t.deepEqual(viaA.body, { ok: true });
  t.is(await usdcOf(treasury), PRICE);

  const viaB = await payOnce(b, id, facilitator.url);
  t.is(viaB.res.status, 200, JSON.stringify(viaB.body));
  t.deepEqual(viaB.body, { ok: true });
  t.is(await usdcOf(treasury), 2n * PRICE, 'the seller leg landed again, through the HTTP facilitator');
  t.is(await usdcOf(viaB.buyer), 1_000_000n - PRICE - fee, 'the buyer paid price + fee once');

  const sigA = decodePaymentResponse(viaA.res.headers.get('PAYMENT-RESPONSE')!).transaction;
  const sigB = decodePaymentResponse(viaB.res.headers.get('PAYMENT-RESPONSE')!).transaction;
  t.not(sigA, sigB);
  for (const sig of [sigA, sigB]) {
    const [status] = await a.services.ledgers['chain-devnet']!.getSignatureStatuses([sig]);
    t.is(status?.err, null);
  }
  // Both settlements went through the one duplicate guard and counted on the one link.
  const link = await http(a, 'GET', `/v1/payment-links/${id}`, { key });
  t.is((link.body as { counters: { settled_count: number } }).counters.settled_count, 2);
  const rows = (await a.database.orm.em.fork().execute(`select status from facilitator_settlements where signature in (?, ?)`, [sigA, sigB])) as {
    status: string;
  }[];
  t.deepEqual(
    rows.map((r) => r.status),
    ['settled', 'settled'],
  );
});

/**
 * A seller agent with a link answering `body`, served by gateway C (whose facilitator sits behind the fault proxy),
 * and a funded buyer whose kit records its paid retry's PAYMENT-SIGNATURE so the very same payment can be replayed.
 */
async function pendingScenario(t: ExecutionContext, body: Record<string, unknown>) {
  const key = await issueKey(a);
  const { mint: agent } = await recordAgent(a, key);
  const created = await http(a, 'POST', '/v1/payment-links', { key, body: linkBody(agent, { response: { status: 200, body } }) });
  t.is(created.status, 201, JSON.stringify(created.body));
  const id = (created.body as { id: string }).id;
  const buyer = Keypair.generate();
  await a.services.dev.fund('chain-devnet', { address: buyer.publicKey.toBase58(), token: 'USDC', amount: '1' });
  const recorded = { paymentHeader: '' };
  const recording: typeof fetch = async (input, init) => {
    const h = input instanceof Request ? input.headers : new Headers(init?.headers);
    if (h.get('PAYMENT-SIGNATURE')) recorded.paymentHeader = h.get('PAYMENT-SIGNATURE')!;
    return fetch(input, init);
  };
  const pay = createPayingFetch({ signer: buyer, rpcUrl: a.ledgers.rpcUrls['chain-devnet']!, facilitatorUrl: `${a.url}/facilitator`, fetch: recording });
  const settledCount = async () =>
    ((await http(a, 'GET', `/v1/payment-links/${id}`, { key })).body as { counters: { settled_count: number } }).counters.settled_count;
  return { agent, id, url: `${c.url}/x/${id}?network=chain-devnet`, treasury: treasuryOf(agent), pay, recorded, settledCount };
}

test.serial('a settle whose answer is lost answers 504 payment_pending, never a new 402; the replay resolves it without settling twice', async (t) => {
  const { url, treasury, pay, recorded, settledCount } = await pendingScenario(t, { pending: 'resolved' });

  proxy.dropSettle = true;
  const first = await pay(url);
  const firstBody = (await first.json()) as { error: string; details: { signature: unknown } };
  t.is(first.status, 504, JSON.stringify(firstBody));
  t.is(firstBody.error, 'payment_pending');
  t.true('signature' in firstBody.details);
  const paymentHeader = recorded.paymentHeader;
  t.truthy(paymentHeader);
  t.is(await usdcOf(treasury), PRICE, 'the settlement did land');
  t.is(proxy.settles, 1);

  proxy.dropSettle = false;
  const replay = await fetch(url, { headers: { 'PAYMENT-SIGNATURE': paymentHeader } });
  t.is(replay.status, 200, await replay.clone().text());
  t.deepEqual(await replay.json(), { pending: 'resolved' });
  const settled = decodePaymentResponse(replay.headers.get('PAYMENT-RESPONSE')!);
  const [status] = await a.services.ledgers['chain-devnet']!.getSignatureStatuses([settled.transaction]);
  t.is(status?.err, null);
  t.is(await usdcOf(treasury), PRICE, 'settled once');

  const again = await fetch(url, { headers: { 'PAYMENT-SIGNATURE': paymentHeader } });
  t.is(again.status, 200);
  t.is(again.headers.get('X-Svc-Replayed'), 'true');
  t.is(proxy.settles, 2, 'the stored response answers the second replay: no third settle');
  t.is(await settledCount(), 1);
});

test.serial('a pending paid call whose buyer never comes back is finished by the reconciliation job: receipt, counters, stored response', async (t) => {
  const { agent, url, treasury, pay, recorded, settledCount } = await pendingScenario(t, { late: true });

  proxy.dropSettle = true;
  try {
    t.is((await pay(url)).status, 504);
  } finally {
    proxy.dropSettle = false;
  }
  t.is(await usdcOf(treasury), PRICE, 'the money moved');
  t.is(await settledCount(), 0, 'not recorded yet');

  // The buyer never replays; the job (run here directly, with no grace period) finishes the call.
  const tally = await c.services.paywall!.resolvePending({ olderThanMs: 0 });
  t.like(tally, { resolved: 1 });
  t.is(await settledCount(), 1);
  const receipts = (await a.database.store.transaction((r) => r.receipts.listByAgent('chain-devnet', agent, { limit: 5 }))).map((x) => x.receipt);
  t.is(receipts.length, 1);
  t.is(await usdcOf(treasury), PRICE, 'settled once');
  t.deepEqual(await c.services.paywall!.resolvePending({ olderThanMs: 0 }), { resolved: 0, refused: 0, pending: 0, forgotten: 0 }, 'nothing left');

  // The buyer's late replay gets the response the job stored.
  const replay = await fetch(url, { headers: { 'PAYMENT-SIGNATURE': recorded.paymentHeader } });
  t.is(replay.status, 200);
  t.is(replay.headers.get('X-Svc-Replayed'), 'true');
  t.deepEqual(await replay.json(), { late: true });
});

test('a link changed on one instance is seen by another’s paywall: disabled 410, deleted 404 (event-feed invalidation; the time logged)', async (t) => {
  const key = await issueKey(a);
  const { mint: agent } = await recordAgent(a, key);
  const created = await http(a, 'POST', '/v1/payment-links', { key, body: linkBody(agent) });
  const id = (created.body as { id: string }).id;
  const url = `${c.url}/x/${id}?network=chain-devnet`;
  t.is((await fetch(url)).status, 402, 'gateway C has read (and cached) the link');
  t.is((await fetch(url)).status, 402);

  const patched = await http(b, 'PATCH', `/v1/payment-links/${id}`, { key, body: { disabled: true } });
  t.is(patched.status, 200, JSON.stringify(patched.body));
  // Waited on the answer, not timed: the invalidation's time is logged (docs/policies.md: milliseconds through the event
  // feed, the 5 s TTL the backstop), so a loaded machine cannot fail the test.
  const started = performance.now();
  await until('C answers 410 for the link disabled through B', async () => (await fetch(url)).status === 410, { everyMs: 50 });
  t.log(`C saw the disable ${Math.round(performance.now() - started)} ms after B's answer`);
  t.is((await fetch(url)).status, 410, 'and keeps answering 410');

  await http(b, 'DELETE', `/v1/payment-links/${id}`, { key });
  await until('C answers 404 once deleted there', async () => (await fetch(url)).status === 404, { everyMs: 50 });
  t.is((await fetch(url)).status, 404, 'and 404 once deleted there');
});
