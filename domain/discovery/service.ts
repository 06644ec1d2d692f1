import { z } from 'zod';
import { shareUrl } from '../payment-links/service.ts';
import type { Caller } from '../access/ownership.ts';
import type { DiscoverableLinkFilter, DiscoveryRepository, DiscoverableLinkRow, RegisteredAgentRow } from '../ports/discovery-store.ts';
import { atomicToDecimal, decimalToAtomic } from '../shared/money.ts';
import { findStable, Network as NetworkSchema, type Network } from '../shared/network.ts';
import { parseInput } from '../shared/validation.ts';
import { decodeCursor, encodeCursor } from '../shared/pagination.ts';
import {
  BazaarListInput,
  BazaarSearchInput,
  DiscoverInput,
  PaymentDocumentInput,
  DiscoverySource,
  PublicDiscoverInput,
  type DiscoverItem,
  type DiscoverResult,
} from './schema.ts';
import { BAZAAR_KEY, discoveryOf } from './bazaar.ts';
import { paymentDocument, paymentOffers } from './openapi.ts';
import { acceptsFor, type OfferTerms } from '../paywall/offer.ts';
import { networkFromX402, type X402RequirementsV2 } from '../facilitator/wire.ts';

/** where the next page starts: a catalogue and an offset among its newest entries */
const DiscoverCursor = z.object({ source: DiscoverySource, offset: z.number().int().min(0) });
type DiscoverCursor = z.infer<typeof DiscoverCursor>;

/** How many of each catalogue's newest entries a search reads at most. */
const CATALOGUE_WINDOW = 500;

/**
 * The reads of one catalogue: chunks of its newest entries, the first of `limit` entries, each next one twice the last,
 * until `limit` matches are found or CATALOGUE_WINDOW entries were read (bench:growth: a search used to read
 * the whole window whatever it matched; a page without a search is its first chunk alone). Offsets of the chunks read.
 */
export function discoverChunks(limit: number, start = 0): Array<{ limit: number; offset: number }> {
  const chunks: Array<{ limit: number; offset: number }> = [];
  for (let offset = start, size = Math.max(1, Math.min(limit, CATALOGUE_WINDOW)); offset < CATALOGUE_WINDOW; offset += size, size *= 2) {
    chunks.push({ offset, limit: Math.min(size, CATALOGUE_WINDOW - offset) });
  }
  return chunks;
}

/** the most links one MPP discovery document lists: the newest of the network (or of the seller) */
export const DOCUMENT_MAX_LINKS = 500;

export interface DiscoveryDeps {
  store: { discovery: DiscoveryRepository };
  baseUrl: string;
  /** the gateway's version, the discovery document's info.version */
  version?: string;
  /**
   * The paywall's offer terms of a network (fee payer, fee), for the accepts the bazaar lists state; undefined when this
   * process runs no paywall (the lists are then empty: nothing here could be paid). Without the blockhash: a listed
   * offer is read long after it was made.
   */
  offerTerms?: (network: Network) => Promise<OfferTerms | undefined>;
}

/** A catalogue entry in the bazaar's DiscoveryResource shape (@x402/extensions 2.27). */
export interface BazaarResource {
  resource: string;
  type: 'http';
  x402Version: 2;
  accepts: X402RequirementsV2[];
  lastUpdated: string;
  description?: string;
  mimeType?: string;
  serviceName?: string;
  tags?: string[];
  iconUrl?: string;
  extensions: Record<string, unknown>;
}

/** where a bazaar search's next page starts: a network and an offset among its newest discoverable links */
const BazaarCursor = z.object({ network: NetworkSchema, offset: z.number().int().min(0) });

/** GET /v1/discover: both catalogues of the caller's network, public to every key of it (nothing owned is shown). */
export class DiscoveryService {
  constructor(private readonly deps: DiscoveryDeps) {}

  async discover(caller: Caller, input: DiscoverInput): Promise<DiscoverResult> {
    return this.search(caller.network, parseInput(DiscoverInput, input));
  }

  /** GET /v1/discover/public: the same catalogues with no key, on the network the query names. */
  async discoverPublic(input: PublicDiscoverInput): Promise<DiscoverResult> {
    const { network, ...q } = parseInput(PublicDiscoverInput, input);
    return this.search(network, q);
  }

  private async search(network: Network, q: z.output<typeof DiscoverInput>): Promise<DiscoverResult> {
    const words = (q.q ?? '').toLowerCase().split(/\s+/).filter(Boolean);
    const maxPrice = q.max_price_usd === undefined ? null : decimalToAtomic(q.max_price_usd, 6);
    const matches = (item: DiscoverItem): boolean => {
      const text = [item.name, item.description ?? '', ...item.capabilities].join(' ').toLowerCase();
      if (!words.every((w) => text.includes(w))) return false;
      if (q.capability && !item.capabilities.some((c) => c.toLowerCase() === q.capability!.toLowerCase())) return false;
      if (maxPrice !== null && item.price_usd !== null && decimalToAtomic(item.price_usd, 6)! > maxPrice) return false;
      return true;
    };
    // svc's links first, then the registry's agents, each newest first: the first `limit` matches of the newest
    // CATALOGUE_WINDOW entries of each, read chunk by chunk until the page is full. One match more says whether
    // another page exists; the cursor is where that match stands (DECISIONS "Wire conventions": the list envelope).
    const from = q.cursor ? decodeCursor(DiscoverCursor, q.cursor) : undefined;
    const want = q.limit + 1;
    const found: Array<{ item: DiscoverItem; at: DiscoverCursor }> = [];
    const seen = new Set<string>(); // an entry added between two chunks shifts the offsets by one: never list one twice
    const scan = async <R>(source: DiscoverCursor['source'], read: (limit: number, offset: number) => Promise<R[]>, toItem: (row: R) => DiscoverItem) => {
      if (q.source !== undefined && q.source !== source) return;
      if (from && source === 'svc' && from.source === 'registry') return;
      const start = from && from.source === source ? from.offset : 0;
      for (const chunk of discoverChunks(want, start)) {
        if (found.length >= want) return;
        const rows = await read(chunk.limit, chunk.offset);
        for (const [i, row] of rows.entries()) {
          const item = toItem(row);
          if (seen.has(`${item.source}:${item.id}`) || !matches(item)) continue;
          seen.add(`${item.source}:${item.id}`);
          if (found.push({ item, at: { source, offset: chunk.offset + i } }) >= want) return;
        }
        if (rows.length < chunk.limit) return;
      }
    };
    await scan(
      'svc',
      (limit, offset) => this.deps.store.discovery.discoverableLinks(network, limit, offset),
      (row) => this.linkItem(row),
    );
    await scan('registry', (limit, offset) => this.deps.store.discovery.registeredAgents(network, limit, offset), registryItem);
    const next = found.length > q.limit ? found[q.limit]!.at : null;
    return { data: found.slice(0, q.limit).map((f) => f.item), next_cursor: next && encodeCursor(next), has_more: next !== null };
  }

  /** GET /discovery/resources: the x402 links of the catalogue, both networks (mainnet first) unless one is named. */
  async bazaarResources(input: BazaarListInput) {
    const q = parseInput(BazaarListInput, input);
    const scope = this.bazaarScope(q);
    const pagination = { limit: q.limit, offset: q.offset, total: 0 };
    if (!scope) return { x402Version: 2 as const, items: [] as BazaarResource[], pagination };
    const items: BazaarResource[] = [];
    let skip = q.offset;
    for (const network of scope.networks) {
      const count = await this.deps.store.discovery.countDiscoverableLinks(network, scope.filter);
      pagination.total += count;
      if (items.length >= q.limit || skip >= count) {
        skip = Math.max(0, skip - count);
        continue;
      }
      const rows = await this.deps.store.discovery.discoverableLinks(network, q.limit - items.length, skip, scope.filter);
      skip = 0;
      items.push(...(await this.bazaarItems(network, rows)));
    }
    return { x402Version: 2 as const, items, pagination };
  }

  /**
   * GET /discovery/search: /v1/discover's word match over the same catalogue (its newest CATALOGUE_WINDOW links per
   * network, read chunk by chunk), paged by an opaque cursor.
   */
  async bazaarSearch(input: BazaarSearchInput) {
    const q = parseInput(BazaarSearchInput, input);
    const scope = this.bazaarScope(q);
    if (!scope) return { x402Version: 2 as const, resources: [] as BazaarResource[], partialResults: false, pagination: { limit: q.limit, cursor: null } };
    const words = q.query.toLowerCase().split(/\s+/).filter(Boolean);
    const from = q.cursor ? decodeCursor(BazaarCursor, q.cursor) : undefined;
    const want = q.limit + 1;
    const found: Array<{ row: DiscoverableLinkRow; at: z.infer<typeof BazaarCursor> }> = [];
    const networks = from ? scope.networks.slice(Math.max(0, scope.networks.indexOf(from.network))) : scope.networks;
    const seen = new Set<string>(); // a link added between two chunks shifts the offsets by one: never list one twice
    let windowFull = false; // a network holds links past the searched window: their matches are not in the results
    for (const network of networks) {
      const start = from?.network === network ? from.offset : 0;
      const chunks = discoverChunks(want, start);
      for (const [n, chunk] of chunks.entries()) {
        if (found.length >= want) break;
        const rows = await this.deps.store.discovery.discoverableLinks(network, chunk.limit, chunk.offset, scope.filter);
        if (n === chunks.length - 1 && rows.length === chunk.limit) windowFull = true;
        for (const [i, row] of rows.entries()) {
          const item = this.linkItem(row);
          const text = [item.name, item.description ?? '', ...item.capabilities].join(' ').toLowerCase();
          if (seen.has(`${network}:${row.id}`) || !words.every((w) => text.includes(w))) continue;
          seen.add(`${network}:${row.id}`);
          if (found.push({ row, at: { network, offset: chunk.offset + i } }) >= want) break;
        }
        if (rows.length < chunk.limit) break;
      }
      if (found.length >= want) break;
    }
    const next = found.length > q.limit ? found[q.limit]!.at : null;
    const page = found.slice(0, q.limit);
    const resources: BazaarResource[] = [];
    for (const network of scope.networks) {
      resources.push(
        ...(await this.bazaarItems(
          network,
          page.filter((f) => f.at.network === network).map((f) => f.row),
        )),
      );
    }
    return {
      x402Version: 2 as const,
      resources,
      // the reference's partialResults: matches may exist that no page will list (past the newest CATALOGUE_WINDOW)
      partialResults: windowFull,
      pagination: { limit: q.limit, cursor: next && encodeCursor(next) },
    };
  }

  /**
   * GET /x/openapi.json: the OpenAPI document of the catalogue's MPP links with their `x-payment-info` (openapi.ts), so
   * mppx discovery lists the sellers paid on that rail; the x402 links are the bazaar's (above).
   */
  async paymentDocument(input: PaymentDocumentInput): Promise<Record<string, unknown>> {
    const q = parseInput(PaymentDocumentInput, input);
    const filter: DiscoverableLinkFilter = { protocol: 'mpp', ...(q.payTo !== undefined ? { payTo: q.payTo } : {}) };
    const terms = await this.deps.offerTerms?.(q.network);
    const rows = terms ? await this.deps.store.discovery.discoverableLinks(q.network, DOCUMENT_MAX_LINKS, 0, filter) : [];
    return paymentDocument({
      baseUrl: this.deps.baseUrl,
      version: this.deps.version ?? '1.0.0',
      network: q.network,
      links: rows.map((link) => ({ link, offers: terms ? paymentOffers(link, acceptsFor(link, terms)) : [] })),
    });
  }

  /** The networks and filter a bazaar query names; undefined when it can list nothing here. */
  private bazaarScope(q: {
    type?: string | undefined;
    scheme?: string | undefined;
    network?: string | undefined;
    extensions?: string | undefined;
    payTo?: string | undefined;
  }) {
    if (!this.deps.offerTerms) return undefined;
    if ((q.type !== undefined && q.type !== 'http') || (q.scheme !== undefined && q.scheme !== 'exact')) return undefined;
    if (q.extensions !== undefined && q.extensions !== BAZAAR_KEY) return undefined;
    const named = q.network === undefined ? undefined : networkFromX402(q.network);
    if (q.network !== undefined && !named) return undefined;
    const filter: DiscoverableLinkFilter = { protocol: 'x402', ...(q.payTo !== undefined ? { payTo: q.payTo } : {}) };
    return { networks: named ? [named] : (['chain-mainnet', 'chain-devnet'] as Network[]), filter };
  }

  /** Catalogue rows of one network as bazaar resources: the paywall's accepts, its 402's resource and declaration. */
  private async bazaarItems(network: Network, rows: DiscoverableLinkRow[]): Promise<BazaarResource[]> {
    if (rows.length === 0) return [];
    const terms = await this.deps.offerTerms?.(network);
    if (!terms) return [];
    return rows.map((row) => {
      const discovery = discoveryOf(row);
      return {
        resource: shareUrl(this.deps.baseUrl, row.network, row.id),
        type: 'http',
        x402Version: 2,
        accepts: acceptsFor(row, terms),
        lastUpdated: row.updatedAt.toISOString(),
        description: row.label,
        mimeType: row.response.mimeType,
        ...discovery?.resource,
        extensions: discovery?.extensions ?? {},
      };
    });
  }

  private linkItem(r: DiscoverableLinkRow): DiscoverItem {
    const stable = findStable(r.network, r.currency);
    return {
      source: 'svc',
      id: r.id,
      network: r.network,
      name: r.label,
      description: typeof r.metadata.description === 'string' ? r.metadata.description : null,
      capabilities: strings(r.metadata.capabilities),
      agent: r.ownerAgent,
      url: shareUrl(this.deps.baseUrl, r.network, r.id),
      method: r.method,
      // the stables are dollar-pegged: one unit is one US dollar
      price_usd: stable ? atomicToDecimal(r.amountAtomic, stable.decimals) : null,
      currencies: [r.currency, ...r.acceptsCurrencies.filter((c) => c !== r.currency)],
      protocol: r.protocol,
      settled_calls: r.settledCount,
    };
  }
}

function registryItem(r: RegisteredAgentRow): DiscoverItem {
  return {
    source: 'registry',
    id: r.mint,
    network: r.network,
    name: r.name ?? r.mint,
    description: r.description,
    capabilities: r.capabilities,
    agent: r.mint,
    url: r.uri,
    method: null,
    price_usd: null,
    currencies: [],
    protocol: null,
    settled_calls: null,
  };
}

function strings(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string').slice(0, 32) : [];
}
