import { createSourceEventStream, execute, type DocumentNode, type ExecutionArgs, type ExecutionResult } from 'graphql';
import { isAsyncIterable, type Plugin } from 'graphql-yoga';
import { ownerFilter } from '../../domain/access/ownership.ts';
import type { Principal } from '../../domain/access/schema.ts';
import type { EventRecord } from '../../domain/events/schema.ts';
import { MAX_BUFFERED, toEvent } from '../../domain/events/service.ts';
import { DomainError } from '../../domain/shared/errors.ts';
import { GRAPHQL_LIMITS } from '../policies/graphql-limits.ts';
import type { Services } from '../services.ts';

// Live fan-out at near the cost of a plain ws.send.
//
// The `events` subscription resolver (schema/events.ts) runs the policies (key, rate limit, input checks) and returns a
// `LiveEvents` request instead of a stream. The subscribe function of the envelop pipeline (the `useFanOut` plugin)
// files it in a group: one group per distinct subscription (document, operation, variables, principal scope). A group
// is one watch in the event index (EventService.watch); per event it executes the document once and serialises the
// result once. Each member (one graphql-ws operation or one SSE request) then gets the same JSON:
// - graphql-ws: sent straight on the socket (ws.ts hands it in the operation's `LiveArgs`) with its own
//   `{"id":…,"type":"next","payload":…}` envelope;
// - SSE: the result carries `stringify` (Yoga writes that text), so the per-request pipeline does not serialise again.
// A member replaying `after`, holding a backlog, or receiving an error or an oversized result goes through the usual
// per-subscription pipeline (envelop hooks: error formatting with its request id, the size cap), in order.
// Every member is held in one registry, ended at once on shutdown: no abort listener per subscription.

/**
 * What the `events` subscription resolver returns once its policies passed: a request to join the fan-out. graphql-js
 * accepts only an async iterable from a subscribe resolver, and only the fan-out's subscribe (which holds the
 * operation's document and variables, its group key) can serve it; iterated anywhere else it is a wiring error.
 */
export class LiveEvents implements AsyncIterable<never> {
  constructor(
    readonly services: Services,
    readonly principal: Principal,
    readonly options: { kinds: string[] | undefined; agent: string | undefined; after: string | undefined },
  ) {}

  [Symbol.asyncIterator](): AsyncIterator<never> {
    throw new Error('LiveEvents are served by the fan-out plugin (interfaces/graphql/fanout.ts)');
  }
}

/** A failure of the live stream, delivered as the field error of one last payload instead of tearing the socket down. */
export class StreamFailure {
  constructor(readonly error: unknown) {}
}

/** graphql-ws: the member's socket, written to directly. `send` answers false when the socket's backlog is too large. */
export interface DirectSink {
  send(json: string): boolean;
}

/** A subscription's execution arguments; graphql-ws (ws.ts) adds the operation's socket as `directSink`. */
export interface LiveArgs extends ExecutionArgs {
  directSink?: DirectSink | undefined;
}

const preSerialised = new WeakSet<object>();

/** True for a shared result, whose size was checked once for its group. */
export function isPreSerialised(result: unknown): boolean {
  return typeof result === 'object' && result !== null && preSerialised.has(result);
}

interface Delivery {
  seq: bigint;
  /** the JSON of `result` when it is shareable as is (no errors, within the size cap) */
  json: string | undefined;
  result: ExecutionResult;
}

/** Live subscriptions of one registry. */
export interface FanOutStats {
  groups: number;
  members: number;
}

/** Process-wide counters, for tests and benchmarks: executions of a group's document for a live event (one per group). */
export const fanOutCounters = { sharedExecutions: 0 };

const REPLAY_WINDOW = 64;

const documentIds = new WeakMap<DocumentNode, number>();
let nextDocumentId = 1;

function documentId(document: DocumentNode): number {
  let id = documentIds.get(document);
  if (id === undefined) {
    id = nextDocumentId++;
    documentIds.set(document, id);
  }
  return id;
}

/** JSON with object keys sorted, so equal variables give equal keys. */
function stableJson(value: unknown): string {
  if (value === undefined) return '';
  if (Array.isArray(value)) return `[${value.map(stableJson).join(',')}]`;
  if (value && typeof value === 'object') {
    const keys = Object.keys(value).sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${stableJson((value as Record<string, unknown>)[k])}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

function isPromiseLike<T>(value: unknown): value is PromiseLike<T> {
  return typeof value === 'object' && value !== null && typeof (value as { then?: unknown }).then === 'function';
}

class Group {
  readonly members = new Set<Member>();
  private unwatch: () => void = () => {};
  /** results of async executions still to deliver, in seq order */
  private tail: Promise<void> | undefined;

  constructor(
    readonly hub: FanOut,
    readonly key: string,
    private readonly args: ExecutionArgs,
    live: LiveEvents,
  ) {
    this.unwatch = live.services.events.watch(live.principal, live.options, (e) => this.publish(e));
  }

  /** Executes the document for one event (its `events` field resolves to the event). */
  run(e: EventRecord | StreamFailure, contextValue = this.args.contextValue): ExecutionResult | PromiseLike<ExecutionResult> {
    return execute({ ...this.args, contextValue, rootValue: e instanceof StreamFailure ? e : toEvent(e) });
  }

  private publish(e: EventRecord): void {
    if (this.members.size === 0) return;
    fanOutCounters.sharedExecutions++;
    let out: ExecutionResult | PromiseLike<ExecutionResult>;
    try {
      out = this.run(e);
      if (!isPromiseLike(out) && this.tail === undefined) {
        this.deliver(e.seq, out);
        return;
      }
    } catch (error) {
      // Never thrown back into the feed, whose other watchers must still get the event.
      for (const member of [...this.members]) member.fail(error);
      return;
    }
    const previous = this.tail ?? Promise.resolve();
    const next: Promise<void> = previous
      .then(() => out)
      .then(
        (result) => this.deliver(e.seq, result),
        (error) => {
          for (const m of [...this.members]) m.fail(error);
        },
      )
      .finally(() => {
        if (this.tail === next) this.tail = undefined;
      });
    this.tail = next;
  }

  private deliver(seq: bigint, result: ExecutionResult): void {
    const d = share(seq, result);
    for (const member of this.members) member.live(d);
  }

  leave(member: Member): void {
    this.members.delete(member);
    this.hub.stats.members--;
    if (this.members.size === 0) this.close();
  }

  close(): void {
    this.unwatch();
    this.unwatch = () => {};
    if (this.hub.groups.get(this.key) === this) {
      this.hub.groups.delete(this.key);
      this.hub.stats.groups--;
    }
  }
}

/** Serialises a group's result once: every member receives this text (or, when not shareable, the result itself). */
function share(seq: bigint, result: ExecutionResult): Delivery {
  let json: string | undefined;
  if (!result.errors?.length) {
    const text = JSON.stringify(result);
    if (Buffer.byteLength(text) <= GRAPHQL_LIMITS.maxResponseBytes) json = text;
  }
  if (json !== undefined) {
    const text = json;
    Object.defineProperty(result, 'stringify', { value: () => text, enumerable: false });
    preSerialised.add(result);
  }
  return { seq, json, result };
}

/**
 * A member's life, one state at a time (`MEMBER_TRANSITIONS`):
 *
 *   replaying ──► live ──► ending ──► done
 *       └─────────────────────┘
 *
 * - replaying: `after` is being replayed; the group's live deliveries are held, in order, until it is done.
 * - live: each delivery goes straight to the socket when nothing is queued, else to the queue.
 * - ending: it left its group (its client left, completed it, shutdown, a failure or an overflow); what is queued,
 *   then `last` (a failure's payload), still go out.
 * - done: the transport was told the subscription is complete.
 */
type MemberState =
  | { name: 'replaying'; held: Delivery[] }
  | { name: 'live' }
  | { name: 'ending'; last: ExecutionResult | PromiseLike<ExecutionResult> | undefined }
  | { name: 'done' };

const MEMBER_TRANSITIONS: Record<MemberState['name'], readonly MemberState['name'][]> = {
  replaying: ['live', 'ending'],
  live: ['ending'],
  ending: ['done'],
  done: [],
};

const DONE: IteratorResult<ExecutionResult> = { done: true, value: undefined };

/** One subscription (a graphql-ws operation or an SSE request): an async iterator of its results. */
class Member implements AsyncIterableIterator<ExecutionResult> {
  private state: MemberState;
  /** results waiting for the transport to ask for them */
  private readonly queue: ExecutionResult[] = [];
  /** a result handed to the transport that has not asked for the next one yet (it may not be written yet) */
  private inflight = false;
  private lastSeq = -1n;
  /** wakes `next` waiting for a result */
  private wake: (() => void) | undefined;
  /** wakes a replay waiting for the transport to take what is queued */
  private room: (() => void) | undefined;
  /** aborted when the subscription ends (its client left, completed it, or shutdown): cancels the replay's statement */
  private readonly stop = new AbortController();

  private readonly args: ExecutionArgs;
  private readonly sink: DirectSink | undefined;

  /** `replays`: it starts by replaying `after` (`replay`), else live. */
  constructor(
    private readonly group: Group,
    opening: { args: LiveArgs; replays: boolean },
  ) {
    this.args = opening.args;
    this.sink = opening.args.directSink;
    this.state = opening.replays ? { name: 'replaying', held: [] } : { name: 'live' };
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  private to(next: MemberState): void {
    if (!MEMBER_TRANSITIONS[this.state.name].includes(next.name)) throw new Error(`a fan-out member cannot go from ${this.state.name} to ${next.name}`);
    this.state = next;
  }

  private get ending(): boolean {
    return this.state.name === 'ending' || this.state.name === 'done';
  }

  /** Replays the events after `after`, then the live deliveries held meanwhile, then goes live. */
  async replay(live: LiveEvents, after: string): Promise<void> {
    // Each page is read in a request scope of this subscription: its statement carries the operation's
    // request id and is cancelled when the subscription ends, as a query's is when its client leaves.
    const scope = {
      tag: (this.args.contextValue as { requestId?: string } | undefined)?.requestId ?? '',
      heavy: false,
      principal: `${live.principal.network} ${live.principal.owner}`,
      signal: this.stop.signal,
    };
    const pages = live.services.events.replay(live.principal, after, live.options);
    try {
      for (;;) {
        if (this.ending) return;
        const step = await live.services.requestScope(scope, () => pages.next());
        if (step.done) break;
        for (const e of step.value) {
          while (this.queue.length >= REPLAY_WINDOW && !this.ending) await new Promise<void>((resolve) => (this.room = resolve));
          if (this.ending) return;
          this.lastSeq = e.seq;
          this.push(await this.group.run(e));
        }
      }
      if (this.state.name !== 'replaying') return;
      const { held } = this.state;
      this.to({ name: 'live' });
      for (const d of held) this.live(d);
    } catch (error) {
      this.fail(error);
    } finally {
      void pages.return(undefined).catch(() => {});
    }
  }

  /** A live event of the group. */
  live(d: Delivery): void {
    if (this.state.name === 'replaying') {
      if (this.state.held.length >= MAX_BUFFERED) this.overflow();
      else this.state.held.push(d);
      return;
    }
    if (this.state.name !== 'live' || d.seq <= this.lastSeq) return;
    this.lastSeq = d.seq;
    if (d.json !== undefined && this.sink && this.queue.length === 0 && !this.inflight) {
      if (!this.sink.send(d.json)) this.overflow();
      return;
    }
    if (this.queue.length >= MAX_BUFFERED) this.overflow();
    else this.push(d.result);
  }

  private overflow(): void {
    this.fail(new DomainError('service_unavailable', 'The subscriber fell too far behind; reconnect with after.'));
  }

  /** Ends the subscription with the error as the field error of one last payload. */
  fail(error: unknown): void {
    if (this.ending) return;
    this.end(this.group.run(new StreamFailure(error), this.args.contextValue));
  }

  /** Ends the subscription (shutdown): what is queued (then `last`) is still delivered, then the transport completes it. */
  end(last?: ExecutionResult | PromiseLike<ExecutionResult>): void {
    if (this.ending) return;
    this.to({ name: 'ending', last });
    this.stop.abort();
    this.group.leave(this);
    this.group.hub.members.delete(this);
    this.wake?.();
    this.room?.();
  }

  private push(result: ExecutionResult): void {
    this.queue.push(result);
    this.wake?.();
  }

  async next(): Promise<IteratorResult<ExecutionResult>> {
    this.inflight = false;
    for (;;) {
      if (this.state.name === 'done') return DONE;
      const item = this.queue.shift();
      if (item !== undefined) {
        this.inflight = true;
        if (this.queue.length < REPLAY_WINDOW) this.room?.();
        return { done: false, value: item };
      }
      if (this.state.name === 'ending') return this.finish(this.state);
      await new Promise<void>((resolve) => (this.wake = resolve));
      this.wake = undefined;
    }
  }

  /** The queue is empty: `last` if there is one, then done. */
  private async finish(ending: Extract<MemberState, { name: 'ending' }>): Promise<IteratorResult<ExecutionResult>> {
    if (ending.last === undefined) {
      this.to({ name: 'done' });
      return DONE;
    }
    const pending = ending.last;
    ending.last = undefined;
    const last = await pending;
    if (this.state.name === 'done') return DONE;
    this.inflight = true;
    return { done: false, value: last };
  }

  async return(): Promise<IteratorResult<ExecutionResult>> {
    this.end();
    if (this.state.name !== 'done') this.to({ name: 'done' });
    this.queue.length = 0;
    return DONE;
  }
}

/** The registry of live subscriptions of one GraphQL front door. */
export class FanOut {
  readonly groups = new Map<string, Group>();
  readonly members = new Set<Member>();
  readonly stats: FanOutStats = { groups: 0, members: 0 };
  private closed = false;

  /** Envelop's subscribe: `events` subscriptions join their group; anything else runs as graphql-js would. */
  readonly subscribe = async (args: LiveArgs): Promise<ExecutionResult | AsyncIterableIterator<ExecutionResult>> => {
    const source = await createSourceEventStream(args);
    if (source instanceof LiveEvents) return this.join(args, source);
    if (!isAsyncIterable(source)) return source as ExecutionResult;
    return mapSource(source as AsyncIterable<unknown>, args);
  };

  private join(args: LiveArgs, live: LiveEvents): AsyncIterableIterator<ExecutionResult> {
    const owner = ownerFilter(live.principal);
    const key = [
      documentId(args.document),
      args.operationName ?? '',
      stableJson(args.variableValues ?? {}),
      live.principal.network,
      owner === undefined ? '*' : `=${owner}`,
    ].join('\u0000');
    let group = this.groups.get(key);
    if (!group) {
      group = new Group(this, key, args, live);
      this.groups.set(key, group);
      this.stats.groups++;
    }
    const member = new Member(group, { args, replays: !this.closed && live.options.after !== undefined });
    group.members.add(member);
    this.members.add(member);
    this.stats.members++;
    if (this.closed) member.end();
    else if (live.options.after !== undefined) void member.replay(live, live.options.after);
    return member;
  }

  /** Server shutdown: every live subscription completes. */
  close(): void {
    this.closed = true;
    for (const member of [...this.members]) member.end();
  }
}

async function* mapSource(source: AsyncIterable<unknown>, args: ExecutionArgs): AsyncGenerator<ExecutionResult> {
  for await (const payload of source) yield await execute({ ...args, rootValue: payload });
}

/** Envelop plugin: subscriptions run through the fan-out registry. */
export function useFanOut(fanOut: FanOut): Plugin {
  return {
    onSubscribe: ({ setSubscribeFn }) => {
      setSubscribeFn(fanOut.subscribe as never);
    },
  };
}
