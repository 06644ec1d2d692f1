// The Solana wire format of a transaction (legacy and v0), parsed strictly: the one transaction parser. The embedded
// ledger's hot path reads the byte offsets it gives (LiteSVM aborts the whole process on bytes it cannot deserialize,
// so nothing reaches it that this parser has not accepted); domain/facilitator/decode.ts names keys on top of it.
// Pure: offsets into the caller's bytes, no allocation beyond the instruction records.

export const PACKET_DATA_SIZE = 1232;

export class WireError extends Error {
  override readonly name = 'WireError';
}

/** An instruction as offsets into the transaction; the views are made on first use (most are never read). */
export class WireInstruction {
  private accountsView: Uint8Array | undefined;
  private dataView: Uint8Array | undefined;
  // biome-ignore lint/complexity/useMaxParams: made once per instruction of every parsed transaction (the settle hot path); plain offsets, no options object to allocate
  constructor(
    private readonly bytes: Buffer,
    readonly programIndex: number,
    readonly accountsOffset: number,
    readonly accountsLength: number,
    readonly dataOffset: number,
    readonly dataLength: number,
  ) {}
  /** the whole transaction the offsets point into */
  bytesOf(): Buffer {
    return this.bytes;
  }
  get accounts(): Uint8Array {
    this.accountsView ??= this.bytes.subarray(this.accountsOffset, this.accountsOffset + this.accountsLength);
    return this.accountsView;
  }
  get data(): Buffer {
    this.dataView ??= this.bytes.subarray(this.dataOffset, this.dataOffset + this.dataLength);
    return this.dataView as Buffer;
  }
}

export interface WireLookup {
  /** offset of the table's address in `bytes` */
  keyOffset: number;
  writable: Uint8Array;
  readonly: Uint8Array;
}

export interface WireTransaction {
  bytes: Buffer;
  version: 'legacy' | 0;
  numSignatures: number;
  /** offset of the first 64-byte signature */
  signaturesOffset: number;
  messageOffset: number;
  numRequiredSignatures: number;
  numReadonlySigned: number;
  numReadonlyUnsigned: number;
  numStaticKeys: number;
  keysOffset: number;
  blockhashOffset: number;
  instructions: WireInstruction[];
  lookups: WireLookup[];
  /** writable + readonly indexes loaded from lookup tables */
  numLoadedKeys: number;
}

type Message = Omit<WireTransaction, 'bytes' | 'numSignatures' | 'signaturesOffset'>;

// A cursor shared by the readers below: module-level functions, so nothing is allocated per call (tsx's keepNames
// would wrap every per-call closure with a property definition).
const EMPTY = Buffer.alloc(0);
let bytesAt: Buffer = EMPTY;
let pos = 0;

function u8(): number {
  if (pos >= bytesAt.length) throw new WireError('unexpected end of transaction');
  return bytesAt[pos++]!;
}

/** Solana's compact-u16 ("short_vec" length), rejecting the non-canonical encodings bincode rejects. */
function readShortU16(): number {
  const b0 = u8();
  if (b0 < 0x80) return b0;
  const b1 = u8();
  if (b1 < 0x80) {
    if (b1 === 0) throw new WireError('non-canonical compact-u16');
    return (b0 & 0x7f) | (b1 << 7);
  }
  const b2 = u8();
  if (b2 === 0) throw new WireError('non-canonical compact-u16');
  if (b2 > 3) throw new WireError('compact-u16 overflow');
  return (b0 & 0x7f) | ((b1 & 0x7f) << 7) | (b2 << 14);
}

function skip(count: number): number {
  const at = pos;
  if (at + count > bytesAt.length) throw new WireError('unexpected end of transaction');
  pos += count;
  return at;
}

/** Reads a message at `start`; returns it with the position after it. */
function readMessage(bytes: Buffer, start: number): { message: Message; end: number } {
  bytesAt = bytes;
  pos = start;
  const messageOffset = pos;
  const first = u8();
  let version: 'legacy' | 0 = 'legacy';
  let numRequiredSignatures = first;
  if (first & 0x80) {
    if ((first & 0x7f) !== 0) throw new WireError(`unsupported transaction version ${first & 0x7f}`);
    version = 0;
    numRequiredSignatures = u8();
  }
  const numReadonlySigned = u8();
  const numReadonlyUnsigned = u8();
  const numStaticKeys = readShortU16();
  const keysOffset = skip(numStaticKeys * 32);
  const blockhashOffset = skip(32);
  const numInstructions = readShortU16();
  const instructions: WireInstruction[] = new Array(numInstructions);
  for (let i = 0; i < numInstructions; i++) {
    const programIndex = u8();
    const accountsLength = readShortU16();
    const accountsOffset = skip(accountsLength);
    const dataLength = readShortU16();
    const dataOffset = skip(dataLength);
    instructions[i] = new WireInstruction(bytes, programIndex, accountsOffset, accountsLength, dataOffset, dataLength);
  }
  const lookups: WireLookup[] = [];
  let numLoadedKeys = 0;
  if (version === 0) {
    const numLookups = readShortU16();
    for (let i = 0; i < numLookups; i++) {
      const keyOffset = skip(32);
      const w = readShortU16();
      const writable = bytes.subarray(skip(w), pos);
      const r = readShortU16();
      const readonly = bytes.subarray(skip(r), pos);
      numLoadedKeys += w + r;
      lookups.push({ keyOffset, writable, readonly });
    }
  }
  const message: Message = {
    messageOffset,
    version,
    numRequiredSignatures,
    numReadonlySigned,
    numReadonlyUnsigned,
    numStaticKeys,
    keysOffset,
    blockhashOffset,
    instructions,
    lookups,
    numLoadedKeys,
  };
  const end = pos;
  bytesAt = EMPTY;
  return { message, end };
}

/** The sanitize rules of the runtime (`Message::sanitize`), checked before LiteSVM sees the bytes. */
function sanitize(bytes: Buffer, m: Message, numSignatures: number): void {
  if (m.numRequiredSignatures === 0) throw new WireError('a transaction needs a fee payer signature');
  if (m.numRequiredSignatures > m.numStaticKeys) throw new WireError('more required signatures than account keys');
  if (m.numReadonlySigned >= m.numRequiredSignatures) throw new WireError('the fee payer must be writable');
  if (m.numReadonlyUnsigned > m.numStaticKeys - m.numRequiredSignatures) throw new WireError('readonly unsigned count out of range');
  if (numSignatures !== m.numRequiredSignatures) throw new WireError('signature count does not match the message header');
  const total = m.numStaticKeys + m.numLoadedKeys;
  if (total > 256) throw new WireError('too many account keys');
  for (const ix of m.instructions) {
    if (ix.programIndex === 0 || ix.programIndex >= m.numStaticKeys) throw new WireError('invalid program index');
    for (let k = ix.accountsOffset; k < ix.accountsOffset + ix.accountsLength; k++) if (bytes[k]! >= total) throw new WireError('invalid account index');
  }
  for (const l of m.lookups) if (l.writable.length + l.readonly.length === 0) throw new WireError('empty address table lookup');
}

/** Parses and sanitizes a wire transaction; throws WireError when LiteSVM must not see it. */
export function parseTransaction(input: Uint8Array): WireTransaction {
  const bytes = Buffer.isBuffer(input) ? input : Buffer.from(input.buffer, input.byteOffset, input.byteLength);
  if (bytes.length > PACKET_DATA_SIZE) throw new WireError(`transaction too large: ${bytes.length} bytes, max ${PACKET_DATA_SIZE}`);
  if (bytes.length === 0) throw new WireError('unexpected end of transaction');
  // a one-byte count: 128 signatures or more cannot fit in a packet
  const numSignatures = bytes[0]!;
  if (numSignatures >= 0x80) throw new WireError('too many signatures');
  const signaturesOffset = 1;
  if (signaturesOffset + numSignatures * 64 > bytes.length) throw new WireError('unexpected end of transaction');
  const { message, end } = readMessage(bytes, signaturesOffset + numSignatures * 64);
  if (end !== bytes.length) throw new WireError('trailing bytes after the transaction');
  sanitize(bytes, message, numSignatures);
  return { bytes, numSignatures, signaturesOffset, ...message };
}

/** Parses a message alone (getFeeForMessage). */
export function parseMessage(input: Uint8Array): Omit<WireTransaction, 'numSignatures' | 'signaturesOffset'> {
  const bytes = Buffer.isBuffer(input) ? input : Buffer.from(input.buffer, input.byteOffset, input.byteLength);
  const { message, end } = readMessage(bytes, 0);
  if (end !== bytes.length) throw new WireError('trailing bytes after the message');
  sanitize(bytes, message, message.numRequiredSignatures);
  return { bytes, ...message };
}

export function isStaticWritable(
  tx: Pick<WireTransaction, 'numRequiredSignatures' | 'numReadonlySigned' | 'numReadonlyUnsigned' | 'numStaticKeys'>,
  i: number,
): boolean {
  return i < tx.numRequiredSignatures ? i < tx.numRequiredSignatures - tx.numReadonlySigned : i < tx.numStaticKeys - tx.numReadonlyUnsigned;
}

/** Encodes a compact-u16. */
export function shortU16(n: number): number[] {
  const out: number[] = [];
  let v = n;
  for (;;) {
    const byte = v & 0x7f;
    v >>= 7;
    if (v === 0) {
      out.push(byte);
      return out;
    }
    out.push(byte | 0x80);
  }
}
