import type { Network } from '../../../domain/shared/network.ts';
import type { StreamTokenRepository } from '../../../domain/ports/stream-token-store.ts';
import { query, type RepoContext } from './context.ts';

/** What redeeming a row of `stream_tokens` (migrations/0022-browser.ts) answers, with its key's hash. */
interface RedeemedRow {
  network: Network;
  key_hash: string;
}

export function streamTokenRepository(ctx: RepoContext): StreamTokenRepository {
  return {
    insert: async (r) => {
      const em = ctx.em();
      await query(em, 'delete from stream_tokens where expires_at < ?', [r.createdAt]);
      await query(
        em,
        `insert into stream_tokens (token_hash, network, key_id, owner_principal, created_at, expires_at, used_at)
         values (?, ?, ?, ?, ?, ?, null)`,
        [r.tokenHash, r.network, r.keyId, r.ownerPrincipal, r.createdAt, r.expiresAt],
      );
    },
    redeem: async (tokenHash, at) => {
      // One statement: the row lock makes a second redeemer (any node) wait, then find used_at set.
      const rows = await query<RedeemedRow>(
        ctx.em(),
        `update stream_tokens t set used_at = ?
           from api_keys k
          where t.token_hash = ? and t.used_at is null and t.expires_at > ? and k.id = t.key_id
          returning t.network, k.key_hash`,
        [at, tokenHash, at],
      );
      const row = rows[0];
      return row ? { network: row.network, keyHash: row.key_hash } : null;
    },
  };
}
