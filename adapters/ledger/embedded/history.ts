import { closeSync, fdatasync, fdatasyncSync, fstatSync, ftruncateSync, openSync, readSync, writeSync } from 'node:fs';
import { crc32 } from 'node:zlib';
import type { LedgerTransactionError } from '../../../domain/ports/ledger.ts';
import { decodeRecord, encodeRecord, Writer, type RecordInput, type StoredTransaction } from './history-codec.ts';

export type { RawInner, RawTokenBalance, RecordInput, StoredTokenBalance, StoredTransaction } from './history-codec.ts';

// The transaction history of one embedded ledger: an append-only file with one binary record per landed
// transaction. It is also the write-ahead log: on start the records after the last snapshot are executed again
// (ledger.ts). Binary because this runs once per transaction: raw keys and the wire transaction are copied, not
// base58/base64/JSON-encoded.
//
// Group commit, mapped onto Solana's commitment levels: a record is appended in memory when its transaction executes
// (processed: lost if the process dies), written to the file once per event-loop turn (confirmed: survives the
// process) and fdatasync'd right after in the background (finalized: survives the machine).
//
// Record: u32 body length | body | u32 crc32(body). A record whose length or checksum does not hold is a torn
// write at the tail (the process or machine died mid-write) and is cut off with everything after it.

export interface HistoryEntry {
  seq: number;
  sig: string;
  slot: number;
  time: number;
  err: LedgerTransactionError | null;
  memo: string | null;
  offset: number;
  length: number;
}

export interface SignatureQuery {
  before?: string | undefined;
  until?: string | undefined;
  limit: number;
}

export type { Commitment } from '../../../domain/ports/ledger.ts';
import type { Commitment } from '../../../domain/ports/ledger.ts';

const FLUSH_AT = 1 << 20;

export class History {
  private readonly fd: number;
  /** bytes in the file (written) */
  private size: number;
  private readonly pending = new Writer();
  private confirmedSeq: number;
  private finalizedSeq: number;
  private readonly entries: HistoryEntry[] = [];
  private readonly bySig = new Map<string, HistoryEntry>();
  private readonly byAddress = new Map<string, number[]>();
  private syncing = false;

  /**
   * Opens (creating) the log and rebuilds the indexes; `describe` returns the account keys and memo summary of a
   * stored record. A torn tail is cut off.
   */
  constructor(
    readonly path: string,
    describe: (record: StoredTransaction) => { keys: string[]; memo: string | null },
  ) {
    this.fd = openSync(path, 'a+', 0o600);
    this.size = fstatSync(this.fd).size;
    let good = 0;
    const head = Buffer.allocUnsafe(4);
    while (good + 4 <= this.size) {
      readSync(this.fd, head, 0, 4, good);
      const bodyLength = head.readUInt32LE(0);
      if (good + 8 + bodyLength > this.size) break;
      const frame = Buffer.allocUnsafe(bodyLength + 4);
      readSync(this.fd, frame, 0, frame.length, good + 4);
      const body = frame.subarray(0, bodyLength);
      if (crc32(body) !== frame.readUInt32LE(bodyLength)) break;
      let record: StoredTransaction;
      try {
        record = decodeRecord(body);
      } catch {
        break;
      }
      if (record.seq !== this.entries.length + 1) break;
      const { keys, memo } = describe(record);
      this.index({ seq: record.seq, sig: record.sig, slot: record.slot, time: record.time, err: record.err, memo, offset: good, length: bodyLength + 8 }, keys);
      good += bodyLength + 8;
    }
    if (good < this.size) {
      ftruncateSync(this.fd, good);
      this.size = good;
    }
    this.confirmedSeq = this.finalizedSeq = this.entries.length;
  }

  get lastSeq(): number {
    return this.entries.length;
  }

  get lastSlot(): number {
    return this.entries.at(-1)?.slot ?? 0;
  }

  nextSeq(): number {
    return this.entries.length + 1;
  }

  /** Appends one record in memory (its `seq` must be nextSeq()) and indexes it under every account key. */
  append(record: RecordInput, signature: string, keys: string[], memo: string | null): HistoryEntry {
    const start = this.pending.at;
    encodeRecord(this.pending, record);
    const entry = this.index(
      {
        seq: record.seq,
        sig: signature,
        slot: record.slot,
        time: record.time,
        err: record.err,
        memo,
        offset: this.size + start,
        length: this.pending.at - start,
      },
      keys,
    );
    if (this.pending.at >= FLUSH_AT) this.flush();
    return entry;
  }

  /** Writes the pending records to the file (one write); true when there were some. */
  flush(): boolean {
    if (this.pending.at === 0) return false;
    writeSync(this.fd, this.pending.buf, 0, this.pending.at);
    this.size += this.pending.at;
    this.pending.at = 0;
    this.confirmedSeq = this.entries.length;
    return true;
  }

  commitment(seq: number): Commitment {
    return seq <= this.finalizedSeq ? 'finalized' : seq <= this.confirmedSeq ? 'confirmed' : 'processed';
  }

  get confirmed(): number {
    return this.confirmedSeq;
  }

  get finalized(): number {
    return this.finalizedSeq;
  }

  private index(entry: HistoryEntry, keys: string[]): HistoryEntry {
    const { sig, seq } = entry;
    this.entries.push(entry);
    this.bySig.set(sig, entry);
    for (const key of keys) {
      const list = this.byAddress.get(key);
      if (list === undefined) this.byAddress.set(key, [seq]);
      else if (list[list.length - 1] !== seq) list.push(seq);
    }
    return entry;
  }

  entry(signature: string): HistoryEntry | undefined {
    return this.bySig.get(signature);
  }

  has(signature: string): boolean {
    return this.bySig.has(signature);
  }

  read(entry: HistoryEntry): StoredTransaction {
    if (entry.offset + entry.length > this.size) this.flush();
    const frame = Buffer.allocUnsafe(entry.length);
    readSync(this.fd, frame, 0, entry.length, entry.offset);
    return decodeRecord(frame.subarray(4, entry.length - 4));
  }

  /** Records with seq > `afterSeq`, oldest first (for replay). */
  *since(afterSeq: number): Generator<StoredTransaction> {
    for (let i = afterSeq; i < this.entries.length; i++) yield this.read(this.entries[i]!);
  }

  /**
   * The entries landed in slots [first, last], oldest first (entries are in slot order: the slot clock never goes
   * back), at most `limit` of them; `more` tells whether the span holds others past the limit.
   */
  inSlots(first: number, last: number, limit: number): { entries: HistoryEntry[]; more: boolean } {
    const from = this.firstAtOrAfter(first);
    const entries: HistoryEntry[] = [];
    let i = from;
    for (; i < this.entries.length && this.entries[i]!.slot <= last && entries.length < limit; i++) entries.push(this.entries[i]!);
    return { entries, more: i < this.entries.length && this.entries[i]!.slot <= last };
  }

  /** The seqs of the transactions that name `address`, oldest first (the per-address index itself: do not change it). */
  seqsOf(address: string): readonly number[] {
    return this.byAddress.get(address) ?? [];
  }

  entryAt(seq: number): HistoryEntry | undefined {
    return this.entries[seq - 1];
  }

  /** An entry's position in its slot's block (getTransactionsForAddress' transactionIndex). */
  indexInSlot(entry: HistoryEntry): number {
    return entry.seq - 1 - this.firstAtOrAfter(entry.slot);
  }

  /** The seq of the transaction at `index` in the block of `slot`, if there is one. */
  seqAt(slot: number, index: number): number | undefined {
    const i = this.firstAtOrAfter(slot) + index;
    return this.entries[i]?.slot === slot ? i + 1 : undefined;
  }

  /** The newest entry landed in a slot at or before `slot`, if any. */
  lastAtOrBefore(slot: number): HistoryEntry | undefined {
    const i = this.firstAtOrAfter(slot + 1);
    return i > 0 ? this.entries[i - 1] : undefined;
  }

  /** index of the first entry whose slot is >= `slot` (binary search) */
  private firstAtOrAfter(slot: number): number {
    let lo = 0;
    let hi = this.entries.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.entries[mid]!.slot < slot) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** Newest first, like getSignaturesForAddress. */
  signaturesFor(address: string, query: SignatureQuery): HistoryEntry[] {
    const list = this.byAddress.get(address);
    if (!list) return [];
    const before = query.before === undefined ? Infinity : (this.bySig.get(query.before)?.seq ?? -1);
    const until = query.until === undefined ? 0 : (this.bySig.get(query.until)?.seq ?? 0);
    const out: HistoryEntry[] = [];
    for (let i = list.length - 1; i >= 0 && out.length < query.limit; i--) {
      const seq = list[i]!;
      if (seq >= before) continue;
      if (seq <= until) break;
      out.push(this.entries[seq - 1]!);
    }
    return out;
  }

  /**
   * fdatasync in the background (one at a time) when written records are not yet on disk; `done` gets the seq now
   * finalized. Returns false when nothing needed it or one is already running.
   */
  syncSoon(done?: (finalizedSeq: number) => void): boolean {
    if (this.syncing || this.finalizedSeq >= this.confirmedSeq) return false;
    const target = this.confirmedSeq;
    this.syncing = true;
    fdatasync(this.fd, (e) => {
      this.syncing = false;
      if (e) return;
      this.finalizedSeq = Math.max(this.finalizedSeq, target);
      done?.(this.finalizedSeq);
    });
    return true;
  }

  /** Everything appended, written and fdatasync'd off the event loop. */
  sync(): Promise<void> {
    this.flush();
    const target = this.confirmedSeq;
    return new Promise((resolve, reject) =>
      fdatasync(this.fd, (e) => {
        if (e) return reject(e);
        this.finalizedSeq = Math.max(this.finalizedSeq, target);
        resolve();
      }),
    );
  }

  syncNow(): void {
    this.flush();
    fdatasyncSync(this.fd);
    this.finalizedSeq = this.confirmedSeq;
  }

  close(): void {
    this.syncNow();
    closeSync(this.fd);
  }
}
