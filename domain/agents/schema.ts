import { z } from 'zod';
import { Network, StableSymbol } from '../shared/network.ts';
import { Address } from '../shared/address.ts';

export interface AgentRecord {
  mint: string;
  network: Network;
  owner: string;
  name: string | null;
  uri: string | null;
  treasury: string;
  executive: string | null;
  source: 'recorded' | 'prepared';
  /** the principal that recorded it and owns it ("wallet:…", "key:…"); null for a legacy row nobody adopted yet */
  ownerPrincipal: string | null;
  registeredAt: Date;
  /**
   * When the ledger was seen holding the agent's Metaplex Core AssetV1 with `owner` as its owner (DECISIONS "Agents,
   * submissions and events"); null for a row recorded before records were checked, until the proof job or a first use
   * finds the asset. No payment is taken into the treasury of an agent without it.
   */
  provenAt: Date | null;
}

export const RecordAgentInput = z.strictObject({
  mint: Address,
  owner: Address,
  name: z.string().min(1).max(200).optional(),
  uri: z.url().max(2048).optional(),
});
export type RecordAgentInput = z.input<typeof RecordAgentInput>;

export const AgentMintInput = z.object({ mint: Address });

/** DECISIONS "Prepare / submit / events": the agent record. */
export const Agent = z.object({
  mint: z.string(),
  network: Network,
  owner: z.string(),
  name: z.string().nullable(),
  uri: z.string().nullable(),
  treasury: z.string(),
  executive: z.string().nullable(),
  delegations: z.array(
    z.object({ stable_symbol: StableSymbol, delegate: z.string(), allowance_atomic: z.string() }),
  ),
  source: z.enum(['recorded', 'prepared']),
  registered_at: z.string(),
  /**
   * When the ledger was seen holding its Metaplex Core asset with its owner; null: not proven (a row recorded before
   * records were checked) — no link may name it and its links take no payments (DECISIONS "Agents, submissions and events").
   */
  proven_at: z.string().nullable(),
});
export type Agent = z.infer<typeof Agent>;
