import test from 'ava';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { Keypair } from '@solana/web3.js';
import { RpcLedger } from '../../adapters/ledger/rpc/rpc-ledger.ts';
import { startLedgerRpcServer } from '../../adapters/ledger/embedded/rpc-server.ts';
import { DomainError } from '../../domain/shared/errors.ts';
import { ledgerContract } from './ledger-contract.ts';
import { settlesBefore } from '../support/until.ts';
import { ledgerDir, openTestLedger, removeDir, runTs, solTransfer, USDC_DEVNET } from '../support/ledger.ts';

// The rpc adapter against the embedded ledger's JSON-RPC server: the same contract as the embedded adapter.
ledgerContract(test, 'rpc', async () => {
  const dir = await ledgerDir();
  const embedded = await openTestLedger({ dir });
  const server = await startLedgerRpcServer({ ledger: embedded, port: 0, wsPort: false });
  // PubSub on the HTTP port (the server takes upgrades there): waits and feeds on notifications. The contract is not
  // about deadlines (the tests below are): the adapter's defaults (10 s reads) were outlasted by a loaded machine, and
  // a read that never comes is AVA's timeout to report.
  const ledger = new RpcLedger({ url: server.url, wsUrl: server.wsUrl, readTimeoutMs: 120_000, sendTimeoutMs: 120_000 });
  return {
    ledger,
    airdrop: async (to, lamports) => void embedded.airdrop(to, lamports),
    mintUsdc: async (owner, amount) => void embedded.mintTo(owner, USDC_DEVNET.mint, amount),
    advance: async (slots) => embedded.advance(slots),
    close: async () => {
      ledger.close();
      await server.close();
      await embedded.close();
      await removeDir(dir);
    },
  };
});

// serial: its child process compiles TypeScript, which would starve the concurrent tests' own ledgers on a busy machine
test.serial(
  'rpc: with the node’s WebSocket gone, a feed and a wait fall back; once the adapter is closed the process ends by itself, printing nothing',
  async (t) => {
    const dir = await ledgerDir();
    const embedded = await openTestLedger({ dir });
    const server = await startLedgerRpcServer({ ledger: embedded, port: 0, wsPort: false });
    t.teardown(async () => {
      await server.close();
      await embedded.close();
      await removeDir(dir);
    });
    const child = await runTs(fileURLToPath(new URL('../support/rpc-close-child.ts', import.meta.url)), [server.url, 'ws://127.0.0.1:1']);
    t.like(child, { status: 0, stdout: '', stderr: '' });
  },
);

// ---- faults: an unreachable node, a node that never answers, a node that answers garbage ----

async function fakeNode(
  t: { teardown(fn: () => unknown): void },
  answer: (req: IncomingMessage, body: string) => { status: number; body: string } | 'hang',
): Promise<string> {
  const hanging: IncomingMessage[] = [];
  const server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      const a = answer(req, body);
      if (a === 'hang') return void hanging.push(req);
      res.writeHead(a.status, { 'content-type': 'application/json' }).end(a.body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

const signedTransfer = () => solTransfer(Keypair.generate(), Keypair.generate().publicKey, 1_000_000, Keypair.generate().publicKey.toBase58());

test('rpc: an unreachable node is rpc_unavailable, for reads and for sends', async (t) => {
  const ledger = new RpcLedger({ url: 'http://127.0.0.1:1', readTimeoutMs: 2_000, sendTimeoutMs: 2_000 });
  const read = await t.throwsAsync(ledger.getLatestBlockhash(), { instanceOf: DomainError });
  t.is(read?.code, 'rpc_unavailable');
  t.is(read?.details?.method, 'getLatestBlockhash');
  const send = await t.throwsAsync(ledger.sendTransaction(signedTransfer()), { instanceOf: DomainError });
  t.is(send?.code, 'rpc_unavailable', 'refused before anything was sent: not a timeout');
  t.is((await t.throwsAsync(ledger.getBalance(Keypair.generate().publicKey.toBase58()), { instanceOf: DomainError }))?.code, 'rpc_unavailable');
});

test('rpc: a node that never answers sendTransaction is submit_timeout, with the signature to poll', async (t) => {
  const url = await fakeNode(t, () => 'hang');
  const ledger = new RpcLedger({ url, readTimeoutMs: 200, sendTimeoutMs: 300 });
  const wire = signedTransfer();
  // the 300 ms deadline, not the 15 s default: the send answers before a 10 s timer
  const e = await t.throwsAsync(settlesBefore(ledger.sendTransaction(wire), 10_000, 'sendTransaction'), { instanceOf: DomainError });
  t.is(e?.code, 'submit_timeout');
  t.is(e?.status, 504);
  t.is(typeof e?.details?.signature, 'string');
  const read = await t.throwsAsync(ledger.getSlot(), { instanceOf: DomainError });
  t.is(read?.code, 'rpc_unavailable', 'a read that times out is the node being unavailable');
  t.regex(read?.message ?? '', /no answer within 200 ms/, 'the read deadline, not the 10 s default');
});

test('rpc: HTTP errors, JSON-RPC errors and garbage are rpc_unavailable', async (t) => {
  const url500 = await fakeNode(t, () => ({ status: 500, body: 'boom' }));
  t.is((await t.throwsAsync(new RpcLedger({ url: url500 }).getBlockHeight(), { instanceOf: DomainError }))?.code, 'rpc_unavailable');
  const url429 = await fakeNode(t, () => ({ status: 429, body: '' }));
  t.is((await t.throwsAsync(new RpcLedger({ url: url429 }).getBlockHeight(), { instanceOf: DomainError }))?.code, 'rpc_unavailable');
  const garbage = await fakeNode(t, () => ({ status: 200, body: '{"jsonrpc":"2.0","id":1,"result":{"unexpected":true}}' }));
  t.is((await t.throwsAsync(new RpcLedger({ url: garbage }).getLatestBlockhash(), { instanceOf: DomainError }))?.code, 'rpc_unavailable');
  const unhealthy = await fakeNode(t, (_req, body) => ({
    status: 200,
    body: JSON.stringify({ jsonrpc: '2.0', id: JSON.parse(body).id, error: { code: -32005, message: 'Node is unhealthy' } }),
  }));
  const ledger = new RpcLedger({ url: unhealthy });
  t.is((await t.throwsAsync(ledger.sendTransaction(signedTransfer()), { instanceOf: DomainError }))?.code, 'rpc_unavailable');
  t.is(
    (
      await t.throwsAsync(
        ledger.getSignatureStatuses([]).then(() => ledger.getSlot()),
        { instanceOf: DomainError },
      )
    )?.code,
    'rpc_unavailable',
  );
});
