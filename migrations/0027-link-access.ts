import type { MigrationSteps } from './steps.ts';

// Returning payers (sign-in-with-x) and request-bound payments, two payment-link settings and what they keep:
//   access_window_seconds — how long a paid call grants its wallet access by signing in (null: every call pays);
//   request_binding — 'optional' (stock clients' unbound payments accepted) or 'required' (only bound payments);
//   link_access — the latest paid call of each wallet on each link (one row per pair, a primary-key probe per sign-in);
//   siwx_nonces — the sign-in nonces already used, kept until their challenge expires (single use across nodes).
export const migration0027LinkAccess: MigrationSteps = {
  up(addSql) {
    addSql(`alter table payment_links add column access_window_seconds integer null;`);
    addSql(`alter table payment_links add column request_binding text not null default 'optional';`);
    addSql(`create table link_access (
      network text not null,
      link_pk text not null,
      payer text not null,
      paid_at timestamptz not null,
      primary key (network, link_pk, payer)
    );`);
    addSql(`create table siwx_nonces (
      nonce text not null primary key,
      expires_at timestamptz not null
    );`);
    addSql(`create index siwx_nonces_expires_idx on siwx_nonces (expires_at);`);
  },
};
