import type { MigrationSteps } from './steps.ts';

// Short-lived subscription tokens for browsers (POST /v1/auth/stream-token). Stored only as SHA-256; a token
// is used once: the redeeming UPDATE sets used_at where it is still null, so two gateway nodes on this database cannot
// both accept it. Rows are deleted once expired (at the next issue).
export const migration0022Browser: MigrationSteps = {
  up(addSql) {
    addSql(`create table stream_tokens (
      token_hash text primary key,
      network text not null,
      key_id text not null references api_keys (id) on delete cascade,
      owner_principal text not null,
      created_at timestamptz not null,
      expires_at timestamptz not null,
      used_at timestamptz
    );`);
    addSql(`create index stream_tokens_expires_idx on stream_tokens (expires_at);`);
  },
};
