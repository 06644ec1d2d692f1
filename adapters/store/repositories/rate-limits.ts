import type { EntityManager } from '@mikro-orm/postgresql';
import type { RateLimitStore } from '../../../domain/ports/policy-store.ts';
import { bound } from './context.ts';

/** Rate-limit windows in `rate_hits` (migrations/0002, svc_rate_hit from 0007-weighted-rate-hits.ts). */
export function rateLimitRepository(em: () => EntityManager): RateLimitStore {
  return {
    hit: async ({ subject, bucket, limit, windowMs }, { now, pending, hits = 1 }) => {
      const rows = await bound<{ allowed: boolean; used: number; oldest: Date }>(
        em(),
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
      const rows = await bound<{ subject: string; bucket: string; used: number; oldest: Date | null }>(
        em(),
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
}
