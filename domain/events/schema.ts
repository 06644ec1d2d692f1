import { z } from 'zod';
import { Network } from '../shared/network.ts';
import { Cursor, Limit, listEnvelope } from '../shared/pagination.ts';
import type { EventKindName, EventMetadata } from './kinds.ts';

export const EventPhase = z
  .enum(['prepared', 'submitted', 'confirmed', 'failed'])
  .describe('prepared (built, not yet submitted), submitted (broadcast), confirmed or failed on the ledger (hosted-api §3.1)');
export type EventPhase = z.infer<typeof EventPhase>;

/** hosted-api §6 plus DECISIONS; `kind` is a dotted lowercase name. */
export const EventKind = z.string().regex(/^[a-z0-9_]+(\.[a-z0-9_]+)*$/);

/** A kind pattern: exact kind, `prefix.*`, or `*`. */
export const KindPattern = z
  .string()
  .max(100)
  .regex(/^(\*|[a-z0-9_]+(\.[a-z0-9_]+)*(\.\*)?)$/, 'Expected an event kind, a wildcard such as payment_link.*, or *');

/** One transition of an event: the phase it entered, when, and the transaction it named then (if any). */
export interface EventPhaseEntry {
  phase: EventPhase;
  at: Date;
  signature: string | null;
}

export interface EventRecord {
  id: string;
  seq: bigint;
  kind: string;
  phase: EventPhase;
  /** every phase the event entered, oldest first; the last is `phase` */
  phases: EventPhaseEntry[];
  network: Network;
  agentAsset: string | null;
  signature: string | null;
  blockTime: number | null;
  confirmedAt: Date | null;
  slot: number | null;
  errorCode: string | null;
  errorLogs: string[] | null;
  metadata: Record<string, unknown>;
  clientReference: string | null;
  /** the principal owning the resource the event is about ("wallet:…", "key:…"); null: admin-only (docs/architecture.md "Ownership") */
  owner: string | null;
  createdAt: Date;
  updatedAt: Date;
}

/** The fields of an event to append, but its kind and metadata. */
export interface NewEventFields {
  id: string;
  phase: EventPhase;
  network: Network;
  agentAsset: string | null;
  /**
   * The principal owning the resource the event is about (its link, its agent): only it (and admins) read the event.
   * Required so that no appender forgets it; null makes the event admin-only.
   */
  owner: string | null;
  createdAt: Date;
  confirmedAt?: Date | null;
  /** the transaction the event is about, e.g. a settlement */
  signature?: string | null;
  /** where and when that transaction landed, when the appender knows (the indexer) */
  slot?: number | null;
  blockTime?: number | null;
}

/**
 * What a domain service appends inside its transaction (transactional outbox): typed by kind through the event
 * catalogue (kinds.ts), so an unknown kind or a metadata shape the catalogue does not declare does not compile.
 */
export type NewEvent = { [K in EventKindName]: NewEventFields & { kind: K; metadata: EventMetadata<K> } }[EventKindName];

export const EventPhaseStep = z
  .object({
    phase: EventPhase,
    at: z.string().describe('When the event entered this phase (ISO 8601).'),
    signature: z.string().nullable().describe('The transaction the event named at that moment (null before one was submitted).'),
  })
  .describe('One transition of an event: the phase it entered, when, and the transaction it named then.');
export type EventPhaseStep = z.infer<typeof EventPhaseStep>;

export const Event = z
  .object({
    id: z.string().describe('the event id (ULID)'),
    kind: z.string().describe('dotted lowercase kind, e.g. payment_link.settled (hosted-api §6; GET /v1/event-kinds lists them)'),
    phase: EventPhase,
    phases: z
      .array(EventPhaseStep)
      .describe(
        'Every phase the event entered, oldest first; the last is `phase`. A subscriber or webhook that sees only the newest state still knows each transition and when it happened (an event written before this field existed lists its current phase only).',
      ),
    network: Network,
    agent_asset: z.string().nullable().describe('mint of the agent the event is about; null when none'),
    signature: z.string().nullable().describe('the transaction signature; set once submitted (or for an observed transaction)'),
    block_time: z.number().int().nullable().describe('block time in Unix seconds; set on confirmation'),
    confirmed_at: z.string().nullable().describe('ISO 8601 time of confirmation; null until confirmed'),
    slot: z.number().int().nullable().describe('the ledger slot the transaction landed in; set on confirmation'),
    error_code: z.string().nullable().describe('why the event failed (e.g. expired, or the ledger’s error); null unless failed or refused'),
    error_logs: z.array(z.string()).nullable().describe('the ledger’s program logs of a failure; null when none'),
    metadata: z.record(z.string(), z.unknown()).describe('kind-specific fields (delegation events carry stable_symbol and allowance_atomic)'),
    client_reference: z.string().nullable().describe('the client_reference given to submit; null when none'),
    created_at: z.string().describe('ISO 8601 time the event was written'),
  })
  .describe('One entry of the event stream: a ledger action or a gateway state change (hosted-api §2.7).');
export type Event = z.infer<typeof Event>;

/** `kind` may hold several patterns separated by commas: `payment_link.*,receipt.published`. */
export const ListEventsInput = z.object({
  kind: z.string().max(500).describe('kind patterns, comma separated: an exact kind, a wildcard such as payment_link.*, or *').optional(),
  agent: z.string().max(64).describe('only events of this agent mint').optional(),
  id: z.string().max(64).describe('only the event with this id').optional(),
  cursor: Cursor.optional(),
  limit: Limit,
});
export type ListEventsInput = z.input<typeof ListEventsInput>;

export const EventIdInput = z.object({ id: z.string().min(1).max(64).describe('the event id') });

export const EventList = listEnvelope(Event);
export type EventList = z.infer<typeof EventList>;
