import { z } from 'zod';
import { DomainError } from '../shared/errors.ts';
import type { Clock } from '../ports/clock.ts';
import type { RateLimitStore } from '../ports/policy-store.ts';

/**
 * hosted-api §8 and DECISIONS: limits per 60 s; `default` covers routes outside the table, `paywall` is per client IP,
 * `graphql` counts the cost of GraphQL operations (one slot per started unit of cost, interfaces/policies/graphql-limits.ts).
 */
export const DEFAULT_LIMITS = {
  prepare: 600,
  submit: 600,
  'receipts.write': 1200,
  'receipts.read': 600,
  'events.read': 600,
  'agents.read': 300,
  'indexer.read': 60,
  meta: 60,
  default: 600,
  paywall: 600,
  /** per client IP: the anonymous reads (disclosure links, registration documents) */
  public: 600,
  graphql: 600,
} as const;

export type Bucket = keyof typeof DEFAULT_LIMITS;
export const BUCKETS = Object.keys(DEFAULT_LIMITS) as Bucket[];
export const WINDOW_MS = 60_000;

/** `SVC_RATE_LIMITS='{"meta":5}'`: overrides by bucket name; unknown buckets are refused. */
export const RateLimitOverrides = z.partialRecord(z.enum(BUCKETS as [Bucket, ...Bucket[]]), z.number().int().min(1).max(10_000_000));
export type RateLimitOverrides = z.infer<typeof RateLimitOverrides>;

export function resolveLimits(overrides: RateLimitOverrides = {}): Record<Bucket, number> {
  return { ...DEFAULT_LIMITS, ...overrides };
}

export interface RateDecision {
  bucket: Bucket;
  allowed: boolean;
  limit: number;
  remaining: number;
  /** seconds until a slot frees up (the oldest hit in the window ages out) */
  resetSeconds: number;
  /** set when refused */
  retryAfterMs: number | null;
}

/** The headers of DECISIONS "Wire conventions", on every /v1 response. */
export function rateLimitHeaders(d: RateDecision): Record<string, string> {
  const headers: Record<string, string> = {
    'RateLimit-Limit': String(d.limit),
    'RateLimit-Remaining': String(d.remaining),
    'RateLimit-Reset': String(d.resetSeconds),
    'RateLimit-Policy': `${d.limit};w=${WINDOW_MS / 1000}`,
  };
  if (d.retryAfterMs !== null) headers['Retry-After'] = String(Math.max(1, Math.ceil(d.retryAfterMs / 1000)));
  return headers;
}

export function rateLimitedError(d: RateDecision): DomainError {
  return new DomainError('rate_limited', `Rate limit of ${d.limit} requests per 60 s exceeded for bucket ${d.bucket}.`, {
    bucket: d.bucket,
    limit: d.limit,
    retry_after_ms: d.retryAfterMs,
  });
}

/** A process admits on its own only while its view of the window is under this share of the limit. */
export const LOCAL_SHARE = 0.25;
/** ...and only while its view of the other processes' hits is this fresh. */
const FRESH_MS = 1000;

// The decision, pure: what memory and the store's answers prove about one window, and what is decided from it. The
// limiter (below) does the I/O around these functions: it reads the store, waits, and applies the next state.

/** One request: its bucket and limit, and the slots it takes (at least 1, at most the limit). */
export interface RateRequest {
  bucket: Bucket;
  limit: number;
  need: number;
}

/** What the store last proved: `used` hits in the window, none older than `until` − WINDOW_MS (see `WindowFacts.floor`). */
export interface Floor {
  used: number;
  until: number;
}

/** What this process knows of one window: the state every decision reads. */
export interface WindowFacts {
  /** this process's hits in the window (ms), oldest first */
  readonly local: { readonly length: number; at(i: number): number };
  /** other processes' hits in the window at the last exchange (an upper bound: never fewer than there were) */
  readonly others: number;
  /** when `others` was last refreshed (ms) */
  readonly exchangedAt: number;
  /** slots asked for by the exact decisions in flight: each may be an own hit in neither `local` nor `others` yet */
  readonly decidingSlots: number;
  /** admissions from memory so far: those made while an exact decision was in flight may precede it in truth */
  readonly admitted: number;
  /** Hits only age out or are added, so until `floor.until` the window holds at least `floor.used`. */
  readonly floor: Floor;
}

/** The next state of a window after a decision: the own hits it took at now, and the fields that change. */
export interface WindowChange {
  /** own hits taken at now: appended to `local` */
  take: number;
  /** true when the store recorded them (an exact decision); false: they are still to be shared (memory admitted them) */
  shared?: boolean;
  others?: number;
  exchangedAt?: number;
  admitted?: number;
  floor?: Floor;
}

/** A decision and the window's next state. */
export interface Decided {
  decision: RateDecision;
  next: WindowChange;
}

function decide(req: RateRequest, window: { allowed: boolean; used: number; oldestMs: number }, nowMs: number): RateDecision {
  const { allowed, used, oldestMs } = window;
  const freesAt = oldestMs + WINDOW_MS;
  const waitMs = Math.max(0, freesAt - nowMs);
  return {
    bucket: req.bucket,
    allowed,
    limit: req.limit,
    remaining: Math.max(0, req.limit - used),
    resetSeconds: Math.ceil(waitMs / 1000),
    retryAfterMs: allowed ? null : Math.max(1, waitMs),
  };
}

/** The slots a request of `hits` takes: at least one; a request needing more than the limit takes the whole window. */
export function slotsOf(hits: number, limit: number): number {
  return Math.min(Math.max(1, Math.ceil(hits)), limit);
}

/**
 * When the sliding window alone proves that `need` more slots do not fit: the hits proven in the window and the time
 * (ms) at which that proof lapses; otherwise undefined. Two proofs, both lower bounds on the hits in the window, so a
 * refusal from memory is one the store would have made:
 * - this process's own hits: each one is in the shared log (or on its way there) until it ages out;
 * - the store's last answer: `used` hits none older than `until` − 60 s are all still in the window before `until`.
 * The wait is until the proof lapses: then the store decides again (the first moment a slot may be free).
 */
function provenFull(w: WindowFacts, req: RateRequest, nowMs: number): Floor | undefined {
  let proof: Floor | undefined;
  const room = req.limit - req.need;
  if (w.local.length > room) proof = { used: w.local.length, until: w.local.at(w.local.length - room - 1) + WINDOW_MS };
  if (w.floor.until > nowMs && w.floor.used > room && (!proof || w.floor.until > proof.until)) {
    proof = { used: Math.max(w.floor.used, proof?.used ?? 0), until: w.floor.until };
  }
  return proof;
}

/** The refusal memory proves (`provenFull`), or undefined. `local` holds only hits still in the window. */
export function refuseFromMemory(w: WindowFacts, req: RateRequest, nowMs: number): RateDecision | undefined {
  const proof = provenFull(w, req, nowMs);
  return proof && decide(req, { allowed: false, used: proof.used, oldestMs: proof.until - WINDOW_MS }, nowMs);
}

/**
 * The decision memory alone can make, or undefined when only the store can decide: a refusal the window proves, or an
 * admission while this process's fresh view is far from the limit (under LOCAL_SHARE of it).
 */
export function decideFromMemory(w: WindowFacts, req: RateRequest, nowMs: number): Decided | undefined {
  const refused = refuseFromMemory(w, req, nowMs);
  if (refused) return { decision: refused, next: { take: 0 } };
  const view = w.others + w.local.length + w.decidingSlots;
  if (nowMs - w.exchangedAt > FRESH_MS || view + req.need > Math.floor(req.limit * LOCAL_SHARE)) return undefined;
  const oldestMs = w.local.length > 0 ? w.local.at(0) : nowMs;
  return {
    decision: decide(req, { allowed: true, used: view + req.need, oldestMs }, nowMs),
    next: { take: req.need, shared: false, admitted: w.admitted + req.need },
  };
}

/**
 * Whether an exact decision should wait for one in flight to be answered rather than ask too: the window was full at
 * the store's last answer and the decisions in flight may take whatever has freed up since. (Otherwise, near the
 * limit, every request that comes in while a slot frees up would go to PostgreSQL at once.)
 */
export function awaitsDecisionsInFlight(w: WindowFacts, req: RateRequest): boolean {
  return w.decidingSlots > 0 && w.floor.used + w.decidingSlots + req.need > req.limit;
}

/**
 * Keeps the store's proof of a busy window (see `WindowFacts.floor`): a new answer replaces a proof still valid only
 * when it proves as many hits (answers may arrive out of order; both are lower bounds, the larger one is kept).
 */
function raisedFloor(floor: Floor, seen: { used: number; oldestMs: number }, nowMs: number): Floor {
  if (floor.until > nowMs && floor.used > seen.used) return floor;
  return { used: seen.used, until: seen.oldestMs + WINDOW_MS };
}

/** The store's exact answer to one request, and what this process had sent with it. */
export interface StoreAnswer {
  allowed: boolean;
  /** hits in the window after the decision (its own included when allowed) */
  used: number;
  oldestMs: number;
  /** own hits the store had surely counted before the call (`confirmedOwn`) */
  confirmed: number;
  /** own hits not shared yet that the call carried */
  carried: number;
  /** `admitted` when the call was made */
  admittedBefore: number;
}

/**
 * The exact decision from the store's answer. The others' count is the store's minus the own hits it surely counted:
 * those confirmed before, the ones the call carried, and its own. Admissions from memory made while the call was in
 * flight were not in the store it counted: reported as taken (cautious; there are none once the window nears the
 * limit, where every decision is exact).
 */
export function decideFromStore(w: WindowFacts, req: RateRequest, answer: StoreAnswer, nowMs: number): Decided {
  const { allowed } = answer;
  const take = allowed ? req.need : 0;
  const used = allowed ? Math.min(req.limit, answer.used + (w.admitted - answer.admittedBefore)) : answer.used;
  return {
    decision: decide(req, { allowed, used, oldestMs: answer.oldestMs }, nowMs),
    next: {
      take,
      shared: true,
      others: Math.max(0, answer.used - answer.confirmed - answer.carried - take),
      exchangedAt: nowMs,
      floor: raisedFloor(w.floor, answer, nowMs),
    },
  };
}

/** The state after an exchange's row for a window no exact decision overlapped (`sync`). */
export function afterExchange(w: WindowFacts, row: { used: number; oldestMs: number | null; confirmed: number; carried: number }, nowMs: number): WindowChange {
  return {
    take: 0,
    others: Math.max(0, row.used - row.confirmed - row.carried),
    exchangedAt: nowMs,
    ...(row.oldestMs !== null ? { floor: raisedFloor(w.floor, { used: row.used, oldestMs: row.oldestMs }, nowMs) } : {}),
  };
}

/**
 * A sliding log of hit times (ms), oldest first. Aging out advances a head index and compacts now and then, so a hit
 * costs O(1) amortised however many the window holds (a splice per hit was O(window) once hits began to age out).
 */
export class HitLog {
  private times: number[] = [];
  private head = 0;

  get length(): number {
    return this.times.length - this.head;
  }

  /** the i-th oldest hit in the window */
  at(i: number): number {
    return this.times[this.head + i]!;
  }

  /** the newest hit, or undefined */
  last(): number | undefined {
    return this.length ? this.times[this.times.length - 1] : undefined;
  }

  push(t: number): void {
    this.times.push(t);
  }

  /** forgets the hits at or before `cutoff` */
  dropUntil(cutoff: number): void {
    const times = this.times;
    let head = this.head;
    while (head < times.length && times[head]! <= cutoff) head++;
    if (head === times.length) {
      this.times = [];
      this.head = 0;
    } else if (head > 1024 && head * 2 > times.length) {
      this.times = times.slice(head);
      this.head = 0;
    } else {
      this.head = head;
    }
  }
}

/** One window in this process: the facts the decisions read, and the bookkeeping of the store calls in flight. */
interface WindowState extends WindowFacts {
  local: HitLog;
  others: number;
  exchangedAt: number;
  decidingSlots: number;
  admitted: number;
  floor: Floor;
  /** this process's hits not yet written to the shared log */
  pending: Date[];
  /** own hits taken from `pending` by exchanges still in flight: the store may or may not have them yet */
  carrying: number;
  /** exact decisions in flight */
  deciding: number;
  /** resolved (and replaced) each time an exact decision of this window is answered */
  settled: Promise<void>;
  settle: () => void;
  /** exact decisions started so far: an exchange that overlapped one leaves `others` to that decision's answer */
  decisions: number;
  /** an exact decision carrying pending hits to the store: the next exact decision waits until they are there */
  flushing: Promise<void> | undefined;
}

/**
 * Own hits the store has surely counted once an exchange that started with this view is answered: every local hit
 * neither pending nor carried by another exchange in flight. Subtracting them from the store's count gives the
 * others' hits exactly when no other exchange of the window overlapped, and an upper bound when one did (its hits
 * may have been counted too) — so concurrent exchanges can make a process cautious, never generous.
 */
function confirmedOwn(w: WindowState): number {
  return Math.max(0, w.local.length - w.pending.length - w.carrying);
}

function newWindow(): WindowState {
  const w: WindowState = {
    local: new HitLog(),
    pending: [],
    others: 0,
    exchangedAt: -Infinity,
    carrying: 0,
    deciding: 0,
    decisions: 0,
    flushing: undefined,
    admitted: 0,
    floor: { used: 0, until: -Infinity },
    decidingSlots: 0,
    settled: Promise.resolve(),
    settle: () => {},
  };
  renewSettled(w);
  return w;
}

function renewSettled(w: WindowState): void {
  let settle!: () => void;
  w.settled = new Promise<void>((resolve) => (settle = resolve));
  w.settle = () => {
    renewSettled(w);
    settle();
  };
}

/** Applies a decision's next state; own hits taken from memory are also queued to be shared. */
function apply(w: WindowState, change: WindowChange, now: Date): void {
  const nowMs = now.getTime();
  for (let i = 0; i < change.take; i++) w.local.push(nowMs);
  if (change.shared === false) for (let i = 0; i < change.take; i++) w.pending.push(now);
  if (change.admitted !== undefined) w.admitted = change.admitted;
  if (change.others !== undefined) w.others = change.others;
  if (change.exchangedAt !== undefined) w.exchangedAt = change.exchangedAt;
  if (change.floor !== undefined) w.floor = change.floor;
}

/** While an exact decision carries pending hits to the store, the window's next exact decision waits for them. */
function trackFlush(w: WindowState, call: Promise<unknown>): void {
  const flushing = call.then(
    () => undefined,
    () => undefined,
  );
  w.flushing = flushing;
  void flushing.then(() => {
    if (w.flushing === flushing) w.flushing = undefined;
  });
}

function prune(log: HitLog, nowMs: number): void {
  log.dropUntil(nowMs - WINDOW_MS);
}

/**
 * Sliding-window log per (subject, bucket) shared by every process through the store (hosted-api §8).
 *
 * Far from the limit a process admits from memory (its exact own hits plus the others' count from the last exchange,
 * refreshed every 250 ms by `sync`), so a request costs no database round trip. Once its view reaches LOCAL_SHARE of
 * the limit, every admission is the store's exact, serialised decision. One process is therefore exact; across N
 * processes a burst inside one exchange interval can exceed the limit by at most (N − 1) × LOCAL_SHARE × limit.
 *
 * Refusals need no round trip once memory proves them (`provenFull`): this process's own hits already fill the
 * window, or the store's last answer showed a full window whose oldest hit has not aged out yet. Near the limit, then,
 * only the first refusal and the requests made when a slot may have freed up reach the store.
 */
export class RateLimiter {
  private readonly windows = new Map<string, WindowState>();
  /** the exchange in flight: an exact decision of a window whose hits it carries waits for it */
  private syncing: Promise<void> | undefined;
  /** the one exchange due after it: exchanges never overlap, and calls made meanwhile share the next one */
  private next: Promise<void> | undefined;
  /** refusals decided from memory so far, with no store round trip */
  localDenials = 0;

  constructor(private readonly deps: { store: RateLimitStore; clock: Clock; limits: Record<Bucket, number> }) {}

  limitOf(bucket: Bucket): number {
    return this.deps.limits[bucket];
  }

  /**
   * The decision memory alone can make, with no store round trip, or undefined when only the store can decide
   * (`decideFromMemory`). Synchronous, so the paywall's unpaid 402 can be answered before the HTTP framework
   * (interfaces/paywall/fast-402.ts).
   */
  admitFromMemory(subject: string, bucket: Bucket, hits = 1): RateDecision | undefined {
    const now = this.deps.clock.now();
    const req = this.requestOf(bucket, hits);
    const w = this.windowOf(subject, bucket);
    prune(w.local, now.getTime());
    const decided = decideFromMemory(w, req, now.getTime());
    if (!decided) return undefined;
    if (!decided.decision.allowed) this.localDenials++;
    apply(w, decided.next, now);
    return decided.decision;
  }

  private requestOf(bucket: Bucket, hits: number): RateRequest {
    const limit = this.deps.limits[bucket];
    return { bucket, limit, need: slotsOf(hits, limit) };
  }

  private windowOf(subject: string, bucket: Bucket): WindowState {
    const id = `${subject}\u0000${bucket}`;
    let w = this.windows.get(id);
    if (!w) {
      w = newWindow();
      this.windows.set(id, w);
    }
    return w;
  }

  /**
   * One request taking `hits` slots of the window (default 1; a GraphQL operation takes one per unit of its cost). A
   * request needing more slots than the limit takes the whole window. Memory decides when it can; otherwise, once its
   * turn comes (`blocker`), the store does (`askStore`).
   */
  async hit(subject: string, bucket: Bucket, hits = 1): Promise<RateDecision> {
    const fromMemory = this.admitFromMemory(subject, bucket, hits);
    if (fromMemory) return fromMemory;
    const now = this.deps.clock.now();
    const req = this.requestOf(bucket, hits);
    const w = this.windowOf(subject, bucket);
    // The last check and the store call's bookkeeping (askStore, up to its first await) run in one tick: a decision
    // that starts in between would not see this one in flight.
    for (let wait = this.blocker(w, req); wait; wait = this.blocker(w, req)) {
      await wait.until;
      if (wait.on !== 'decisions') continue;
      prune(w.local, now.getTime());
      const refused = refuseFromMemory(w, req, now.getTime());
      if (refused) {
        this.localDenials++;
        return refused;
      }
    }
    return this.askStore({ subject, w, req, now });
  }

  /**
   * What an exact decision of the window must wait for before it asks the store, or undefined: its hits carried by an
   * exchange in flight must be there first, and no decision in flight may be asking for the last free slots
   * (`awaitsDecisionsInFlight`; once one is answered, what it proved may refuse this one from memory).
   */
  private blocker(w: WindowState, req: RateRequest): { on: 'carried' | 'decisions'; until: Promise<unknown> } | undefined {
    if (w.carrying > 0 && w.flushing) return { on: 'carried', until: w.flushing };
    if (w.carrying > 0 && this.syncing) return { on: 'carried', until: this.syncing.catch(() => {}) };
    if (awaitsDecisionsInFlight(w, req)) return { on: 'decisions', until: w.settled };
    return undefined;
  }

  /** The store's exact, serialised decision, carrying this process's hits not shared yet (`decideFromStore`). */
  private async askStore(asked: { subject: string; w: WindowState; req: RateRequest; now: Date }): Promise<RateDecision> {
    const { subject, w, req, now } = asked;
    const confirmed = confirmedOwn(w);
    const pending = w.pending;
    const admittedBefore = w.admitted;
    w.pending = [];
    w.carrying += pending.length;
    w.deciding++;
    w.decidingSlots += req.need;
    w.decisions++;
    const call = this.deps.store.hit({ subject, bucket: req.bucket, limit: req.limit, windowMs: WINDOW_MS }, { now, pending, hits: req.need });
    if (pending.length) trackFlush(w, call);
    const answered = () => {
      w.carrying -= pending.length;
      w.deciding--;
      w.decidingSlots -= req.need;
    };
    let answer: Awaited<typeof call>;
    try {
      answer = await call;
    } catch (e) {
      // the hits it carried may not be in the store: they go back to be shared
      answered();
      w.pending = pending.concat(w.pending);
      w.settle();
      throw e;
    }
    answered();
    const decided = decideFromStore(
      w,
      req,
      { allowed: answer.allowed, used: answer.used, oldestMs: answer.oldest.getTime(), confirmed, carried: pending.length, admittedBefore },
      now.getTime(),
    );
    apply(w, decided.next, now);
    w.settle();
    return decided.decision;
  }

  /** Shares pending hits and refreshes the others' counts of the windows in use; forgets idle ones. */
  sync(): Promise<void> {
    if (!this.syncing) return this.startExchange();
    this.next ??= this.syncing
      .catch(() => {})
      .then(() => {
        this.next = undefined;
        return this.startExchange();
      });
    return this.next;
  }

  private startExchange(): Promise<void> {
    const run = this.exchange().finally(() => {
      if (this.syncing === run) this.syncing = undefined;
    });
    this.syncing = run;
    return run;
  }

  private async exchange(): Promise<void> {
    const now = this.deps.clock.now();
    const nowMs = now.getTime();
    const entries: { subject: string; bucket: string; pending: Date[] }[] = [];
    const taken = new Map<string, { w: WindowState; pending: Date[]; confirmed: number; overlapped: boolean; decisions: number }>();
    for (const [id, w] of this.windows) {
      prune(w.local, nowMs);
      if (!w.local.length && !w.pending.length && !w.deciding) {
        this.windows.delete(id);
        continue;
      }
      const [subject, bucket] = id.split('\u0000') as [string, string];
      entries.push({ subject, bucket, pending: w.pending });
      taken.set(id, { w, pending: w.pending, confirmed: confirmedOwn(w), overlapped: w.deciding > 0, decisions: w.decisions });
      w.carrying += w.pending.length;
      w.pending = [];
    }
    if (!entries.length) return;
    let rows: Awaited<ReturnType<RateLimitStore['sync']>>;
    try {
      rows = await this.deps.store.sync(entries, WINDOW_MS, now);
    } catch (e) {
      for (const { w, pending } of taken.values()) {
        w.carrying -= pending.length;
        w.pending = pending.concat(w.pending);
      }
      throw e;
    }
    for (const { w, pending } of taken.values()) w.carrying -= pending.length;
    for (const row of rows) {
      const mine = taken.get(`${row.subject}\u0000${row.bucket}`);
      // An exact decision ran meanwhile: the store may have counted its hit, and it refreshes `others` itself.
      if (!mine || mine.overlapped || mine.w.decisions !== mine.decisions) continue;
      const seen = { used: row.used, oldestMs: row.oldest?.getTime() ?? null, confirmed: mine.confirmed, carried: mine.pending.length };
      apply(mine.w, afterExchange(mine.w, seen, nowMs), now);
    }
  }
}
