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

export const RecordAgentInput = z
  .strictObject({
    mint: Address.describe('address of the agent’s Metaplex Core asset on your network'),
    owner: Address.describe('the asset’s owner; the ledger must show this owner'),
    name: z.string().min(1).max(200).describe('display name; default the asset’s').optional(),
    uri: z.url().max(2048).describe('registration document URI; default the asset’s').optional(),
  })
  .describe('An agent minted outside the API, to record (DECISIONS "Agents, submissions and events").');
export type RecordAgentInput = z.input<typeof RecordAgentInput>;

export const AgentMintInput = z.object({ mint: Address.describe('the agent’s mint (its Metaplex Core asset address)') });

/** DECISIONS "Prepare / submit / events": the agent record. */
export const Agent = z
  .object({
    mint: z.string().describe('the agent’s mint (Metaplex Core asset address)'),
    network: Network,
    owner: z.string().describe('the asset’s owner wallet'),
    name: z.string().nullable().describe('display name; null when unknown'),
    uri: z.string().nullable().describe('registration document URI; null when unknown'),
    treasury: z.string().describe('the treasury address (the asset-signer account) holding the agent’s funds'),
    executive: z.string().nullable().describe('the executive wallet bound to the agent; null when none'),
    delegations: z
      .array(
        z
          .object({
            stable_symbol: StableSymbol,
            delegate: z.string().describe('the wallet allowed to spend from the treasury'),
            allowance_atomic: z.string().describe('remaining allowance in atomic units, decimal string'),
          })
          .describe('A token delegation from the treasury.'),
      )
      .describe('active token delegations of the treasury'),
    source: z.enum(['recorded', 'prepared']).describe('recorded (POST /v1/agents/record) or prepared (minted through POST /v1/agents/prepare)'),
    registered_at: z.string().describe('ISO 8601 time the gateway first knew the agent'),
    /**
     * When the ledger was seen holding its Metaplex Core asset with its owner; null: not proven (a row recorded before
     * records were checked) — no link may name it and its links take no payments (DECISIONS "Agents, submissions and events").
     */
    proven_at: z
      .string()
      .nullable()
      .describe('ISO 8601 time the ledger was seen holding the asset with its owner; null: not proven, its links take no payments'),
  })
  .describe('An agent record (DECISIONS "Prepare / submit / events").');
export type Agent = z.infer<typeof Agent>;
