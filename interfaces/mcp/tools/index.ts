import type { ToolDef } from '../context.ts';
import { discover, registryEndpoints } from './discovery.ts';
import { getIdentity, reputation, resolveIdentity, verifyIdentity } from './identity.ts';
import { createPaymentLink, payPaymentLink } from './payments.ts';
import { dailyTransactions, getReceipt, receipts, transactionHistory } from './receipts.ts';
import { registerAgent } from './register.ts';
import { checkTreasuryBalance, getSpendLimit, setSpendLimit, withdrawTreasury } from './treasury.ts';

/** fee-facilitator-mpp-tools §4.3: exactly these 17 tools, in the spec's order. */
export const TOOLS = [
  registerAgent,
  getIdentity,
  resolveIdentity,
  verifyIdentity,
  checkTreasuryBalance,
  payPaymentLink,
  createPaymentLink,
  withdrawTreasury,
  setSpendLimit,
  getSpendLimit,
  receipts,
  getReceipt,
  transactionHistory,
  dailyTransactions,
  discover,
  registryEndpoints,
  reputation,
] as unknown as readonly ToolDef[];
