import { AsyncResource } from 'node:async_hooks';

// Group commit for single-row statements on a hot path. While one statement of a kind is in flight, the
// calls that arrive wait (in memory, not on a pooled connection) and go together as the next statement: one round
// trip for all of them. Alone, a call is sent at once — nothing waits for company.

/** Runs `write` for groups of items: one call at a time, each with what arrived meanwhile (at most `max`). */
export class Coalescer<T, R> {
  private readonly waiting: { item: T; resolve: (r: R) => void; reject: (e: unknown) => void }[] = [];
  private running = false;
  /**
   * A group's statement serves several requests: it runs in the async context the coalescer was made in (the store's),
   * never in the request that happened to start it — whose scope (statement tag, timeout, cancellation) is its own.
   */
  private readonly context = new AsyncResource('Coalescer');

  constructor(
    /** answers one result per item, in order; when it throws for a group, each item is written again alone */
    private readonly write: (items: T[]) => Promise<R[]>,
    private readonly max = 64,
  ) {}

  add(item: T): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.waiting.push({ item, resolve, reject });
      if (!this.running) void this.context.runInAsyncScope(() => this.drain());
    });
  }

  private async drain(): Promise<void> {
    this.running = true;
    try {
      while (this.waiting.length > 0) {
        const group = this.waiting.splice(0, this.max);
        try {
          const results = await this.write(group.map((g) => g.item));
          for (const [i, g] of group.entries()) g.resolve(results[i]!);
        } catch (e) {
          if (group.length === 1) {
            group[0]!.reject(e);
            continue;
          }
          // one item's failure fails that item only: the group is written again item by item
          for (const g of group) {
            try {
              g.resolve((await this.write([g.item]))[0]!);
            } catch (alone) {
              g.reject(alone);
            }
          }
        }
      }
    } finally {
      this.running = false;
    }
  }
}
