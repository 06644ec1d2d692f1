import type { MigrationSteps } from './steps.ts';

// Found by bench:growth: GET /v1/metrics/usage counted request_records row by row — a key's last 7
// days at 1M records read ~120,000 rows per call (an admin's, every key's). request_usage_daily keeps the counts per
// (network, key, UTC day, bucket), written by statement triggers on request_records in the statement that writes the
// records (the recorder's one insert per flush; a prune's delete), so the read costs O(keys × days × buckets) and stays
// exact whatever writes the table. Writers are few (one flush at a time per process) and short, so the counters are
// upserted in place, in key order (two flushes touching the same counters lock them in one order: no deadlock).
// A counter brought to 0 by a prune (or an update) is removed by the same statement.
function upsert(changes: string): string {
  return `insert into request_usage_daily as u (network, key_id, day, bucket, requests, errors, throttled)
    select network, key_id, (at at time zone 'UTC')::date, bucket, sum(d),
           sum(case when status >= 400 then d else 0 end), sum(case when status = 429 then d else 0 end)
      from (${changes}) c
     group by 1, 2, 3, 4 order by 1, 2, 3, 4
    on conflict (network, key_id, day, bucket) do update
      set requests = u.requests + excluded.requests, errors = u.errors + excluded.errors, throttled = u.throttled + excluded.throttled`;
}

export const migration0023UsageRollup: MigrationSteps = {
  up(addSql) {
    addSql(`create table request_usage_daily (
      network text not null,
      key_id text not null,
      day date not null,
      bucket text not null,
      requests bigint not null,
      errors bigint not null,
      throttled bigint not null,
      primary key (network, key_id, day, bucket)
    );`);
    // an admin's read: every key of the network from a day on
    addSql(`create index request_usage_daily_network_day_idx on request_usage_daily (network, day);`);
    addSql(`create function request_usage_trigger() returns trigger language plpgsql as $$
      begin
        if tg_op = 'INSERT' then
          ${upsert('select network, key_id, at, bucket, status, 1 as d from new_rows')};
          return null;
        elsif tg_op = 'UPDATE' then
          ${upsert('select network, key_id, at, bucket, status, 1 as d from new_rows union all select network, key_id, at, bucket, status, -1 from old_rows')};
        else
          ${upsert('select network, key_id, at, bucket, status, -1 as d from old_rows')};
        end if;
        delete from request_usage_daily u
         using (select distinct network, key_id, (at at time zone 'UTC')::date as day, bucket from old_rows) o
         where u.network = o.network and u.key_id = o.key_id and u.day = o.day and u.bucket = o.bucket and u.requests = 0;
        return null;
      end $$;`);
    addSql(`create function request_usage_truncate() returns trigger language plpgsql as $$
      begin
        truncate request_usage_daily;
        return null;
      end $$;`);
    // No record may slip between the backfill and the triggers (another node flushing while this runs).
    addSql(`lock table request_records in share row exclusive mode;`);
    addSql(`create trigger request_usage_insert after insert on request_records referencing new table as new_rows
      for each statement execute function request_usage_trigger();`);
    addSql(`create trigger request_usage_update after update on request_records referencing old table as old_rows new table as new_rows
      for each statement execute function request_usage_trigger();`);
    addSql(`create trigger request_usage_delete after delete on request_records referencing old table as old_rows
      for each statement execute function request_usage_trigger();`);
    addSql(`create trigger request_usage_truncate after truncate on request_records for each statement execute function request_usage_truncate();`);
    addSql(`insert into request_usage_daily (network, key_id, day, bucket, requests, errors, throttled)
      select network, key_id, (at at time zone 'UTC')::date, bucket, count(*),
             count(*) filter (where status >= 400), count(*) filter (where status = 429)
        from request_records group by 1, 2, 3, 4;`);
  },
};
