import type { LiteSvm } from 'litesvm/dist/internal.js';
import type { LedgerTransactionError } from '../../../domain/ports/ledger.ts';
import { isStaticWritable, type WireTransaction } from '../../../domain/ledger/wire.ts';
import type { AccountIndex } from './account-index.ts';
import { LOOKUP_TABLE_PROGRAM_ID, SYSTEM_PROGRAM_ID } from './token.ts';

// The account keys of a parsed transaction, as the runtime loads them: static keys, then those of its address
// lookup tables (writable first); which are writable; and the durable nonce a transaction may use instead of a
// recent blockhash. Read on every send (the hot path) and on replay.

const LOOKUP_TABLE_META_SIZE = 56;

export interface ResolvedKeys {
  names: string[];
  /** the 32 bytes of each key */
  keys: Buffer[];
  /** raw addresses loaded from lookup tables (writable first) */
  loaded: Buffer[];
  loadedWritable: number;
}

/** Account keys of a parsed transaction: static, then loaded writable, then loaded readonly. */
export function resolveKeys(svm: LiteSvm, accounts: AccountIndex, tx: WireTransaction): ResolvedKeys | { err: LedgerTransactionError } {
  const names: string[] = new Array(tx.numStaticKeys);
  const keys: Buffer[] = new Array(tx.numStaticKeys);
  for (let i = 0; i < tx.numStaticKeys; i++) {
    const entry = accounts.keyEntry(tx.bytes, tx.keysOffset + i * 32);
    names[i] = entry.name;
    keys[i] = entry.key;
  }
  if (tx.lookups.length === 0) return { names, keys, loaded: [], loadedWritable: 0 };
  const tables = tx.lookups.map((l) => {
    const table = svm.getAccount(tx.bytes.subarray(l.keyOffset, l.keyOffset + 32));
    return table ? { owner: accounts.nameOf(table.owner()), data: Buffer.from(table.data()) } : null;
  });
  const loaded: Buffer[] = [];
  let loadedWritable = 0;
  for (const kind of ['writable', 'readonly'] as const) {
    for (let t = 0; t < tx.lookups.length; t++) {
      const table = tables[t];
      if (!table) return { err: 'AddressLookupTableNotFound' };
      if (table.owner !== LOOKUP_TABLE_PROGRAM_ID) return { err: 'InvalidAddressLookupTableOwner' };
      const count = Math.floor((table.data.length - LOOKUP_TABLE_META_SIZE) / 32);
      for (const index of tx.lookups[t]![kind]) {
        if (index >= count) return { err: 'InvalidAddressLookupTableIndex' };
        const entry = accounts.keyEntry(table.data, LOOKUP_TABLE_META_SIZE + index * 32);
        names.push(entry.name);
        keys.push(entry.key);
        loaded.push(entry.key);
        if (kind === 'writable') loadedWritable++;
      }
    }
  }
  return { names, keys, loaded, loadedWritable };
}

export function isWritable(tx: WireTransaction, i: number, loadedWritable: number): boolean {
  return i < tx.numStaticKeys ? isStaticWritable(tx, i) : i < tx.numStaticKeys + loadedWritable;
}

/** First instruction is System AdvanceNonceAccount (index 4). */
export function isNonceTransaction(tx: WireTransaction, names: string[]): boolean {
  const first = tx.instructions[0];
  if (!first || names[first.programIndex] !== SYSTEM_PROGRAM_ID || first.accounts.length < 1) return false;
  const d = first.data;
  return d.length === 4 && d[0] === 4 && d[1] === 0 && d[2] === 0 && d[3] === 0;
}

/** A durable-nonce transaction: first instruction AdvanceNonceAccount, blockhash = the nonce account's nonce. */
export function nonceAccountOf(svm: LiteSvm, accounts: AccountIndex, tx: WireTransaction, resolved: ResolvedKeys): Uint8Array | null {
  if (!isNonceTransaction(tx, resolved.names)) return null;
  const index = tx.instructions[0]!.accounts[0]!;
  if (index >= resolved.names.length) return null;
  const nonceKey = resolved.keys[index]!;
  const account = svm.getAccount(nonceKey);
  if (!account || accounts.nameOf(account.owner()) !== SYSTEM_PROGRAM_ID) return null;
  const data = account.data();
  if (data.length !== 80 || data[4] !== 1) return null;
  return Buffer.from(data.subarray(40, 72)).equals(tx.bytes.subarray(tx.blockhashOffset, tx.blockhashOffset + 32)) ? nonceKey : null;
}
