import { z } from 'zod';
import { Network } from '../shared/network.ts';
import { Cursor, listEnvelope } from '../shared/pagination.ts';

// fee-facilitator-mpp-tools §4.3 svc_discover: one search over two catalogues — the gateway's public
// payment links (`source: "svc"`; a link is public when its owner sets metadata.discoverable = true) and the
// registration documents of the agents the gateway knows (`source: "registry"`).

export const DiscoverySource = z.enum(['svc', 'registry']);

/** GET /v1/discover */
export const DiscoverInput = z.object({
  q: z.string().trim().max(200).optional().describe('words matched against name, description and capabilities (all must match, any case)'),
  capability: z.string().trim().min(1).max(100).optional().describe('a declared capability, e.g. weather.forecast'),
  max_price_usd: z
    .string()
    .regex(/^\d{1,12}(\.\d{1,6})?$/, 'Expected a decimal amount of US dollars, e.g. "0.05"')
    .optional()
    .describe('only paid services at or below this price (registry items have no price and are kept)'),
  source: DiscoverySource.optional().describe('one catalogue only'),
  limit: z.coerce.number().int().min(1).max(100).default(20),
  cursor: Cursor.optional().describe('the next_cursor of the previous page'),
});
export type DiscoverInput = z.input<typeof DiscoverInput>;

/**
 * GET /v1/discover/public: the same search with no key (fee-facilitator-mpp-tools §4.3: svc_discover is public), on
 * the network the query names — chain-mainnet unless named, as the paywall's and registration documents' URLs.
 */
export const PublicDiscoverInput = DiscoverInput.extend({
  network: Network.default('chain-mainnet').describe('the catalogues of this network (a key’s prefix decides it on GET /v1/discover)'),
});
export type PublicDiscoverInput = z.input<typeof PublicDiscoverInput>;

export const DiscoverItem = z.object({
  source: DiscoverySource,
  /** svc: the payment link id; registry: the agent mint */
  id: z.string(),
  network: z.string(),
  name: z.string(),
  description: z.string().nullable(),
  capabilities: z.array(z.string()),
  /** the agent selling (svc) or described (registry) */
  agent: z.string(),
  /** svc: the link's share_url (its paywall); registry: the registration document URL */
  url: z.string(),
  /** svc only */
  method: z.string().nullable(),
  price_usd: z.string().nullable(),
  currencies: z.array(z.string()),
  protocol: z.enum(['x402', 'mpp']).nullable(),
  /** svc: paid calls settled so far */
  settled_calls: z.number().int().nullable(),
});
export type DiscoverItem = z.infer<typeof DiscoverItem>;

/** DECISIONS "Wire conventions": the list envelope; pages go on while the catalogues' newest entries hold matches */
export const DiscoverResult = listEnvelope(DiscoverItem);
export type DiscoverResult = z.infer<typeof DiscoverResult>;
