import { crc32 } from 'node:zlib';
import type { LedgerTransactionError } from '../../../domain/ports/ledger.ts';
import { encodeBase58 } from '../../../domain/shared/base58.ts';
import { TOKEN_2022_PROGRAM_ID, TOKEN_PROGRAM_ID } from './token.ts';

// One history record (history.ts stores them): u32 length, the binary body — the landed transaction's raw keys,
// wire bytes, balances and logs, written field by field — and u32 crc32(body).

/** A token balance as recorded: the account's mint and owner as raw bytes (the first 64 bytes of its data). */
export interface RawTokenBalance {
  index: number;
  /** mint (32) + owner (32) */
  raw: Uint8Array;
  amount: bigint;
  decimals: number;
  program: string;
}

export type RawInner = [number, [number, Uint8Array, Uint8Array, number][]][];

export interface RecordInput {
  seq: number;
  slot: number;
  time: number;
  wire: Uint8Array;
  err: LedgerTransactionError | null;
  fee: bigint;
  pre: bigint[];
  post: bigint[];
  preTok: RawTokenBalance[];
  postTok: RawTokenBalance[];
  logs: string[];
  cu: number;
  loadedWritable: Uint8Array[];
  loadedReadonly: Uint8Array[];
  inner: RawInner | undefined;
}

export interface StoredTokenBalance {
  index: number;
  mint: string;
  owner: string;
  amount: bigint;
  decimals: number;
  program: string;
}

/** A record as read back. */
export interface StoredTransaction {
  seq: number;
  sig: string;
  slot: number;
  /** unix seconds */
  time: number;
  tx: Buffer;
  err: LedgerTransactionError | null;
  fee: bigint;
  /** addresses loaded from lookup tables: writable, readonly */
  lw: string[];
  lr: string[];
  pre: bigint[];
  post: bigint[];
  preTok: StoredTokenBalance[];
  postTok: StoredTokenBalance[];
  logs: string[];
  cu: number;
  /** inner instructions per top-level index: [index, [programIdIndex, accountIndexes, data, stackHeight][]] */
  inner: [number, [number, number[], Buffer, number][]][];
}

const FORMAT = 2;

// Field by field through a DataView: Buffer's write helpers and subarray cost more per field, on the ledger's hot path.
export class Writer {
  buf = Buffer.allocUnsafe(256 * 1024);
  view = new DataView(this.buf.buffer, this.buf.byteOffset, this.buf.byteLength);
  at = 0;
  ensure(n: number): void {
    if (this.at + n <= this.buf.length) return;
    const bigger = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.at + n + 1024));
    this.buf.copy(bigger, 0, 0, this.at);
    this.buf = bigger;
    this.view = new DataView(bigger.buffer, bigger.byteOffset, bigger.byteLength);
  }
  u8(v: number): void {
    this.buf[this.at++] = v;
  }
  u16(v: number): void {
    this.view.setUint16(this.at, v, true);
    this.at += 2;
  }
  u32(v: number): void {
    this.view.setUint32(this.at, v >>> 0, true);
    this.at += 4;
  }
  f64(v: number): void {
    this.view.setFloat64(this.at, v, true);
    this.at += 8;
  }
  u64(v: bigint): void {
    this.view.setBigUint64(this.at, v, true);
    this.at += 8;
  }
  bytes(b: Uint8Array): void {
    this.ensure(b.length);
    this.buf.set(b, this.at);
    this.at += b.length;
  }
  /** u16 byte length + utf8 */
  text(s: string): void {
    this.ensure(2 + s.length * 3);
    const n = this.buf.write(s, this.at + 2, 'utf8');
    this.view.setUint16(this.at, n, true);
    this.at += 2 + n;
  }
  /** u16 count, u16 UTF-16 length of each, u32 byte length, then all of them as one utf8 run */
  texts(list: string[]): void {
    this.ensure(6 + list.length * 2);
    this.u16(list.length);
    for (const s of list) this.u16(s.length);
    const joined = list.join('');
    this.ensure(4 + joined.length * 3);
    const n = this.buf.write(joined, this.at + 4, 'utf8');
    this.view.setUint32(this.at, n, true);
    this.at += 4 + n;
  }
}

class Reader {
  at = 0;
  constructor(readonly buf: Buffer) {}
  u8(): number {
    return this.buf[this.at++]!;
  }
  u16(): number {
    const v = this.buf.readUInt16LE(this.at);
    this.at += 2;
    return v;
  }
  u32(): number {
    const v = this.buf.readUInt32LE(this.at);
    this.at += 4;
    return v;
  }
  f64(): number {
    const v = this.buf.readDoubleLE(this.at);
    this.at += 8;
    return v;
  }
  u64(): bigint {
    const v = this.buf.readBigUInt64LE(this.at);
    this.at += 8;
    return v;
  }
  bytes(n: number): Buffer {
    const b = this.buf.subarray(this.at, this.at + n);
    this.at += n;
    return b;
  }
  text(): string {
    const n = this.u16();
    const s = this.buf.toString('utf8', this.at, this.at + n);
    this.at += n;
    return s;
  }
  texts(): string[] {
    const lengths: number[] = [];
    for (let n = this.u16(); n > 0; n--) lengths.push(this.u16());
    const bytes = this.u32();
    const joined = this.buf.toString('utf8', this.at, this.at + bytes);
    this.at += bytes;
    const out: string[] = [];
    let from = 0;
    for (const length of lengths) {
      out.push(joined.slice(from, from + length));
      from += length;
    }
    return out;
  }
}

function encodeTokenBalances(w: Writer, list: RawTokenBalance[]): void {
  w.ensure(1 + list.length * 76);
  w.u8(list.length);
  for (const t of list) {
    w.u8(t.index);
    w.bytes(t.raw); // exactly the 64 bytes
    w.u64(t.amount);
    w.u8(t.decimals);
    w.u8(t.program === TOKEN_2022_PROGRAM_ID ? 1 : 0);
  }
}

/** Appends a record (framed) to `w`. */
export function encodeRecord(w: Writer, r: RecordInput): void {
  const start = w.at;
  w.ensure(68 + r.wire.length + r.pre.length * 16);
  w.at += 4;
  w.u8(FORMAT);
  w.u32(r.seq);
  w.f64(r.slot);
  w.f64(r.time);
  w.u16(r.wire.length);
  w.bytes(r.wire);
  if (r.err === null) w.u8(0);
  else {
    w.u8(1);
    w.text(JSON.stringify(r.err));
  }
  w.ensure(9 + r.pre.length * 16);
  w.u64(r.fee);
  w.u8(r.pre.length);
  for (const v of r.pre) w.u64(v);
  for (const v of r.post) w.u64(v);
  encodeTokenBalances(w, r.preTok);
  encodeTokenBalances(w, r.postTok);
  w.ensure(4);
  w.u32(r.cu);
  w.texts(r.logs);
  w.ensure(2 + (r.loadedWritable.length + r.loadedReadonly.length) * 32);
  w.u8(r.loadedWritable.length);
  for (const k of r.loadedWritable) w.bytes(k);
  w.u8(r.loadedReadonly.length);
  for (const k of r.loadedReadonly) w.bytes(k);
  const inner = r.inner ?? [];
  w.ensure(1);
  w.u8(inner.length);
  for (const [index, list] of inner) {
    w.ensure(3);
    w.u8(index);
    w.u16(list.length);
    for (const [program, accounts, data, stackHeight] of list) {
      w.ensure(6 + accounts.length + data.length);
      w.u8(program);
      w.u8(accounts.length);
      w.bytes(accounts);
      w.u16(data.length);
      w.bytes(data);
      w.u8(stackHeight);
    }
  }
  const bodyLength = w.at - start - 4;
  w.view.setUint32(start, bodyLength, true);
  w.ensure(4);
  w.u32(crc32(new Uint8Array(w.buf.buffer, w.buf.byteOffset + start + 4, bodyLength)));
}

function decodeTokenBalances(r: Reader): StoredTokenBalance[] {
  const out: StoredTokenBalance[] = [];
  for (let n = r.u8(); n > 0; n--) {
    const index = r.u8();
    const raw = r.bytes(64);
    out.push({
      index,
      mint: encodeBase58(raw.subarray(0, 32)),
      owner: encodeBase58(raw.subarray(32)),
      amount: r.u64(),
      decimals: r.u8(),
      program: r.u8() === 1 ? TOKEN_2022_PROGRAM_ID : TOKEN_PROGRAM_ID,
    });
  }
  return out;
}

/** Decodes one record body. */
export function decodeRecord(body: Buffer): StoredTransaction {
  const r = new Reader(body);
  if (r.u8() !== FORMAT) throw new Error('unknown history record format');
  const seq = r.u32();
  const slot = r.f64();
  const time = r.f64();
  const tx = Buffer.from(r.bytes(r.u16()));
  const err = r.u8() === 1 ? (JSON.parse(r.text()) as LedgerTransactionError) : null;
  const fee = r.u64();
  const keys = r.u8();
  const pre: bigint[] = [];
  const post: bigint[] = [];
  for (let i = 0; i < keys; i++) pre.push(r.u64());
  for (let i = 0; i < keys; i++) post.push(r.u64());
  const preTok = decodeTokenBalances(r);
  const postTok = decodeTokenBalances(r);
  const cu = r.u32();
  const logs = r.texts();
  const lw: string[] = [];
  for (let n = r.u8(); n > 0; n--) lw.push(encodeBase58(r.bytes(32)));
  const lr: string[] = [];
  for (let n = r.u8(); n > 0; n--) lr.push(encodeBase58(r.bytes(32)));
  const inner: StoredTransaction['inner'] = [];
  for (let g = r.u8(); g > 0; g--) {
    const index = r.u8();
    const list: [number, number[], Buffer, number][] = [];
    for (let n = r.u16(); n > 0; n--) {
      const program = r.u8();
      const accounts = Array.from(r.bytes(r.u8()));
      const data = Buffer.from(r.bytes(r.u16()));
      list.push([program, accounts, data, r.u8()]);
    }
    inner.push([index, list]);
  }
  const sig = encodeBase58(tx.subarray(1, 65));
  return { seq, sig, slot, time, tx, err, fee, lw, lr, pre, post, preTok, postTok, logs, cu, inner };
}
