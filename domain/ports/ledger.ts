// The Solana ledger as the domain sees it (ARCHITECTURE "Ledger"). Two adapters implement it: `rpc` (any Solana
// JSON-RPC node) and `embedded` (LiteSVM in-process); test/adapters/ledger-contract.ts holds both to this shape.
//
// Conventions: addresses, signatures and blockhashes are base58 strings; lamports and token amounts are bigint;
// slots, block heights, unix times and compute units are numbers (they stay far below 2^53).
//
// Failures:
// - the node is unreachable, answers with an error or garbage, or a read times out → throws
//   DomainError('rpc_unavailable', …, { method, cause? });
// - sendTransaction gets no answer in time → throws DomainError('submit_timeout', …, { signature }): the
//   transaction may still land; poll getSignatureStatuses with that signature.
// - the ledger rejects a transaction (failed preflight, expired blockhash, bad signature, malformed bytes) →
//   no throw: `simulateTransaction` returns `{ err }` and `sendTransaction` returns `{ ok: false, err, logs }`.

/**
 * A transaction error in the Solana RPC's JSON form, e.g. "BlockhashNotFound", "AlreadyProcessed",
 * "SignatureFailure", "SanitizeFailure", { InstructionError: [3, { Custom: 1 }] } (SPL Token: insufficient funds),
 * { InstructionError: [0, "InvalidAccountData"] }, { InsufficientFundsForRent: { account_index: 2 } }.
 */
export type LedgerTransactionError = string | { readonly [variant: string]: unknown };

export type Commitment = 'processed' | 'confirmed' | 'finalized';

/** e.g. { blockhash: "EkSnNWid2cvwEVnVx9aBqawnmiCNiDgp3gUdkDPTKN1N", lastValidBlockHeight: 1_043, slot: 893 } */
export interface LatestBlockhash {
  blockhash: string;
  /** the blockhash is accepted while the block height is ≤ this (issue height + 150) */
  lastValidBlockHeight: number;
  /** slot the answer was read at */
  slot: number;
}

/**
 * e.g. { address: "9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin", lamports: 2_039_280n,
 *        owner: "TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA", data: Uint8Array(165), executable: false }
 */
export interface LedgerAccount {
  address: string;
  lamports: bigint;
  owner: string;
  data: Uint8Array;
  executable: boolean;
}

/**
 * One token account of an owner, e.g. { address: "3Kz…ATA", mint: "4zMMC9srt5Ri5X14GAgXhaHii3GnPAEERYPJgZJDncDU",
 * owner: "7Yk…", amount: 10_000_000n, decimals: 6, tokenProgram: "TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA" }
 */
export interface TokenAccountBalance {
  address: string;
  mint: string;
  owner: string;
  amount: bigint;
  decimals: number;
  tokenProgram: string;
}

/** e.g. { err: null, logs: ["Program 11111111111111111111111111111111 invoke [1]", …], unitsConsumed: 150 } */
export interface SimulationResult {
  err: LedgerTransactionError | null;
  logs: string[];
  unitsConsumed: number;
}

export interface SimulateOptions {
  /** verify signatures too (default false, as the RPC) */
  sigVerify?: boolean;
}

export interface SendOptions {
  /** skip the preflight simulation: a transaction that fails in execution then lands with its err and pays its fee */
  skipPreflight?: boolean;
}

/**
 * Accepted: { ok: true, signature: "5VERv8NMvzbJMEkV8xnrLkEaWRtSz9CosKDYjCJjBRnbJLgp8uirBgmQpjKhoR4tjF3ZpRzrFmBV6UjKdiSZkQUW" }
 * (accepted ≠ landed: poll getSignatureStatuses).
 * Rejected: { ok: false, signature: "5VER…" | null, err: { InstructionError: [2, { Custom: 1 }] }, logs: ["…"] } —
 * nothing landed and no fee was paid. `signature` is null when the bytes were not a transaction.
 */
export type SendResult = { ok: true; signature: string } | { ok: false; signature: string | null; err: LedgerTransactionError; logs: string[] };

/** e.g. { slot: 912, confirmationStatus: "finalized", err: null } */
export interface SignatureStatus {
  slot: number;
  confirmationStatus: Commitment;
  err: LedgerTransactionError | null;
}

export interface WaitForSignatureOptions {
  /** default 'confirmed' */
  commitment?: 'confirmed' | 'finalized';
  /** real-time deadline of the wait, ms from now */
  timeoutMs: number;
}

/** e.g. { signature: "5VER…", slot: 912, blockTime: 1_763_719_200, err: null, memo: "[9] order-123" } */
export interface SignatureInfo {
  signature: string;
  slot: number;
  blockTime: number | null;
  err: LedgerTransactionError | null;
  /** the RPC's memo summary: "[length] text" per Memo instruction, joined by "; " */
  memo: string | null;
}

export interface SignaturesForAddressOptions {
  /** start after this signature (exclusive), going back in time */
  before?: string;
  /** stop at this signature (exclusive) */
  until?: string;
  /** 1..1000, default 1000 */
  limit?: number;
}

/**
 * A token balance in a transaction's meta, e.g. { accountIndex: 2, account: "3Kz…ATA", mint: "4zMM…", owner: "7Yk…",
 * amount: 1_000_000n, decimals: 6, tokenProgram: "TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA" }
 */
export interface TransactionTokenBalance {
  accountIndex: number;
  account: string;
  mint: string;
  owner: string;
  amount: bigint;
  decimals: number;
  tokenProgram: string;
}

/** A top-level instruction with its accounts resolved, e.g. { programId: "MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr", accounts: [], data: Uint8Array(9) } */
export interface TransactionInstructionRecord {
  programId: string;
  accounts: string[];
  data: Uint8Array;
}

/** A landed transaction (succeeded or failed), as the indexer reads it. */
export interface LedgerTransaction {
  signature: string;
  slot: number;
  blockTime: number | null;
  version: 'legacy' | 0;
  err: LedgerTransactionError | null;
  /** lamports, e.g. 5_000n + priority fee */
  fee: bigint;
  /** static keys, then loaded writable, then loaded readonly (the order of the balance arrays) */
  accountKeys: string[];
  /** the first `signers.length` accountKeys, e.g. ["FeePayer…", "Owner…"] */
  signers: string[];
  recentBlockhash: string;
  /** the signed transaction as it was sent (signatures then message): its message bytes are what the signers signed */
  wire: Uint8Array;
  preBalances: bigint[];
  postBalances: bigint[];
  preTokenBalances: TransactionTokenBalance[];
  postTokenBalances: TransactionTokenBalance[];
  instructions: TransactionInstructionRecord[];
  /** instructions invoked by the top-level instruction `index` (CPI), e.g. [{ index: 2, instructions: [{ programId: "1111…", … }] }]; null when the node did not record them */
  innerInstructions: { index: number; instructions: TransactionInstructionRecord[] }[] | null;
  logs: string[];
  unitsConsumed: number | null;
}

/**
 * A transaction that touched followed addresses, e.g. { signature: "5VER…", slot: 912, err: null, addresses:
 * ["Treasury…"], feePayer: "Payer…" }. The embedded ledger tells it at the commit that makes it confirmed; an RPC
 * node may tell it earlier than its confirmed read answers (the embedded JSON-RPC's logs notifications come at
 * processed), so a follower that reads it waits for it (waitForSignature) when getTransaction answers null.
 */
export interface AddressActivity {
  signature: string;
  slot: number;
  err: LedgerTransactionError | null;
  /** the followed addresses among its account keys */
  addresses: string[];
  /** its fee payer when the ledger says (the embedded ledger does; an RPC node's log notifications do not): null otherwise */
  feePayer: string | null;
}

/** What a feed tells its follower. Called on the event loop, never concurrently; a throwing handler is ignored. */
export interface ActivityHandlers {
  onActivity(activity: AddressActivity): void;
  /**
   * The feed follows every address of the set from now on (at start, after a gap, and after `follow` widened the set):
   * what happened before may have been missed and is read with getSignaturesForAddress.
   */
  onLive(): void;
  /** Activity may be missed from now until the next onLive (a dropped socket, a refused subscription), e.g. "socket closed". */
  onGap(reason: string): void;
}

/**
 * A live feed of the transactions that touch a set of addresses (closed by `close`). Best effort by contract: between
 * an onGap and the next onLive nothing is promised, and a follower catches up by listing signatures.
 */
export interface ActivityFeed {
  /** replaces the followed set; onLive follows once every address of it is followed */
  follow(addresses: readonly string[]): void;
  close(): void;
}

export interface Ledger {
  getLatestBlockhash(): Promise<LatestBlockhash>;
  /** false once the block height passed the blockhash's lastValidBlockHeight, or for a blockhash never issued */
  isBlockhashValid(blockhash: string): Promise<boolean>;
  /** e.g. 1_043 */
  getBlockHeight(): Promise<number>;
  /** e.g. 893 */
  getSlot(): Promise<number>;
  /** null when the account does not exist */
  getAccount(address: string): Promise<LedgerAccount | null>;
  /** same order as `addresses`; null where missing */
  getMultipleAccounts(addresses: string[]): Promise<(LedgerAccount | null)[]>;
  /** lamports; 0n for a missing account */
  getBalance(address: string): Promise<bigint>;
  /** the owner's token accounts under SPL Token and Token-2022, optionally of one mint; empty when none */
  getTokenBalances(owner: string, filter?: { mint?: string }): Promise<TokenAccountBalance[]>;
  simulateTransaction(wire: Uint8Array, options?: SimulateOptions): Promise<SimulationResult>;
  sendTransaction(wire: Uint8Array, options?: SendOptions): Promise<SendResult>;
  /** same order as `signatures`; null for unknown (never landed, dropped or expired) */
  getSignatureStatuses(signatures: string[]): Promise<(SignatureStatus | null)[]>;
  /**
   * Waits until `signature` has reached `commitment` (default confirmed) — notified by the ledger (the embedded
   * ledger: when the history write holding it completes; an RPC node: signatureSubscribe over its WebSocket, its status
   * polled inside the adapter while that socket is refused or dropped) — or until `timeoutMs` (real time, the adapter's
   * own deadline) passes. Resolves with its status then (the status may be below `commitment`, or null when unknown,
   * once the deadline passed); never throws for a ledger that cannot be read meanwhile (it answers what it last knew).
   * Closing the adapter ends the wait early: the rpc adapter answers the status as last known, the ledger thread
   * rejects with rpc_unavailable. e.g. waitForSignature("5VER…", { timeoutMs: 2_000 }) →
   * { slot: 912, confirmationStatus: "confirmed", err: null }.
   */
  waitForSignature(signature: string, options: WaitForSignatureOptions): Promise<SignatureStatus | null>;
  /** newest first: transactions that had `address` among their account keys */
  getSignaturesForAddress(address: string, options?: SignaturesForAddressOptions): Promise<SignatureInfo[]>;
  /** null when unknown */
  getTransaction(signature: string): Promise<LedgerTransaction | null>;
  /**
   * Notifications of the transactions touching `addresses` (the embedded ledger: its commit events; an RPC node:
   * logsSubscribe per address over its WebSocket, subscribed again after a drop with an onGap/onLive pair; the job
   * runner's joined ledger: the PubSub of whichever process serves the embedded ledger, attached anew when that
   * changes). Never throws: a ledger that cannot notify (no WebSocket reachable) reports onGap and keeps trying until
   * the feed is closed; a closed adapter reports onGap and stops. Absent on a ledger that never notifies: its follower
   * polls getSignaturesForAddress.
   */
  followAddresses?(handlers: ActivityHandlers): ActivityFeed;
}
