import { Keypair } from '@solana/web3.js';
import { RpcLedger } from '../../adapters/ledger/rpc/rpc-ledger.ts';
import { randomSignature } from './ledger.ts';

// A process using the rpc adapter's notifications while the node's WebSocket is not there (a feed and a wait, both
// falling back), then closing the adapter: it must end by itself and print nothing (test/adapters/ledger-rpc.test.ts).
// No process.exit here: a timer, a socket or a reconnect loop left behind would keep it running.
// Usage: node scripts/run.mjs test/support/rpc-close-child.ts URL WS_URL
const [url, wsUrl] = process.argv.slice(2) as [string, string];
const ledger = new RpcLedger({ url, wsUrl });
const gap = new Promise<void>((resolve) => {
  const feed = ledger.followAddresses({ onActivity: () => {}, onLive: () => {}, onGap: () => resolve() });
  feed.follow([Keypair.generate().publicKey.toBase58()]);
});
const waited = ledger.waitForSignature(randomSignature(), { timeoutMs: 600_000 });
await gap;
ledger.close();
await waited; // ends with the adapter, long before its deadline
