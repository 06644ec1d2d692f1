import type { LinkAccessRepository } from '../../../domain/ports/link-access-store.ts';
import { query, type RepoContext } from './context.ts';

/** `link_access` and `siwx_nonces` (migrations/0027-link-access.ts). */
export function linkAccessRepository(ctx: RepoContext): LinkAccessRepository {
  return {
    recordPayment: async (network, linkPk, payer, at) => {
      await query(
        ctx.em(),
        `insert into link_access (network, link_pk, payer, paid_at) values (?, ?, ?, ?)
         on conflict (network, link_pk, payer) do update set paid_at = greatest(link_access.paid_at, excluded.paid_at)`,
        [network, linkPk, payer, at],
      );
    },
    lastPaid: async (network, linkPk, payer) => {
      const rows = await query<{ paid_at: Date }>(ctx.em(), `select paid_at from link_access where network = ? and link_pk = ? and payer = ?`, [
        network,
        linkPk,
        payer,
      ]);
      const at = rows[0]?.paid_at;
      return at ? new Date(at) : null;
    },
    useNonce: async (nonce, expiresAt, now) => {
      const em = ctx.em();
      await query(em, `delete from siwx_nonces where expires_at < ?`, [now]);
      // The primary key decides between two nodes: only one insert lands.
      const rows = await query<{ nonce: string }>(em, `insert into siwx_nonces (nonce, expires_at) values (?, ?) on conflict do nothing returning nonce`, [
        nonce,
        expiresAt,
      ]);
      return rows.length === 1;
    },
  };
}
