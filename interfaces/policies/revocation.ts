import type { Credentials } from '../../domain/access/schema.ts';
import { DomainError } from '../../domain/shared/errors.ts';
import type { Services } from '../services.ts';
import { authenticate } from './auth.ts';

// Long-lived connections (graphql-ws sockets, SSE subscriptions) authenticate once, at the start. This watch
// re-authenticates the keys they hold every second through the shared auth policy, whose key cache every process
// drops a key from when the key's api_key.disabled event reaches it (docs/policies.md "The hot path and its caches"; 5 s at most whatever the feed
// does): a key disabled on any node ends them on every node within about a second (6 s at worst).

export const RECHECK_MS = 1000;

type OnRevoked = (error: DomainError) => void;

export class KeyWatch {
  /** by credentials: the header value, or a stream grant (one per connection, by identity) */
  private readonly watchers = new Map<Exclude<Credentials, undefined>, Set<OnRevoked>>();
  private timer: NodeJS.Timeout | undefined;
  private checking = false;

  constructor(private readonly services: Services) {}

  /**
   * Calls `onRevoked` once, with the key's error (invalid_api_key), when the credentials stop authenticating.
   * Returns the function that stops watching. A failure to reach the database is not a revocation: it is tried again.
   */
  watch(authorization: Credentials, onRevoked: OnRevoked): () => void {
    const id = authorization ?? '';
    let set = this.watchers.get(id);
    if (!set) {
      set = new Set();
      this.watchers.set(id, set);
    }
    set.add(onRevoked);
    this.timer ??= setInterval(() => void this.check(), RECHECK_MS).unref();
    return () => {
      const current = this.watchers.get(id);
      if (!current) return;
      current.delete(onRevoked);
      if (!current.size) this.watchers.delete(id);
      if (!this.watchers.size) this.stop();
    };
  }

  close(): void {
    this.watchers.clear();
    this.stop();
  }

  private stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  private async check(): Promise<void> {
    // A slow database must not pile up checks: the next tick starts after this one ends.
    if (this.checking) return;
    this.checking = true;
    try {
      await Promise.all(
        [...this.watchers.keys()].map(async (id) => {
          try {
            await authenticate(this.services, id || undefined);
          } catch (e) {
            if (!(e instanceof DomainError)) return;
            const set = this.watchers.get(id);
            this.watchers.delete(id);
            for (const onRevoked of set ?? []) onRevoked(e);
          }
        }),
      );
    } finally {
      this.checking = false;
      if (!this.watchers.size) this.stop();
    }
  }
}
