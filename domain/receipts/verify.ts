import type { LedgerTransaction, TransactionTokenBalance } from '../ports/ledger.ts';
import { treasuryOf } from '../treasury/derive.ts';
import { settlementSignature, type Receipt, type VerificationStatus } from './schema.ts';
import { newId } from '../shared/ids.ts';
import type { Network } from '../shared/network.ts';
import type { VerificationUpdate } from '../ports/store.ts';
import { newEvent } from '../events/kinds.ts';
import type { NewEvent } from '../events/schema.ts';

// A receipt's money claim checked against the ledger. The transaction must exist, have succeeded, and
// have moved price.amount_atomic of price.asset into the seller's treasury token account — for an earn receipt the
// agent's own treasury; for a spend receipt out of the agent's treasury (gross: seller leg + fee leg) — and, when the
// price has a fee, price.fee into the fee authority's token account of the same mint.

/** Retry schedule of a transaction the ledger does not know (yet): seconds after each attempt. */
export const VERIFY_RETRY_SECONDS = [10, 30, 60, 300, 900, 3600, 10_800, 21_600] as const;

export interface Check {
  status: VerificationStatus;
  reason: string | null;
}

/** The token-balance change of `owner`'s accounts of `mint` in the transaction (post − pre). */
function delta(tx: LedgerTransaction, owner: string, mint: string): bigint {
  const sum = (list: TransactionTokenBalance[]) => list.filter((b) => b.owner === owner && b.mint === mint).reduce((a, b) => a + b.amount, 0n);
  return sum(tx.postTokenBalances) - sum(tx.preTokenBalances);
}

/** Decides a receipt against its landed transaction (null: the ledger does not know the signature). */
export function checkReceipt(receipt: Receipt, tx: LedgerTransaction | null, attemptsSoFar: number): Check {
  const sig = settlementSignature(receipt);
  if (sig === null) return { status: 'not_applicable', reason: 'The receipt names no transaction.' };
  if (tx === null) {
    return attemptsSoFar + 1 >= VERIFY_RETRY_SECONDS.length
      ? { status: 'mismatch', reason: `Transaction ${sig} was not found on the ledger after ${attemptsSoFar + 1} checks.` }
      : { status: 'pending', reason: `Transaction ${sig} is not on the ledger yet.` };
  }
  if (tx.err !== null) return { status: 'mismatch', reason: `Transaction ${sig} failed on the ledger: ${JSON.stringify(tx.err)}.` };
  const { price } = receipt;
  const amount = BigInt(price.amount_atomic);
  const fee = BigInt(price.fee);
  const treasury = treasuryOf(receipt.agent);
  const moved = delta(tx, treasury, price.asset);
  if (receipt.kind === 'earn') {
    if (moved !== amount) {
      return { status: 'mismatch', reason: `The transaction moved ${moved} of ${price.asset} to the treasury ${treasury}, the receipt says ${amount}.` };
    }
  } else if (-moved !== amount + fee) {
    return {
      status: 'mismatch',
      reason: `The transaction moved ${-moved} of ${price.asset} out of the treasury ${treasury}, the receipt says ${amount + fee} (gross).`,
    };
  }
  if (fee > 0n) {
    if (!price.feeAuthority) return { status: 'mismatch', reason: 'The price has a fee but names no feeAuthority.' };
    const feeMoved = delta(tx, price.feeAuthority, price.asset);
    if (feeMoved !== fee) {
      return { status: 'mismatch', reason: `The fee leg moved ${feeMoved} of ${price.asset} to ${price.feeAuthority}, the receipt says ${fee}.` };
    }
  }
  return {
    status: 'verified',
    reason: `Transaction ${sig} succeeded and moved ${amount} of ${price.asset} ${receipt.kind === 'earn' ? 'to' : 'from'} the treasury${fee > 0n ? ` and ${fee} to the fee authority` : ''}.`,
  };
}

/** When a pending check runs again, after `attempts` checks. */
export function nextCheckAt(now: Date, attempts: number): Date {
  const i = Math.min(Math.max(attempts - 1, 0), VERIFY_RETRY_SECONDS.length - 1);
  return new Date(now.getTime() + VERIFY_RETRY_SECONDS[i]! * 1000);
}

/**
 * DECISIONS "Receipts": a settlement this gateway's own facilitator saw confirmed on the ledger — after verifying the
 * very legs the price block states (amount to the payee, fee to the fee authority) — is the ledger check of its
 * receipts: they are recorded `verified`, with no second read of the transaction.
 */
export function confirmedBySettlement(receipt: Receipt): Check {
  const sig = settlementSignature(receipt);
  if (sig === null) return { status: 'not_applicable', reason: 'The receipt names no transaction.' };
  const { price } = receipt;
  const fee = BigInt(price.fee);
  return {
    status: 'verified',
    reason: `Transaction ${sig} was settled by this gateway's facilitator, which saw it confirmed on the ledger moving ${price.amount_atomic} of ${price.asset} ${receipt.kind === 'earn' ? 'to' : 'from'} the treasury${fee > 0n ? ` and ${fee} to the fee authority` : ''}.`,
  };
}

/**
 * The receipt.verified / receipt.mismatch event of a decided check (the receipts job's, or the record transaction's for
 * a settlement our facilitator saw confirmed); null while pending or for a receipt without a settlement.
 */
export function verificationEvent(
  e: { network: Network; owner: string | null; receipt: Receipt; source: string; now: Date },
  v: VerificationUpdate,
): NewEvent | null {
  const sig = settlementSignature(e.receipt);
  if (!sig || (v.status !== 'verified' && v.status !== 'mismatch')) return null;
  const fields = {
    id: newId(e.now.getTime()),
    network: e.network,
    agentAsset: e.receipt.agent,
    owner: e.owner,
    phase: 'confirmed' as const,
    createdAt: e.now,
    confirmedAt: e.now,
    signature: sig,
  };
  const metadata = { receipt_hash: e.receipt.receipt_hash, nonce: e.receipt.nonce, tx_sig: sig, source: e.source, verification: v.status, reason: v.reason };
  return v.status === 'verified' ? newEvent('receipt.verified', fields, metadata) : newEvent('receipt.mismatch', fields, metadata);
}
