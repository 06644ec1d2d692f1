import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  ComputeBudgetProgram,
  type Keypair,
  PublicKey,
  SystemProgram,
  Transaction,
  TransactionInstruction,
  TransactionMessage,
  VersionedTransaction,
  type Connection,
} from '@solana/web3.js';
import { createAssociatedTokenAccountIdempotentInstruction, createTransferCheckedInstruction, getAssociatedTokenAddressSync } from '@solana/spl-token';
import { getBase58Decoder } from '@solana/kit';
import { EmbeddedLedger, type EmbeddedLedgerOptions } from '../../adapters/ledger/embedded/ledger.ts';
import { findStable, TOKEN_PROGRAM_ID, type Network } from '../../domain/shared/network.ts';
import { RUN_TS } from './commands.ts';
import { afterAll } from './teardown.ts';
import { until } from './until.ts';
import { spawnChild } from './children.ts';

export const MEMO_PROGRAM = new PublicKey('MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr');
export const USDC_DEVNET = findStable('chain-devnet', 'USDC')!;

export async function ledgerDir(): Promise<string> {
  return mkdtemp(join(tmpdir(), 'svc-ledger-'));
}

export async function removeDir(dir: string): Promise<void> {
  await rm(dir, { recursive: true, force: true });
}

/** A fresh embedded ledger in a temp dir; slots move only by advance() unless slotMs is given. */
export async function openTestLedger(options: Partial<EmbeddedLedgerOptions> = {}): Promise<EmbeddedLedger> {
  return EmbeddedLedger.open({ network: 'chain-devnet', dir: options.dir ?? (await ledgerDir()), slotMs: 0, ...options });
}

export function solTransfer(from: Keypair, to: PublicKey | string, lamports: number, blockhash: string): Uint8Array {
  const tx = new Transaction({ feePayer: from.publicKey, recentBlockhash: blockhash }).add(
    SystemProgram.transfer({ fromPubkey: from.publicKey, toPubkey: new PublicKey(to), lamports }),
  );
  tx.sign(from);
  return tx.serialize();
}

export interface TokenTransferInput {
  owner: Keypair;
  to: PublicKey | string;
  mint: string;
  amount: bigint;
  decimals?: number;
  tokenProgram?: string;
  blockhash: string;
  memo?: string;
  /** add SetComputeUnitLimit/Price like a settlement transaction */
  computeBudget?: { units: number; microLamports: number };
  version?: 'legacy' | 0;
}

/** CreateIdempotent for the recipient's ATA, TransferChecked, optional memo; the owner pays and signs. */
export function tokenTransferInstructions(input: Omit<TokenTransferInput, 'blockhash' | 'version'>): TransactionInstruction[] {
  const program = new PublicKey(input.tokenProgram ?? TOKEN_PROGRAM_ID);
  const mint = new PublicKey(input.mint);
  const to = new PublicKey(input.to);
  const source = getAssociatedTokenAddressSync(mint, input.owner.publicKey, true, program);
  const destination = getAssociatedTokenAddressSync(mint, to, true, program);
  const ixs: TransactionInstruction[] = [];
  if (input.computeBudget) {
    ixs.push(
      ComputeBudgetProgram.setComputeUnitLimit({ units: input.computeBudget.units }),
      ComputeBudgetProgram.setComputeUnitPrice({ microLamports: input.computeBudget.microLamports }),
    );
  }
  ixs.push(
    createAssociatedTokenAccountIdempotentInstruction(input.owner.publicKey, destination, to, mint, program),
    createTransferCheckedInstruction(source, mint, destination, input.owner.publicKey, input.amount, input.decimals ?? 6, [], program),
  );
  if (input.memo !== undefined) ixs.push(new TransactionInstruction({ programId: MEMO_PROGRAM, keys: [], data: Buffer.from(input.memo) }));
  return ixs;
}

export function tokenTransfer(input: TokenTransferInput): Uint8Array {
  const ixs = tokenTransferInstructions(input);
  if (input.version === 0) {
    const tx = new VersionedTransaction(
      new TransactionMessage({ payerKey: input.owner.publicKey, recentBlockhash: input.blockhash, instructions: ixs }).compileToV0Message(),
    );
    tx.sign([input.owner]);
    return tx.serialize();
  }
  const tx = new Transaction({ feePayer: input.owner.publicKey, recentBlockhash: input.blockhash }).add(...ixs);
  tx.sign(input.owner);
  return tx.serialize();
}

export function ata(owner: PublicKey | string, mint: string, tokenProgram: string = TOKEN_PROGRAM_ID): string {
  return getAssociatedTokenAddressSync(new PublicKey(mint), new PublicKey(owner), true, new PublicKey(tokenProgram)).toBase58();
}

/** A well-formed signature that was never issued. */
export function randomSignature(): string {
  return getBase58Decoder().decode(randomBytes(64));
}

/** A well-formed 32-byte value (address or blockhash) that was never issued. */
export function randomHash(): string {
  return getBase58Decoder().decode(randomBytes(32));
}

/** web3.js keeps reconnecting its WebSocket forever once the server is gone: close it first. */
export async function closeConnection(connection: Connection): Promise<void> {
  const ws = (connection as unknown as { _rpcWebSocket?: { setAutoReconnect(on: boolean): void; close(): void } })._rpcWebSocket;
  ws?.setAutoReconnect(false);
  ws?.close();
}

export type { Network };

export interface ChildResult {
  status: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs a TypeScript entry point in a child node (async: the test process keeps serving its own servers). No deadline
 * (./until.ts says why): a child that never ends is AVA's timeout to report, and the file's teardown kills it.
 */
export function runTs(script: string, args: string[], env: Record<string, string> = {}): Promise<ChildResult> {
  return new Promise((resolve, reject) => {
    const child = spawnChild(process.execPath, [RUN_TS, script, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c) => (stdout += c));
    child.stderr.on('data', (c) => (stderr += c));
    afterAll(() => (child.exitCode === null && child.signalCode === null ? void child.kill('SIGKILL') : undefined));
    child.on('error', reject);
    child.on('close', (status, signal) => resolve({ status, signal, stdout, stderr }));
  });
}

/**
 * Polls until the signature reaches `level`, as clients confirm transactions. No deadline (./until.ts says why):
 * finalized waits for an fdatasync, slow on a disk busy with other suites, and a signature that never gets there is
 * AVA's timeout to report.
 */
export async function waitForCommitment<S extends { confirmationStatus: string }>(
  ledger: { getSignatureStatuses(signatures: string[]): Promise<(S | null)[]> },
  signature: string,
  level: 'confirmed' | 'finalized' = 'confirmed',
): Promise<S> {
  const rank = { processed: 0, confirmed: 1, finalized: 2 } as Record<string, number>;
  return until(
    `${signature} reaches ${level}`,
    async () => {
      const [status] = await ledger.getSignatureStatuses([signature]);
      return status && rank[status.confirmationStatus]! >= rank[level]! ? status : undefined;
    },
    { everyMs: 5 },
  );
}
