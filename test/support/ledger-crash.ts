import { Keypair } from '@solana/web3.js';
import { EmbeddedLedger } from '../../adapters/ledger/embedded/ledger.ts';
import { tokenTransfer, USDC_DEVNET, waitForCommitment } from './ledger.ts';

// Child process for the crash test: lands transactions, reports them, then dies by SIGKILL without closing (no
// final snapshot, no fsync). Usage: node scripts/run.mjs test/support/ledger-crash.ts DIR COUNT

const [dir, count] = [process.argv[2]!, Number(process.argv[3] ?? 5)];
// no snapshot after genesis: everything must come back from the history log
const ledger = await EmbeddedLedger.open({ network: 'chain-devnet', dir, slotMs: 0, snapshotEvery: 1_000_000, snapshotIntervalMs: 3_600_000 });
const payer = Keypair.generate();
const merchant = Keypair.generate().publicKey.toBase58();
ledger.airdrop(payer.publicKey.toBase58(), 1_000_000_000n);
ledger.mintTo(payer.publicKey.toBase58(), USDC_DEVNET.mint, 100_000_000n);
ledger.advance(7);
const signatures: string[] = [];
for (let i = 0; i < count; i++) {
  const sent = ledger.sendWire(
    tokenTransfer({ owner: payer, to: merchant, mint: USDC_DEVNET.mint, amount: 1_000_000n, blockhash: ledger.latestBlockhash().blockhash, memo: `n${i}` }),
  );
  if (!sent.ok) throw new Error(JSON.stringify(sent));
  signatures.push(sent.signature);
}
// Reported once confirmed (written to the file): that is what must survive the kill.
await waitForCommitment(ledger, signatures.at(-1)!, 'confirmed');
const report = {
  payer: payer.publicKey.toBase58(),
  merchant,
  signatures,
  payerLamports: String(ledger.balance(payer.publicKey.toBase58())),
  slot: ledger.slot(),
};
// One more that is only processed when the process dies: it may be lost, as on a cluster.
ledger.sendWire(
  tokenTransfer({ owner: payer, to: merchant, mint: USDC_DEVNET.mint, amount: 1n, blockhash: ledger.latestBlockhash().blockhash, memo: 'unconfirmed' }),
);
process.stdout.write(`${JSON.stringify(report)}\n`, () => process.kill(process.pid, 'SIGKILL'));
