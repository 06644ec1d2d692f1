import type { MigrationSteps } from './steps.ts';

// DECISIONS "Identity": an agent's public profile (handle unique per network, case-insensitive) and the
// domains it claims, each with the token of its check and the time it was verified, and the claims it states.
export const migration0013Identity: MigrationSteps = {
  up(addSql) {
    addSql(`create table identity_profiles (
      network text not null,
      mint text not null,
      handle text null,
      display_name text null,
      description text null,
      image text null,
      capabilities jsonb not null default '[]'::jsonb,
      owner_principal text not null,
      updated_at timestamptz not null,
      primary key (network, mint)
    );`);
    // resolve?handle= and the uniqueness rule read the same index: one handle per network whatever its case.
    addSql(`create unique index identity_profiles_handle_key on identity_profiles (network, lower(handle)) where handle is not null;`);
    addSql(`create table identity_domains (
      network text not null,
      mint text not null,
      domain text not null,
      token text not null,
      owner_principal text not null,
      created_at timestamptz not null,
      verified_at timestamptz null,
      primary key (network, mint, domain)
    );`);
    // A domain proves one agent per network: resolve?domain= answers the agent that verified it.
    addSql(`create unique index identity_domains_verified_key on identity_domains (network, domain) where verified_at is not null;`);
    // Claims an owner states about its agent; revoked ones are kept (revoked_at) so history stays whole.
    addSql(`create table identity_claims (
      network text not null,
      id text not null,
      mint text not null,
      type text not null,
      statement text not null,
      evidence_url text null,
      public boolean not null,
      owner_principal text not null,
      created_at timestamptz not null,
      revoked_at timestamptz null,
      primary key (network, id)
    );`);
    addSql(`create index identity_claims_mint on identity_claims (network, mint, created_at);`);
    // Disclosure links: the token is shown once; only its SHA-256 is stored.
    addSql(`create table identity_disclosures (
      network text not null,
      token_hash text not null,
      mint text not null,
      fields jsonb not null,
      owner_principal text not null,
      created_at timestamptz not null,
      expires_at timestamptz not null,
      primary key (network, token_hash)
    );`);
  },
};
