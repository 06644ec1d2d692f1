import { shareUrl } from '../payment-links/service.ts';
import type { Caller } from '../access/ownership.ts';
import type { DiscoveryRepository, DiscoverableLinkRow, RegisteredAgentRow } from '../ports/discovery-store.ts';
import { atomicToDecimal, decimalToAtomic } from '../shared/money.ts';
import { findStable } from '../shared/network.ts';
import { parseInput } from '../shared/validation.ts';
import { DiscoverInput, type DiscoverItem, type DiscoverResult } from './schema.ts';

/** How many of each catalogue's newest entries a search reads before filtering. */
const CATALOGUE_WINDOW = 500;

/**
 * How many of each catalogue's newest entries `discover` reads: a search (words, capability, price) filters the
 * CATALOGUE_WINDOW newest; without one, the answer is the first `limit` entries (svc before registry), so `limit` of each
 * is all it needs (issue 21, bench:growth: 500 rows read to answer 20 at 1M links).
 */
export function discoverWindow(q: { q?: string | undefined; capability?: string | undefined; max_price_usd?: string | undefined; limit: number }): number {
  const searching = (q.q ?? '').trim() !== '' || q.capability !== undefined || q.max_price_usd !== undefined;
  return searching ? CATALOGUE_WINDOW : Math.min(q.limit, CATALOGUE_WINDOW);
}

export interface DiscoveryDeps {
  store: { discovery: DiscoveryRepository };
  baseUrl: string;
}

/** GET /v1/discover: both catalogues of the caller's network, public to every key of it (nothing owned is shown). */
export class DiscoveryService {
  constructor(private readonly deps: DiscoveryDeps) {}

  async discover(caller: Caller, input: DiscoverInput): Promise<DiscoverResult> {
    const q = parseInput(DiscoverInput, input);
    const words = (q.q ?? '').toLowerCase().split(/\s+/).filter(Boolean);
    const maxPrice = q.max_price_usd === undefined ? null : decimalToAtomic(q.max_price_usd, 6);
    const items: DiscoverItem[] = [];
    const window = discoverWindow(q);
    if (q.source !== 'registry') {
      for (const row of await this.deps.store.discovery.discoverableLinks(caller.network, window)) items.push(this.linkItem(row));
    }
    if (q.source !== 'svc') {
      for (const row of await this.deps.store.discovery.registeredAgents(caller.network, window)) items.push(registryItem(row));
    }
    const matches = items.filter((item) => {
      const text = [item.name, item.description ?? '', ...item.capabilities].join(' ').toLowerCase();
      if (!words.every((w) => text.includes(w))) return false;
      if (q.capability && !item.capabilities.some((c) => c.toLowerCase() === q.capability!.toLowerCase())) return false;
      if (maxPrice !== null && item.price_usd !== null && decimalToAtomic(item.price_usd, 6)! > maxPrice) return false;
      return true;
    });
    return { data: matches.slice(0, q.limit) };
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
