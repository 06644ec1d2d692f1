import type { MigrationSteps } from './steps.ts';

export const migration0003PaidCalls: MigrationSteps = {
  up(addSql) {
    // DECISIONS "Facilitator": the duplicate-settlement guard, shared by every facilitator instance.
    addSql(`create table facilitator_settlements (
      network text not null,
      signature text not null,
      status text not null,
      payer text not null,
      blockhash text not null,
      error text null,
      created_at timestamptz not null,
      updated_at timestamptz not null,
      primary key (network, signature)
    );`);

    // DECISIONS "Facilitator": one sponsored token-account creation per (owner, mint), a daily budget per network.
    addSql(`create table rent_sponsorships (
      network text not null,
      owner text not null,
      mint text not null,
      account text not null,
      lamports bigint not null,
      signature text not null,
      day date not null,
      created_at timestamptz not null,
      primary key (network, owner, mint)
    );`);
    addSql(`create index rent_sponsorships_signature_idx on rent_sponsorships (network, signature);`);
    addSql(`create table rent_budget (
      network text not null,
      day date not null,
      lamports_used bigint not null,
      primary key (network, day)
    );`);

    // DECISIONS "x402 on the paywall": a payment is used once; its replay within 24 h gets the stored response.
    // Keyed by the SHA-256 of the signed message: the same transaction whatever signature bytes carry it.
    addSql(`create table paid_calls (
      network text not null,
      payment_key text not null,
      link_pk text not null,
      link_id text not null,
      status text not null,
      signature text null,
      attempted boolean not null default false,
      payer text null,
      response jsonb null,
      request jsonb null,
      locked_until timestamptz not null,
      created_at timestamptz not null,
      updated_at timestamptz not null,
      expires_at timestamptz not null,
      primary key (network, payment_key)
    );`);
    addSql(`create index paid_calls_expires_idx on paid_calls (expires_at);`);
    addSql(`create index paid_calls_pending_idx on paid_calls (locked_until) where status = 'pending';`);

    // DECISIONS "Receipts": hash-chained per agent, gapless nonces from 0.
    addSql(`create table receipts (
      network text not null,
      agent text not null,
      nonce bigint not null,
      kind text not null,
      receipt_hash text not null,
      prev_receipt_hash text null,
      tx_sig text null,
      source text not null,
      body jsonb not null,
      created_at timestamptz not null,
      primary key (network, agent, nonce),
      constraint receipts_network_hash_key unique (network, receipt_hash)
    );`);

    // Per-link webhook: a signing secret of its own (DECISIONS "Webhooks" signature scheme).
    addSql(`alter table payment_links add column webhook_secret text null;`);
  },
};
