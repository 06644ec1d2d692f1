import { z } from 'zod';
import { parseInput } from '../shared/validation.ts';
import { DomainError } from '../shared/errors.ts';
import { Cursor, decodeCursor, encodeCursor, Limit, listEnvelope, toPage } from '../shared/pagination.ts';
import type { Store } from '../ports/store.ts';
import type { Clock } from '../ports/clock.ts';
import type { RequestRecordStore } from '../ports/policy-store.ts';
import type { Principal } from '../access/schema.ts';
import { ownerFilter, type Caller } from '../access/ownership.ts';
import type { Network } from '../shared/network.ts';

export const UsageInput = z.object({
  days: z.coerce.number().int().min(1).max(30).default(7).describe('window in days: default 7, at most 30'),
  key_id: z.string().max(64).describe('only this key (admin); default all you can see').optional(),
  cursor: Cursor.optional(),
  limit: Limit,
});
export type UsageInput = z.input<typeof UsageInput>;

export const UsageEntry = z
  .object({
    key_id: z.string().describe('the API key id'),
    bucket: z.string().describe('the rate-limit bucket'),
    day: z.string().describe('the UTC day, YYYY-MM-DD'),
    requests: z.number().int().describe('requests counted'),
    errors: z.number().int().describe('answers with status 4xx/5xx'),
    throttled: z.number().int().describe('requests refused with 429'),
  })
  .describe('Usage of one key in one bucket on one day.');
/** DECISIONS "Wire conventions": the list envelope, with the window it covers */
export const Usage = z.object({
  network: z.string().describe('chain-devnet or chain-mainnet'),
  since: z.string().describe('start of the window, ISO 8601'),
  ...listEnvelope(UsageEntry).shape,
});
const UsageCursor = z.object({ day: z.string(), key_id: z.string(), bucket: z.string() });

export const EventsInput = z.object({
  days: z.coerce.number().int().min(1).max(3650).describe('counters of the last N days; not with since').optional(),
  since: z.string().datetime({ offset: true }).describe('counters from this time on (rounded down to its UTC hour); not with days').optional(),
});
export const EventCounters = z
  .object({
    network: z.string().describe('chain-devnet or chain-mainnet'),
    since: z.string().nullable().describe('start of the window, ISO 8601; null: all time'),
    total: z.number().int().describe('events counted'),
    kinds: z
      .array(
        z.object({
          kind: z.string().describe('the event kind'),
          count: z.number().int().describe('events of this kind'),
          phases: z.record(z.string(), z.number().int()).describe('events per current phase'),
        }),
      )
      .describe('counters per kind'),
  })
  .describe('Event counters of the network you can read.');

export const SettlementInput = z.object({
  hours: z.coerce.number().int().min(1).max(720).default(24).describe('window in hours: default 24, at most 720'),
});
export type SettlementInput = z.input<typeof SettlementInput>;

export const SettlementLatency = z
  .object({
    network: z.string().describe('chain-devnet or chain-mainnet'),
    since: z.string().describe('start of the window, ISO 8601'),
    sample_limit: z.number().int().describe('at most this many of the newest settlements are counted'),
    settlements: z.number().int().describe('settlements counted'),
    p50_ms: z.number().int().nullable().describe('median milliseconds from claim to confirmation seen; null without settlements'),
    p95_ms: z.number().int().nullable().describe('95th percentile, milliseconds; null without settlements'),
  })
  .describe("Settlement latency of the gateway facilitator on the key's network: from the settle's claim to the confirmation it saw.");

/** The facilitator's settled rows, read for their latency (FacilitatorStore.settlementLatency). */
export interface SettlementLatencyReader {
  settlementLatency(network: Network, options: { since: Date; limit: number }): Promise<{ count: number; p50Ms: number | null; p95Ms: number | null }>;
}

/** The newest settlements a latency figure reads: a bounded read of an index, whatever the table holds. */
export const SETTLEMENT_SAMPLE = 1000;

const HOUR_MS = 3_600_000;

/** hosted-api §4.8 metrics: usage from stored request records, event counters by kind. */
export class MetricsService {
  constructor(private readonly deps: { store: Store; records: RequestRecordStore; clock: Clock; settlements?: SettlementLatencyReader | undefined }) {}

  /**
   * Timing of the facilitator (published like its costs on /supported): p50/p95 of the newest settlements
   * on the key's network within the window. Any key reads it — the rows carry no owner, and the figures name no party
   * or amount — so an owner sees the same network figure an admin does.
   */
  async settlement(caller: Caller, input: z.input<typeof SettlementInput>): Promise<z.infer<typeof SettlementLatency>> {
    const q = parseInput(SettlementInput, input ?? {});
    const since = new Date(this.deps.clock.now().getTime() - q.hours * HOUR_MS);
    const figures = (await this.deps.settlements?.settlementLatency(caller.network, { since, limit: SETTLEMENT_SAMPLE })) ?? {
      count: 0,
      p50Ms: null,
      p95Ms: null,
    };
    return {
      network: caller.network,
      since: since.toISOString(),
      sample_limit: SETTLEMENT_SAMPLE,
      settlements: figures.count,
      p50_ms: figures.p50Ms,
      p95_ms: figures.p95Ms,
    };
  }

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
