import { DomainError } from '../../../domain/shared/errors.ts';
import type { PaymentLinkRecord } from '../../../domain/payment-links/schema.ts';
import type { PaymentLinkListQuery, PaymentLinkRepository } from '../../../domain/ports/store.ts';
import { affected, date, dateOrNull, lockedInTransaction, one, prepared, query, uniqueOr, Where, type RepoContext } from './context.ts';

/** A row of `payment_links` (migrations/0001-initial.ts; webhook_secret from 0003, owner_principal from 0005). */
export interface PaymentLinkRow {
  pk: string;
  id: string;
  network: PaymentLinkRecord['network'];
  label: string;
  owner_agent: string;
  method: PaymentLinkRecord['method'];
  price: string;
  currency: PaymentLinkRecord['currency'];
  /** numeric(20,0), read as a decimal string */
  amount_atomic: string;
  accepts_currencies: PaymentLinkRecord['acceptsCurrencies'];
  protocol: PaymentLinkRecord['protocol'];
  response: PaymentLinkRecord['response'];
  webhook_url: string | null;
  webhook_secret: string | null;
  wrap_receipt: boolean;
  settle_policy: PaymentLinkRecord['settlePolicy'];
  /** migration 0027 */
  access_window_seconds: number | null;
  request_binding: PaymentLinkRecord['requestBinding'];
  metadata: Record<string, unknown>;
  disabled: boolean;
  call_count: number;
  settled_count: number;
  last_called_at: Date | null;
  last_settled_at: Date | null;
  last_tx_sig: string | null;
  created_by: string;
  owner_principal: string;
  created_at: Date;
  updated_at: Date;
  /** read with the row (LINK_SELECT), not a column of it */
  owner_agent_proven: boolean;
}

/**
 * A link with whether its owner agent is proven on the ledger (migration 0024), in the same statement: the paywall's
 * check costs no extra round trip (one primary-key probe of agents per row).
 */
export const LINK_SELECT = `select l.*, exists (select 1 from agents a where a.network = l.network and a.mint = l.owner_agent and a.proven_at is not null) as owner_agent_proven
  from payment_links l`;

export const fromRow = (r: PaymentLinkRow): PaymentLinkRecord => ({
  pk: r.pk,
  id: r.id,
  network: r.network,
  label: r.label,
  ownerAgent: r.owner_agent,
  method: r.method,
  price: r.price,
  currency: r.currency,
  amountAtomic: BigInt(r.amount_atomic),
  acceptsCurrencies: r.accepts_currencies,
  protocol: r.protocol,
  response: r.response,
  webhookUrl: r.webhook_url,
  webhookSecret: r.webhook_secret,
  wrapReceipt: r.wrap_receipt,
  settlePolicy: r.settle_policy,
  accessWindowSeconds: r.access_window_seconds,
  requestBinding: r.request_binding,
  metadata: r.metadata,
  disabled: r.disabled,
  callCount: r.call_count,
  settledCount: r.settled_count,
  lastCalledAt: dateOrNull(r.last_called_at),
  lastSettledAt: dateOrNull(r.last_settled_at),
  lastTxSig: r.last_tx_sig,
  createdBy: r.created_by,
  ownerPrincipal: r.owner_principal,
  createdAt: date(r.created_at),
  updatedAt: date(r.updated_at),
  ownerAgentProven: r.owner_agent_proven,
});

/** Every column but pk, in one order for insert and update, with its value from the record (json as text). */
const COLUMNS = `id, network, label, owner_agent, method, price, currency, amount_atomic, accepts_currencies, protocol, response,
  webhook_url, webhook_secret, wrap_receipt, settle_policy, metadata, disabled, call_count, settled_count, last_called_at,
  last_settled_at, last_tx_sig, created_by, owner_principal, created_at, updated_at, access_window_seconds, request_binding`;
const PLACEHOLDERS = '?, ?, ?, ?, ?, ?, ?, ?, ?::jsonb, ?, ?::jsonb, ?, ?, ?, ?, ?::jsonb, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?';
const values = (r: PaymentLinkRecord): unknown[] => [
  r.id,
  r.network,
  r.label,
  r.ownerAgent,
  r.method,
  r.price,
  r.currency,
  r.amountAtomic.toString(),
  JSON.stringify(r.acceptsCurrencies),
  r.protocol,
  JSON.stringify(r.response),
  r.webhookUrl,
  r.webhookSecret,
  r.wrapReceipt,
  r.settlePolicy,
  JSON.stringify(r.metadata),
  r.disabled,
  r.callCount,
  r.settledCount,
  r.lastCalledAt,
  r.lastSettledAt,
  r.lastTxSig,
  r.createdBy,
  r.ownerPrincipal,
  r.createdAt,
  r.updatedAt,
  r.accessWindowSeconds,
  r.requestBinding,
];

/** The list page's SQL (exported so the query-plan test EXPLAINs what runs). */
export function paymentLinkListSql(network: string, q: PaymentLinkListQuery): { sql: string; params: unknown[] } {
  // Served by payment_links_list_[principal_][agent_]idx in its own order (newest pk first): `pk || ''` is the pk, an
  // expression only those indexes hold, so no plan walks the primary key filtering other scopes out (migration 0021).
  const where = new Where().and('network = ?', network);
  if (q.owner !== undefined) where.and('owner_principal = ?', q.owner);
  if (q.ownerAgent !== undefined) where.and('owner_agent = ?', q.ownerAgent);
  if (q.beforePk !== undefined) where.and(`(pk || '') < ?`, q.beforePk);
  return { sql: `${LINK_SELECT} where ${where.sql} order by (pk || '') desc limit ?`, params: [...where.params, q.limit] };
}

export function paymentLinkRepository(ctx: RepoContext): PaymentLinkRepository {
  return {
    insert: async (r) => {
      await uniqueOr(
        query(ctx.em(), `insert into payment_links (pk, ${COLUMNS}) values (?, ${PLACEHOLDERS})`, [r.pk, ...values(r)]),
        () => new DomainError('conflict', `A payment link with id "${r.id}" already exists on ${r.network}.`, { id: r.id }),
      );
    },
    get: async (network, id) => {
      if (ctx.raw) {
        // The hot read (GET /v1/payment-links/{id}, the paywall's link) straight on a pooled connection
        const [row] = await ctx.raw<PaymentLinkRow>(`${LINK_SELECT} where network = $1 and id = $2`, [network, id]);
        return row ? fromRow(row) : null;
      }
      // Inside a transaction the row is locked so concurrent updates serialise instead of losing writes.
      return one(ctx.em(), `${LINK_SELECT} where network = ? and id = ?${lockedInTransaction(ctx) && ' for update of l'}`, [network, id], fromRow);
    },
    list: async (network, q) => {
      const { sql, params } = paymentLinkListSql(network, q);
      return (await query<PaymentLinkRow>(ctx.em(), sql, params)).map(fromRow);
    },
    update: async (r) => {
      await query(ctx.em(), `update payment_links set (${COLUMNS}) = row(${PLACEHOLDERS}) where pk = ?`, [...values(r), r.pk]);
    },
    delete: async (network, id) => (await affected(ctx.em(), 'delete from payment_links where network = ? and id = ?', [network, id])) > 0,
    countCalls: async (network, calls) => {
      if (calls.length === 0) return;
      const rows = calls.map((c) => ({ pk: c.pk, calls: c.calls, at: c.at, tx_sig: c.settledTxSig }));
      // the rows locked in pk order first (the order every record transaction takes them in), then counted
      await prepared(
        ctx.em(),
        `with x as (select * from jsonb_to_recordset(?::jsonb) as x(pk text, calls int, at timestamptz, tx_sig text)),
              locked as (select l.pk from payment_links l join x on x.pk = l.pk where l.network = ? order by l.pk for no key update of l)
         update payment_links l set call_count = call_count + x.calls, last_called_at = x.at, settled_count = settled_count + x.calls,
           last_settled_at = x.at, last_tx_sig = x.tx_sig
           from x join locked on locked.pk = x.pk
          where l.network = ? and l.pk = x.pk`,
        [JSON.stringify(rows), network, network],
      );
    },
    countCall: async (network, pk, call) => {
      await prepared(
        ctx.em(),
        `update payment_links set call_count = call_count + ?::int, last_called_at = ?,
           settled_count = settled_count + (case when ?::text is null then 0 else ?::int end),
           last_settled_at = case when ?::text is null then last_settled_at else ? end,
           last_tx_sig = coalesce(?::text, last_tx_sig)
         where network = ? and pk = ?`,
        [call.calls ?? 1, call.at, call.settledTxSig, call.calls ?? 1, call.settledTxSig, call.at, call.settledTxSig, network, pk],
      );
    },
  };
}
