import type { MikroORM } from '@mikro-orm/postgresql';
import type {
  IdempotencyRecord,
  IdempotencyStore,
  PolicyStore,
  RateLimitStore,
  RequestRecord,
  RequestRecordStore,
  UsageRow,
} from '../../domain/ports/policy-store.ts';

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

const fromIdemRow = (r: IdemRow): IdempotencyRecord => ({
  keyId: r.key_id,
  route: r.route,
  idemKey: r.idem_key,
  requestHash: r.request_hash,
  state: r.state,
  response: r.response,
  lockedUntil: new Date(r.locked_until),
  createdAt: new Date(r.created_at),
  expiresAt: new Date(r.expires_at),
});

/** The policy tables through MikroORM's connection (plain SQL: these are single-statement hot paths). */
export class MikroOrmPolicyStore implements PolicyStore {
  constructor(private readonly orm: MikroORM) {}

  private exec<T>(sql: string, params: unknown[] = []): Promise<T[]> {
    return this.orm.em.fork({ useContext: false }).execute(sql, params) as Promise<T[]>;
  }

  readonly idempotency: IdempotencyStore = {
    claim: async (r) => {
      // Insert, or take over an expired record / a running claim whose owner's lease lapsed. The primary key
      // makes this the single decision point across processes.
      const claimed = await this.exec<{ key_id: string }>(
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
      const existing = await this.idempotency.get(r.keyId, r.route, r.idemKey);
      // Released between our insert and this read: try again as a fresh claim.
      return existing ?? this.idempotency.claim(r);
    },
    get: async (keyId, route, idemKey) => {
      const rows = await this.exec<IdemRow>('select * from idempotency_records where key_id = ? and route = ? and idem_key = ?', [
        keyId,
        route,
        idemKey,
      ]);
      return rows[0] ? fromIdemRow(rows[0]) : null;
    },
    complete: async (keyId, route, idemKey, response) => {
      await this.exec(`update idempotency_records set state = 'done', response = ? where key_id = ? and route = ? and idem_key = ?`, [
        response,
        keyId,
        route,
        idemKey,
      ]);
    },
    release: async (keyId, route, idemKey) => {
      await this.exec(`delete from idempotency_records where key_id = ? and route = ? and idem_key = ? and state = 'running'`, [
        keyId,
        route,
        idemKey,
      ]);
    },
    deleteExpired: async (now) => {
      const rows = await this.exec<{ n: number }>(
        'with d as (delete from idempotency_records where expires_at <= ? returning 1) select count(*)::int as n from d',
        [now],
      );
      return rows[0]?.n ?? 0;
    },
  };

  readonly rateLimits: RateLimitStore = {
    hit: async (subject, bucket, limit, windowMs, now, pending, hits = 1) => {
      const rows = await this.exec<{ allowed: boolean; used: number; oldest: Date }>(
        'select allowed, used, oldest from svc_rate_hit(?, ?, ?, ?, ?, ?::jsonb, ?::integer)',
        [subject, bucket, limit, windowMs, now, JSON.stringify(pending.map((d) => d.toISOString())), hits],
      );
      const r = rows[0]!;
      return { allowed: r.allowed, used: r.used, oldest: new Date(r.oldest) };
    },
    sync: async (entries, windowMs, now) => {
      if (!entries.length) return [];
      const keys = entries.map((e) => ({ subject: e.subject, bucket: e.bucket }));
      const hits = entries.flatMap((e) => e.pending.map((at) => ({ subject: e.subject, bucket: e.bucket, at: at.toISOString() })));
      const cutoff = new Date(now.getTime() - windowMs);
      // One statement: share the pending hits, age out the active keys' old hits, read back their windows.
      const rows = await this.exec<{ subject: string; bucket: string; used: number; oldest: Date | null }>(
        `with added as (
           insert into rate_hits (subject, bucket, at)
           select subject, bucket, at from jsonb_to_recordset(?::jsonb) as x(subject text, bucket text, at timestamptz)
           returning subject, bucket, at
         ), keys as (
           select subject, bucket from jsonb_to_recordset(?::jsonb) as k(subject text, bucket text)
         ), aged as (
           delete from rate_hits h using keys k
            where h.subject = k.subject and h.bucket = k.bucket and h.at <= ?
         )
         select k.subject, k.bucket,
                ((select count(*) from rate_hits h where h.subject = k.subject and h.bucket = k.bucket and h.at > ?)
                 + (select count(*) from added a where a.subject = k.subject and a.bucket = k.bucket and a.at > ?))::int as used,
                least((select min(at) from rate_hits h where h.subject = k.subject and h.bucket = k.bucket and h.at > ?),
                      (select min(at) from added a where a.subject = k.subject and a.bucket = k.bucket and a.at > ?)) as oldest
           from keys k`,
        [JSON.stringify(hits), JSON.stringify(keys), cutoff, cutoff, cutoff, cutoff, cutoff],
      );
      return rows.map((r) => ({ subject: r.subject, bucket: r.bucket, used: r.used, oldest: r.oldest ? new Date(r.oldest) : null }));
    },
  };

  readonly requestRecords: RequestRecordStore = {
    insertMany: async (records: RequestRecord[]) => {
      if (!records.length) return;
      // One statement per batch; the rows travel as one JSON parameter (an array binding would be expanded).
      const rows = records.map((r) => ({
        id: r.id,
        key_id: r.keyId,
        network: r.network,
        bucket: r.bucket,
        method: r.method,
        route: r.route,
        status: r.status,
        duration_ms: r.durationMs,
        at: r.at.toISOString(),
      }));
      await this.exec(
        `insert into request_records (id, key_id, network, bucket, method, route, status, duration_ms, at)
         select id, key_id, network, bucket, method, route, status, duration_ms, at
           from jsonb_to_recordset(?::jsonb) as x(id text, key_id text, network text, bucket text, method text, route text,
                                                 status int, duration_ms int, at timestamptz)
         on conflict (id) do nothing`,
        [JSON.stringify(rows)],
      );
    },
    usage: async (network, q) => {
      const rows = await this.exec<{ key_id: string; bucket: string; day: string; requests: number; errors: number; throttled: number }>(
        `select key_id, bucket, to_char(date_trunc('day', at at time zone 'UTC'), 'YYYY-MM-DD') as day,
                count(*)::int as requests,
                count(*) filter (where status >= 400)::int as errors,
                count(*) filter (where status = 429)::int as throttled
           from request_records
          where network = ? and at >= ? ${q.keyId ? 'and key_id = ?' : ''}
          group by 1, 2, 3
          order by 3 desc, 1, 2`,
        q.keyId ? [network, q.since, q.keyId] : [network, q.since],
      );
      return rows.map((r): UsageRow => ({ keyId: r.key_id, bucket: r.bucket, day: r.day, requests: r.requests, errors: r.errors, throttled: r.throttled }));
    },
    deleteOlderThan: async (cutoff) => {
      const rows = await this.exec<{ n: number }>(
        'with d as (delete from request_records where at < ? returning 1) select count(*)::int as n from d',
        [cutoff],
      );
      return rows[0]?.n ?? 0;
    },
  };
}
