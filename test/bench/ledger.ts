// Settlement-shaped transactions per second: LiteSVM called directly vs the embedded Ledger adapter vs the rpc
// adapter through the embedded ledger's JSON-RPC server, in one run on the same machine.
//
//   node --import tsx test/bench/ledger.ts [transactions per path, default 4000] [--only raw,kit,adapter,rpc]
//
// Each transaction: SetComputeUnitLimit, SetComputeUnitPrice, CreateAssociatedTokenAccountIdempotent (merchant),
// TransferChecked (buyer → merchant), TransferChecked (buyer → fee collector), Memo; signed by a fee payer and the
// buyer (x402-style). Each round fetches a blockhash through the path being measured, sends 250 transactions and,
// where the path persists (adapter, rpc), waits until the last one is confirmed, i.e. written to the history file.
// Building and signing happen between the timed sections (the client's cost, the same for every path). Paths run
// in interleaved rounds so a busy machine slows all of them alike.
//
// Baselines: "wire bytes" hands the signed bytes to LiteSVM's native binding (litesvm/dist/internal), the floor;
// "@solana/kit" is LiteSVM's public API, which takes a kit Transaction (decoded from the wire bytes here).
//
// The rpc paths' server (an embedded ledger and its JSON-RPC server) runs in a process of its own
// (test/bench/support/ledger-rpc-child.ts), apart from the rpc adapter that loads it; a plain fastify route answering
// {"ok":true} is measured by the benches' load generator (autocannon, its own process) as the machine's check.

import { createPrivateKey, sign, type KeyObject } from 'node:crypto';
import v8 from 'node:v8';
import vm from 'node:vm';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ComputeBudgetProgram, Keypair, PublicKey, Transaction, TransactionInstruction } from '@solana/web3.js';
import {
  createAssociatedTokenAccountIdempotentInstruction,
  createTransferCheckedInstruction,
  getAssociatedTokenAddressSync,
  MintLayout,
  createMintToCheckedInstruction,
} from '@solana/spl-token';
import { getTransactionDecoder, type Blockhash } from '@solana/kit';
import { LiteSVM } from 'litesvm';
import { Account, type LiteSvm } from 'litesvm/dist/internal.js';
import { EmbeddedLedger } from '../../adapters/ledger/embedded/ledger.ts';
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { RpcLedger } from '../../adapters/ledger/rpc/rpc-ledger.ts';
import type { Ledger } from '../../domain/ports/ledger.ts';
import { findStable, TOKEN_PROGRAM_ID } from '../../domain/shared/network.ts';
import { header, machineLine, plainBaseline, row, startPlainServer } from './support/load.ts';

const TOTAL = Number(process.argv.slice(2).find((a) => /^\d+$/.test(a)) ?? 4000);
const ONLY = process.argv.includes('--only') ? new Set(process.argv[process.argv.indexOf('--only') + 1]!.split(',')) : null;
const wanted = (path: string) => !ONLY || ONLY.has(path);
const ROUND = 250; // transactions per blockhash
const MERCHANTS = 50;
const USDC = new PublicKey(findStable('chain-devnet', 'USDC')!.mint);
const MEMO = new PublicKey('MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr');

interface Party {
  kp: Keypair;
  key: KeyObject;
}
const party = (kp = Keypair.generate()): Party => {
  return {
    kp,
    key: createPrivateKey({
      key: Buffer.concat([Buffer.from('302e020100300506032b657004220420', 'hex'), Buffer.from(kp.secretKey.subarray(0, 32))]),
      format: 'der',
      type: 'pkcs8',
    }),
  };
};

const facilitator = party();
const buyer = party();
const feeCollector = Keypair.generate().publicKey;
const merchants = Array.from({ length: MERCHANTS }, () => Keypair.generate().publicKey);
const ataOf = (owner: PublicKey) => getAssociatedTokenAddressSync(USDC, owner, true);
const buyerAta = ataOf(buyer.kp.publicKey);
const feeAta = ataOf(feeCollector);
const merchantAtas = merchants.map(ataOf);

function signWith(tx: Transaction, signers: Party[]): Uint8Array {
  const message = tx.serializeMessage();
  for (const s of signers) tx.addSignature(s.kp.publicKey, sign(null, message, s.key));
  return tx.serialize({ verifySignatures: false });
}

let order = 0;
function settlement(blockhash: string): Uint8Array {
  const i = order++;
  const m = i % MERCHANTS;
  const tx = new Transaction({ feePayer: facilitator.kp.publicKey, recentBlockhash: blockhash }).add(
    ComputeBudgetProgram.setComputeUnitLimit({ units: 60_000 }),
    ComputeBudgetProgram.setComputeUnitPrice({ microLamports: 1_000 }),
    createAssociatedTokenAccountIdempotentInstruction(facilitator.kp.publicKey, merchantAtas[m]!, merchants[m]!, USDC),
    createTransferCheckedInstruction(buyerAta, USDC, merchantAtas[m]!, buyer.kp.publicKey, 10_000n, 6),
    createTransferCheckedInstruction(buyerAta, USDC, feeAta, buyer.kp.publicKey, 100n, 6),
    new TransactionInstruction({ programId: MEMO, keys: [], data: Buffer.from(`order-${i}`) }),
  );
  return signWith(tx, [facilitator, buyer]);
}

/** Mint with the given authority, buyer funded, ATAs of the fee collector and merchants in place (warm-up). */
function fundingTransactions(blockhash: string, mintAuthority: Party): Uint8Array[] {
  const out: Uint8Array[] = [];
  const first = new Transaction({ feePayer: facilitator.kp.publicKey, recentBlockhash: blockhash }).add(
    createAssociatedTokenAccountIdempotentInstruction(facilitator.kp.publicKey, buyerAta, buyer.kp.publicKey, USDC),
    createAssociatedTokenAccountIdempotentInstruction(facilitator.kp.publicKey, feeAta, feeCollector, USDC),
    createMintToCheckedInstruction(USDC, buyerAta, mintAuthority.kp.publicKey, 1_000_000_000_000n, 6),
  );
  out.push(signWith(first, [facilitator, mintAuthority]));
  for (let i = 0; i < MERCHANTS; i += 10) {
    const tx = new Transaction({ feePayer: facilitator.kp.publicKey, recentBlockhash: blockhash });
    for (let m = i; m < Math.min(i + 10, MERCHANTS); m++)
      tx.add(createAssociatedTokenAccountIdempotentInstruction(facilitator.kp.publicKey, merchantAtas[m]!, merchants[m]!, USDC));
    out.push(signWith(tx, [facilitator]));
  }
  return out;
}

interface Path {
  name: string;
  blockhash(): Promise<string>;
  /** sends one transaction; returns its signature where the path persists anything */
  send(wire: Uint8Array): Promise<string | undefined>;
  /** waits until the round's last transaction is confirmed (written to the history file) */
  settle?(signature: string): Promise<void>;
  /** how many sends in flight (1 = one after the other) */
  concurrency?: number;
  close(): void | Promise<void>;
}

// A collection before each timed section keeps the garbage of building transactions out of the figures.
v8.setFlagsFromString('--expose-gc');
const collect = vm.runInNewContext('gc') as () => void;

/** One round on one path: a blockhash through the path, then `n` sends; returns the timed milliseconds. */
async function round(path: Path, n: number): Promise<number> {
  collect();
  let started = performance.now();
  const blockhash = await path.blockhash();
  let timed = performance.now() - started;
  const batch = Array.from({ length: n }, () => settlement(blockhash));
  collect();
  started = performance.now();
  let next = 0;
  let last: string | undefined;
  await Promise.all(
    Array.from({ length: path.concurrency ?? 1 }, async () => {
      while (next < batch.length) last = await path.send(batch[next++]!);
    }),
  );
  if (path.settle && last) await path.settle(last);
  timed += performance.now() - started;
  return timed;
}

async function confirmed(ledger: Ledger, signature: string): Promise<void> {
  for (;;) {
    const [status] = await ledger.getSignatureStatuses([signature]);
    if (status && status.confirmationStatus !== 'processed') return;
    await new Promise((resolve) => setImmediate(resolve));
  }
}

async function directPath(kind: 'raw' | 'kit'): Promise<Path> {
  const svm = new LiteSVM();
  const inner = (svm as unknown as { inner: LiteSvm }).inner;
  const mintAuthority = party();
  const data = Buffer.alloc(82);
  MintLayout.encode(
    {
      mintAuthorityOption: 1,
      mintAuthority: mintAuthority.kp.publicKey,
      supply: 0n,
      decimals: 6,
      isInitialized: true,
      freezeAuthorityOption: 0,
      freezeAuthority: PublicKey.default,
    },
    data,
  );
  inner.setAccount(USDC.toBytes(), new Account(svm.minimumBalanceForRentExemption(82n), data, new PublicKey(TOKEN_PROGRAM_ID).toBytes(), false, 0n));
  inner.airdrop(facilitator.kp.publicKey.toBytes(), 1_000_000_000_000n);
  for (const wire of fundingTransactions(svm.latestBlockhash(), mintAuthority)) {
    const r = inner.sendLegacyTransaction(wire);
    if ('err' in r) throw new Error(`funding failed: ${r.toString()}`);
  }
  const decoder = getTransactionDecoder();
  return {
    name: kind === 'raw' ? 'LiteSVM direct, wire bytes (internal API)' : 'LiteSVM direct, @solana/kit transaction (public API)',
    blockhash: async () => {
      svm.expireBlockhash(); // a fresh blockhash per round, as LiteSVM only accepts its latest
      return svm.latestBlockhash() as Blockhash;
    },
    send: async (wire) => {
      const r = kind === 'raw' ? inner.sendLegacyTransaction(wire) : svm.sendTransaction(decoder.decode(wire));
      if ('err' in r) throw new Error(`failed: ${r.toString()}`);
      return undefined; // nothing persisted, so nothing to settle
    },
    close: () => {},
  };
}

async function openLedger(): Promise<{ ledger: EmbeddedLedger; dir: string }> {
  const dir = await mkdtemp(join(tmpdir(), 'svc-bench-ledger-'));
  const ledger = await EmbeddedLedger.open({ network: 'chain-devnet', dir });
  ledger.airdrop(facilitator.kp.publicKey.toBase58(), 1_000_000_000_000n);
  const mintAuthority = party(Keypair.fromSecretKey(Uint8Array.from(JSON.parse(readFileSync(join(dir, 'mint-authority.json'), 'utf8')) as number[])));
  for (const wire of fundingTransactions(ledger.latestBlockhash().blockhash, mintAuthority)) {
    const r = ledger.sendWire(wire);
    if (!r.ok) throw new Error(`funding failed: ${JSON.stringify(r)}`);
  }
  return { ledger, dir };
}

/** An embedded ledger and its JSON-RPC server in a child process; the facilitator funded, the mint's authority back. */
async function servedLedger(): Promise<{ url: string; mintAuthority: Party; close(): Promise<void> }> {
  const child = fork(fileURLToPath(new URL('./support/ledger-rpc-child.ts', import.meta.url)), [], {
    execArgv: ['--import', 'tsx'],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const ready = await new Promise<{ url: string; mintAuthority: number[] }>((resolve, reject) => {
    child.once('message', resolve as (m: unknown) => void);
    child.once('exit', (code) => reject(new Error(`ledger rpc child exited with ${code}`)));
    child.send({ airdrop: [[facilitator.kp.publicKey.toBase58(), '1000000000000']] });
  });
  return {
    url: ready.url,
    mintAuthority: party(Keypair.fromSecretKey(Uint8Array.from(ready.mintAuthority))),
    close: async () => {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.send('close');
      await exited;
    },
  };
}

async function main() {
  console.log(`ledger bench: ${TOTAL} settlement transactions per path, ${ROUND} per blockhash, ${MERCHANTS} merchants (ATAs exist), node ${process.version}`);
  const sample = settlement('11111111111111111111111111111111');
  console.log(`transaction: 2 signatures, 6 instructions, ${sample.length} bytes; paths measured in interleaved rounds\n`);

  const paths: Path[] = [];
  if (wanted('raw')) paths.push(await directPath('raw'));
  if (wanted('kit')) paths.push(await directPath('kit'));
  if (wanted('adapter')) {
    const embedded = await openLedger();
    paths.push({
      name: 'embedded Ledger adapter (persisted, indexed)',
      blockhash: async () => (await embedded.ledger.getLatestBlockhash()).blockhash,
      send: async (wire) => {
        const r = await embedded.ledger.sendTransaction(wire);
        if (!r.ok) throw new Error(JSON.stringify(r));
        return r.signature;
      },
      settle: (signature) => confirmed(embedded.ledger, signature),
      close: async () => {
        await embedded.ledger.close();
        await rm(embedded.dir, { recursive: true, force: true });
      },
    });
  }
  if (wanted('rpc')) {
    const served = await servedLedger();
    const rpc = new RpcLedger({ url: served.url });
    const { blockhash } = await rpc.getLatestBlockhash();
    let lastFunding = '';
    for (const wire of fundingTransactions(blockhash, served.mintAuthority)) {
      const r = await rpc.sendTransaction(wire);
      if (!r.ok) throw new Error(`funding failed: ${JSON.stringify(r)}`);
      lastFunding = r.signature;
    }
    await confirmed(rpc, lastFunding);
    for (const concurrency of [1, 16]) {
      paths.push({
        name: concurrency === 1 ? 'rpc adapter → JSON-RPC server (one at a time)' : `rpc adapter → JSON-RPC server (${concurrency} in flight)`,
        concurrency,
        blockhash: async () => (await rpc.getLatestBlockhash()).blockhash,
        send: async (wire) => {
          const r = await rpc.sendTransaction(wire);
          if (!r.ok) throw new Error(JSON.stringify(r));
          return r.signature;
        },
        settle: (signature) => confirmed(rpc, signature),
        close: async () => {
          if (concurrency !== 16) return;
          await served.close();
        },
      });
    }
  }

  for (const path of paths) await round(path, 50); // warm-up
  const timed = new Map<Path, number>(paths.map((p) => [p, 0]));
  for (let done = 0, r = 0; done < TOTAL; done += ROUND, r++) {
    const n = Math.min(ROUND, TOTAL - done);
    for (let k = 0; k < paths.length; k++) {
      const path = paths[(k + r) % paths.length]!; // rotate the order: no path always runs right after another
      timed.set(path, timed.get(path)! + (await round(path, n)));
    }
  }
  const tps = new Map<string, number>();
  for (const path of paths) {
    const rate = (TOTAL / timed.get(path)!) * 1000;
    tps.set(path.name, rate);
    console.log(`${path.name.padEnd(58)} ${rate.toFixed(0).padStart(6)} tx/s`);
    await path.close();
  }
  const plain = await startPlainServer();
  const plainFig = await plainBaseline(plain, { generator: 'cannon', connections: 50, duration: Number(process.env.BENCH_SECONDS ?? 5) });
  await plain.close();
  console.log(`\nmachine: ${machineLine()}`);
  console.log(header('autocannon 50 connections (in its own process)', 58));
  console.log(row('plain fastify route, fixed {"ok":true}', plainFig, 58));
  const get = (prefix: string) => [...tps.entries()].find(([name]) => name.startsWith(prefix))?.[1] ?? NaN;
  const raw = get('LiteSVM direct, wire');
  const kit = get('LiteSVM direct, @solana/kit');
  const adapter = get('embedded');
  const overRpc = get('rpc adapter → JSON-RPC server (one');
  const overRpcConcurrent = get('rpc adapter → JSON-RPC server (16');
  const pct = (a: number, b: number) => (Number.isNaN(a) || Number.isNaN(b) ? '  -' : `${((a / b) * 100).toFixed(0)}%`);
  console.log('\nratios');
  console.log(`  embedded adapter / LiteSVM wire bytes     ${pct(adapter, raw)}   (target ≥ 80%)`);
  console.log(`  embedded adapter / LiteSVM kit API        ${pct(adapter, kit)}`);
  console.log(`  rpc adapter (1)  / embedded adapter       ${pct(overRpc, adapter)}`);
  console.log(`  rpc adapter (16) / embedded adapter       ${pct(overRpcConcurrent, adapter)}`);
  console.log(`  rpc adapter (1)  / LiteSVM wire bytes     ${pct(overRpc, raw)}`);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
