import type { EntityManager } from '@mikro-orm/postgresql';
import type { RequestRecord, RequestRecordStore, UsageQuery, UsageRow } from '../../../domain/ports/policy-store.ts';
import { affected, bound, query, Where } from './context.ts';

/**
 * GET /v1/metrics/usage: requests per key, bucket and UTC day from `since` (a UTC midnight) on, newest day first, read
 * from the request_usage_daily rollup (migration 0023) — O(keys × days × buckets), not O(requests). Exported so the
 * query-plan test EXPLAINs what runs. Served by its primary key with a key, request_usage_daily_network_day_idx without.
 */
export function usageSql(network: string, q: UsageQuery): { sql: string; params: unknown[] } {
  const where = new Where().and('network = ?', network).and('day >= ?::date', q.since.toISOString().slice(0, 10));
  if (q.keyId) where.and('key_id = ?', q.keyId);
  // a page's cursor: the rows after that one in the order below (day descending, then key and bucket ascending)
  if (q.after) where.and('(day < ?::date or (day = ?::date and (key_id, bucket) > (?, ?)))', q.after.day, q.after.day, q.after.keyId, q.after.bucket);
  const params = [...where.params];
  if (q.limit !== undefined) params.push(q.limit);
  return {
    sql: `select key_id, bucket, to_char(day, 'YYYY-MM-DD') as day, requests::int as requests, errors::int as errors, throttled::int as throttled
            from request_usage_daily
           where ${where.sql} and requests <> 0
           order by request_usage_daily.day desc, key_id, bucket${q.limit !== undefined ? ' limit ?' : ''}`,
    params,
  };
}

/** Per-request records in `request_records` (migrations/0002-policies.ts) and the usage read from their rollup. */
export function requestRecordRepository(em: () => EntityManager): RequestRecordStore {
  return {
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
      await bound(
        em(),
        `insert into request_records (id, key_id, network, bucket, method, route, status, duration_ms, at)
         select id, key_id, network, bucket, method, route, status, duration_ms, at
           from jsonb_to_recordset(?::jsonb) as x(id text, key_id text, network text, bucket text, method text, route text,
                                                 status int, duration_ms int, at timestamptz)
         on conflict (id) do nothing`,
        [JSON.stringify(rows)],
      );
    },
    usage: async (network, q) => {
      const { sql, params } = usageSql(network, q);
      const rows = await query<{ key_id: string; bucket: string; day: string; requests: number; errors: number; throttled: number }>(em(), sql, params);
      return rows.map((r): UsageRow => ({ keyId: r.key_id, bucket: r.bucket, day: r.day, requests: r.requests, errors: r.errors, throttled: r.throttled }));
    },
    deleteOlderThan: async (cutoff) => {
      return affected(em(), 'delete from request_records where at < ?', [cutoff]);
    },
  };
}
