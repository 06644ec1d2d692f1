import type { MigrationSteps } from './steps.ts';

// DECISIONS "Identity", second part: capability cards, and the index the anonymous disclosure read needs.
export const migration0015IdentityCards: MigrationSteps = {
  up(addSql) {
    // What an agent says it can do, one card per capability name; public ones are in GET /v1/identity/{mint}, in its
    // registration document and in the verify `capability_declared` check, private ones are the owner's notes.
    addSql(`create table identity_capability_cards (
      network text not null,
      id text not null,
      mint text not null,
      capability text not null,
      title text null,
      description text null,
      endpoint text null,
      tags jsonb not null default '[]'::jsonb,
      public boolean not null,
      owner_principal text not null,
      created_at timestamptz not null,
      updated_at timestamptz not null,
      primary key (network, id)
    );`);
    addSql(`create unique index identity_capability_cards_capability_key on identity_capability_cards (network, mint, capability);`);
    // GET /v1/identity/disclosures/{token} is anonymous (the link is the credential): found by its token's hash alone.
    addSql(`create unique index identity_disclosures_token_key on identity_disclosures (token_hash);`);
  },
};
