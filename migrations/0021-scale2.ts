import type { MigrationSteps } from './steps.ts';

// Two aggregates of an agent's receipts read rollups instead of the receipts themselves, kept in the
// transaction that writes the receipt, the way event_counts is (migration 0014): a trigger only INSERTs delta rows
// (no unique key: no row lock, so two writers never wait on a counter row), svc_compact_receipt_rollups() folds them
// into the counters in a short transaction of its own (the compact_event_counts job, every minute), and a read sums the
// counters and the deltas not yet folded — exact at any moment.
// - receipt_reputation: per (network, agent, currency, asset), the earn receipts that count for the identity
//   reputation summary (decision allow, verification not mismatch): calls, calls answered 2xx, amount. A receipt's
//   verification becoming mismatch takes it out again. The newest settled time is one probe per row of
//   receipts_reputation_ts (a partial index holding exactly the counted receipts), so it stays exact too.
// - receipt_daily: per (network, agent, UTC day, kind, asset), the settled receipts (decision allow) and their amount
//   (spend: gross; earn: amount_atomic), for GET /v1/receipts/{agent}/daily and the MCP history.
// And the payment-link lists order by the expression pk || '' (values and order of pk), which only their own indexes
// hold: PostgreSQL cannot walk the primary key (or the network's pk index) discarding other principals' links, which
// it chose by the pk's perfect correlation — tens of thousands of rows per page for a principal whose links are all
// old. The same trick as the events feed's (seq + 0) index (migration 0014).
/**
 * One statement inserting the deltas of `changes` (rows of receipts with d = +1 or -1) into both rollups' delta tables:
 * settled receipts by day, kind and asset; counted earn receipts by currency and asset. Groups that cancel out are left out.
 */
function rollupDeltas(changes: string): string {
  return `with c as (${changes}),
    daily as (
      insert into receipt_daily_deltas (network, agent, day, kind, asset, count, amount_atomic)
      select network, agent, (ts at time zone 'UTC')::date, kind, coalesce(body->'price'->>'asset', ''), sum(d),
             sum(d * svc_atomic(body->'price'->>(case when kind = 'spend' then 'gross' else 'amount_atomic' end)))
        from c where decision = 'allow'
       group by 1, 2, 3, 4, 5
      having sum(d) <> 0 or sum(d * svc_atomic(body->'price'->>(case when kind = 'spend' then 'gross' else 'amount_atomic' end))) <> 0
    )
    insert into receipt_reputation_deltas (network, agent, currency, asset, calls, ok_calls, amount_atomic)
    select network, agent, coalesce(body->'price'->>'currency', ''), coalesce(body->'price'->>'asset', ''), sum(d),
           sum(case when coalesce(body->'response'->>'status', '') ~ '^2[0-9][0-9]$' then d else 0 end),
           sum(d * svc_atomic(body->'price'->>'amount_atomic'))
      from c where kind = 'earn' and decision = 'allow' and verification <> 'mismatch'
     group by 1, 2, 3, 4
    having sum(d) <> 0 or sum(case when coalesce(body->'response'->>'status', '') ~ '^2[0-9][0-9]$' then d else 0 end) <> 0
        or sum(d * svc_atomic(body->'price'->>'amount_atomic')) <> 0`;
}

export const migration0021Scale2: MigrationSteps = {
  up(addSql) {
    addSql(`create index payment_links_list_idx on payment_links (network, (pk || '') desc);`);
    addSql(`create index payment_links_list_principal_idx on payment_links (network, owner_principal, (pk || '') desc);`);
    addSql(`create index payment_links_list_agent_idx on payment_links (network, owner_agent, (pk || '') desc);`);
    addSql(`create index payment_links_list_principal_agent_idx on payment_links (network, owner_principal, owner_agent, (pk || '') desc);`);
    addSql(`drop index payment_links_network_pk_idx, payment_links_network_owner_pk_idx, payment_links_network_principal_pk_idx,
      payment_links_network_principal_agent_pk_idx;`);

    addSql(`create table receipt_reputation (
      network text not null,
      agent text not null,
      currency text not null,
      asset text not null,
      calls bigint not null,
      ok_calls bigint not null,
      amount_atomic numeric(60, 0) not null,
      primary key (network, agent, currency, asset)
    );`);
    addSql(`create table receipt_reputation_deltas (
      network text not null,
      agent text not null,
      currency text not null,
      asset text not null,
      calls bigint not null,
      ok_calls bigint not null,
      amount_atomic numeric(60, 0) not null
    );`);
    addSql(`create index receipt_reputation_deltas_agent_idx on receipt_reputation_deltas (network, agent);`);
    addSql(`create table receipt_daily (
      network text not null,
      agent text not null,
      day date not null,
      kind text not null,
      asset text not null,
      count bigint not null,
      amount_atomic numeric(60, 0) not null,
      primary key (network, agent, day, kind, asset)
    );`);
    addSql(`create table receipt_daily_deltas (
      network text not null,
      agent text not null,
      day date not null,
      kind text not null,
      asset text not null,
      count bigint not null,
      amount_atomic numeric(60, 0) not null
    );`);
    addSql(`create index receipt_daily_deltas_agent_idx on receipt_daily_deltas (network, agent, day);`);
    // The newest counted earn receipt of an (agent, currency, asset): the receipts the reputation counts, by ts.
    addSql(`create index receipts_reputation_ts on receipts (network, agent, (body->'price'->>'currency'), (body->'price'->>'asset'), ts)
      where kind = 'earn' and decision = 'allow' and verification <> 'mismatch';`);

    // A malformed amount or status never fails the receipt's insert: it counts 0 (the receipt schema admits neither).
    addSql(`create function svc_atomic(v text) returns numeric language sql immutable as $$
      select case when v ~ '^[0-9]{1,60}$' then v::numeric else 0 end
    $$;`);
    // Statement triggers with transition tables, as on events (migration 0014): one statement of grouped deltas per
    // write, only for the counters that change — a bulk insert of 50,000 receipts writes a handful of delta rows, and
    // an update that keeps what the rollups count (pending → verified) writes none.
    addSql(`create function receipts_rollup_trigger() returns trigger language plpgsql as $$
      begin
        if tg_op = 'INSERT' then
          ${rollupDeltas('select network, agent, kind, decision, verification, ts, body, 1 as d from new_rows')};
        elsif tg_op = 'UPDATE' then
          ${rollupDeltas('select network, agent, kind, decision, verification, ts, body, 1 as d from new_rows union all select network, agent, kind, decision, verification, ts, body, -1 from old_rows')};
        else
          ${rollupDeltas('select network, agent, kind, decision, verification, ts, body, -1 as d from old_rows')};
        end if;
        return null;
      end $$;`);
    addSql(`create function receipts_rollup_truncate() returns trigger language plpgsql as $$
      begin
        truncate receipt_reputation, receipt_reputation_deltas, receipt_daily, receipt_daily_deltas;
        return null;
      end $$;`);
    // Folds the deltas committed so far (one compaction at a time; another caller returns at once). Returns the number
    // of counters changed. A counter may reach zero (its receipts turned mismatch, or were deleted): readers skip it.
    addSql(`create function svc_compact_receipt_rollups() returns bigint language plpgsql as $$
      declare a bigint; b bigint;
      begin
        if not pg_try_advisory_xact_lock(7212021) then return 0; end if;
        with moved as (delete from receipt_reputation_deltas returning *)
        insert into receipt_reputation as c (network, agent, currency, asset, calls, ok_calls, amount_atomic)
        select network, agent, currency, asset, sum(calls), sum(ok_calls), sum(amount_atomic) from moved
         group by 1, 2, 3, 4 order by 1, 2, 3, 4
        on conflict (network, agent, currency, asset) do update
          set calls = c.calls + excluded.calls, ok_calls = c.ok_calls + excluded.ok_calls, amount_atomic = c.amount_atomic + excluded.amount_atomic;
        get diagnostics a = row_count;
        with moved as (delete from receipt_daily_deltas returning *)
        insert into receipt_daily as c (network, agent, day, kind, asset, count, amount_atomic)
        select network, agent, day, kind, asset, sum(count), sum(amount_atomic) from moved
         group by 1, 2, 3, 4, 5 order by 1, 2, 3, 4, 5
        on conflict (network, agent, day, kind, asset) do update
          set count = c.count + excluded.count, amount_atomic = c.amount_atomic + excluded.amount_atomic;
        get diagnostics b = row_count;
        return a + b;
      end $$;`);

    // No receipt may slip between the backfill and the triggers (another node writing while this runs).
    addSql(`lock table receipts in share row exclusive mode;`);
    addSql(`create trigger receipts_rollup_insert after insert on receipts referencing new table as new_rows
      for each statement execute function receipts_rollup_trigger();`);
    // Receipts are immutable but for their verification; any change of what the rollups count moves it.
    addSql(`create trigger receipts_rollup_update after update on receipts referencing old table as old_rows new table as new_rows
      for each statement execute function receipts_rollup_trigger();`);
    addSql(`create trigger receipts_rollup_delete after delete on receipts referencing old table as old_rows
      for each statement execute function receipts_rollup_trigger();`);
    addSql(`create trigger receipts_rollup_truncate after truncate on receipts for each statement execute function receipts_rollup_truncate();`);
    addSql(`insert into receipt_reputation (network, agent, currency, asset, calls, ok_calls, amount_atomic)
      select network, agent, coalesce(body->'price'->>'currency', ''), coalesce(body->'price'->>'asset', ''), count(*),
             count(*) filter (where coalesce(body->'response'->>'status', '') ~ '^2[0-9][0-9]$'), sum(svc_atomic(body->'price'->>'amount_atomic'))
        from receipts where kind = 'earn' and decision = 'allow' and verification <> 'mismatch'
       group by 1, 2, 3, 4;`);
    addSql(`insert into receipt_daily (network, agent, day, kind, asset, count, amount_atomic)
      select network, agent, (ts at time zone 'UTC')::date, kind, coalesce(body->'price'->>'asset', ''), count(*),
             sum(svc_atomic(body->'price'->>(case when kind = 'spend' then 'gross' else 'amount_atomic' end)))
        from receipts where decision = 'allow'
       group by 1, 2, 3, 4, 5;`);
  },
};
