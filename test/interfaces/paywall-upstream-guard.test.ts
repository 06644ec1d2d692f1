import test from 'ava';
import { Keypair } from '@solana/web3.js';
import { createPayingFetch } from '../../interfaces/client/index.ts';
import { findStable } from '../../domain/shared/network.ts';
import { treasuryOf } from '../../domain/treasury/derive.ts';
import { http, issueKey, linkBody, recordAgent, removeDataDir, startTestApp, type TestApp } from '../support/app.ts';

// DECISIONS "Webhooks" (outbound URLs) on the paywall: with private targets not allowed (the production setting), an
// upstream_url on loopback is never called — and since before_forward would settle first, it is checked before any
// money moves: the buyer gets 502 upstream_failed and is not charged, under both settle policies.

const USDC = findStable('chain-devnet', 'USDC')!;
let app: TestApp;

test.before(async () => {
  app = await startTestApp({ env: { SVC_OUTBOUND_ALLOW_PRIVATE: 'false' } });
});

test.after.always(async () => {
  await app?.close();
  if (app) await removeDataDir(app.dataDir);
});

async function usdcOf(owner: string): Promise<bigint> {
  const balances = await app.services.ledgers['chain-devnet']!.getTokenBalances(owner, { mint: USDC.mint });
  return balances.reduce((sum, b) => sum + b.amount, 0n);
}

for (const policy of ['before_forward', 'on_success'] as const) {
  test(`${policy}: an upstream on loopback is refused with 502 upstream_failed and the buyer is not charged`, async (t) => {
    const key = await issueKey(app);
    const { mint: agent } = await recordAgent(app, key);
    const created = await http(app, 'POST', '/v1/payment-links', {
      key,
      body: linkBody(agent, { settle_policy: policy, metadata: { upstream_url: 'http://127.0.0.1:9/private' } }),
    });
    t.is(created.status, 201, JSON.stringify(created.body));
    const link = created.body as { id: string; share_url: string };
    const buyer = Keypair.generate();
    await app.services.dev.fund('chain-devnet', { address: buyer.publicKey.toBase58(), token: 'USDC', amount: '1' });
    const pay = createPayingFetch({ signer: buyer, rpcUrl: app.ledgers.rpcUrls['chain-devnet']! });

    const res = await pay(link.share_url);
    const body = (await res.json()) as { error: string; details: { reason: string } };
    t.is(res.status, 502, JSON.stringify(body));
    t.is(body.error, 'upstream_failed');
    t.is(body.details.reason, 'url_refused');
    t.is(await usdcOf(buyer.publicKey.toBase58()), 1_000_000n, 'nothing left the buyer');
    t.is(await usdcOf(treasuryOf(agent)), 0n);
    const after = await http(app, 'GET', `/v1/payment-links/${link.id}`, { key });
    t.is((after.body as { counters: { settled_count: number } }).counters.settled_count, 0);
  });
}
