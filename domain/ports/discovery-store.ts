import type { Network } from '../shared/network.ts';

// Issue 15: the two catalogues of svc_discover (fee-facilitator-mpp-tools §4.3), read through migration 0019's indexes.

/** An enabled payment link its owner listed (metadata.discoverable = true). */
export interface DiscoverableLinkRow {
  id: string;
  network: Network;
  label: string;
  ownerAgent: string;
  method: string;
  price: string;
  currency: string;
  amountAtomic: bigint;
  acceptsCurrencies: string[];
  protocol: 'x402' | 'mpp';
  metadata: Record<string, unknown>;
  settledCount: number;
}

/** A recorded agent with a registration document URI. */
export interface RegisteredAgentRow {
  mint: string;
  network: Network;
  name: string | null;
  uri: string;
  treasury: string;
  capabilities: string[];
  description: string | null;
}

export interface DiscoveryRepository {
  /** newest first */
  discoverableLinks(network: Network, limit: number): Promise<DiscoverableLinkRow[]>;
  /** newest first, with the identity profile's description and capabilities when one is set */
  registeredAgents(network: Network, limit: number): Promise<RegisteredAgentRow[]>;
}
