import type { EntityManager } from '@mikro-orm/postgresql';
import type { RequestRecord, RequestRecordStore, UsageRow } from '../../../domain/ports/policy-store.ts';
import { affected, bound, query, Where } from './context.ts';

/** Per-request records in `request_records` (migrations/0002-policies.ts) and the usage read from them. */
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
      // Served by request_records_network_at_idx (or _key_at_idx with a key).
      const where = new Where().and('network = ?', network).and('at >= ?', q.since);
      if (q.keyId) where.and('key_id = ?', q.keyId);
      const rows = await query<{ key_id: string; bucket: string; day: string; requests: number; errors: number; throttled: number }>(
        em(),
        `select key_id, bucket, to_char(date_trunc('day', at at time zone 'UTC'), 'YYYY-MM-DD') as day,
                count(*)::int as requests,
                count(*) filter (where status >= 400)::int as errors,
                count(*) filter (where status = 429)::int as throttled
           from request_records
          where ${where.sql}
          group by 1, 2, 3
          order by 3 desc, 1, 2`,
        where.params,
      );
      return rows.map((r): UsageRow => ({ keyId: r.key_id, bucket: r.bucket, day: r.day, requests: r.requests, errors: r.errors, throttled: r.throttled }));
    },
    deleteOlderThan: async (cutoff) => {
      return affected(em(), 'delete from request_records where at < ?', [cutoff]);
    },
  };
}
