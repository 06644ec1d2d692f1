import { DomainError } from '../../../domain/shared/errors.ts';
import type { Network } from '../../../domain/shared/network.ts';
import type { ReceiptRecord, ReceiptV1 } from '../../../domain/receipts/schema.ts';
import type { ReceiptRepository } from '../../../domain/ports/store.ts';
import { date, one, query, uniqueOr, type RepoContext } from './context.ts';

/** receipt chains: one transaction-scoped advisory lock per (network, agent), keyed (RECEIPTS_LOCK, hashtext(…)) */
const RECEIPTS_LOCK = 7_201_003;

/** The columns of `receipts` (migrations/0003-paid-calls.ts) a record is read from. */
interface ReceiptRow {
  network: Network;
  source: string;
  body: ReceiptV1;
  created_at: Date;
}

const fromRow = (r: ReceiptRow): ReceiptRecord => ({ network: r.network, receipt: r.body, source: r.source, createdAt: date(r.created_at) });

export function receiptRepository(ctx: RepoContext): ReceiptRepository {
  return {
    lockHead: async (network, agent) => {
      if (!ctx.inTransaction) throw new Error('receipts.lockHead must run inside store.transaction');
      const em = ctx.em();
      await query(em, 'select pg_advisory_xact_lock(?, hashtext(?))', [RECEIPTS_LOCK, `${network}:${agent}`]);
      const rows = await query<{ nonce: number; receipt_hash: string }>(
        em,
        'select nonce::int as nonce, receipt_hash from receipts where network = ? and agent = ? order by nonce desc limit 1',
        [network, agent],
      );
      return rows[0] ? { nonce: rows[0].nonce, receiptHash: rows[0].receipt_hash } : null;
    },
    insert: async (r) => {
      await uniqueOr(
        query(
          ctx.em(),
          `insert into receipts (network, agent, nonce, kind, receipt_hash, prev_receipt_hash, tx_sig, source, body, created_at)
           values (?, ?, ?, ?, ?, ?, ?, ?, ?::jsonb, ?)`,
          [r.network, r.receipt.agent, r.receipt.nonce, r.receipt.kind, r.receipt.receipt_hash, r.receipt.prev_receipt_hash,
            r.receipt.tx_sig ?? null, r.source, JSON.stringify(r.receipt), r.createdAt],
        ),
        () => new DomainError('receipt_chain_invalid', `Receipt nonce ${r.receipt.nonce} or hash is already on the chain of ${r.receipt.agent}.`),
      );
    },
    hasPaywallTxSig: async (network, txSig) =>
      (await query(ctx.em(), `select 1 from receipts where network = ? and tx_sig = ? and source = 'paywall' limit 1`, [network, txSig])).length > 0,
    get: async (network, receiptHash) => {
      return one(ctx.em(), 'select * from receipts where network = ? and receipt_hash = ?', [network, receiptHash], fromRow);
    },
    listByAgent: async (network, agent, q) => {
      const rows = await query<ReceiptRow>(
        ctx.em(),
        'select * from receipts where network = ? and agent = ? and nonce > ? order by nonce asc limit ?',
        [network, agent, q.afterNonce ?? -1, q.limit],
      );
      return rows.map(fromRow);
    },
  };
}
