import { Migration0001Initial } from './0001-initial.ts';
import { Migration0002Policies } from './0002-policies.ts';
import { Migration0003PaidCalls } from './0003-paid-calls.ts';
import { Migration0004PaidCallOwners } from './0004-paid-call-owners.ts';
import { Migration0005Ownership } from './0005-ownership.ts';
import { Migration0007WeightedRateHits } from './0007-weighted-rate-hits.ts';
import { Migration0008Receipts } from './0008-receipts.ts';
import { Migration0009Webhooks } from './0009-webhooks.ts';
import { Migration0010PreparedTransactions } from './0010-prepared-transactions.ts';
import { Migration0011Indexer } from './0011-indexer.ts';
import { Migration0012AgentsByTreasury } from './0012-agents-by-treasury.ts';
import { Migration0013Identity } from './0013-identity.ts';
import { Migration0014Scale } from './0014-scale.ts';
import { Migration0015IdentityCards } from './0015-identity-cards.ts';
import { Migration0016Buyer } from './0016-buyer.ts';
import { Migration0018EventsSeqByTransaction } from './0018-events-seq-by-transaction.ts';
import { Migration0019Mcp } from './0019-mcp.ts';
import { Migration0021Scale2 } from './0021-scale2.ts';
import { Migration0022Browser } from './0022-browser.ts';
import { Migration0023UsageRollup } from './0023-usage-rollup.ts';
import { Migration0024AgentProof } from './0024-agent-proof.ts';
import { Migration0026ReputationVerified } from './0026-reputation-verified.ts';

/** Listed explicitly: under tsx MikroORM cannot discover TypeScript migrations by scanning. */
export const migrationsList = [
  { name: '0001-initial', class: Migration0001Initial },
  { name: '0002-policies', class: Migration0002Policies },
  { name: '0003-paid-calls', class: Migration0003PaidCalls },
  { name: '0004-paid-call-owners', class: Migration0004PaidCallOwners },
  { name: '0005-ownership', class: Migration0005Ownership },
  { name: '0007-weighted-rate-hits', class: Migration0007WeightedRateHits },
  { name: '0008-receipts', class: Migration0008Receipts },
  { name: '0009-webhooks', class: Migration0009Webhooks },
  { name: '0010-prepared-transactions', class: Migration0010PreparedTransactions },
  { name: '0011-indexer', class: Migration0011Indexer },
  { name: '0012-agents-by-treasury', class: Migration0012AgentsByTreasury },
  { name: '0013-identity', class: Migration0013Identity },
  { name: '0014-scale', class: Migration0014Scale },
  { name: '0015-identity-cards', class: Migration0015IdentityCards },
  { name: '0016-buyer', class: Migration0016Buyer },
  { name: '0018-events-seq-by-transaction', class: Migration0018EventsSeqByTransaction },
  { name: '0019-mcp', class: Migration0019Mcp },
  { name: '0021-scale2', class: Migration0021Scale2 },
  { name: '0022-browser', class: Migration0022Browser },
  { name: '0023-usage-rollup', class: Migration0023UsageRollup },
  { name: '0024-agent-proof', class: Migration0024AgentProof },
  { name: '0026-reputation-verified', class: Migration0026ReputationVerified },
];
