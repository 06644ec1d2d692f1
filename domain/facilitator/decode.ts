import { VersionedMessage } from '@solana/web3.js';
import { MAX_TRANSACTION_BYTES } from './schema.ts';

// A wire transaction taken apart exactly as the runtime reads it: signatures, the signed message bytes, the
// static account keys and the instructions with their accounts resolved. Pure; web3.js only parses bytes.

export interface DecodedInstruction {
  index: number;
  programId: string;
  /** account addresses in instruction order */
  accounts: string[];
  data: Uint8Array;
}

export interface DecodedTransaction {
  version: 'legacy' | 0;
  /** the bytes every signature covers */
  messageBytes: Uint8Array;
  signatures: Uint8Array[];
  /** static account keys; the first `numRequiredSignatures` are the signers, the first of all the fee payer */
  accountKeys: string[];
  numRequiredSignatures: number;
  recentBlockhash: string;
  addressTableLookups: number;
  instructions: DecodedInstruction[];
}

export class DecodeError extends Error {
  override readonly name = 'DecodeError';
}

/** Solana's compact-u16 ("shortvec"); returns [value, bytes read]. */
function readShortVec(bytes: Uint8Array, offset: number): [number, number] {
  let value = 0;
  for (let i = 0; i < 3; i++) {
    const byte = bytes[offset + i];
    if (byte === undefined) throw new DecodeError('truncated length prefix');
    value |= (byte & 0x7f) << (7 * i);
    if ((byte & 0x80) === 0) {
      // Canonical form only: no trailing zero continuation bytes.
      if (i > 0 && byte === 0) throw new DecodeError('non-canonical length prefix');
      return [value, i + 1];
    }
  }
  throw new DecodeError('length prefix too long');
}

/**
 * Throws DecodeError for anything the runtime would not accept as a legacy or v0 transaction: truncated or trailing
 * bytes, non-canonical encodings (the re-serialized message must equal the signed bytes), other message versions,
 * a signature count that differs from the header, account indexes out of range, duplicate account keys.
 */
export function decodeTransaction(wire: Uint8Array): DecodedTransaction {
  if (wire.length === 0) throw new DecodeError('empty transaction');
  if (wire.length > MAX_TRANSACTION_BYTES) throw new DecodeError(`transaction is ${wire.length} bytes; the limit is ${MAX_TRANSACTION_BYTES}`);
  const [signatureCount, prefix] = readShortVec(wire, 0);
  const messageStart = prefix + signatureCount * 64;
  if (signatureCount === 0 || messageStart >= wire.length) throw new DecodeError('no signatures or no message');
  const signatures: Uint8Array[] = [];
  for (let i = 0; i < signatureCount; i++) signatures.push(wire.slice(prefix + i * 64, prefix + (i + 1) * 64));
  const messageBytes = wire.slice(messageStart);

  const first = messageBytes[0]!;
  const version = first & 0x80 ? first & 0x7f : 'legacy';
  if (version !== 'legacy' && version !== 0) throw new DecodeError(`message version ${version} is not supported`);

  let message: VersionedMessage;
  try {
    message = VersionedMessage.deserialize(messageBytes);
  } catch (e) {
    throw new DecodeError(`message does not parse: ${(e as Error).message}`);
  }
  let reencoded: Uint8Array;
  try {
    reencoded = message.serialize();
  } catch (e) {
    throw new DecodeError(`message does not re-encode: ${(e as Error).message}`);
  }
  if (!sameBytes(reencoded, messageBytes)) throw new DecodeError('message has trailing or non-canonical bytes');

  const header = message.header;
  const accountKeys = message.staticAccountKeys.map((k) => k.toBase58());
  if (header.numRequiredSignatures < 1 || header.numRequiredSignatures > accountKeys.length) throw new DecodeError('bad message header');
  if (header.numReadonlySignedAccounts >= header.numRequiredSignatures) throw new DecodeError('the fee payer must be writable');
  if (header.numReadonlyUnsignedAccounts > accountKeys.length - header.numRequiredSignatures) throw new DecodeError('bad message header');
  if (signatureCount !== header.numRequiredSignatures) {
    throw new DecodeError(`${signatureCount} signatures for ${header.numRequiredSignatures} required signers`);
  }
  if (new Set(accountKeys).size !== accountKeys.length) throw new DecodeError('an account key appears twice');

  const addressTableLookups = message.addressTableLookups.length;
  const totalKeys =
    accountKeys.length + message.addressTableLookups.reduce((n, l) => n + l.writableIndexes.length + l.readonlyIndexes.length, 0);
  const instructions = message.compiledInstructions.map((ix, index): DecodedInstruction => {
    for (const i of [ix.programIdIndex, ...ix.accountKeyIndexes]) {
      if (i >= totalKeys) throw new DecodeError(`instruction ${index} refers to account ${i} of ${totalKeys}`);
    }
    // Keys loaded from lookup tables cannot be named without I/O; the caller rejects such transactions anyway.
    const name = (i: number) => accountKeys[i] ?? `lookup:${i}`;
    return { index, programId: name(ix.programIdIndex), accounts: ix.accountKeyIndexes.map(name), data: Uint8Array.from(ix.data) };
  });

  return {
    version,
    messageBytes,
    signatures,
    accountKeys,
    numRequiredSignatures: header.numRequiredSignatures,
    recentBlockhash: message.recentBlockhash,
    addressTableLookups,
    instructions,
  };
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
