import { z } from 'zod';
import { DomainError } from '../shared/errors.ts';
import { decodeCursor, encodeCursor, toPage, type Page } from '../shared/pagination.ts';
import { isoOrNull, iso } from '../shared/settings.ts';
import { parseInput } from '../shared/validation.ts';
import type { EventFeed, EventFilter, Store } from '../ports/store.ts';
import { canAccess, ownerFilter, type Caller } from '../access/ownership.ts';
import { LiveIndex, matchesKind } from './live.ts';
import { KindPattern, ListEventsInput, type Event, type EventRecord } from './schema.ts';

// seq is a PostgreSQL bigint: a forged cursor beyond it is a malformed cursor, not a database error.
const MAX_SEQ = 2n ** 63n - 1n;
const CursorShape = z.object({
  seq: z
    .string()
    .regex(/^\d{1,19}$/)
    .refine((s) => !/^\d{1,19}$/.test(s) || BigInt(s) <= MAX_SEQ),
});
const REPLAY_PAGE = 500;
/** A subscriber that falls this far behind is closed rather than buffering without bound. */
export const MAX_BUFFERED = 10_000;

export function toEvent(r: EventRecord): Event {
  return {
    id: r.id,
    kind: r.kind,
    phase: r.phase,
    phases: r.phases.map((p) => ({ phase: p.phase, at: iso(p.at), signature: p.signature })),
    network: r.network,
    agent_asset: r.agentAsset,
    signature: r.signature,
    block_time: r.blockTime,
    confirmed_at: isoOrNull(r.confirmedAt),
    slot: r.slot,
    error_code: r.errorCode,
    error_logs: r.errorLogs,
    metadata: r.metadata,
    client_reference: r.clientReference,
    created_at: iso(r.createdAt),
  };
}

/** Splits and checks kind patterns: "payment_link.*,receipt.published" → ["payment_link.*", "receipt.published"]. */
export function parseKinds(kinds: string | string[] | undefined, path = 'kind'): string[] | undefined {
  if (kinds === undefined) return undefined;
  const parts = (Array.isArray(kinds) ? kinds : kinds.split(',')).map((k) => k.trim()).filter(Boolean);
  if (parts.length === 0) return undefined;
  parts.forEach((p, i) => {
    if (!KindPattern.safeParse(p).success) {
      throw DomainError.invalid(
        [{ path: Array.isArray(kinds) ? `${path}.${i}` : path, message: `Invalid kind pattern "${p}"`, code: 'invalid_string' }],
        `Invalid kind pattern "${p}": use a kind, a wildcard such as payment_link.*, or *.`,
      );
    }
  });
  return parts.includes('*') ? undefined : parts;
}

export { matchesKind };

/** What a subscriber follows: the live transports (interfaces/graphql/fanout.ts) serve it from `watch` and `replay`. */
export interface StreamOptions {
  kinds?: string[] | undefined;
  agent?: string | undefined;
}

/**
 * docs/architecture.md "Ownership": a principal reads the events of what it owns (each event row carries its owner); an admin reads
 * its whole network. This service is the one place the rule is applied, for REST, tRPC, GraphQL queries and both
 * subscription transports: list and replay filter on the indexed (network, owner, seq), the live feed on the same
 * scope and filters (`watch`, through the live index), and `get` answers another principal's event as not found.
 */
export class EventService {
  constructor(private readonly deps: { store: Store; feed: EventFeed }) {}

  async list(caller: Caller, input: ListEventsInput): Promise<Page<Event>> {
    const q = parseInput(ListEventsInput, input);
    const kinds = parseKinds(q.kind);
    const before = q.cursor ? BigInt(decodeCursor(CursorShape, q.cursor).seq) : undefined;
    const rows = await this.deps.store.events.list(caller.network, {
      owner: ownerFilter(caller),
      kinds,
      agent: q.agent,
      id: q.id,
      beforeSeq: before,
      limit: q.limit + 1,
    });
    return toPage(rows, q.limit, toEvent, (r) => encodeCursor({ seq: r.seq.toString() }));
  }

  async get(caller: Caller, id: string): Promise<Event> {
    return toEvent(await this.require(caller, id));
  }

  private async require(caller: Caller, id: string): Promise<EventRecord> {
    const row = await this.deps.store.events.get(caller.network, id);
    if (!row || !canAccess(caller, row.owner)) throw new DomainError('event_not_found', `No event ${id} on ${caller.network}.`, { id });
    return row;
  }

  private readonly live = new LiveIndex();
  private unfeed: (() => void) | undefined;

  /**
   * Live events of the caller's scope matching `options`, in commit order, each passed to `listener` as it is
   * committed (no replay). Watchers are filed in one index (domain/events/live.ts) behind a single feed listener, so
   * an event costs a lookup by owner and kind, not a test of every watcher. Returns the function that stops it.
   */
  watch(caller: Caller, options: StreamOptions, listener: (e: EventRecord) => void): () => void {
    const remove = this.live.add({ network: caller.network, owner: ownerFilter(caller), kinds: options.kinds, agent: options.agent }, listener);
    this.unfeed ??= this.deps.feed.subscribe((e) => this.live.dispatch(e));
    return () => {
      remove();
      if (this.live.size === 0 && this.unfeed) {
        this.unfeed();
        this.unfeed = undefined;
      }
    };
  }

  /**
   * The caller's events matching `options` committed after the event `after` (event_not_found when the caller may
   * not read it), oldest first, a page at a time.
   */
  async *replay(caller: Caller, after: string, options: StreamOptions): AsyncGenerator<EventRecord[]> {
    const filter: EventFilter = { owner: ownerFilter(caller), kinds: options.kinds, agent: options.agent };
    let lastSeq = (await this.require(caller, after)).seq;
    for (;;) {
      const page = await this.deps.store.events.after(caller.network, lastSeq, filter, REPLAY_PAGE);
      if (page.length) yield page;
      if (page.length < REPLAY_PAGE) return;
      lastSeq = page[page.length - 1]!.seq;
    }
  }
}
