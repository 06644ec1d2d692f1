import type { MigrationSteps } from './steps.ts';
import { migration0001Initial } from './0001-initial.ts';
import { migration0002Policies } from './0002-policies.ts';
import { migration0003PaidCalls } from './0003-paid-calls.ts';
import { migration0004PaidCallOwners } from './0004-paid-call-owners.ts';
import { migration0005Ownership } from './0005-ownership.ts';
import { migration0007WeightedRateHits } from './0007-weighted-rate-hits.ts';
import { migration0008Receipts } from './0008-receipts.ts';
import { migration0009Webhooks } from './0009-webhooks.ts';
import { migration0010PreparedTransactions } from './0010-prepared-transactions.ts';
import { migration0011Indexer } from './0011-indexer.ts';
import { migration0012AgentsByTreasury } from './0012-agents-by-treasury.ts';
import { migration0013Identity } from './0013-identity.ts';
import { migration0014Scale } from './0014-scale.ts';
import { migration0015IdentityCards } from './0015-identity-cards.ts';
import { migration0016Buyer } from './0016-buyer.ts';
import { migration0018EventsSeqByTransaction } from './0018-events-seq-by-transaction.ts';
import { migration0019Mcp } from './0019-mcp.ts';
import { migration0021Scale2 } from './0021-scale2.ts';
import { migration0022Browser } from './0022-browser.ts';
import { migration0023UsageRollup } from './0023-usage-rollup.ts';
import { migration0024AgentProof } from './0024-agent-proof.ts';
import { migration0025EventPhases } from './0025-event-phases.ts';
import { migration0026ReputationVerified } from './0026-reputation-verified.ts';
import { migration0027LinkAccess } from './0027-link-access.ts';
import { migration0028PaymentIds } from './0028-payment-ids.ts';
import { migration0029SettlementStatus } from './0029-settlement-status.ts';

/** Every migration, in the order they run. Listed explicitly: MikroORM cannot discover TypeScript migrations by scanning. */
export const MIGRATIONS: ReadonlyArray<{ name: string; steps: MigrationSteps }> = [
  { name: '0001-initial', steps: migration0001Initial },
  { name: '0002-policies', steps: migration0002Policies },
  { name: '0003-paid-calls', steps: migration0003PaidCalls },
  { name: '0004-paid-call-owners', steps: migration0004PaidCallOwners },
  { name: '0005-ownership', steps: migration0005Ownership },
  { name: '0007-weighted-rate-hits', steps: migration0007WeightedRateHits },
  { name: '0008-receipts', steps: migration0008Receipts },
  { name: '0009-webhooks', steps: migration0009Webhooks },
  { name: '0010-prepared-transactions', steps: migration0010PreparedTransactions },
  { name: '0011-indexer', steps: migration0011Indexer },
  { name: '0012-agents-by-treasury', steps: migration0012AgentsByTreasury },
  { name: '0013-identity', steps: migration0013Identity },
  { name: '0014-scale', steps: migration0014Scale },
  { name: '0015-identity-cards', steps: migration0015IdentityCards },
  { name: '0016-buyer', steps: migration0016Buyer },
  { name: '0018-events-seq-by-transaction', steps: migration0018EventsSeqByTransaction },
  { name: '0019-mcp', steps: migration0019Mcp },
  { name: '0021-scale2', steps: migration0021Scale2 },
  { name: '0022-browser', steps: migration0022Browser },
  { name: '0023-usage-rollup', steps: migration0023UsageRollup },
  { name: '0024-agent-proof', steps: migration0024AgentProof },
  { name: '0025-event-phases', steps: migration0025EventPhases },
  { name: '0026-reputation-verified', steps: migration0026ReputationVerified },
  { name: '0027-link-access', steps: migration0027LinkAccess },
  { name: '0028-payment-ids', steps: migration0028PaymentIds },
  { name: '0029-settlement-status', steps: migration0029SettlementStatus },
];

/** MikroORM's migrations list: each migration as a subclass of its `Migration`, loaded only when one is pending. */
export async function migrationsList() {
  const { Migration } = await import('@mikro-orm/migrations');
  return MIGRATIONS.map(({ name, steps }) => ({
    name,
    class: class extends Migration {
      override async up(): Promise<void> {
        steps.up((sql) => this.addSql(sql));
      }
    },
  }));
}
