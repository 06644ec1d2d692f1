import type { MigrationSteps } from './steps.ts';

// Reputation counts only what the ledger proved: the identity reputation (receipt_reputation, migration 0021) counts an
// agent's earn receipts whose settlement was verified on the ledger (verification = 'verified'). A pushed receipt that
// is still pending, or names no transaction (not_applicable), never raises it; a pending one counts from the moment
// its check verifies it (the update trigger moves it in). A call "answered" for the rating is a 2xx response, or none
// at all: a buyer/payment of a link is a sale that served nothing, and nothing failed. The daily rollup is unchanged.
// The trigger function is redefined whole (0021's text with these two rules), the partial index of the newest counted
// receipt follows the new rule, and the rollup is computed again from the receipts.

/** One statement inserting both rollups' deltas of `changes` (rows of receipts with d = +1 or -1), as in 0021. */
function rollupDeltas(changes: string): string {
  const answered = `(coalesce(body->'response'->>'status', '') ~ '^2[0-9][0-9]$' or body->'response' is null)`;
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
           sum(case when ${answered} then d else 0 end),
           sum(d * svc_atomic(body->'price'->>'amount_atomic'))
      from c where kind = 'earn' and decision = 'allow' and verification = 'verified'
     group by 1, 2, 3, 4
    having sum(d) <> 0 or sum(case when ${answered} then d else 0 end) <> 0
        or sum(d * svc_atomic(body->'price'->>'amount_atomic')) <> 0`;
}

export const migration0026ReputationVerified: MigrationSteps = {
  up(addSql) {
    // no receipt may be written between the recount and the new trigger body (another node writing while this runs)
    addSql(`lock table receipts in share row exclusive mode;`);
    addSql(`create or replace function receipts_rollup_trigger() returns trigger language plpgsql as $$
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
    addSql(`drop index receipts_reputation_ts;`);
    addSql(`create index receipts_reputation_ts on receipts (network, agent, (body->'price'->>'currency'), (body->'price'->>'asset'), ts)
      where kind = 'earn' and decision = 'allow' and verification = 'verified';`);
    addSql(`delete from receipt_reputation_deltas;`);
    addSql(`delete from receipt_reputation;`);
    addSql(`insert into receipt_reputation (network, agent, currency, asset, calls, ok_calls, amount_atomic)
      select network, agent, coalesce(body->'price'->>'currency', ''), coalesce(body->'price'->>'asset', ''), count(*),
             count(*) filter (where coalesce(body->'response'->>'status', '') ~ '^2[0-9][0-9]$' or body->'response' is null),
             sum(svc_atomic(body->'price'->>'amount_atomic'))
        from receipts where kind = 'earn' and decision = 'allow' and verification = 'verified'
       group by 1, 2, 3, 4;`);
  },
};
