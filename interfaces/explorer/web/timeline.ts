import type { Event } from '../../../domain/events/schema.ts';

// The explorer's event timeline: the history page and the live deliveries merged into one list by event id, and the
// events of one paid call gathered under it. Pure functions over the events as REST answers them (snake_case fields:
// the subscription asks for the same names through GraphQL aliases, and `liveEvent` gives its phase REST's spelling).

/** The fields of an event the page reads: a GET /v1/events item, or a subscription delivery through `liveEvent`. */
export type ShownEvent = Pick<Event, 'id' | 'kind' | 'phase' | 'signature' | 'agent_asset' | 'created_at' | 'metadata'>;

/** How many events the page keeps (the newest). */
export const MAX_EVENTS = 300;

/** A phase no event leaves (docs/events.md "An event's history"): its seq never moves again. */
const FINAL_PHASES = new Set<string>(['confirmed', 'failed']);

/**
 * The `after` to subscribe with once the history page (newest first) is shown. A phase change gives an event a new
 * seq (docs/architecture.md "Events"), so the cursor is the newest event that can no longer change: the newer ones of
 * the page that are still moving are replayed after it and merged by id, not shown twice. A page of moving events
 * only resumes after its oldest. Undefined (no history): subscribe from now.
 */
export function resumeAfter(history: readonly ShownEvent[]): string | undefined {
  return (history.find(isFinal) ?? history[history.length - 1])?.id;
}

/** Whether an event is in a phase it never leaves: a safe cursor to resume after. */
export function isFinal(e: ShownEvent): boolean {
  return FINAL_PHASES.has(e.phase);
}

const newestFirst = (a: ShownEvent, b: ShownEvent) =>
  a.created_at === b.created_at ? (a.id < b.id ? 1 : a.id > b.id ? -1 : 0) : a.created_at < b.created_at ? 1 : -1;

/**
 * `incoming` merged into `list` (newest first): an id already there is replaced by its newer state, so a replay
 * after the cursor, a phase change or a reconnection's replay never adds a second row.
 */
export function mergeEvents(list: readonly ShownEvent[], incoming: readonly ShownEvent[]): ShownEvent[] {
  const byId = new Map(list.map((e) => [e.id, e]));
  for (const e of incoming) byId.set(e.id, e);
  return [...byId.values()].sort(newestFirst).slice(0, MAX_EVENTS);
}

/**
 * A subscription's delivery in the shape of a REST list item. GraphQL spells an enum value in capitals (CONFIRMED);
 * every event phase is one lowercase word, so lowering it gives REST's spelling back.
 */
export function liveEvent(e: Omit<ShownEvent, 'phase'> & { phase: string }): ShownEvent {
  return { ...e, phase: e.phase.toLowerCase() as ShownEvent['phase'] };
}

/**
 * The steps of a paid call in the order they happen (hosted-api §4.2 rule 9; fee-facilitator-mpp-tools §6 path 1):
 * settled on the ledger, the paid response served, the earn receipt chained, checked against the ledger, the fee.
 */
export const CALL_STEPS = ['payment_link.settled', 'payment_link.served', 'receipt.published', 'receipt.verified', 'protocol.fee.collected'] as const;
export type CallStep = (typeof CALL_STEPS)[number];
/** a receipt's check fills the same step whichever way it went */
const stepOf = (kind: string): string => (kind === 'receipt.mismatch' ? 'receipt.verified' : kind);
const CALL_KINDS = new Set<string>([...CALL_STEPS, 'receipt.mismatch']);

/**
 * The settlement transaction that ties an event to its paid call; null for an event of no paid call. A key's events
 * are all of its own network (hosted-api §5), so the transaction alone names the call.
 */
export function callKey(e: ShownEvent): string | null {
  if (!CALL_KINDS.has(e.kind)) return null;
  // the paywall's events name it in metadata (a receipt inside its own), and on the event
  const m = e.metadata as { tx_sig?: string; receipt?: { tx_sig?: string } };
  return m.tx_sig ?? m.receipt?.tx_sig ?? e.signature ?? null;
}

export interface CallEntry {
  type: 'call';
  key: string;
  /** the settlement transaction */
  tx: string;
  /** in step order */
  events: ShownEvent[];
  link: string | null;
  /** when its first event happened: the call keeps that place */
  at: string;
}
export type Entry = { type: 'event'; key: string; at: string; event: ShownEvent } | CallEntry;

const stepIndex = (e: ShownEvent) => CALL_STEPS.indexOf(stepOf(e.kind) as CallStep);

/**
 * The timeline's entries, newest first: single events, and paid calls with their events in step order. A call keeps
 * the place of its first event, so steps arriving later fill it in where it is instead of moving it to the top.
 */
export function timeline(events: readonly ShownEvent[]): Entry[] {
  const calls = new Map<string, CallEntry>();
  const entries: Entry[] = [];
  for (const e of events) {
    const key = callKey(e);
    if (!key) {
      entries.push({ type: 'event', key: e.id, at: e.created_at, event: e });
      continue;
    }
    let call = calls.get(key);
    if (!call) {
      call = { type: 'call', key, tx: key, events: [], link: null, at: e.created_at };
      calls.set(key, call);
      entries.push(call);
    }
    call.events.push(e);
    call.link ??= (e.metadata?.payment_link_id as string | undefined) ?? null;
    if (e.created_at < call.at) call.at = e.created_at;
  }
  for (const call of calls.values()) call.events.sort((a, b) => stepIndex(a) - stepIndex(b) || (a.created_at < b.created_at ? -1 : 1));
  return entries.sort((a, b) => (a.at === b.at ? (a.key < b.key ? 1 : -1) : a.at < b.at ? 1 : -1));
}

/** The settled event of a call (its amounts), when the page holds it. */
export function settledOf(call: CallEntry): ShownEvent | null {
  return call.events.find((e) => e.kind === 'payment_link.settled') ?? null;
}

/** Each step of a paid call with its event, null while it has not arrived. */
export function callSteps(call: CallEntry): { kind: CallStep; event: ShownEvent | null }[] {
  return CALL_STEPS.map((kind) => ({ kind, event: call.events.find((e) => stepOf(e.kind) === kind) ?? null }));
}
