import anyTest, { type TestFn } from 'ava';
import { Connection, PublicKey } from '@solana/web3.js';
import { getAssociatedTokenAddressSync } from '@solana/spl-token';
import { http, issueKey, randomAddress, removeDataDir, startTestApp, type TestApp } from '../support/app.ts';

// POST /v1/dev/faucet funds an address on the embedded ledger; the ledger's JSON-RPC server started
// with the app serves what it funded to an unmodified web3.js Connection.

const test = anyTest as TestFn<{ app: TestApp; key: string }>;
const USDC_DEVNET = '4zMMC9srt5Ri5X14GAgXhaHii3GnPAEERYPJgZJDncDU';

test.before(async (t) => {
  const app = await startTestApp();
  t.context = { app, key: await issueKey(app) };
});

test('faucet airdrops SOL and mints USDC, visible through the embedded JSON-RPC', async (t) => {
  const { app, key } = t.context;
  const to = await randomAddress();
  const res = await http(app, 'POST', '/v1/dev/faucet', { key, body: { address: to, sol: '2', token: 'usdc', amount: '12.5' } });
  t.is(res.status, 200, JSON.stringify(res.body));
  t.is(res.body.airdrop.lamports, '2000000000');
  t.is(res.body.mint.amount_atomic, '12500000');
  t.is(res.body.mint.mint, USDC_DEVNET);

  const rpcUrl = app.ledgers.rpcUrls['chain-devnet'];
  t.truthy(rpcUrl);
  const connection = new Connection(rpcUrl!, 'confirmed');
  t.is(await connection.getBalance(new PublicKey(to)), 2_000_000_000);
  const ata = getAssociatedTokenAddressSync(new PublicKey(USDC_DEVNET), new PublicKey(to));
  t.is(ata.toBase58(), res.body.mint.token_account);
  const balance = await connection.getTokenAccountBalance(ata);
  t.is(balance.value.amount, '12500000');
});

test('faucet input errors are invalid_request; a mainnet key funds the mainnet ledger', async (t) => {
  const { app, key } = t.context;
  const to = await randomAddress();
  for (const body of [{ address: to }, { address: 'nope', sol: '1' }, { address: to, token: 'USDC' }, { address: to, sol: '-1' }]) {
    const res = await http(app, 'POST', '/v1/dev/faucet', { key, body });
    t.is(res.status, 400, JSON.stringify(body));
    t.is(res.body.error, 'invalid_request');
  }
  const live = await issueKey(app, 'chain-mainnet');
  const res = await http(app, 'POST', '/v1/dev/faucet', { key: live, body: { address: to, token: 'USDG', amount: '1' } });
  t.is(res.status, 200, JSON.stringify(res.body));
  t.is(res.body.network, 'chain-mainnet');
  t.is(res.body.mint.symbol, 'USDG');
});

test('the faucet route is 404 when the network ledger is not embedded', async (t) => {
  // A second app whose devnet points at the first app's embedded JSON-RPC: an RPC ledger, so no faucet there.
  const { app } = t.context;
  const remote = await startTestApp({ databaseUrl: app.database.url, env: { SVC_DEVNET_LEDGER: app.ledgers.rpcUrls['chain-devnet']! } });
  try {
    const key = await issueKey(remote);
    const res = await http(remote, 'POST', '/v1/dev/faucet', { key, body: { address: await randomAddress(), sol: '1' } });
    t.is(res.status, 404, JSON.stringify(res.body));
    t.is(res.body.error, 'not_found');
  } finally {
    await remote.close();
    await removeDataDir(remote.dataDir);
  }
});
