import { encodeBase58 } from '../shared/base58.ts';
import { isStaticWritable, parseTransaction, WireError, type WireTransaction } from '../ledger/wire.ts';
import { MAX_TRANSACTION_BYTES } from './schema.ts';

// A wire transaction taken apart exactly as the runtime reads it: signatures, the signed message bytes, the
// static account keys and the instructions with their accounts resolved. Pure. The bytes are parsed once, by the
// one transaction parser (domain/ledger/wire.ts, which the embedded ledger's hot path uses too); this names them.

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
  /** per static key: whether the message lets instructions write it */
  writable: boolean[];
  recentBlockhash: string;
  addressTableLookups: number;
  instructions: DecodedInstruction[];
}

export class DecodeError extends Error {
  override readonly name = 'DecodeError';
}

/**
 * Throws DecodeError for anything the runtime would not accept as a legacy or v0 transaction (the sanitize rules of
 * domain/ledger/wire.ts: truncated or trailing bytes, non-canonical lengths, other message versions, a signature
 * count that differs from the header, program or account indexes out of range) and for duplicate account keys.
 */
export function decodeTransaction(wire: Uint8Array): DecodedTransaction {
  if (wire.length === 0) throw new DecodeError('empty transaction');
  if (wire.length > MAX_TRANSACTION_BYTES) throw new DecodeError(`transaction is ${wire.length} bytes; the limit is ${MAX_TRANSACTION_BYTES}`);
  let tx: WireTransaction;
  try {
    tx = parseTransaction(wire);
  } catch (e) {
    if (e instanceof WireError) throw new DecodeError(e.message);
    throw e;
  }
  const { bytes } = tx;
  const signatures: Uint8Array[] = [];
  for (let i = 0; i < tx.numSignatures; i++) {
    const at = tx.signaturesOffset + i * 64;
    signatures.push(Uint8Array.from(bytes.subarray(at, at + 64)));
  }
  const accountKeys: string[] = new Array(tx.numStaticKeys);
  for (let i = 0; i < tx.numStaticKeys; i++) accountKeys[i] = encodeBase58(bytes.subarray(tx.keysOffset + i * 32, tx.keysOffset + (i + 1) * 32));
  if (new Set(accountKeys).size !== accountKeys.length) throw new DecodeError('an account key appears twice');
  // Keys loaded from lookup tables cannot be named without I/O; the caller rejects such transactions anyway.
  const name = (i: number) => accountKeys[i] ?? `lookup:${i}`;
  const instructions = tx.instructions.map(
    (ix, index): DecodedInstruction => ({ index, programId: name(ix.programIndex), accounts: Array.from(ix.accounts, name), data: Uint8Array.from(ix.data) }),
  );
  return {
    version: tx.version,
    messageBytes: Uint8Array.from(bytes.subarray(tx.messageOffset)),
    signatures,
    accountKeys,
    numRequiredSignatures: tx.numRequiredSignatures,
    writable: accountKeys.map((_, i) => isStaticWritable(tx, i)),
    recentBlockhash: encodeBase58(bytes.subarray(tx.blockhashOffset, tx.blockhashOffset + 32)),
    addressTableLookups: tx.lookups.length,
    instructions,
  };
}
