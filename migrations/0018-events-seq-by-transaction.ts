import { Migration } from '@mikro-orm/migrations';

// Issue 19: appends no longer serialise on one advisory lock held until commit. An event's seq is taken from its
// writer's transaction id instead: seq = base + xid × 2^20 + n (n = 1, 2, … the transaction's n-th event seq), so every
// row of one transaction shares the xid prefix. A reader delivers only rows below the horizon
// base + xmin(current snapshot) × 2^20: every transaction with a smaller xid has ended, so no row can ever commit below
// a seq a reader already passed (a cursor on seq never skips a late commit). Rows written before this migration keep
// their seqs, all below `base`.
export class Migration0018EventsSeqByTransaction extends Migration {
  override async up(): Promise<void> {
    this.addSql(`do $$
declare base bigint := (select coalesce(max(seq), 0) + 1 from events);
begin
  execute format($f$
    create function svc_event_seq() returns bigint language sql volatile as $b$
      select %1$s::bigint + (pg_current_xact_id()::text::bigint << 20)
        + set_config('svc.event_n', (coalesce(nullif(current_setting('svc.event_n', true), ''), '0')::bigint + 1)::text, true)::bigint
    $b$ $f$, base);
  execute format($f$
    create function svc_events_horizon() returns bigint language sql stable as $b$
      select %1$s::bigint + (pg_snapshot_xmin(pg_current_snapshot())::text::bigint << 20)
    $b$ $f$, base);
end $$;`);
    this.addSql(`alter table events alter column seq set default svc_event_seq();`);
  }
}
