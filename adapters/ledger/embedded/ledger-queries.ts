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

  /**
   * The landed transactions naming any of `addresses`, in `order`, strictly after the seq `after` in that order,
   * that `accept` keeps, at most `limit` (getTransactionsForAddress); `more` tells whether others follow.
   */
  transactionsFor(
    addresses: string[],
    options: { order: 'asc' | 'desc'; after?: number | undefined; limit: number; accept: (entry: HistoryEntry) => boolean },
  ): { entries: { entry: HistoryEntry; index: number }[]; more: boolean } {
    const seqs =
      addresses.length === 1 ? this.history.seqsOf(addresses[0]!) : [...new Set(addresses.flatMap((a) => this.history.seqsOf(a)))].sort((a, b) => a - b);
    const entries: { entry: HistoryEntry; index: number }[] = [];
    const asc = options.order === 'asc';
    const step = asc ? 1 : -1;
    for (let i = asc ? 0 : seqs.length - 1; i >= 0 && i < seqs.length; i += step) {
      const seq = seqs[i]!;
      if (options.after !== undefined && (asc ? seq <= options.after : seq >= options.after)) continue;
      const entry = this.history.entryAt(seq)!;
      if (!options.accept(entry)) continue;
      if (entries.length === options.limit) return { entries, more: true };
      entries.push({ entry, index: this.history.indexInSlot(entry) });
    }
    return { entries, more: false };
  }

  /** The seq of the transaction at `index` in the block of `slot` (a getTransactionsForAddress page token). */
  seqAt(slot: number, index: number): number | undefined {
    return this.history.seqAt(slot, index);
  }

  /** The seq of a landed signature. */
  seqOf(signature: string): number | undefined {
    return this.history.entry(signature)?.seq;
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
