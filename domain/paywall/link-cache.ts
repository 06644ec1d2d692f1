import type { Network } from '../shared/network.ts';
import type { Clock } from '../ports/clock.ts';
import type { EventFeed, Store } from '../ports/store.ts';
import type { PaymentLinkRecord } from '../payment-links/schema.ts';

/**
 * The events of a link's use — a payment settled, a call served — change only its counters, which the paywall does not
 * read: the cached link stays (each paid call would otherwise make the next one read the link again).
 */
const USES = new Set(['payment_link.settled', 'payment_link.served']);

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
      if (event.kind.startsWith('payment_link.') && !USES.has(event.kind) && typeof id === 'string') this.invalidate(event.network, id);
    });
  }

  async get(network: Network, id: string): Promise<PaymentLinkRecord | null> {
    const key = `${network}\u0000${id}`;
    const now = this.deps.clock.now().getTime();
    const hit = this.entries.get(key);
    if (hit && now - hit.at < (this.deps.ttlMs ?? 5_000)) return hit.link;
    // the requests that miss together share one read
    let read = this.reading.get(key);
    if (!read) {
      const generation = this.generation;
      read = this.deps.store.paymentLinks.get(network, id).then(
        (link) => {
          this.reading.delete(key);
          // A write that landed while we read invalidated nothing we hold yet (the TTL bounds that window); one
          // invalidated meanwhile is answered to the readers waiting, not kept.
          if (generation === this.generation) {
            if (this.entries.size >= (this.deps.maxEntries ?? 10_000)) this.entries.delete(this.entries.keys().next().value!);
            this.entries.set(key, { link, at: now });
          }
          return link;
        },
        (e: unknown) => {
          this.reading.delete(key);
          throw e;
        },
      );
      this.reading.set(key, read);
    }
    return read;
  }

  /** reads in flight, by key */
  private readonly reading = new Map<string, Promise<PaymentLinkRecord | null>>();
  /** moves on every invalidation: a read begun before one is not kept */
  private generation = 0;

  /** The cached read when it is fresh (no I/O, no promise); undefined when `get` would read the store. */
  peek(network: Network, id: string): PaymentLinkRecord | null | undefined {
    const hit = this.entries.get(`${network}\u0000${id}`);
    return hit && this.deps.clock.now().getTime() - hit.at < (this.deps.ttlMs ?? 5_000) ? hit.link : undefined;
  }

  invalidate(network: Network, id: string): void {
    this.entries.delete(`${network}\u0000${id}`);
    this.reading.delete(`${network}\u0000${id}`);
    this.generation++;
  }
}
