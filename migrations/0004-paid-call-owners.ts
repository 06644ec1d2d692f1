import { Migration } from '@mikro-orm/migrations';

export class Migration0004PaidCallOwners extends Migration {
  override async up(): Promise<void> {
    // No money lost on a crash: a claim names the process that holds it. Each process takes a number from
    // this sequence and holds the session-level advisory lock (PROCESS_LOCK, number) while it lives, so a claim whose
    // owner died (kill -9, lost machine) is recognised at once: no session holds its lock any more.
    this.addSql(`create sequence process_epochs as integer cycle;`);
    this.addSql(`alter table paid_calls add column owner integer null;`);
    this.addSql(`alter table facilitator_settlements add column owner integer null;`);
    // Reconciliation reads the calls that are not answered yet, oldest first.
    this.addSql(`create index paid_calls_open_idx on paid_calls (updated_at) where status <> 'done';`);
    // One earn receipt per payment transaction, whatever happens to its paid_calls row (pruned after 24 h): a late
    // replay of an old payment can never be recorded twice.
    this.addSql(`create unique index receipts_paywall_tx_sig_key on receipts (network, tx_sig) where source = 'paywall' and tx_sig is not null;`);
  }
}
