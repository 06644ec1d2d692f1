import type { Network } from '../shared/network.ts';
import type { DailySpend, InFlightPayment, SpendPolicyRecord } from '../buyer/schema.ts';
import type { StoredReceipt } from '../receipts/schema.ts';

// The buyer side's own rows (migrations/0016-buyer.ts): spend policies per buyer agent and the daily spend
// rollup a trigger keeps in the transaction of every spend receipt's insert.

export interface BuyerRepository {
  /** e.g. getPolicy("chain-devnet", "AgEnT…") → { limits: [{ currency: "USDC", perCall: 500000n, daily: 10000000n }], … } */
  getPolicy(network: Network, agent: string): Promise<SpendPolicyRecord | null>;
  /** inserts or replaces the agent's policy */
  putPolicy(record: SpendPolicyRecord): Promise<void>;
  /** what the agent spent on `day` ("2026-11-24", UTC) per asset: one primary-key range read of the rollup */
  spentOn(network: Network, agent: string, day: string): Promise<DailySpend[]>;
  /** the agent's buyer payments not landed yet (index prepared_transactions_open_by_agent: open rows only) */
  inFlight(network: Network, agent: string): Promise<InFlightPayment[]>;
  /**
   * Inside a transaction: takes the agent's payment lock until commit without waiting; false when another request
   * holds it (execute then answers 409 rather than hold a connection while it waits).
   */
  tryLockPayments(network: Network, agent: string): Promise<boolean>;
  /** the agent's spend receipt of a settlement signature (index receipts_spend_tx_sig); null when none */
  spendReceiptOf(network: Network, agent: string, txSig: string): Promise<StoredReceipt | null>;
}
