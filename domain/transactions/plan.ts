import type { TransactionInstruction } from '@solana/web3.js';
import type { Network, Stable } from '../shared/network.ts';
import type { GatewaySettings } from '../shared/settings.ts';
import type { Ledger } from '../ports/ledger.ts';
import type { AgentRecord } from '../agents/schema.ts';
import type { PreparedKind } from '../events/kinds.ts';

// Every prepare route is a builder — a pure function of (input, network, ledger reads) that returns a
// TransactionPlan (or a no-op). The TransactionService adds the blockhash, compiles the message, stores it with an
// event in phase `prepared` and answers the envelope of hosted-api §2.5; submit checks the signed bytes against it.

/** The ledger reads a builder may make (no writes, no sends). */
export type LedgerReads = Pick<Ledger, 'getAccount' | 'getMultipleAccounts' | 'getBalance' | 'getTokenBalances'>;

export interface BuildContext {
  network: Network;
  reads: LedgerReads;
  /** the curated stables of the network (hosted-api §4.3 provision) */
  stables: readonly Stable[];
  fee: GatewaySettings['fee'];
  /** the gateway's public base URL: agents/prepare and identity/prepare write it into a hosted registration uri */
  baseUrl?: string;
  /** the command that adds missing well-known programs to this network's ledger (GatewaySettings.programsCommand) */
  programsCommand?: string | undefined;
}

/** A builder of an agent route also gets the agent (recorded, the caller's). */
export interface AgentBuildContext extends BuildContext {
  agent: AgentRecord;
}

export interface TransactionPlan {
  kind: PreparedKind;
  /** the agent asset the event is about */
  agent: string;
  /** first account of the message and first signer */
  feePayer: string;
  instructions: TransactionInstruction[];
  /**
   * 64-byte secret keys of fresh accounts the gateway signs for before handing the transaction out (the new asset of
   * agents/prepare). Never a user's key: such a key only authorises its account's creation.
   */
  presigners?: Uint8Array[];
  /** hosted-api §2.5 `echo`: function-specific extras (asset, treasury, token account, …) */
  echo: Record<string, unknown>;
  /** the event's metadata (kind-specific, e.g. delegation events carry stable_symbol and allowance_atomic) */
  metadata: Record<string, unknown>;
  /** top-level envelope extras: will_create_destination_ata, fee_padding_atoms, identity, warnings */
  extras?: PlanExtras;
}

export interface PlanExtras {
  will_create_destination_ata?: boolean;
  /** decimal string of atomic units added to an allowance for the protocol fee */
  fee_padding_atoms?: string;
  /** agents/prepare: whether the identity instruction is in the transaction */
  identity?: 'registered' | 'not_registered';
  warnings?: string[];
}

/** Nothing to do (provision when every account exists, withdraw-all at zero): no event, no transaction. */
export interface NoOpPlan {
  kind: PreparedKind;
  agent: string;
  noOp: true;
  echo: Record<string, unknown>;
  extras?: PlanExtras;
}

export type PlanOutcome = TransactionPlan | NoOpPlan;

export const isNoOp = (p: PlanOutcome): p is NoOpPlan => 'noOp' in p;
