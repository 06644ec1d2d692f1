import { z } from 'zod';
import { Address } from '../shared/address.ts';
import { Network } from '../shared/network.ts';
import { Cursor, listEnvelope } from '../shared/pagination.ts';

// fee-facilitator-mpp-tools §4.3 svc_discover: one search over two catalogues — the gateway's public
// payment links (`source: "svc"`; a link is public when its owner sets metadata.discoverable = true) and the
// registration documents of the agents the gateway knows (`source: "registry"`).

export const DiscoverySource = z.enum(['svc', 'registry']).describe('svc (public payment links of this gateway) or registry (agents’ registration documents)');

/** GET /v1/discover */
export const DiscoverInput = z.object({
  q: z.string().trim().max(200).describe('words matched against name, description and capabilities (all must match, any case)').optional(),
  capability: z.string().trim().min(1).max(100).describe('a declared capability, e.g. weather.forecast').optional(),
  max_price_usd: z
    .string()
    .regex(/^\d{1,12}(\.\d{1,6})?$/, 'Expected a decimal amount of US dollars, e.g. "0.05"')
    .describe('only paid services at or below this price (registry items have no price and are kept)')
    .optional(),
  source: DiscoverySource.describe('one catalogue only').optional(),
  limit: z.coerce.number().int().min(1).max(100).default(20).describe('page size: default 20, at most 100'),
  cursor: Cursor.describe('the next_cursor of the previous page').optional(),
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

export const DiscoverItem = z
  .object({
    source: DiscoverySource,
    id: z.string().describe('svc: the payment link id; registry: the agent mint'),
    network: z.string().describe('chain-devnet or chain-mainnet'),
    name: z.string().describe('display name'),
    description: z.string().nullable().describe('free text; null when none'),
    capabilities: z.array(z.string()).describe('capability names'),
    agent: z.string().describe('the agent selling (svc) or described (registry)'),
    url: z.string().describe("svc: the link's share_url (its paywall); registry: the registration document URL"),
    method: z.string().nullable().describe('svc only'),
    price_usd: z.string().nullable().describe('price in US dollars, decimal string; null when not fixed'),
    currencies: z.array(z.string()).describe('stables accepted'),
    protocol: z.enum(['x402', 'mpp']).nullable().describe('x402 or mpp; null when unknown'),
    settled_calls: z.number().int().nullable().describe('svc: paid calls settled so far'),
  })
  .describe('A paid service found by discovery.');
export type DiscoverItem = z.infer<typeof DiscoverItem>;

/** DECISIONS "Wire conventions": the list envelope; pages go on while the catalogues' newest entries hold matches */
export const DiscoverResult = listEnvelope(DiscoverItem);
export type DiscoverResult = z.infer<typeof DiscoverResult>;

// The bazaar's discovery routes (x402 specs/extensions/bazaar.md "Optional Discovery Endpoints"): the same catalogue of
// public payment links, in the shapes @x402/extensions' withBazaar client reads. Only x402 links are listed there (an
// MPP link takes no x402 payment); filters are the spec's.

/** a lower-case protocol word (type, scheme): anything else is a malformed filter, not one that lists nothing */
const Word = z.string().regex(/^[a-z][a-z0-9_-]{0,19}$/, 'Expected a lower-case word, e.g. "exact"');

const BazaarFilters = {
  type: Word.describe('resource type: http (the only one listed); another lists nothing').optional(),
  payTo: Address.describe("the x402 payTo: a seller agent's treasury (a Solana address)").optional(),
  scheme: Word.describe('payment scheme: exact (the only one offered); another lists nothing').optional(),
  network: z
    .string()
    .regex(/^[a-z0-9-]{3,32}(:[A-Za-z0-9_-]{1,64})?$/, 'Expected a CAIP-2 network (solana:EtWT…) or an x402 v1 name (solana-devnet)')
    .describe('CAIP-2 (solana:EtWT…) or x402 v1 name (solana-devnet); default both networks; another chain lists nothing')
    .optional(),
  extensions: z
    .string()
    .regex(/^[A-Za-z0-9._-]{1,64}$/, 'Expected an extension key, e.g. "bazaar"')
    .describe('an extension key each listed resource declares: bazaar (all of them)')
    .optional(),
  limit: z.coerce.number().int().min(1).max(100).default(20).describe('page size: default 20, at most 100'),
};

/** GET /discovery/resources: pages by offset, as the reference's list (pagination.total counts every match). */
export const BazaarListInput = z.object({ ...BazaarFilters, offset: z.coerce.number().int().min(0).max(100_000).default(0) });
export type BazaarListInput = z.input<typeof BazaarListInput>;

/** GET /discovery/search: the words of /v1/discover's `q` over the same catalogue, paged by an opaque cursor. */
export const BazaarSearchInput = z.object({
  ...BazaarFilters,
  query: z.string().trim().min(1).max(200).describe('words matched against name, description and capabilities (all must match, any case)'),
  cursor: Cursor.describe('pagination.cursor of the previous page').optional(),
});
export type BazaarSearchInput = z.input<typeof BazaarSearchInput>;

/** GET /x/openapi.json: the MPP discovery document of a network's public MPP links, or of one seller's (payTo). */
export const PaymentDocumentInput = z.object({
  network: Network.default('chain-mainnet').describe('the links of this network; default chain-mainnet, as the paywall'),
  payTo: Address.describe("one seller's links: its treasury (the x402 payTo, the MPP recipient)").optional(),
});
export type PaymentDocumentInput = z.input<typeof PaymentDocumentInput>;
