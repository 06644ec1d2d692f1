import type { MigrationSteps } from './steps.ts';

// Reads that stay flat as the tables grow.
//
// event_counts: how many events per (network, owner scope, grain bucket, kind, phase), kept by statement triggers on
// `events` in the transaction that writes the event, so GET /v1/metrics/events costs O(buckets), never O(rows), and
// stays exact whatever writes the table (append, phase transition, an owner reassigned, a delete, a test's UPDATE).
//   owner_key  '*' = the whole network (an admin's read), else the owner principal (events without one count in '*' only)
//   grain      't' all time (bucket = epoch), 'd' UTC day, 'h' UTC hour (bucket = its start)
//   count      may reach 0 after transitions; readers skip zero sums
// Writers never wait for each other on a counter row (events append without a global lock, migration 0018): the
// triggers only INSERT into event_count_deltas (no unique key, so no row lock and no lock-order deadlock between two
// transactions appending different kinds in different orders); svc_compact_event_counts() folds the deltas into
// event_counts in a short transaction of its own (the compact_event_counts job every minute, and a metrics read first).
// A read sums event_counts and the deltas not yet folded, so it is exact at any moment.
// event_kinds: the kinds a network has ever had (a handful; filled by the compaction), so a kind wildcard lists as
// per-kind index branches (the catalogue's kinds are added by the reader, so a kind appended a moment ago is listed).
export const migration0014Scale: MigrationSteps = {
  up(addSql) {
    addSql(`create table event_counts (
      network text not null,
      owner_key text not null,
      grain "char" not null,
      bucket timestamptz not null,
      kind text not null,
      phase text not null,
      count bigint not null,
      primary key (network, owner_key, grain, bucket, kind, phase)
    );`);
    addSql(`create table event_count_deltas (
      network text not null,
      owner_key text not null,
      grain "char" not null,
      bucket timestamptz not null,
      kind text not null,
      phase text not null,
      d bigint not null
    );`);
    addSql(`create index event_count_deltas_scope_idx on event_count_deltas (network, owner_key, grain, bucket);`);
    addSql(`create table event_kinds (
      network text not null,
      kind text not null,
      primary key (network, kind)
    );`);

    // The rows a set of events adds (+1) or removes (-1) from the counters: one per owner scope and grain.
    addSql(`create function event_count_rows(e_network text, e_owner text, e_created_at timestamptz, e_kind text, e_phase text, e_d bigint)
      returns table (network text, owner_key text, grain "char", bucket timestamptz, kind text, phase text, d bigint)
      language sql stable as $$
        select e_network, o.owner_key, g.grain,
               case g.grain when 't' then 'epoch'::timestamptz
                            when 'd' then date_trunc('day', e_created_at, 'UTC')
                            else date_trunc('hour', e_created_at, 'UTC') end,
               e_kind, e_phase, e_d
          from (values ('*'), (e_owner)) as o(owner_key)
         cross join (values ('t'::"char"), ('d'::"char"), ('h'::"char")) as g(grain)
         where o.owner_key is not null
      $$;`);
    // One insert of deltas per statement, only for the counters that change (an update that keeps network, owner, time,
    // kind and phase writes nothing).
    addSql(`create function events_count_trigger() returns trigger language plpgsql as $$
      begin
        if tg_op = 'INSERT' then
          insert into event_count_deltas (network, owner_key, grain, bucket, kind, phase, d)
          select r.network, r.owner_key, r.grain, r.bucket, r.kind, r.phase, sum(r.d)
            from new_rows n cross join lateral event_count_rows(n.network, n.owner_principal, n.created_at, n.kind, n.phase, 1) r
           group by 1, 2, 3, 4, 5, 6;
        elsif tg_op = 'UPDATE' then
          insert into event_count_deltas (network, owner_key, grain, bucket, kind, phase, d)
          select r.network, r.owner_key, r.grain, r.bucket, r.kind, r.phase, sum(r.d)
            from (select x.network, x.owner_principal, x.created_at, x.kind, x.phase, 1::bigint as d from new_rows x
                  union all
                  select x.network, x.owner_principal, x.created_at, x.kind, x.phase, -1::bigint from old_rows x) n
           cross join lateral event_count_rows(n.network, n.owner_principal, n.created_at, n.kind, n.phase, n.d) r
           group by 1, 2, 3, 4, 5, 6 having sum(r.d) <> 0;
        else
          insert into event_count_deltas (network, owner_key, grain, bucket, kind, phase, d)
          select r.network, r.owner_key, r.grain, r.bucket, r.kind, r.phase, sum(r.d)
            from old_rows o cross join lateral event_count_rows(o.network, o.owner_principal, o.created_at, o.kind, o.phase, -1) r
           group by 1, 2, 3, 4, 5, 6;
        end if;
        return null;
      end $$;`);
    // Folds the deltas committed so far into event_counts (rows in key order; one compaction at a time, another caller
    // returns at once) and records their kinds. Returns the number of counters changed.
    addSql(`create function svc_compact_event_counts() returns bigint language plpgsql as $$
      declare folded bigint;
      begin
        if not pg_try_advisory_xact_lock(7212014) then return 0; end if;
        with moved as (delete from event_count_deltas returning *),
             kinds as (insert into event_kinds (network, kind) select distinct network, kind from moved order by 1, 2 on conflict do nothing)
        insert into event_counts as c (network, owner_key, grain, bucket, kind, phase, count)
        select network, owner_key, grain, bucket, kind, phase, sum(d) from moved
         group by 1, 2, 3, 4, 5, 6 order by 1, 2, 3, 4, 5, 6
        on conflict (network, owner_key, grain, bucket, kind, phase) do update set count = c.count + excluded.count;
        get diagnostics folded = row_count;
        return folded;
      end $$;`);
    addSql(`create function events_truncate_trigger() returns trigger language plpgsql as $$
      begin
        truncate event_counts, event_count_deltas;
        return null;
      end $$;`);

    // No write may slip between the backfill and the triggers (another node appending while this runs).
    addSql(`lock table events in share row exclusive mode;`);
    addSql(`create trigger events_count_insert after insert on events referencing new table as new_rows
      for each statement execute function events_count_trigger();`);
    addSql(`create trigger events_count_update after update on events referencing old table as old_rows new table as new_rows
      for each statement execute function events_count_trigger();`);
    addSql(`create trigger events_count_delete after delete on events referencing old table as old_rows
      for each statement execute function events_count_trigger();`);
    addSql(`create trigger events_count_truncate after truncate on events for each statement execute function events_truncate_trigger();`);
    addSql(`insert into event_counts (network, owner_key, grain, bucket, kind, phase, count)
      select r.network, r.owner_key, r.grain, r.bucket, r.kind, r.phase, sum(r.d)
        from events e cross join lateral event_count_rows(e.network, e.owner_principal, e.created_at, e.kind, e.phase, 1) r
       group by 1, 2, 3, 4, 5, 6;`);
    addSql(`insert into event_kinds (network, kind) select distinct network, kind from events;`);

    // The feed's catch-up (all networks, seq order) reads its own expression index, so no network-scoped list can take
    // the bare seq index and walk it discarding other networks, owners and kinds: PostgreSQL costs that walk by the seq
    // column's perfect correlation and picks it over the (network, …, seq) index whenever a filter looks common, and it
    // grows with the table when the filtered rows are old. The same for a webhook's deliveries and the id primary key.
    addSql(`create unique index events_seq_feed_key on events ((seq + 0));`);
    addSql(`alter table events drop constraint events_seq_key;`);
    addSql(`create index webhook_deliveries_webhook_list_idx on webhook_deliveries (webhook_id, (id collate "C") desc) where webhook_id is not null;`);

    // Lists by agent and kind (one branch per kind), for the whole network and for one owner.
    addSql(`create index events_network_agent_kind_seq_idx on events (network, agent_asset, kind, seq desc);`);
    addSql(`create index events_network_principal_agent_kind_seq_idx on events (network, owner_principal, agent_asset, kind, seq desc);`);
  },
};
