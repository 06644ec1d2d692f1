import type { MigrationSteps } from './steps.ts';

export const migration0001Initial: MigrationSteps = {
  up(addSql) {
    addSql(`create table api_keys (
      id text primary key,
      network text not null,
      prefix text not null,
      key_hash text not null unique,
      owner_wallet text null,
      label text null,
      role text not null default 'user',
      disabled_at timestamptz null,
      created_at timestamptz not null,
      last_used_at timestamptz null
    );`);
    addSql(`create index api_keys_network_owner_idx on api_keys (network, owner_wallet);`);

    addSql(`create table agents (
      network text not null,
      mint text not null,
      owner text not null,
      name text null,
      uri text null,
      treasury text not null,
      executive text null,
      source text not null,
      registered_at timestamptz not null,
      updated_at timestamptz not null,
      primary key (network, mint)
    );`);

    addSql(`create table payment_links (
      pk text primary key,
      id text not null,
      network text not null,
      label text not null,
      owner_agent text not null,
      method text not null,
      price text not null,
      currency text not null,
      amount_atomic numeric(20, 0) not null,
      accepts_currencies jsonb not null,
      protocol text not null,
      response jsonb not null,
      webhook_url text null,
      wrap_receipt boolean not null,
      settle_policy text not null,
      metadata jsonb not null,
      disabled boolean not null default false,
      call_count integer not null default 0,
      settled_count integer not null default 0,
      last_called_at timestamptz null,
      last_settled_at timestamptz null,
      last_tx_sig text null,
      created_by text not null,
      created_at timestamptz not null,
      updated_at timestamptz not null,
      constraint payment_links_network_id_key unique (network, id)
    );`);
    addSql(`create index payment_links_network_pk_idx on payment_links (network, pk desc);`);
    addSql(`create index payment_links_network_owner_pk_idx on payment_links (network, owner_agent, pk desc);`);

    // seq orders events by commit (appends serialise on an advisory lock), the subscribers' cursor.
    addSql(`create sequence events_seq;`);
    addSql(`create table events (
      id text primary key,
      seq bigint not null unique default nextval('events_seq'),
      network text not null,
      kind text not null,
      phase text not null,
      agent_asset text null,
      signature text null,
      block_time bigint null,
      confirmed_at timestamptz null,
      slot bigint null,
      error_code text null,
      error_logs jsonb null,
      metadata jsonb not null,
      client_reference text null,
      created_at timestamptz not null,
      updated_at timestamptz not null
    );`);
    addSql(`alter sequence events_seq owned by events.seq;`);
    addSql(`create index events_network_seq_idx on events (network, seq desc);`);
    addSql(`create index events_network_kind_seq_idx on events (network, kind text_pattern_ops, seq desc);`);
    addSql(`create index events_network_agent_seq_idx on events (network, agent_asset, seq desc);`);
  },
};
