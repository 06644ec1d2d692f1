import { closeSync, fdatasync, fdatasyncSync, fstatSync, ftruncateSync, openSync, readSync, writeSync } from 'node:fs';
import type { LedgerTransactionError } from '../../../domain/ports/ledger.ts';

// The transaction history of one embedded ledger: an append-only file of JSON lines, one per landed transaction,
// written before the send returns. It is also the write-ahead log: on start, the records after the last snapshot
// are executed again to bring the accounts up to date (see ledger.ts).

/** [accountIndex, mint, owner, amount, decimals, tokenProgram] */
export type StoredTokenBalance = [number, string, string, string, number, string];

export interface StoredTransaction {
  seq: number;
  sig: string;
  slot: number;
  /** unix seconds */
  time: number;
  /** the wire transaction, base64 */
  tx: string;
  err: LedgerTransactionError | null;
  fee: string;
  /** addresses loaded from lookup tables: writable, readonly */
  lw?: string[];
  lr?: string[];
  pre: string[];
  post: string[];
  preTok: StoredTokenBalance[];
  postTok: StoredTokenBalance[];
  logs: string[];
  cu: number;
  /** inner instructions per top-level index: [index, [programIdIndex, accountIndexes, data base64, stackHeight][]] */
  inner?: [number, [number, number[], string, number][]][];
}

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

export class History {
  private readonly fd: number;
  private size: number;
  private readonly entries: HistoryEntry[] = [];
  private readonly bySig = new Map<string, HistoryEntry>();
  private readonly byAddress = new Map<string, number[]>();
  private dirtySince = 0;
  private syncing = false;

  /**
   * Opens (creating) the log and rebuilds the indexes; `describe` returns the account keys and memo summary of a
   * stored record. A torn last line (the process died mid-write) is cut off.
   */
  constructor(
    readonly path: string,
    describe: (record: StoredTransaction) => { keys: string[]; memo: string | null },
    onRecord?: (record: StoredTransaction) => void,
  ) {
    this.fd = openSync(path, 'a+', 0o600);
    this.size = fstatSync(this.fd).size;
    let good = 0;
    for (const { line, offset, length } of readLines(this.fd, this.size)) {
      let record: StoredTransaction;
      try {
        record = JSON.parse(line) as StoredTransaction;
      } catch {
        break;
      }
      if (record.seq !== this.entries.length + 1) break;
      const { keys, memo } = describe(record);
      this.index(record, keys, memo, offset, length);
      onRecord?.(record);
      good = offset + length;
    }
    if (good < this.size) {
      ftruncateSync(this.fd, good);
      this.size = good;
    }
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

  /** Appends one record (its `seq` must be nextSeq()) and indexes it under every account key. */
  append(record: StoredTransaction, keys: string[], memo: string | null): HistoryEntry {
    const line = `${JSON.stringify(record)}\n`;
    const length = Buffer.byteLength(line);
    writeSync(this.fd, line);
    const entry = this.index(record, keys, memo, this.size, length);
    this.size += length;
    this.dirtySince ||= Date.now();
    return entry;
  }

  private index(record: StoredTransaction, keys: string[], memo: string | null, offset: number, length: number): HistoryEntry {
    const entry: HistoryEntry = { seq: record.seq, sig: record.sig, slot: record.slot, time: record.time, err: record.err, memo, offset, length };
    this.entries.push(entry);
    this.bySig.set(record.sig, entry);
    for (const key of keys) {
      const list = this.byAddress.get(key);
      if (list === undefined) this.byAddress.set(key, [record.seq]);
      else if (list[list.length - 1] !== record.seq) list.push(record.seq);
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
    const buffer = Buffer.allocUnsafe(entry.length);
    readSync(this.fd, buffer, 0, entry.length, entry.offset);
    return JSON.parse(buffer.toString('utf8')) as StoredTransaction;
  }

  /** Records with seq > `afterSeq`, oldest first (for replay). */
  *since(afterSeq: number): Generator<StoredTransaction> {
    for (let i = afterSeq; i < this.entries.length; i++) yield this.read(this.entries[i]!);
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

  /** Flushes written records to disk in the background (at most one fdatasync in flight). */
  syncSoon(): void {
    if (!this.dirtySince || this.syncing) return;
    this.dirtySince = 0;
    this.syncing = true;
    fdatasync(this.fd, () => {
      this.syncing = false;
    });
  }

  /** fdatasync off the event loop. */
  sync(): Promise<void> {
    return new Promise((resolve, reject) => fdatasync(this.fd, (e) => (e ? reject(e) : resolve())));
  }

  syncNow(): void {
    fdatasyncSync(this.fd);
    this.dirtySince = 0;
  }

  close(): void {
    this.syncNow();
    closeSync(this.fd);
  }
}

function* readLines(fd: number, size: number): Generator<{ line: string; offset: number; length: number }> {
  const chunk = Buffer.allocUnsafe(1 << 20);
  let carry = Buffer.alloc(0);
  let carryOffset = 0;
  for (let position = 0; position < size; ) {
    const n = readSync(fd, chunk, 0, Math.min(chunk.length, size - position), position);
    if (n <= 0) break;
    position += n;
    const data = carry.length ? Buffer.concat([carry, chunk.subarray(0, n)]) : chunk.subarray(0, n);
    let start = 0;
    for (let nl = data.indexOf(10, start); nl !== -1; nl = data.indexOf(10, start)) {
      yield { line: data.toString('utf8', start, nl), offset: carryOffset + start, length: nl + 1 - start };
      start = nl + 1;
    }
    carryOffset += start;
    carry = Buffer.from(data.subarray(start));
  }
  // a last line without its newline is torn: not yielded
}
