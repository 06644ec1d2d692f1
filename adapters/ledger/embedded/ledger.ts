import { randomBytes } from 'node:crypto';
import type { Commitment } from '../../../domain/ports/ledger.ts';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { Account, Clock, FailedTransactionMetadata, LiteSvm, type SimulatedTransactionInfo, type TransactionMetadata } from 'litesvm/dist/internal.js';
import type {
  LatestBlockhash,
  LedgerAccount,
  LedgerTransactionError,
  SendOptions,
  SendResult,
  SignaturesForAddressOptions,
  SignatureStatus,
  SimulateOptions,
  SimulationResult,
} from '../../../domain/ports/ledger.ts';
import { STABLES, type Network, type Stable } from '../../../domain/shared/chains.ts';
import { decodeAddress, encodeBase58 } from '../../../domain/shared/base58.ts';
import { parseMessage, parseTransaction, WireError, type WireTransaction } from '../../../domain/ledger/wire.ts';
import { AccountIndex, type Known, type LatinBuffer, type TokenInfo } from './account-index.ts';
import { BlockhashWindow } from './blockhash-window.ts';
import { transactionErrorJson } from './errors.ts';
import { acquireLock, readSnapshot, type SnapshotHeader } from './files.ts';
import { Snapshots } from './snapshots.ts';
import { History, type HistoryEntry, type RawTokenBalance, type StoredTransaction } from './history.ts';
import { loadOrCreateKeypair, type LocalSigner } from './keys.ts';
import { SYSTEM_PROGRAM_ID, encodeMint } from './token.ts';
import { innerInstructionsOf, ownersStable, memoSummary, priorityFee } from './ledger-messages.ts';
import { isNonceTransaction, isWritable, nonceAccountOf, resolveKeys, type ResolvedKeys } from './ledger-keys.ts';
import { LedgerReads } from './ledger-reads.ts';
import { describeStored, LedgerQueries } from './ledger-queries.ts';
import { airdrop, mintTo, type MintResult } from './ledger-faucet.ts';
import { EmbeddedLedgerPort } from './ledger-port.ts';

/** An account as setAccount writes it: lamports, raw data, owning program, e.g. { lamports: 1_000_000n, data, owner: 'CoRE…' }. */
export interface RawAccount {
  lamports: bigint;
  data: Uint8Array;
  owner: string;
  executable?: boolean;
}

// One network's ledger in-process: LiteSVM executes the real programs; this class adds what a cluster has and
// LiteSVM lacks — a slot clock, blockhashes that expire after 150 blocks, preflight, a signature index, history and
// persistence. Every state change goes through send (or genesis), which keeps the account cache below coherent.
// Its seams, one file each: the Ledger port (ledger-port.ts, the base class), reads of the state (ledger-reads.ts),
// key resolution for sends (ledger-keys.ts), history queries (ledger-queries.ts), the faucet (ledger-faucet.ts),
// message helpers (ledger-messages.ts), the blockhash window, the account index and snapshots; this file executes.
//
// Durability: state = the last snapshot (LiteSVM's own serialization, written atomically every 2000 transactions or
// 5 s after a change, and on close) + the history log after it, executed again on open. A landed transaction is
// processed at once, confirmed when its history record is written (once per event-loop turn) and finalized when
// fdatasync'd; a killed process loses nothing confirmed, a lost machine nothing finalized.

/** the real clusters' genesis hashes: clients (x402 among them) tell the network by it */
export const GENESIS_HASH: Record<Network, string> = {
  'chain-devnet': 'EtWTRABZaYq6iMfeYKouRu166VU2xqa1wcaWoxPkrZBG',
  'chain-mainnet': '5eykt4UsFv8P8NJdTREpY1vzqKqZKvdpKuc147dw2N9d',
};

export const SLOTS_PER_EPOCH = 432_000;
const LAMPORTS_PER_SIGNATURE = 5_000n;
/** below 2^53 so JSON clients that read lamports as numbers stay exact */
const FAUCET_LAMPORTS = 4_000_000_000_000_000n;
const RENT_EXEMPT_EPOCH = 18_446_744_073_709_551_615n;

export interface EmbeddedLedgerOptions {
  network: Network;
  /** this network's directory, e.g. `${dataDir}/ledger/chain-devnet` */
  dir: string;
  /** slot length; 0 = slots move only by advance() (tests). Default 400 ms, like the clusters. */
  slotMs?: number;
  /** snapshot after this many transactions (default 2000) … */
  snapshotEvery?: number;
  /** … or this long after the first unsaved change (default 5000 ms) */
  snapshotIntervalMs?: number;
  onWarning?: (message: string) => void;
  /** the caller already holds the directory's LOCK (a LedgerThread takes it on the main thread) and releases it */
  lockHeld?: boolean;
  /**
   * programs to load at every open (SVC_LEDGER_PROGRAMS / SVC_LEDGER_CLONE_URL, resolved by programs.ts), e.g.
   * [{ id: 'CoRE…', elf }]: added with the upgradeable loader after the snapshot is restored and before the history
   * after it is executed again, so a restored ledger runs the configured programs and its replay finds them
   */
  programs?: readonly { id: string; elf: Uint8Array }[] | undefined;
}

export interface LandedTransaction {
  signature: string;
  /** position in the history (commitment events name the last seq they cover) */
  seq: number;
  slot: number;
  err: LedgerTransactionError | null;
  /** writable account keys, whose state may have changed */
  writable: string[];
  /** every account key of the transaction (logsSubscribe's `mentions`) */
  keys: string[];
  /** the program logs (logsSubscribe) */
  logs: string[];
}

/**
 * One block of the embedded ledger. Every slot up to the current one is a block (the ledger skips no slots, so block
 * height = slot): its transactions are those that landed while the slot clock stood at it, oldest first, and the
 * current slot's block stays open until the clock moves on. Its blockhash is the one getLatestBlockhash issued at
 * that height, e.g. { slot: 7, parentSlot: 6, blockhash: '9xQe…', previousBlockhash: '4uQe…', blockTime: 1796… }.
 */
export interface LedgerBlock {
  slot: number;
  parentSlot: number;
  blockhash: string;
  previousBlockhash: string;
  /** Unix seconds: the first transaction's time, else estimated from the slot clock (never ahead of now) */
  blockTime: number;
  entries: HistoryEntry[];
  /** the block holds more transactions than `limit` asked for */
  more: boolean;
}

export interface SimulateWireOptions extends SimulateOptions {
  replaceRecentBlockhash?: boolean;
  /** addresses whose post-simulation state to return */
  accounts?: string[];
}

export interface SimulateWireResult extends SimulationResult {
  accounts?: (LedgerAccount | null)[];
  replacementBlockhash?: LatestBlockhash;
}

export interface TransactionRecord {
  stored: StoredTransaction;
  wire: WireTransaction;
  accountKeys: string[];
}

export type { MintResult } from './ledger-faucet.ts';

const NONE: Buffer[] = [];

export class EmbeddedLedger extends EmbeddedLedgerPort {
  readonly network: Network;
  readonly dir: string;
  readonly slotMs: number;
  readonly mintAuthority: LocalSigner;
  readonly faucet: LocalSigner;

  private svm: LiteSvm;
  private readonly history: History;
  private header: SnapshotHeader;
  private lastSlot: number;
  private clockSlot = -1;
  private readonly releaseLock: () => void;

  /** blockhashes of heights [top - 150, top] */
  private readonly blockhashes: BlockhashWindow;

  /** names of keys and what the hot path knows of accounts */
  private readonly accounts: AccountIndex;
  private readonly reads: LedgerReads;
  private readonly queries: LedgerQueries;
  private readonly listeners = new Set<(landed: LandedTransaction) => void>();
  private readonly commitListeners = new Set<(level: 'confirmed' | 'finalized', seq: number) => void>();
  private commitScheduled = false;
  private finalizedNotified = 0;

  private readonly snapshots: Snapshots;
  private readonly timer: NodeJS.Timeout;
  private closed = false;
  private readonly warn: (message: string) => void;

  private constructor(
    options: EmbeddedLedgerOptions,
    parts: { svm: LiteSvm; header: SnapshotHeader; releaseLock: () => void; mintAuthority: LocalSigner; faucet: LocalSigner },
  ) {
    super();
    this.network = options.network;
    this.dir = options.dir;
    this.slotMs = options.slotMs ?? 400;
    this.warn = options.onWarning ?? (() => {});
    this.svm = parts.svm;
    this.accounts = new AccountIndex(parts.svm);
    this.reads = new LedgerReads(parts.svm, this.accounts);
    this.header = parts.header;
    this.blockhashes = new BlockhashWindow(Buffer.from(parts.header.blockhashSeed, 'hex'));
    this.releaseLock = parts.releaseLock;
    this.mintAuthority = parts.mintAuthority;
    this.faucet = parts.faucet;
    this.lastSlot = parts.header.slot;
    this.history = new History(join(this.dir, 'history.log'), (record) => describeStored(this.accounts, record));
    this.queries = new LedgerQueries(this.history, this.accounts);
    this.lastSlot = Math.max(this.lastSlot, this.history.lastSlot);
    this.snapshots = new Snapshots({
      dir: this.dir,
      every: options.snapshotEvery ?? 2000,
      intervalMs: options.snapshotIntervalMs ?? 5000,
      take: () => ({ header: this.snapshotHeader(), state: this.svm.toBytes() }),
      beforeWrite: async () => {
        await this.history.sync();
        this.notifyFinalized();
      },
      beforeWriteSync: () => this.history.syncNow(),
      written: (header) => (this.header = { ...this.header, seq: header.seq, slot: header.slot }),
      isClosed: () => this.closed,
      warn: this.warn,
    });
    this.timer = setInterval(() => this.tick(), 1000);
    this.timer.unref();
  }

  /**
   * Opens the ledger in `dir` (creating it with the curated mints on first use): loads the last snapshot and
   * executes the transactions logged after it. Throws LedgerLockedError when another live process has it open.
   */
  static async open(options: EmbeddedLedgerOptions): Promise<EmbeddedLedger> {
    mkdirSync(options.dir, { recursive: true, mode: 0o700 });
    const releaseLock = options.lockHeld ? () => {} : acquireLock(options.dir);
    try {
      const mintAuthority = loadOrCreateKeypair(join(options.dir, 'mint-authority.json'));
      const faucet = loadOrCreateKeypair(join(options.dir, 'faucet.json'));
      const snapshot = readSnapshot(options.dir);
      if (snapshot && snapshot.header.network !== options.network) throw new Error(`${options.dir} holds the ledger of ${snapshot.header.network}`);
      const svm = snapshot ? LiteSvm.fromBytes(snapshot.state) : new LiteSvm();
      // Blockhash ages are checked here (LiteSVM only knows one blockhash); LiteSVM's own history is not needed.
      svm.setBlockhashCheck(false);
      svm.setTransactionHistory(0n);
      svm.setSigverify(true);
      for (const program of options.programs ?? []) {
        const id = decodeAddress(program.id);
        if (!id) throw new RangeError(`program id ${JSON.stringify(program.id)} is not a base58 address`);
        try {
          svm.addProgram(id, program.elf);
        } catch (e) {
          throw new Error(`program ${program.id} could not be loaded (${(e as Error).message}): is it a Solana program ELF?`);
        }
      }
      const header: SnapshotHeader = snapshot?.header ?? {
        format: 1,
        network: options.network,
        seq: 0,
        slot: 0,
        slotOffset: 0,
        genesisMs: Date.now(),
        blockhashSeed: randomBytes(32).toString('hex'),
        savedAt: new Date().toISOString(),
      };
      const ledger = new EmbeddedLedger(options, { svm, header, releaseLock, mintAuthority, faucet });
      ledger.replay(header.seq);
      const changed = ledger.ensureGenesisAccounts();
      // a snapshot ahead of the history (its tail was lost) is rewritten so new records are never skipped
      if (!snapshot || changed || ledger.history.lastSeq < header.seq) ledger.snapshots.saveSync();
      ledger.accounts.indexTokenAccounts();
      return ledger;
    } catch (e) {
      releaseLock();
      throw e;
    }
  }

  // ---- clock and blockhashes ----

  /** Current slot (= block height: this ledger skips no slots). */
  slot(): number {
    const s = this.slotMs > 0 ? Math.floor((Date.now() - this.header.genesisMs) / this.slotMs) + this.header.slotOffset : this.header.slotOffset;
    if (s > this.lastSlot) this.lastSlot = s;
    return this.lastSlot;
  }

  /** Moves the chain forward by `slots` blocks (tests: expire blockhashes). */
  advance(slots: number): void {
    if (!Number.isInteger(slots) || slots < 0) throw new RangeError('advance by a non-negative whole number of slots');
    this.header.slotOffset += slots;
    this.lastSlot += slots;
    this.markUnsaved();
  }

  /**
   * Writes an account outside any transaction, as genesis or a program deployment does (tests and dev tooling, e.g. an
   * account of a program this ledger does not run). Kept by the next snapshot (taken within seconds and on close),
   * not by the history log: a crash before that snapshot loses it.
   */
  setAccount(address: string, account: RawAccount): void {
    const key = decodeAddress(address);
    const owner = decodeAddress(account.owner);
    if (!key || !owner) throw new RangeError('setAccount: address and owner must be base58 public keys');
    this.svm.setAccount(key, new Account(account.lamports, account.data, owner, account.executable ?? false, RENT_EXEMPT_EPOCH));
    this.accounts.forget(address);
    this.markUnsaved();
  }

  private refreshWindow(): number {
    return this.blockhashes.refresh(this.slot());
  }

  latestBlockhash(): LatestBlockhash {
    this.refreshWindow();
    return this.blockhashes.latest();
  }

  blockhashValid(blockhash: string): boolean {
    this.refreshWindow();
    return this.blockhashes.has(blockhash);
  }

  private syncClock(slot: number, unixSeconds: number): void {
    if (slot === this.clockSlot) return;
    const epoch = BigInt(Math.floor(slot / SLOTS_PER_EPOCH));
    const epochStart = BigInt(Math.floor((this.header.genesisMs + (slot - (slot % SLOTS_PER_EPOCH)) * Math.max(this.slotMs, 1)) / 1000));
    this.svm.setClock(new Clock(BigInt(slot), epochStart, epoch, epoch + 1n, BigInt(unixSeconds)));
    this.clockSlot = slot;
  }

  epochInfo() {
    const slot = this.slot();
    return {
      absoluteSlot: slot,
      blockHeight: slot,
      epoch: Math.floor(slot / SLOTS_PER_EPOCH),
      slotIndex: slot % SLOTS_PER_EPOCH,
      slotsInEpoch: SLOTS_PER_EPOCH,
      transactionCount: this.history.lastSeq,
    };
  }

  get genesisHash(): string {
    return GENESIS_HASH[this.network];
  }

  get transactionCount(): number {
    return this.history.lastSeq;
  }

  // ---- reads (ledger-reads.ts) ----

  minimumBalanceForRentExemption(dataLength: number): bigint {
    return this.reads.minimumBalanceForRentExemption(dataLength);
  }

  readAccount(address: string): LedgerAccount | null {
    return this.reads.readAccount(address);
  }

  balance(address: string): bigint {
    return this.reads.balance(address);
  }

  decimalsOf(mint: string): number | undefined {
    return this.reads.decimalsOf(mint);
  }

  /** Token accounts of `owner`, optionally of one mint or one token program, read from the state. */
  tokenAccountsOf(owner: string, filter: { mint?: string | undefined; programId?: string | undefined } = {}): LedgerAccount[] {
    return this.reads.tokenAccountsOf(owner, filter);
  }

  /** Every account `programId` owns whose raw data `keep` accepts (getProgramAccounts). */
  programAccounts(programId: string, keep?: (data: Uint8Array) => boolean): LedgerAccount[] {
    return this.reads.programAccounts(programId, keep);
  }

  // ---- blocks (LedgerBlock): every slot up to the current one ----

  /** The block at `slot` with at most `limit` of its transactions, or null for a slot the clock has not reached. */
  block(slot: number, limit: number): LedgerBlock | null {
    if (!Number.isSafeInteger(slot) || slot < 0 || slot > this.slot()) return null;
    const { entries, more } = this.history.inSlots(slot, slot, limit);
    return {
      slot,
      parentSlot: Math.max(slot - 1, 0),
      blockhash: this.blockhashes.blockhashOf(slot),
      previousBlockhash: slot === 0 ? this.genesisHash : this.blockhashes.blockhashOf(slot - 1),
      blockTime: (limit > 0 ? entries[0] : this.history.inSlots(slot, slot, 1).entries[0])?.time ?? this.estimatedTime(slot),
      entries,
      more,
    };
  }

  /** Unix seconds of a block without transactions: the slot clock's estimate, between the last transaction before it and now. */
  private estimatedTime(slot: number): number {
    const floor = this.history.lastAtOrBefore(slot)?.time ?? Math.floor(this.header.genesisMs / 1000);
    const clock = this.slotMs > 0 ? Math.floor((this.header.genesisMs + (slot - this.header.slotOffset) * this.slotMs) / 1000) : floor;
    return Math.max(floor, Math.min(clock, Math.floor(Date.now() / 1000)));
  }

  /** The slot of the last snapshot written (getHighestSnapshotSlot). */
  get snapshotSlot(): number {
    return this.header.slot;
  }

  // ---- transactions ----

  private reject(signature: string | null, err: LedgerTransactionError, logs: string[] = []): SendResult {
    return { ok: false, signature, err, logs };
  }

  /** Without preflight the RPC forwards what it cannot check; what then fails to land is dropped silently. */
  private drop(skipPreflight: boolean, signature: string, err: LedgerTransactionError, logs: string[] = []): SendResult {
    return skipPreflight && err !== 'SignatureFailure' ? { ok: true, signature } : this.reject(signature, err, logs);
  }

  /**
   * Executes a wire transaction. With preflight (the default) a transaction that fails leaves no trace, as the
   * RPC's preflight simulation would reject it. With skipPreflight one that fails in execution lands failed and
   * pays its fee, and one that cannot land (expired blockhash, unfunded payer, duplicate) is accepted and dropped,
   * as a cluster does; bad signatures and malformed bytes are rejected either way (the RPC checks those itself).
   */
  sendWire(bytes: Uint8Array, options: SendOptions = {}): SendResult {
    this.assertOpen();
    let tx: WireTransaction;
    try {
      tx = parseTransaction(bytes);
    } catch (e) {
      if (e instanceof WireError) return this.reject(null, 'SanitizeFailure', [e.message]);
      throw e;
    }
    const signature = encodeBase58(tx.bytes.subarray(tx.signaturesOffset, tx.signaturesOffset + 64));
    const slot = this.refreshWindow();
    const skip = options.skipPreflight === true;
    const resolved = resolveKeys(this.svm, this.accounts, tx);
    if ('err' in resolved) return this.drop(skip, signature, resolved.err);
    const names = resolved.names;
    const inWindow = this.blockhashes.hasRaw((tx.bytes as LatinBuffer).latin1Slice(tx.blockhashOffset, tx.blockhashOffset + 32));
    const nonceKey = inWindow ? null : nonceAccountOf(this.svm, this.accounts, tx, resolved);
    if (!inWindow && !nonceKey) return this.drop(skip, signature, 'BlockhashNotFound');
    if (this.history.has(signature)) return this.drop(skip, signature, 'AlreadyProcessed');

    const pre: Known[] = new Array(names.length);
    for (let i = 0; i < names.length; i++) {
      const name = names[i]!;
      pre[i] = this.accounts.cached(name) ?? this.accounts.knownOf(name, resolved.keys[i]!);
    }
    const payerKey = resolved.keys[0]!;
    const nowSeconds = Math.floor(Date.now() / 1000);
    this.syncClock(slot, nowSeconds);
    const nonceBefore = nonceKey ? this.svm.getAccount(nonceKey) : null;
    if (nonceKey) this.svm.expireBlockhash(); // AdvanceNonceAccount needs a new durable nonce to store

    const result = tx.version === 'legacy' ? this.svm.sendLegacyTransaction(tx.bytes) : this.svm.sendVersionedTransaction(tx.bytes);
    let err: LedgerTransactionError | null = null;
    let meta: TransactionMetadata;
    if (result instanceof FailedTransactionMetadata) {
      err = transactionErrorJson(result);
      meta = result.meta();
      const payerAfter = this.svm.getBalance(payerKey) ?? 0n;
      const landed = payerAfter !== pre[0]!.lamports;
      if (!landed) return this.drop(skip, signature, err, meta.logs());
      if (!options.skipPreflight) {
        this.rollbackFee(payerKey, pre[0]!.lamports, nonceKey, nonceBefore);
        return this.reject(signature, err, meta.logs());
      }
    } else {
      meta = result;
    }
    return { ok: true, signature: this.land({ tx, signature, resolved, pre, slot, time: nowSeconds, err, meta }) };
  }

  /** Undoes what a failed transaction changed (its fee, and a durable nonce's advance). */
  private rollbackFee(payer: Uint8Array, lamports: bigint, nonceKey: Uint8Array | null, nonceBefore: Account | null): void {
    const a = this.svm.getAccount(payer);
    if (a) this.svm.setAccount(payer, new Account(lamports, a.data(), a.owner(), a.executable(), a.rentEpoch()));
    if (nonceKey && nonceBefore) this.svm.setAccount(nonceKey, nonceBefore);
  }

  private land(input: {
    tx: WireTransaction;
    signature: string;
    resolved: ResolvedKeys;
    pre: Known[];
    slot: number;
    time: number;
    err: LedgerTransactionError | null;
    meta: TransactionMetadata;
  }): string {
    const { tx, signature, resolved, pre, slot, time, err, meta } = input;
    const { names, loadedWritable } = resolved;
    const n = names.length;
    const stable = ownersStable(tx, names);
    const writable: string[] = [];
    let fee = 0n;
    const preBalances: bigint[] = new Array(n);
    const postBalances: bigint[] = new Array(n);
    const preTok: RawTokenBalance[] = [];
    const postTok: RawTokenBalance[] = [];
    for (let i = 0; i < n; i++) {
      const before = pre[i]!;
      let after = before;
      if (!before.executable && isWritable(tx, i, loadedWritable)) {
        after = this.accounts.readPost(resolved.keys[i]!, before, i < tx.numRequiredSignatures, stable);
        this.accounts.remember(names[i]!, after);
        writable.push(names[i]!);
      }
      if (after !== before) fee += before.lamports - after.lamports;
      preBalances[i] = before.lamports;
      postBalances[i] = after.lamports;
      if (before.token) preTok.push(this.rawTokenBalance(i, before.token));
      if (after.token) postTok.push(this.rawTokenBalance(i, after.token));
    }
    const seq = this.history.nextSeq();
    this.history.append(
      {
        seq,
        slot,
        time,
        wire: tx.bytes,
        err,
        fee,
        pre: preBalances,
        post: postBalances,
        preTok,
        postTok,
        logs: meta.logs(),
        cu: Number(meta.computeUnitsConsumed()),
        loadedWritable: resolved.loaded.length ? resolved.loaded.slice(0, loadedWritable) : NONE,
        loadedReadonly: resolved.loaded.length ? resolved.loaded.slice(loadedWritable) : NONE,
        inner: innerInstructionsOf(meta),
      },
      signature,
      names,
      memoSummary(tx, names),
    );
    this.markUnsaved();
    if (!this.commitScheduled) {
      this.commitScheduled = true;
      setImmediate(this.commit);
    }
    if (this.listeners.size) {
      const landed: LandedTransaction = { signature, seq, slot, err, writable, keys: names, logs: meta.logs() };
      for (const listener of this.listeners) listener(landed);
    }
    return signature;
  }

  /** Group commit: this turn's records in one write (confirmed), then fdatasync in the background (finalized). */
  private readonly commit = (): void => {
    this.commitScheduled = false;
    if (this.closed) return;
    if (this.history.flush()) for (const listener of this.commitListeners) listener('confirmed', this.history.confirmed);
    this.finalizeSoon();
  };

  private finalizeSoon(): void {
    this.history.syncSoon(() => {
      this.notifyFinalized();
      if (!this.closed) this.finalizeSoon();
    });
  }

  private notifyFinalized(): void {
    const seq = this.history.finalized;
    if (seq <= this.finalizedNotified) return;
    this.finalizedNotified = seq;
    for (const listener of this.commitListeners) listener('finalized', seq);
  }

  private rawTokenBalance(index: number, t: TokenInfo): RawTokenBalance {
    return { index, raw: t.raw, amount: t.amount, decimals: this.decimalsOf(t.mint) ?? 0, program: t.program };
  }

  simulateWire(bytes: Uint8Array, options: SimulateWireOptions = {}): SimulateWireResult {
    this.assertOpen();
    let tx: WireTransaction;
    try {
      tx = parseTransaction(bytes);
    } catch (e) {
      if (e instanceof WireError) return { err: 'SanitizeFailure', logs: [e.message], unitsConsumed: 0 };
      throw e;
    }
    const slot = this.refreshWindow();
    const out: Partial<SimulateWireResult> = {};
    if (options.replaceRecentBlockhash) {
      out.replacementBlockhash = this.latestBlockhash();
    } else if (!this.blockhashes.hasRaw(tx.bytes.toString('latin1', tx.blockhashOffset, tx.blockhashOffset + 32))) {
      const resolved = resolveKeys(this.svm, this.accounts, tx);
      const nonce = 'err' in resolved ? null : nonceAccountOf(this.svm, this.accounts, tx, resolved);
      if (!nonce) return { err: 'BlockhashNotFound', logs: [], unitsConsumed: 0 };
    }
    this.syncClock(slot, Math.floor(Date.now() / 1000));
    const sigVerify = options.sigVerify ?? false;
    if (!sigVerify) this.svm.setSigverify(false);
    let result: SimulatedTransactionInfo | FailedTransactionMetadata;
    try {
      result = tx.version === 'legacy' ? this.svm.simulateLegacyTransaction(tx.bytes) : this.svm.simulateVersionedTransaction(tx.bytes);
    } finally {
      if (!sigVerify) this.svm.setSigverify(true);
    }
    const failed = result instanceof FailedTransactionMetadata ? result : null;
    const meta = result.meta();
    const simulated: SimulateWireResult = {
      err: failed ? transactionErrorJson(failed) : null,
      logs: meta.logs(),
      unitsConsumed: Number(meta.computeUnitsConsumed()),
      ...out,
    };
    if (options.accounts) {
      const postAccounts = new Map<string, LedgerAccount>();
      if (!(result instanceof FailedTransactionMetadata)) {
        for (const item of result.postAccounts()) {
          const a = item.account();
          const address = this.accounts.nameOf(item.address);
          postAccounts.set(address, { address, lamports: a.lamports(), owner: this.accounts.nameOf(a.owner()), data: a.data(), executable: a.executable() });
        }
      }
      simulated.accounts = options.accounts.map((address) => (failed ? null : (postAccounts.get(address) ?? this.readAccount(address))));
    }
    return simulated;
  }

  /** The fee a message would pay (5000 per signature + priority fee), or null when its blockhash is not valid. */
  feeForMessage(message: Uint8Array): bigint | null {
    let m: ReturnType<typeof parseMessage>;
    try {
      m = parseMessage(message);
    } catch {
      return null;
    }
    this.refreshWindow();
    if (!this.blockhashes.hasRaw(m.bytes.toString('latin1', m.blockhashOffset, m.blockhashOffset + 32))) return null;
    const names: string[] = [];
    for (let i = 0; i < m.numStaticKeys; i++) names.push(this.accounts.nameAt(m.bytes, m.keysOffset + i * 32));
    return LAMPORTS_PER_SIGNATURE * BigInt(m.numRequiredSignatures) + priorityFee(m.instructions, names);
  }

  // ---- history queries (ledger-queries.ts) ----

  signatureStatus(signature: string): (SignatureStatus & { seq: number }) | null {
    return this.queries.signatureStatus(signature);
  }

  signaturesFor(address: string, options: SignaturesForAddressOptions = {}): HistoryEntry[] {
    return this.queries.signaturesFor(address, options);
  }

  /** getTransactionsForAddress' walk of the per-address index (ledger-queries.ts). */
  transactionsFor(...args: Parameters<LedgerQueries['transactionsFor']>): ReturnType<LedgerQueries['transactionsFor']> {
    return this.queries.transactionsFor(...args);
  }

  seqAt(slot: number, index: number): number | undefined {
    return this.queries.seqAt(slot, index);
  }

  seqOf(signature: string): number | undefined {
    return this.queries.seqOf(signature);
  }

  /** The stored record of a landed transaction with its parsed wire form. */
  transactionRecord(signature: string): TransactionRecord | null {
    return this.queries.transactionRecord(signature);
  }

  /** Called for every landed transaction, as it executes (processed). */
  onTransaction(listener: (landed: LandedTransaction) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Called when transactions up to `seq` become confirmed (written) or finalized (on disk). */
  onCommit(listener: (level: 'confirmed' | 'finalized', seq: number) => void): () => void {
    this.commitListeners.add(listener);
    return () => this.commitListeners.delete(listener);
  }

  commitmentOf(seq: number): Commitment {
    return this.history.commitment(seq);
  }

  // ---- faucet: real transactions signed by the local faucet and mint authority keys ----

  /** Transfers `lamports` from the faucet; returns the signature. */
  airdrop(to: string, lamports: bigint): string {
    return airdrop(this, to, lamports);
  }

  /** Mints `amount` (atomic units) of a curated stable or any mint of the local authority to `owner`'s ATA. */
  mintTo(owner: string, mint: string, amount: bigint): MintResult {
    return mintTo(this, owner, mint, amount);
  }

  // ---- genesis, replay and persistence ----

  /** The curated stables at their real addresses and the funded faucet; true when something was created. */
  private ensureGenesisAccounts(): boolean {
    let changed = false;
    for (const stable of STABLES[this.network] as readonly Stable[]) {
      const key = decodeAddress(stable.mint)!;
      if (this.svm.getAccount(key)) continue;
      this.svm.setAccount(
        key,
        new Account(
          this.minimumBalanceForRentExemption(82),
          encodeMint(this.mintAuthority.publicKey, stable.decimals),
          decodeAddress(stable.tokenProgramId)!,
          false,
          RENT_EXEMPT_EPOCH,
        ),
      );
      this.accounts.forget(stable.mint);
      changed = true;
    }
    if (!this.svm.getAccount(this.faucet.publicKey)) {
      this.svm.setAccount(this.faucet.publicKey, new Account(FAUCET_LAMPORTS, new Uint8Array(0), decodeAddress(SYSTEM_PROGRAM_ID)!, false, RENT_EXEMPT_EPOCH));
      this.accounts.forget(this.faucet.address);
      changed = true;
    }
    return changed;
  }

  /** Executes the logged transactions after the snapshot's `seq` again (the history log is the write-ahead log). */
  private replay(afterSeq: number): void {
    if (this.history.lastSeq < afterSeq) this.warn(`history.log ends at #${this.history.lastSeq} but the snapshot includes #${afterSeq}`);
    let replayed = 0;
    for (const record of this.history.since(afterSeq)) {
      const tx = parseTransaction(record.tx);
      this.syncClock(record.slot, record.time);
      const resolved = resolveKeys(this.svm, this.accounts, tx);
      if (!('err' in resolved) && isNonceTransaction(tx, resolved.names)) this.svm.expireBlockhash();
      const result = tx.version === 'legacy' ? this.svm.sendLegacyTransaction(tx.bytes) : this.svm.sendVersionedTransaction(tx.bytes);
      const err = result instanceof FailedTransactionMetadata ? transactionErrorJson(result) : null;
      if (JSON.stringify(err) !== JSON.stringify(record.err))
        this.warn(`replay of ${record.sig} gave ${JSON.stringify(err)}, logged ${JSON.stringify(record.err)}`);
      this.lastSlot = Math.max(this.lastSlot, record.slot);
      replayed++;
    }
    this.accounts.clear();
    if (replayed) this.snapshots.replayed(replayed);
  }

  private markUnsaved(): void {
    this.snapshots.markUnsaved();
  }

  private tick(): void {
    this.commit();
    this.snapshots.tick();
  }

  private snapshotHeader(): SnapshotHeader {
    return { ...this.header, seq: this.history.lastSeq, slot: this.slot(), savedAt: new Date().toISOString() };
  }

  /** Writes a snapshot in the background (one at a time); history up to it is fsynced first. */
  save(): Promise<void> {
    return this.snapshots.save();
  }

  private assertOpen(): void {
    if (this.closed) throw new Error(`the ${this.network} ledger is closed`);
  }

  /** Saves a final snapshot and releases the directory. */
  async close(): Promise<void> {
    if (this.closed) return;
    clearInterval(this.timer);
    await this.snapshots.settle();
    this.snapshots.saveSync();
    this.closed = true;
    this.history.close();
    this.listeners.clear();
    this.releaseLock();
  }
}
