import type { SignaturesForAddressOptions, SignatureStatus } from '../../../domain/ports/ledger.ts';
import { parseTransaction } from '../../../domain/ledger/wire.ts';
import type { AccountIndex } from './account-index.ts';
import type { History, HistoryEntry, StoredTransaction } from './history.ts';
import type { TransactionRecord } from './ledger.ts';
import { memoSummary } from './ledger-messages.ts';

// Queries of the history: a signature's status, an address's signatures (the per-address index), a landed
// transaction's record with its account keys named.

export class LedgerQueries {
  constructor(
    private readonly history: History,
    private readonly accounts: AccountIndex,
  ) {}

  signatureStatus(signature: string): (SignatureStatus & { seq: number }) | null {
    const e = this.history.entry(signature);
    return e ? { slot: e.slot, confirmationStatus: this.history.commitment(e.seq), err: e.err, seq: e.seq } : null;
  }

  signaturesFor(address: string, options: SignaturesForAddressOptions = {}): HistoryEntry[] {
    const limit = Math.min(Math.max(Math.trunc(options.limit ?? 1000), 1), 1000);
    return this.history.signaturesFor(address, { before: options.before, until: options.until, limit });
  }

  /** The stored record of a landed transaction with its parsed wire form. */
  transactionRecord(signature: string): TransactionRecord | null {
    const entry = this.history.entry(signature);
    if (!entry) return null;
    const stored = this.history.read(entry);
    const { wire, keys } = keysOf(this.accounts, stored);
    return { stored, wire, accountKeys: keys };
  }
}

/** The account keys and memo of a stored transaction, for the history's per-address index (read while it loads). */
export function describeStored(accounts: AccountIndex, record: StoredTransaction): { keys: string[]; memo: string | null } {
  const { wire, keys } = keysOf(accounts, record);
  return { keys, memo: memoSummary(wire, keys) };
}

function keysOf(accounts: AccountIndex, record: StoredTransaction) {
  const wire = parseTransaction(record.tx);
  const keys: string[] = [];
  for (let i = 0; i < wire.numStaticKeys; i++) keys.push(accounts.nameAt(wire.bytes, wire.keysOffset + i * 32));
  keys.push(...record.lw, ...record.lr);
  return { wire, keys };
}
