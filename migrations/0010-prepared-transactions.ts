import type { MigrationSteps } from './steps.ts';

// The transactions the prepare routes built (hosted-api §2.5, §3.1, §4.5). The event (same id) carries the
// phase; this row keeps what submit checks the signed bytes against (the message, its signers and blockhash) and,
// once submitted, the signed transaction for the confirmations job (status reads, re-broadcast while the blockhash
// is valid). state: 'prepared' → 'submitted' → 'done' (confirmed, failed or expired); the partial index holds only
// the rows a job still has to look at.
export const migration0010PreparedTransactions: MigrationSteps = {
  up(addSql) {
    addSql(`create table prepared_transactions (
      event_id text primary key,
      network text not null,
      kind text not null,
      agent text not null,
      owner_principal text null,
      message bytea not null,
      signers text[] not null,
      recent_blockhash text not null,
      last_valid_block_height bigint not null,
      state text not null check (state in ('prepared', 'submitted', 'done')),
      signature text null,
      transaction bytea null,
      client_reference text null,
      submitted_at timestamptz null,
      next_check_at timestamptz null,
      checks integer not null default 0,
      created_at timestamptz not null
    );`);
    addSql(`create index prepared_transactions_open_idx on prepared_transactions (state, created_at) where state <> 'done';`);
    addSql(`create index prepared_transactions_due_idx on prepared_transactions (next_check_at) where state = 'submitted';`);
  },
};
