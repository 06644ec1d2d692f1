import type { EntityManager } from '@mikro-orm/postgresql';
import type { IdempotencyRecord, IdempotencyStore } from '../../../domain/ports/policy-store.ts';
import { affected, date, one, query } from './context.ts';

/** A row of `idempotency_records` (migrations/0002-policies.ts). */
interface IdemRow {
  key_id: string;
  route: string;
  idem_key: string;
  request_hash: string;
  state: 'running' | 'done';
  response: string | null;
  locked_until: Date;
  created_at: Date;
  expires_at: Date;
}

const fromRow = (r: IdemRow): IdempotencyRecord => ({
  keyId: r.key_id,
  route: r.route,
  idemKey: r.idem_key,
  requestHash: r.request_hash,
  state: r.state,
  response: r.response,
  lockedUntil: date(r.locked_until),
  createdAt: date(r.created_at),
  expiresAt: date(r.expires_at),
});

/** Idempotency-Key records: single-statement claims, the primary key the decision point across processes. */
export function idempotencyRepository(em: () => EntityManager): IdempotencyStore {
  const repo: IdempotencyStore = {
    claim: async (r) => {
      // Insert, or take over an expired record / a running claim whose owner's lease lapsed. The primary key
      // makes this the single decision point across processes.
      const claimed = await query<{ key_id: string }>(
        em(),
        `insert into idempotency_records (key_id, route, idem_key, request_hash, state, response, locked_until, created_at, expires_at)
         values (?, ?, ?, ?, 'running', null, ?, ?, ?)
         on conflict (key_id, route, idem_key) do update
           set request_hash = excluded.request_hash, state = 'running', response = null,
               locked_until = excluded.locked_until, created_at = excluded.created_at, expires_at = excluded.expires_at
           where idempotency_records.expires_at <= excluded.created_at
              or (idempotency_records.state = 'running' and idempotency_records.locked_until <= excluded.created_at)
         returning key_id`,
        [r.keyId, r.route, r.idemKey, r.requestHash, r.lockedUntil, r.createdAt, r.expiresAt],
      );
      if (claimed.length) return 'claimed';
      const existing = await repo.get(r.keyId, r.route, r.idemKey);
      // Released between our insert and this read: try again as a fresh claim.
      return existing ?? repo.claim(r);
    },
    get: async (keyId, route, idemKey) => {
      return one(em(), 'select * from idempotency_records where key_id = ? and route = ? and idem_key = ?', [keyId, route, idemKey], fromRow);
    },
    complete: async (keyId, route, idemKey, response) => {
      await query(em(), `update idempotency_records set state = 'done', response = ? where key_id = ? and route = ? and idem_key = ?`, [
        response,
        keyId,
        route,
        idemKey,
      ]);
    },
    release: async (keyId, route, idemKey) => {
      await query(em(), `delete from idempotency_records where key_id = ? and route = ? and idem_key = ? and state = 'running'`, [keyId, route, idemKey]);
    },
    deleteExpired: async (now) => {
      return affected(em(), 'delete from idempotency_records where expires_at <= ?', [now]);
    },
  };
  return repo;
}
