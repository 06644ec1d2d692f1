import type { MigrationSteps } from './steps.ts';

// DECISIONS "Agents, submissions and events": no payment is taken into the treasury of an agent that is not proven on
// the ledger. `proven_at`: when the ledger was seen holding the agent's Metaplex Core AssetV1 with its recorded owner
// (a mint through the API once it confirmed, a record when it was read). `ledger_checked_at`: the last time the proof
// job (or a first use) looked for an unproven one, so the job walks the longest-unchecked first. Additive: rows
// recorded before this without a look at the ledger stay unproven until the job or a first use finds their asset.
export const migration0024AgentProof: MigrationSteps = {
  up(addSql) {
    addSql(`alter table agents add column proven_at timestamptz null, add column ledger_checked_at timestamptz null;`);
    // an agent.create row is written only once its mint transaction confirmed: the ledger held the asset then
    addSql(`update agents set proven_at = registered_at where source = 'prepared';`);
    addSql(`create index agents_unproven_idx on agents (ledger_checked_at nulls first, network, mint) where proven_at is null;`);
  },
};
