import type { PaymentIdRepository } from '../../../domain/ports/store.ts';
import { affected, query, type RepoContext } from './context.ts';

/** `payment_ids` (migrations/0028-payment-ids.ts): x402 payment-identifier ids bound to their payment. */
export function paymentIdRepository(ctx: RepoContext): PaymentIdRepository {
  return {
    bind: async (b) => {
      // A fresh id is inserted; one past its window is taken over; one bound to this same payment is bound again (a
      // new generation: the earlier request's unbind, should its attempt be refused, must not free the id this one
      // goes on paying with); one live for another payment is left as it is and read below (a second statement: its
      // snapshot sees the row a racing request committed while this insert waited on it). The generation is the row's
      // created_at, written with the database's microsecond clock and compared as text (a JS Date keeps milliseconds).
      const [won] = await query<{ payment_key: string; generation: string }>(
        ctx.em(),
        `insert into payment_ids (network, link_pk, payment_id, payment_key, created_at, expires_at) values (?, ?, ?, ?, clock_timestamp(), ?)
         on conflict (network, link_pk, payment_id) do update
           set payment_key = excluded.payment_key, created_at = excluded.created_at, expires_at = excluded.expires_at
           where payment_ids.expires_at <= ? or payment_ids.payment_key = excluded.payment_key
         returning payment_key, created_at::text as generation`,
        [b.network, b.linkPk, b.paymentId, b.paymentKey, b.expiresAt, b.at],
      );
      if (won) return { paymentKey: won.payment_key, generation: won.generation };
      const [bound] = await query<{ payment_key: string }>(
        ctx.em(),
        `select payment_key from payment_ids where network = ? and link_pk = ? and payment_id = ?`,
        [b.network, b.linkPk, b.paymentId],
      );
      // removed in between (its payment refused): bind again
      return bound ? { paymentKey: bound.payment_key, generation: null } : paymentIdRepository(ctx).bind(b);
    },
    unbind: async (b) => {
      await query(
        ctx.em(),
        `delete from payment_ids where network = ? and link_pk = ? and payment_id = ? and payment_key = ? and created_at = ?::timestamptz
           and not exists (select 1 from paid_calls where network = ? and payment_key = ?)`,
        [b.network, b.linkPk, b.paymentId, b.paymentKey, b.generation, b.network, b.paymentKey],
      );
    },
    deleteExpired: (now) => affected(ctx.em(), `delete from payment_ids where expires_at <= ?`, [now]),
  };
}
