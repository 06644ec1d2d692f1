import type { MigrationSteps } from './steps.ts';

// Appends no longer serialise on one advisory lock held until commit. An event's seq is taken from its
// writer's transaction id instead: seq = base + xid × 2^20 + n (n = 1, 2, … the transaction's n-th event seq), so every
// row of one transaction shares the xid prefix. A reader delivers only rows below the horizon
// base + (the oldest transaction in progress in the reader's snapshot) × 2^20: every transaction with a smaller xid has
// ended, so no row can ever commit below a seq a reader already passed (a cursor on seq never skips a late commit).
// Transaction ids are cluster-wide: a transaction that pg_stat_activity shows in ANOTHER database of the cluster is left
// out (it writes no events here), so a long transaction elsewhere does not hold this database's events back. One that
// ended between the snapshot and that read stays in (a lower horizon only delays, never skips). Rows written before
// this migration keep their seqs, all below `base`.
export const migration0018EventsSeqByTransaction: MigrationSteps = {
  up(addSql) {
    addSql(`do $$
declare base bigint := (select coalesce(max(seq), 0) + 1 from events);
begin
  execute format($f$
    create function svc_event_seq() returns bigint language sql volatile as $b$
      select %1$s::bigint + (pg_current_xact_id()::text::bigint << 20)
        + set_config('svc.event_n', (coalesce(nullif(current_setting('svc.event_n', true), ''), '0')::bigint + 1)::text, true)::bigint
    $b$ $f$, base);
  execute format($f$
    create function svc_events_horizon() returns bigint language sql stable as $b$
      with s as (select pg_current_snapshot() as snap),
      elsewhere as (
        select a.backend_xid::text::bigint as x32 from pg_stat_activity a
         where a.backend_xid is not null and a.datid is distinct from (select oid from pg_database where datname = current_database())
      )
      select %1$s::bigint + (coalesce(
        (select min(x::text::bigint) from s, pg_snapshot_xip(s.snap) as x
          where (x::text::bigint %% 4294967296) not in (select x32 from elsewhere)),
        (select pg_snapshot_xmax(s.snap)::text::bigint from s)) << 20)
    $b$ $f$, base);
end $$;`);
    addSql(`alter table events alter column seq set default svc_event_seq();`);
  },
};
