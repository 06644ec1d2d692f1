import type { MigrationSteps } from './steps.ts';

// Buyer routes: a buyer agent's spend policy, and what the agent spent per stable per UTC day — the
// rollup the daily cap reads (one row per (network, agent, asset, day), never a scan of receipts).
export const migration0016Buyer: MigrationSteps = {
  up(addSql) {
    // PUT /v1/buyer/policy: one policy per buyer agent, owned by the agent's owner principal.
    addSql(`create table buyer_policies (
      network text not null,
      agent text not null,
      policy jsonb not null,
      owner_principal text not null,
      updated_at timestamptz not null,
      primary key (network, agent)
    );`);
    // The daily rollup of spend receipts (kind spend, decision allow), kept by a trigger in the transaction that
    // inserts the receipt: every writer of spend receipts (buyer/payment confirmations, the paywall's buyer side,
    // buyer/receipt/finalize, pushes) keeps it without knowing of it. gross_atomic: seller leg + fee leg.
    addSql(`create table buyer_spend_daily (
      network text not null,
      agent text not null,
      asset text not null,
      day date not null,
      gross_atomic numeric(40, 0) not null,
      receipts integer not null,
      primary key (network, agent, asset, day)
    );`);
    addSql(`create function buyer_spend_daily_add() returns trigger language plpgsql as $$
      begin
        if new.kind = 'spend' and new.decision = 'allow' then
          insert into buyer_spend_daily (network, agent, asset, day, gross_atomic, receipts)
          values (new.network, new.agent, new.body->'price'->>'asset', (new.ts at time zone 'UTC')::date,
            (new.body->'price'->>'gross')::numeric, 1)
          on conflict (network, agent, asset, day) do update
            set gross_atomic = buyer_spend_daily.gross_atomic + excluded.gross_atomic, receipts = buyer_spend_daily.receipts + 1;
        end if;
        return new;
      end $$;`);
    addSql(`create trigger receipts_buyer_spend_daily after insert on receipts for each row execute function buyer_spend_daily_add();`);
    addSql(`insert into buyer_spend_daily (network, agent, asset, day, gross_atomic, receipts)
      select network, agent, body->'price'->>'asset', (ts at time zone 'UTC')::date, sum((body->'price'->>'gross')::numeric), count(*)
      from receipts where kind = 'spend' and decision = 'allow'
      group by 1, 2, 3, 4;`);
    // The daily cap also counts the agent's buyer payments not landed yet (open rows only: a partial index).
    addSql(`create index prepared_transactions_open_by_agent on prepared_transactions (network, agent, kind) where state <> 'done';`);
    // buyer/receipt/finalize is idempotent per settlement: the agent's spend receipt of a signature, by index.
    addSql(`create index receipts_spend_tx_sig on receipts (network, agent, tx_sig) where kind = 'spend' and tx_sig is not null;`);
  },
};
