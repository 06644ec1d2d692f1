import { DomainError, isErrorCode } from '../../../domain/shared/errors.ts';
import type { RequestBounds } from '../../../domain/shared/request-bounds.ts';
import type { Network } from '../../../domain/shared/network.ts';
import type { AddressActivity } from '../../../domain/ports/ledger.ts';
import { LedgerLockedError } from './files.ts';
import { RpcListenError } from './rpc-server.ts';
import type { PubSubLimits } from './pubsub.ts';

// The messages between a LedgerThread (main thread) and its worker (thread-worker.ts), which owns one embedded
// ledger and its JSON-RPC server. Values cross by structured clone: bigint and Uint8Array survive, classes do not,
// so errors travel as { name, message, code, details } and are rebuilt on the other side.

export interface LedgerThreadData {
  network: Network;
  dir: string;
  slotMs?: number | undefined;
  /** always true: the main thread holds the directory's LOCK, where the same-process checks (files.ts) can see it */
  lockHeld: true;
  /** serve the ledger's JSON-RPC (and PubSub) from the worker; null = no server */
  rpc: { port: number; host?: string | undefined; adminSecret: string | null; limits?: PubSubLimits | undefined; bounds?: RequestBounds | undefined } | null;
  /** programs the worker adds to LiteSVM at open (EmbeddedLedgerOptions.programs) */
  programs: readonly { id: string; elf: Uint8Array }[];
}

/** What the main thread may call: the Ledger port, the faucet's operations and the test/dev clock. */
export const THREAD_METHODS = [
  'getLatestBlockhash',
  'isBlockhashValid',
  'getBlockHeight',
  'getSlot',
  'getAccount',
  'getMultipleAccounts',
  'getBalance',
  'getTokenBalances',
  'simulateTransaction',
  'sendTransaction',
  'getSignatureStatuses',
  'waitForSignature',
  'getSignaturesForAddress',
  'getTransaction',
  'airdrop',
  'mintTo',
  'decimalsOf',
  'advance',
  'setAccount',
] as const;
export type ThreadMethod = (typeof THREAD_METHODS)[number];

export type ToThreadCall =
  | { id: number; method: ThreadMethod; args: unknown[] }
  /** the addresses whose transactions the worker posts as `activity` (the union of the main thread's feeds) */
  | { id: number; method: 'follow'; args: [string[]] }
  | { id: number; method: 'close' };
/**
 * The calls made in one turn of the main thread's event loop cross as one message (an array), and the
 * replies ready in one turn of the worker's come back as one: a paid call made three messages each way of its own.
 */
export type ToThread = ToThreadCall[];

export type Reply = { type: 'reply'; id: number; ok: true; value: unknown } | { type: 'reply'; id: number; ok: false; error: SerializedError };

export type FromThread =
  | { type: 'ready'; url: string | null; wsUrl: string | null }
  | { type: 'failed'; error: SerializedError }
  | { type: 'warning'; message: string }
  | { type: 'replies'; replies: Reply[] }
  /** confirmed transactions touching followed addresses, posted at their commit (before any later reply) */
  | { type: 'activity'; activities: AddressActivity[] };

export interface SerializedError {
  name: string;
  message: string;
  code?: string;
  details?: Record<string, unknown>;
  dir?: string;
  pid?: number;
  listener?: RpcListenError['listener'];
}

export function serializeError(e: unknown): SerializedError {
  if (e instanceof DomainError) return { name: e.name, message: e.message, code: e.code, details: e.details };
  if (e instanceof LedgerLockedError) return { name: e.name, message: e.message, dir: e.dir, pid: e.pid };
  if (e instanceof RpcListenError) return { name: e.name, message: e.message, listener: e.listener };
  if (e instanceof Error) return { name: e.name, message: e.message };
  return { name: 'Error', message: String(e) };
}

export function deserializeError(e: SerializedError): Error {
  if (e.name === 'DomainError' && isErrorCode(e.code)) return new DomainError(e.code, e.message, e.details);
  if (e.name === 'LedgerLockedError' && e.dir !== undefined && e.pid !== undefined) return new LedgerLockedError(e.dir, e.pid);
  if (e.name === 'RpcListenError' && e.listener) return new RpcListenError(e.listener, e.message);
  if (e.name === 'RangeError') return new RangeError(e.message);
  return new Error(e.message);
}
