import { z } from 'zod';
import { parseInput } from '../shared/validation.ts';
import { DomainError } from '../shared/errors.ts';
import { Cursor, decodeCursor, encodeCursor, Limit, listEnvelope, toPage } from '../shared/pagination.ts';
import type { Store } from '../ports/store.ts';
import type { Clock } from '../ports/clock.ts';
import type { RequestRecordStore } from '../ports/policy-store.ts';
import type { Principal } from '../access/schema.ts';
import { ownerFilter, type Caller } from '../access/ownership.ts';

export const UsageInput = z.object({
  days: z.coerce.number().int().min(1).max(30).default(7),
  key_id: z.string().max(64).optional(),
  cursor: Cursor.optional(),
  limit: Limit,
});
export type UsageInput = z.input<typeof UsageInput>;

export const UsageEntry = z.object({
  key_id: z.string(),
  bucket: z.string(),
  day: z.string(),
  requests: z.number().int(),
  errors: z.number().int(),
  throttled: z.number().int(),
});
/** DECISIONS "Wire conventions": the list envelope, with the window it covers */
export const Usage = z.object({ network: z.string(), since: z.string(), ...listEnvelope(UsageEntry).shape });
const UsageCursor = z.object({ day: z.string(), key_id: z.string(), bucket: z.string() });

export const EventsInput = z.object({
  days: z.coerce.number().int().min(1).max(3650).optional(),
  /** counters from this time on (rounded down to its UTC hour); not with days */
  since: z.string().datetime({ offset: true }).optional(),
});
export const EventCounters = z.object({
  network: z.string(),
  since: z.string().nullable(),
  total: z.number().int(),
  kinds: z.array(z.object({ kind: z.string(), count: z.number().int(), phases: z.record(z.string(), z.number().int()) })),
});

const HOUR_MS = 3_600_000;

/** hosted-api §4.8 metrics: usage from stored request records, event counters by kind. */
export class MetricsService {
  constructor(private readonly deps: { store: Store; records: RequestRecordStore; clock: Clock }) {}

  /** A user key sees its own usage; an admin key sees every key of its network (or one, with key_id). */
  async usage(principal: Principal, input: z.input<typeof UsageInput>): Promise<z.infer<typeof Usage>> {
    const q = parseInput(UsageInput, input);
    const now = this.deps.clock.now();
    const since = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() - (q.days - 1)));
    const keyId = principal.role === 'admin' ? q.key_id : principal.keyId;
    const after = q.cursor ? decodeCursor(UsageCursor, q.cursor) : undefined;
    const rows = await this.deps.records.usage(principal.network, {
      keyId,
      since,
      limit: q.limit + 1,
      ...(after ? { after: { day: after.day, keyId: after.key_id, bucket: after.bucket } } : {}),
    });
    const page = toPage(
      rows,
      q.limit,
      (r) => ({ key_id: r.keyId, bucket: r.bucket, day: r.day, requests: r.requests, errors: r.errors, throttled: r.throttled }),
      (r) => encodeCursor({ day: r.day, key_id: r.keyId, bucket: r.bucket }),
    );
    return { network: principal.network, since: since.toISOString(), ...page };
  }

  /** Folds the event counters' deltas into their rollup (the compact_event_counts job). */
  compactEventCounts(): Promise<number> {
    return this.deps.store.events.compactCounts();
  }

  /** Counts of the events the caller may read (docs/architecture.md "Ownership"): its own; an admin's, its network's. */
  async events(caller: Caller, input: z.input<typeof EventsInput>): Promise<z.infer<typeof EventCounters>> {
    const q = parseInput(EventsInput, input ?? {});
    const { network } = caller;
    if (q.days !== undefined && q.since !== undefined) {
      throw DomainError.invalid([{ path: 'since', message: 'Give days or since, not both', code: 'custom' }], 'Give days or since, not both.');
    }
    // Counters are kept per UTC hour (migration 0014): a window starts at the start of the hour it falls in.
    const from = q.since ? new Date(q.since) : q.days ? new Date(this.deps.clock.now().getTime() - q.days * 86_400_000) : undefined;
    const since = from && new Date(Math.floor(from.getTime() / HOUR_MS) * HOUR_MS);
    const rows = await this.deps.store.events.countByKind(network, { owner: ownerFilter(caller), since });
    const byKind = new Map<string, { kind: string; count: number; phases: Record<string, number> }>();
    for (const r of rows) {
      const entry = byKind.get(r.kind) ?? { kind: r.kind, count: 0, phases: {} };
      entry.count += r.count;
      entry.phases[r.phase] = r.count;
      byKind.set(r.kind, entry);
    }
    const kinds = [...byKind.values()];
    return { network, since: since?.toISOString() ?? null, total: kinds.reduce((n, k) => n + k.count, 0), kinds };
  }
}
