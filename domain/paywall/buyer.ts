import type { AgentRecord } from '../agents/schema.ts';
import type { Ledger } from '../ports/ledger.ts';
import type { Store } from '../ports/store.ts';
import { type DecodedTransaction, decodeTransaction } from '../facilitator/decode.ts';
import { decodeTokenAccount } from '../shared/token-account.ts';
import { associatedTokenAccount } from '../treasury/derive.ts';
import type { Call } from './call.ts';

// The buyer side of a paid call. A payment whose seller leg debits an agent's treasury token account (its
// executive signing as SPL delegate — `createPayingFetch({ agent })`, or the buyer/payment route's layout) is the buyer
// agent's spend: the recorder writes its spend receipt beside the seller's earn receipt. A wallet paying from its own
// token account is nobody's agent: no spend receipt.

/** SPL Token / Token-2022 TransferChecked */
const TRANSFER_CHECKED = 12;

/** The recorded agent (on the link's network) whose treasury paid the call's seller leg; null for a wallet's payment. */
export async function buyerAgentOf(call: Call, deps: { store: Store; ledger: Ledger | undefined }): Promise<AgentRecord | null> {
  if (!deps.ledger) return null;
  const { accept, link } = call;
  let decoded: DecodedTransaction;
  try {
    decoded = decodeTransaction(Uint8Array.from(Buffer.from(call.transaction, 'base64')));
  } catch {
    return null;
  }
  // The seller leg: the first TransferChecked of the offer's asset (the fee leg follows it, fee-facilitator-mpp-tools §2.3).
  const leg = decoded.instructions.find((i) => i.data[0] === TRANSFER_CHECKED && i.accounts[1] === accept.asset && i.accounts.length >= 4);
  if (!leg) return null;
  const [source, mint, , authority] = leg.accounts as [string, string, string, string];
  if (source === associatedTokenAccount(authority, mint, leg.programId)) return null;
  // A ledger failure is thrown: the recorder logs the spend receipt it could not write (the payment is recorded anyway).
  const account = decodeTokenAccount(await deps.ledger.getAccount(source));
  if (!account) return null;
  const agent = await deps.store.agents.findByTreasury(link.network, account.owner);
  return agent && agent.mint !== link.ownerAgent ? agent : null;
}
