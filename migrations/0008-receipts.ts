import type { MigrationSteps } from './steps.ts';

// Receipts as a resource (hosted-api §4.7). Each list order and filter has an index in its own order, the
// ledger check (verification) lives on the row with its retry schedule, and pull targets (§2.9) are their own table.
export const migration0008Receipts: MigrationSteps = {
  up(addSql) {
    addSql(`alter table receipts
      add column decision text null,
      add column ts timestamptz null,
      add column ts_max timestamptz null,
      add column verification text null,
      add column verification_reason text null,
      add column verification_checked_at timestamptz null,
      add column verification_attempts integer not null default 0,
      add column verify_after timestamptz null;`);
    // Rows written before: the paywall's earn receipts, ISO timestamps, oldest nonce first.
    addSql(`update receipts r set decision = r.body->>'decision', ts = (r.body->>'ts')::timestamptz,
      verification = case when r.tx_sig is null then 'not_applicable' else 'pending' end,
      verify_after = case when r.tx_sig is null then null else r.created_at end;`);
    addSql(`update receipts r set ts_max = m.ts_max
      from (select network, agent, nonce, max(ts) over (partition by network, agent order by nonce) as ts_max from receipts) m
      where m.network = r.network and m.agent = r.agent and m.nonce = r.nonce;`);
    addSql(`alter table receipts alter column decision set not null, alter column ts set not null,
      alter column ts_max set not null, alter column verification set not null;`);
    addSql(`alter table receipts add constraint receipts_verification_check
      check (verification in ('verified', 'mismatch', 'pending', 'not_applicable'));`);
    // GET /v1/receipts/{agent}: nonce desc under each filter combination; since bounds nonce through ts_max (the
    // running maximum of ts along the chain, monotonic in nonce).
    addSql(`create index receipts_agent_kind_nonce on receipts (network, agent, kind, nonce);`);
    addSql(`create index receipts_agent_decision_nonce on receipts (network, agent, decision, nonce);`);
    addSql(`create index receipts_agent_kind_decision_nonce on receipts (network, agent, kind, decision, nonce);`);
    addSql(`create index receipts_agent_ts_max on receipts (network, agent, ts_max, nonce);`);
    // The retry job's queue: pending checks by due time.
    addSql(`create index receipts_verify_due on receipts (verify_after) where verification = 'pending';`);

    addSql(`create table pull_targets (
      id text primary key,
      network text not null,
      agent text not null,
      owner_principal text not null,
      url text not null,
      format text not null check (format in ('json', 'jsonl')),
      interval_seconds integer not null check (interval_seconds >= 10),
      next_run_at timestamptz not null,
      leased_until timestamptz null,
      last_run_at timestamptz null,
      last_status text null,
      last_error text null,
      consecutive_failures integer not null default 0,
      accepted_total bigint not null default 0,
      rejected_total bigint not null default 0,
      created_at timestamptz not null,
      constraint pull_targets_network_agent_url_key unique (network, agent, url)
    );`);
    addSql(`create index pull_targets_agent_id on pull_targets (network, agent, id);`);
    addSql(`create index pull_targets_due on pull_targets (next_run_at);`);
  },
};
