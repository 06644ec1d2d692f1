import type { Network } from '../shared/network.ts';
import type { PaymentLinkRecord } from '../payment-links/schema.ts';

// The two catalogues of svc_discover (fee-facilitator-mpp-tools §4.3), read through migration 0019's indexes.

/** An enabled payment link its owner listed (metadata.discoverable = true). */
/** what the discovery catalogue reads of a payment link: the fields of the one link record */
export type DiscoverableLinkRow = Pick<
  PaymentLinkRecord,
  | 'id'
  | 'network'
  | 'label'
  | 'ownerAgent'
  | 'method'
  | 'price'
  | 'currency'
  | 'amountAtomic'
  | 'acceptsCurrencies'
  | 'protocol'
  | 'metadata'
  | 'settledCount'
  | 'response'
  | 'updatedAt'
>;

/** Narrows the discoverable links (the bazaar lists' filters): paid to this treasury, on this rail. */
export interface DiscoverableLinkFilter {
  /** the x402 payTo: the owner agent's treasury, e.g. "9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin" */
  payTo?: string;
  protocol?: 'x402' | 'mpp';
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
  /** newest first, skipping the `offset` newest */
  discoverableLinks(network: Network, limit: number, offset?: number, filter?: DiscoverableLinkFilter): Promise<DiscoverableLinkRow[]>;
  /** how many discoverable links `discoverableLinks` walks through with this filter */
  countDiscoverableLinks(network: Network, filter?: DiscoverableLinkFilter): Promise<number>;
  /** newest first (skipping the `offset` newest), with the identity profile's description and capabilities when one is set */
  registeredAgents(network: Network, limit: number, offset?: number): Promise<RegisteredAgentRow[]>;
}
