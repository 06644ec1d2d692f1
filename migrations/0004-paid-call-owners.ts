import type { MigrationSteps } from './steps.ts';

export const migration0004PaidCallOwners: MigrationSteps = {
  up(addSql) {
    // No money lost on a crash: a claim names the process that holds it. Each process takes a number from
    // this sequence and holds the session-level advisory lock (PROCESS_LOCK, number) while it lives, so a claim whose
    // owner died (kill -9, lost machine) is recognised at once: no session holds its lock any more.
    addSql(`create sequence process_epochs as integer cycle;`);
    addSql(`alter table paid_calls add column owner integer null;`);
    addSql(`alter table facilitator_settlements add column owner integer null;`);
    // Reconciliation reads the calls that are not answered yet, oldest first.
    addSql(`create index paid_calls_open_idx on paid_calls (updated_at) where status <> 'done';`);
    // One earn receipt per payment transaction, whatever happens to its paid_calls row (pruned after 24 h): a late
    // replay of an old payment can never be recorded twice.
    addSql(`create unique index receipts_paywall_tx_sig_key on receipts (network, tx_sig) where source = 'paywall' and tx_sig is not null;`);
  },
};
