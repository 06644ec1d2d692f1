import type { ApiKeyRecord } from '../../../domain/access/schema.ts';
import type { ApiKeyRepository } from '../../../domain/ports/store.ts';
import { date, dateOrNull, one, query, Where, type RepoContext } from './context.ts';

/** A row of `api_keys` (migrations/0001-initial.ts). */
interface ApiKeyRow {
  id: string;
  network: ApiKeyRecord['network'];
  prefix: string;
  key_hash: string;
  owner_wallet: string | null;
  label: string | null;
  role: ApiKeyRecord['role'];
  disabled_at: Date | null;
  created_at: Date;
  last_used_at: Date | null;
}

const fromRow = (r: ApiKeyRow): ApiKeyRecord => ({
  id: r.id,
  network: r.network,
  prefix: r.prefix,
  keyHash: r.key_hash,
  ownerWallet: r.owner_wallet,
  label: r.label,
  role: r.role,
  disabledAt: dateOrNull(r.disabled_at),
  createdAt: date(r.created_at),
  lastUsedAt: dateOrNull(r.last_used_at),
});

export function apiKeyRepository(ctx: RepoContext): ApiKeyRepository {
  const get: ApiKeyRepository['get'] = async (network, id) => {
    return one(ctx.em(), 'select * from api_keys where network = ? and id = ?', [network, id], fromRow);
  };
  return {
    insert: async (r) => {
      await query(
        ctx.em(),
        `insert into api_keys (id, network, prefix, key_hash, owner_wallet, label, role, disabled_at, created_at, last_used_at)
         values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        [r.id, r.network, r.prefix, r.keyHash, r.ownerWallet, r.label, r.role, r.disabledAt, r.createdAt, r.lastUsedAt],
      );
    },
    findByHash: async (keyHash) => {
      return one(ctx.em(), 'select * from api_keys where key_hash = ?', [keyHash], fromRow);
    },
    touch: async (id, at) => {
      await query(ctx.em(), 'update api_keys set last_used_at = ? where id = ?', [at, id]);
    },
    get,
    list: async (network, q) => {
      // Served by the primary key / api_keys_network_owner_idx, newest id first.
      const where = new Where().and('network = ?', network);
      if (q.ownerWallet !== undefined) where.and('owner_wallet = ?', q.ownerWallet);
      if (q.beforeId !== undefined) where.and('id < ?', q.beforeId);
      const rows = await query<ApiKeyRow>(ctx.em(), `select * from api_keys where ${where.sql} order by id desc limit ?`, [...where.params, q.limit]);
      return rows.map(fromRow);
    },
    disable: async (network, id, at) => {
      await query(ctx.em(), 'update api_keys set disabled_at = ? where network = ? and id = ? and disabled_at is null', [at, network, id]);
      return get(network, id);
    },
  };
}
