import type { MigrationSteps } from './steps.ts';

// The paywall finds the buyer agent of a delegate payment by its treasury (the debited account's owner).
export const migration0012AgentsByTreasury: MigrationSteps = {
  up(addSql) {
    addSql(`create index agents_network_treasury_idx on agents (network, treasury);`);
  },
};
