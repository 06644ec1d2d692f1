import type { Network } from '../shared/network.ts';
import type { EventRecord } from './schema.ts';

// Live events are matched to their watchers through an index, not by testing every watcher.
// Watchers are filed by (network, owner scope), then by exact kind; only watchers with a wildcard (or no kind filter)
// are tested one by one within their scope. An admin's watch (owner undefined) is filed under its network's "all" scope.

/** What a live watcher asks for: the network, the owner scope (undefined: the whole network) and optional filters. */
export interface LiveFilter {
  network: Network;
  owner: string | undefined;
  /** exact kinds or prefixes ending in ".*"; undefined: every kind */
  kinds?: string[] | undefined;
  agent?: string | undefined;
}

interface Entry {
  filter: LiveFilter;
  listener: (e: EventRecord) => void;
  /** filed by exact kind (every pattern exact), else tested in `other` */
  exact: boolean;
}

interface Scope {
  byKind: Map<string, Set<Entry>>;
  other: Set<Entry>;
  size: number;
}

const ALL = '\u0000all';

function scopeKey(network: string, owner: string | undefined): string {
  return `${network}\u0000${owner ?? ALL}`;
}

/** A kind against patterns (exact kinds or dotted prefixes); undefined patterns match every kind. */
export function matchesKind(kind: string, patterns: string[] | undefined): boolean {
  if (!patterns) return true;
  return patterns.some((p) => (p.endsWith('.*') ? kind.startsWith(p.slice(0, -1)) : kind === p));
}

export class LiveIndex {
  private readonly scopes = new Map<string, Scope>();
  private count = 0;

  get size(): number {
    return this.count;
  }

  /** Files `listener` under its filter; the function returned removes it (idempotent). */
  add(filter: LiveFilter, listener: (e: EventRecord) => void): () => void {
    const key = scopeKey(filter.network, filter.owner);
    let scope = this.scopes.get(key);
    if (!scope) {
      scope = { byKind: new Map(), other: new Set(), size: 0 };
      this.scopes.set(key, scope);
    }
    const exact = filter.kinds?.every((k) => !k.endsWith('.*') && k !== '*') === true;
    const entry: Entry = { filter, listener, exact };
    if (exact) {
      for (const kind of new Set(filter.kinds)) {
        let set = scope.byKind.get(kind);
        if (!set) {
          set = new Set();
          scope.byKind.set(kind, set);
        }
        set.add(entry);
      }
    } else {
      scope.other.add(entry);
    }
    scope.size++;
    this.count++;
    let removed = false;
    const owned = scope;
    return () => {
      if (removed) return;
      removed = true;
      if (entry.exact) {
        for (const kind of new Set(filter.kinds)) {
          const set = owned.byKind.get(kind);
          set?.delete(entry);
          if (set?.size === 0) owned.byKind.delete(kind);
        }
      } else {
        owned.other.delete(entry);
      }
      owned.size--;
      this.count--;
      if (owned.size === 0 && this.scopes.get(key) === owned) this.scopes.delete(key);
    };
  }

  /** Calls the listener of every watcher the event matches, once each. */
  dispatch(e: EventRecord): void {
    if (e.owner !== null) this.visit(this.scopes.get(scopeKey(e.network, e.owner)), e);
    this.visit(this.scopes.get(scopeKey(e.network, undefined)), e);
  }

  private visit(scope: Scope | undefined, e: EventRecord): void {
    if (!scope) return;
    const exact = scope.byKind.get(e.kind);
    if (exact) {
      for (const entry of exact) if (entry.filter.agent === undefined || entry.filter.agent === e.agentAsset) entry.listener(e);
    }
    for (const entry of scope.other) {
      if (!matchesKind(e.kind, entry.filter.kinds)) continue;
      if (entry.filter.agent !== undefined && entry.filter.agent !== e.agentAsset) continue;
      entry.listener(e);
    }
  }
}
