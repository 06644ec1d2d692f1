// An embedded ledger and its JSON-RPC server in a process of their own (forked by test/bench/ledger.ts), so the rpc
// adapter measured in the bench process does not share an event loop with the server it calls. Gets
// { airdrop: [address, lamports][] } over IPC, opens a fresh ledger in a temporary directory, airdrops, serves, and
// answers { url, mintAuthority } (the stable mint's authority secret, for the bench's funding transactions); 'close'
// stops everything and removes the directory.
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EmbeddedLedger } from '../../../adapters/ledger/embedded/ledger.ts';
import { startLedgerRpcServer } from '../../../adapters/ledger/embedded/rpc-server.ts';

process.once('message', async (m: { airdrop: [string, string][] }) => {
  const dir = await mkdtemp(join(tmpdir(), 'svc-bench-ledger-rpc-'));
  const ledger = await EmbeddedLedger.open({ network: 'chain-devnet', dir });
  for (const [address, lamports] of m.airdrop) ledger.airdrop(address, BigInt(lamports));
  const mintAuthority = JSON.parse(await readFile(join(dir, 'mint-authority.json'), 'utf8')) as number[];
  const server = await startLedgerRpcServer({ ledger, port: 0, wsPort: false, announce: false });
  process.on('message', async (c: string) => {
    if (c !== 'close') return;
    await server.close();
    await ledger.close();
    await rm(dir, { recursive: true, force: true });
    process.send!('closed', () => process.exit(0));
  });
  process.send!({ url: server.url, mintAuthority });
});
