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
});
export type Agent = z.infer<typeof Agent>;
