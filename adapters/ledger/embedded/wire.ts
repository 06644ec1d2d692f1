// The Solana wire format of a transaction (legacy and v0), parsed strictly. LiteSVM aborts the whole process on
// bytes it cannot deserialize, so nothing reaches it that this parser has not accepted.

export const PACKET_DATA_SIZE = 1232;

export class WireError extends Error {
  override readonly name = 'WireError';
}

/** An instruction as offsets into the transaction; the views are made on first use (most are never read). */
export class WireInstruction {
  private accountsView: Uint8Array | undefined;
  private dataView: Uint8Array | undefined;
  constructor(
    private readonly bytes: Buffer,
    readonly programIndex: number,
    readonly accountsOffset: number,
    readonly accountsLength: number,
    readonly dataOffset: number,
    readonly dataLength: number,
  ) {}
  get accounts(): Uint8Array {
    return (this.accountsView ??= this.bytes.subarray(this.accountsOffset, this.accountsOffset + this.accountsLength));
  }
  get data(): Buffer {
    return (this.dataView ??= this.bytes.subarray(this.dataOffset, this.dataOffset + this.dataLength)) as Buffer;
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

class Reader {
  pos: number;
  constructor(
    readonly bytes: Buffer,
    start: number,
  ) {
    this.pos = start;
  }
  u8(): number {
    if (this.pos >= this.bytes.length) throw new WireError('unexpected end of transaction');
    return this.bytes[this.pos++]!;
  }
  /** Solana's compact-u16 ("short_vec" length), rejecting the non-canonical encodings bincode rejects. */
  shortU16(): number {
    let value = 0;
    for (let i = 0; i < 3; i++) {
      const byte = this.u8();
      value |= (byte & 0x7f) << (i * 7);
      if ((byte & 0x80) === 0) {
        if (i > 0 && byte === 0) throw new WireError('non-canonical compact-u16');
        if (value > 0xffff) throw new WireError('compact-u16 overflow');
        return value;
      }
      if (i === 2) throw new WireError('compact-u16 overflow');
    }
    throw new WireError('compact-u16 overflow');
  }
  take(n: number): Uint8Array {
    if (this.pos + n > this.bytes.length) throw new WireError('unexpected end of transaction');
    const out = this.bytes.subarray(this.pos, this.pos + n);
    this.pos += n;
    return out;
  }
  skip(n: number): number {
    const at = this.pos;
    if (at + n > this.bytes.length) throw new WireError('unexpected end of transaction');
    this.pos += n;
    return at;
  }
}

function readMessage(r: Reader) {
  const messageOffset = r.pos;
  const first = r.u8();
  let version: 'legacy' | 0 = 'legacy';
  let numRequiredSignatures = first;
  if (first & 0x80) {
    if ((first & 0x7f) !== 0) throw new WireError(`unsupported transaction version ${first & 0x7f}`);
    version = 0;
    numRequiredSignatures = r.u8();
  }
  const numReadonlySigned = r.u8();
  const numReadonlyUnsigned = r.u8();
  const numStaticKeys = r.shortU16();
  const keysOffset = r.skip(numStaticKeys * 32);
  const blockhashOffset = r.skip(32);
  const numInstructions = r.shortU16();
  const instructions: WireInstruction[] = [];
  for (let i = 0; i < numInstructions; i++) {
    const programIndex = r.u8();
    const accountsLength = r.shortU16();
    const accountsOffset = r.skip(accountsLength);
    const dataLength = r.shortU16();
    const dataOffset = r.skip(dataLength);
    instructions.push(new WireInstruction(r.bytes, programIndex, accountsOffset, accountsLength, dataOffset, dataLength));
  }
  const lookups: WireLookup[] = [];
  let numLoadedKeys = 0;
  if (version === 0) {
    const numLookups = r.shortU16();
    for (let i = 0; i < numLookups; i++) {
      const keyOffset = r.skip(32);
      const writable = r.take(r.shortU16());
      const readonly = r.take(r.shortU16());
      numLoadedKeys += writable.length + readonly.length;
      lookups.push({ keyOffset, writable, readonly });
    }
  }
  return {
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
}

/** The sanitize rules of the runtime (`Message::sanitize`), checked before LiteSVM sees the bytes. */
function sanitize(bytes: Buffer, m: ReturnType<typeof readMessage>, numSignatures: number): void {
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
  const r = new Reader(bytes, 0);
  const numSignatures = r.shortU16();
  const signaturesOffset = r.skip(numSignatures * 64);
  const m = readMessage(r);
  if (r.pos !== bytes.length) throw new WireError('trailing bytes after the transaction');
  sanitize(bytes, m, numSignatures);
  return { bytes, numSignatures, signaturesOffset, ...m };
}

/** Parses a message alone (getFeeForMessage). */
export function parseMessage(input: Uint8Array): Omit<WireTransaction, 'numSignatures' | 'signaturesOffset'> {
  const bytes = Buffer.isBuffer(input) ? input : Buffer.from(input.buffer, input.byteOffset, input.byteLength);
  const r = new Reader(bytes, 0);
  const m = readMessage(r);
  if (r.pos !== bytes.length) throw new WireError('trailing bytes after the message');
  sanitize(bytes, m, m.numRequiredSignatures);
  return { bytes, ...m };
}

export function isStaticWritable(tx: Pick<WireTransaction, 'numRequiredSignatures' | 'numReadonlySigned' | 'numReadonlyUnsigned' | 'numStaticKeys'>, i: number): boolean {
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
