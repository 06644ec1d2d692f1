import type { Network } from '../shared/network.ts';
import type { Clock } from '../ports/clock.ts';
import type { EventFeed, Store } from '../ports/store.ts';
import type { PaymentLinkRecord } from '../payment-links/schema.ts';

/**
 * The paywall's read of a link (and of its absence), kept in process memory: a 402 challenge is then no database
 * round trip. Kept fresh by invalidation — this process's writes at once (PaymentLinkService calls `invalidate`),
 * other processes' through the event feed (every write emits a payment_link.* event) — with a short TTL as a
 * backstop should a notification be missed.
 */
export class LinkCache {
  private readonly entries = new Map<string, { link: PaymentLinkRecord | null; at: number }>();

  constructor(private readonly deps: { store: Store; clock: Clock; feed?: EventFeed; ttlMs?: number; maxEntries?: number }) {
    deps.feed?.subscribe((event) => {
      const id = event.metadata.payment_link_id;
      if (event.kind.startsWith('payment_link.') && typeof id === 'string') this.invalidate(event.network, id);
    });
  }

  async get(network: Network, id: string): Promise<PaymentLinkRecord | null> {
    const key = `${network}\u0000${id}`;
    const now = this.deps.clock.now().getTime();
    const hit = this.entries.get(key);
    if (hit && now - hit.at < (this.deps.ttlMs ?? 5_000)) return hit.link;
    const link = await this.deps.store.paymentLinks.get(network, id);
    // A write that landed while we read invalidated nothing we hold yet; the TTL bounds that window.
    if (this.entries.size >= (this.deps.maxEntries ?? 10_000)) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(key, { link, at: now });
    return link;
  }

  /** The cached read when it is fresh (no I/O, no promise); undefined when `get` would read the store. */
  peek(network: Network, id: string): PaymentLinkRecord | null | undefined {
    const hit = this.entries.get(`${network}\u0000${id}`);
    return hit && this.deps.clock.now().getTime() - hit.at < (this.deps.ttlMs ?? 5_000) ? hit.link : undefined;
  }

  invalidate(network: Network, id: string): void {
    this.entries.delete(`${network}\u0000${id}`);
  }
}
