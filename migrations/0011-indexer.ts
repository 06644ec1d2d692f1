import type { MigrationSteps } from './steps.ts';

// Indexer half: what the indexer follows on each network's ledger and how far it got (hosted-api §4.4, §6;
// fee-facilitator-mpp-tools §6).
// - indexer_watch: one row per watched (network, address) with its role and the agent it belongs to (null for a fee
//   authority's token account), and its cursor: the newest signature processed for the address and its slot.
// - indexer_seen: the exactly-once record of what the indexer reported: one row per (network, signature, key), key
//   naming the event's subject (e.g. "fund:<token account>"); inserted in the transaction that appends the event, so
//   a rescan or two runners at once write each event once.
// - indexer_runs: per network, the last run, the slot everything was scanned up to, and the last error.
export const migration0011Indexer: MigrationSteps = {
  up(addSql) {
    addSql(`create table indexer_watch (
      network text not null,
      address text not null,
      role text not null check (role in ('agent_asset', 'treasury', 'treasury_token', 'fee_token')),
      agent text null,
      owner_principal text null,
      mint text null,
      cursor_signature text null,
      cursor_slot bigint null,
      added_at timestamptz not null,
      primary key (network, address)
    );`);
    addSql(`create table indexer_seen (
      network text not null,
      signature text not null,
      key text not null,
      event_id text not null,
      created_at timestamptz not null,
      primary key (network, signature, key)
    );`);
    addSql(`create table indexer_runs (
      network text primary key,
      last_run_at timestamptz null,
      synced_slot bigint null,
      last_error text null,
      last_error_at timestamptz null
    );`);
    // "was this signature submitted through /v1/submit?" is asked for every transaction the indexer reads
    addSql(`create index prepared_transactions_signature on prepared_transactions (network, signature) where signature is not null;`);
  },
};
