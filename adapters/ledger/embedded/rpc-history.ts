import type { HistoryEntry } from './history.ts';
import type { EmbeddedLedger } from './ledger.ts';
import { encodeTransaction, invalidParams, type TransactionEncoding } from './rpc-encode.ts';
import { address, config, contextOf, limitParam, signature, VERSION_0_REFUSED, type Params } from './rpc-params.ts';

// getTransactionsForAddress (in @solana/kit's API; served by Helius and QuickNode): an address's transactions from
// the history's per-address index, oldest or newest first, filtered by slot, block time, signature and status, in
// pages named by "slot:transactionIndex" tokens. `tokenAccounts: "all"` adds the transactions of the token accounts
// the address owns now; "balanceChanged" is refused (-32602) rather than answered as "all".

const MAX_SIGNATURES = 1000;
const MAX_FULL = 100;

type Handler = (params: Params) => unknown;
type Comparison = { gt?: unknown; gte?: unknown; lt?: unknown; lte?: unknown; eq?: unknown };

function comparison(value: unknown, what: string, read: (v: unknown) => number): ((n: number) => boolean) | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== 'object' || Array.isArray(value)) throw invalidParams(`Invalid params: filters.${what} must be an object`);
  const c = value as Comparison;
  const bound = (v: unknown) => (v === undefined ? undefined : read(v));
  const [gt, gte, lt, lte, eq] = [bound(c.gt), bound(c.gte), bound(c.lt), bound(c.lte), bound(c.eq)];
  return (n) =>
    (gt === undefined || n > gt) &&
    (gte === undefined || n >= gte) &&
    (lt === undefined || n < lt) &&
    (lte === undefined || n <= lte) &&
    (eq === undefined || n === eq);
}

const whole = (what: string) => (v: unknown) => {
  if (typeof v !== 'number' || !Number.isSafeInteger(v)) throw invalidParams(`Invalid params: filters.${what} bounds must be integers`);
  return v;
};

export function historyMethods(ledger: EmbeddedLedger): [string, Handler][] {
  const getTransactionsForAddress: Handler = (p) => {
    const owner = address(p[0]);
    const c = config(p, 1);
    contextOf(ledger, c);
    if (c.commitment === 'processed') throw invalidParams('Method does not support commitment below `confirmed`');
    const details = c.transactionDetails ?? 'signatures';
    if (details !== 'signatures' && details !== 'full') throw invalidParams('Invalid params: transactionDetails must be "signatures" or "full"');
    const order = c.sortOrder ?? 'desc';
    if (order !== 'asc' && order !== 'desc') throw invalidParams('Invalid params: sortOrder must be "asc" or "desc"');
    const max = details === 'full' ? MAX_FULL : MAX_SIGNATURES;
    const limit = limitParam(c.limit, max, max);
    const encoding = (c.encoding ?? 'json') as TransactionEncoding;
    if (!['json', 'jsonParsed', 'base64', 'base58'].includes(encoding)) throw invalidParams(`Invalid params: unknown variant \`${String(encoding)}\``);
    const maxVersion = c.maxSupportedTransactionVersion;
    if (maxVersion !== undefined && maxVersion !== null && maxVersion !== 0) throw invalidParams('Invalid params: maxSupportedTransactionVersion must be 0');

    let after: number | undefined;
    if (c.paginationToken !== undefined && c.paginationToken !== null) {
      const m = typeof c.paginationToken === 'string' ? /^(\d{1,15}):(\d{1,9})$/.exec(c.paginationToken) : null;
      const seq = m ? ledger.seqAt(Number(m[1]), Number(m[2])) : undefined;
      if (seq === undefined) throw invalidParams('Invalid params: unknown paginationToken');
      after = seq;
    }
    const f = (c.filters ?? {}) as { slot?: unknown; blockTime?: unknown; signature?: unknown; status?: unknown; tokenAccounts?: unknown };
    if (typeof f !== 'object' || Array.isArray(f)) throw invalidParams('Invalid params: filters must be an object');
    const bySlot = comparison(f.slot, 'slot', whole('slot'));
    const byTime = comparison(f.blockTime, 'blockTime', whole('blockTime'));
    // signatures compare by their position in the ledger's history, as slots and indexes order them
    const bySignature = comparison(f.signature, 'signature', (v) => ledger.seqOf(signature(v)) ?? Number.NaN);
    const status = f.status ?? 'any';
    if (status !== 'any' && status !== 'succeeded' && status !== 'failed')
      throw invalidParams('Invalid params: filters.status must be any, succeeded or failed');
    const tokenAccounts = f.tokenAccounts ?? 'none';
    if (tokenAccounts === 'balanceChanged')
      throw invalidParams('Invalid params: tokenAccounts "balanceChanged" is not supported by this ledger; use "all" or "none"');
    if (tokenAccounts !== 'none' && tokenAccounts !== 'all') throw invalidParams('Invalid params: filters.tokenAccounts must be none, balanceChanged or all');
    const addresses = tokenAccounts === 'all' ? [owner, ...ledger.tokenAccountsOf(owner).map((a) => a.address)] : [owner];
    const accept = (e: HistoryEntry) =>
      (!bySlot || bySlot(e.slot)) &&
      (!byTime || byTime(e.time)) &&
      (!bySignature || bySignature(e.seq)) &&
      (status === 'any' || (status === 'succeeded') === (e.err === null));

    const { entries, more } = ledger.transactionsFor(addresses, { order, after, limit, accept });
    const data = entries.map(({ entry, index }) => {
      if (details === 'signatures') {
        return {
          blockTime: entry.time,
          confirmationStatus: ledger.commitmentOf(entry.seq),
          err: entry.err,
          memo: entry.memo,
          signature: entry.sig,
          slot: entry.slot,
          transactionIndex: index,
        };
      }
      const record = ledger.transactionRecord(entry.sig)!;
      if (record.wire.version === 0 && (maxVersion === undefined || maxVersion === null)) throw VERSION_0_REFUSED();
      const { meta, transaction, version } = encodeTransaction(record, encoding);
      return { blockTime: entry.time, meta, slot: entry.slot, transaction, transactionIndex: index, version: maxVersion === 0 ? version : undefined };
    });
    const last = entries.at(-1);
    return { data, paginationToken: more && last ? `${last.entry.slot}:${last.index}` : null };
  };
  return [['getTransactionsForAddress', getTransactionsForAddress]];
}
