import test from 'ava';
import fc from 'fast-check';
import {
  afterExchange,
  decideFromMemory,
  decideFromStore,
  type Floor,
  type RateDecision,
  type RateRequest,
  slotsOf,
  WINDOW_MS,
  type WindowChange,
  type WindowFacts,
} from '../../domain/policies/rate-limit.ts';

// The rate limiter's decision is pure (domain/policies/rate-limit.ts): these properties drive it the way the limiter
// does — from memory when it can, else from an exact store — over random traffic of one process, against a model
// store that holds every hit, and check what hosted-api §8 promises of a sliding window.

/** One process's view of a window, as the limiter keeps it (no store call is in flight between two steps here). */
interface Model extends WindowFacts {
  local: { length: number; at(i: number): number };
  times: number[];
  pending: number[];
  others: number;
  exchangedAt: number;
  decidingSlots: number;
  admitted: number;
  floor: Floor;
}

function newModel(): Model {
  const times: number[] = [];
  return {
    times,
    local: {
      get length() {
        return times.length;
      },
      at: (i: number) => times[i]!,
    },
    pending: [],
    others: 0,
    exchangedAt: -Infinity,
    decidingSlots: 0,
    admitted: 0,
    floor: { used: 0, until: -Infinity },
  };
}

function apply(m: Model, change: WindowChange, nowMs: number): void {
  for (let i = 0; i < change.take; i++) {
    m.times.push(nowMs);
    if (change.shared === false) m.pending.push(nowMs);
  }
  if (change.admitted !== undefined) m.admitted = change.admitted;
  if (change.others !== undefined) m.others = change.others;
  if (change.exchangedAt !== undefined) m.exchangedAt = change.exchangedAt;
  if (change.floor !== undefined) m.floor = change.floor;
}

/** Hits at or before `cutoff` age out (as HitLog.dropUntil and the store do). */
const ageOut = (times: number[], nowMs: number) => {
  while (times.length > 0 && times[0]! <= nowMs - WINDOW_MS) times.shift();
};

type Step = { kind: 'hit'; dt: number; hits: number } | { kind: 'sync'; dt: number };

const step: fc.Arbitrary<Step> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({
      kind: fc.constant('hit' as const),
      dt: fc.oneof(fc.integer({ min: 0, max: 300 }), fc.integer({ min: 0, max: 70_000 })),
      hits: fc.integer({ min: 1, max: 4 }),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('sync' as const), dt: fc.integer({ min: 0, max: 2_000 }) }) },
);

/** Runs the steps; answers every decision with the request, the time and the hits truly in the window before it. */
function run(limit: number, steps: readonly Step[]): { decision: RateDecision; need: number; inWindow: number; fromMemory: boolean }[] {
  const m = newModel();
  const store: number[] = [];
  const admittedAt: number[] = [];
  const out: { decision: RateDecision; need: number; inWindow: number; fromMemory: boolean }[] = [];
  let nowMs = 1_000_000;
  for (const s of steps) {
    nowMs += s.dt;
    ageOut(m.times, nowMs);
    if (s.kind === 'sync') {
      const seen = { confirmed: m.times.length - m.pending.length, carried: m.pending.length };
      store.push(...m.pending.splice(0));
      ageOut(store, nowMs);
      apply(m, afterExchange(m, { used: store.length, oldestMs: store[0] ?? null, ...seen }, nowMs), nowMs);
      continue;
    }
    const req: RateRequest = { bucket: 'default', limit, need: slotsOf(s.hits, limit) };
    const inWindow = admittedAt.filter((t) => t > nowMs - WINDOW_MS).length;
    let decided = decideFromMemory(m, req, nowMs);
    const fromMemory = decided !== undefined;
    if (!decided) {
      // the exact decision: the store takes the process's pending hits, ages out, and admits when the request fits
      const carried = { confirmed: m.times.length - m.pending.length, carried: m.pending.length, admittedBefore: m.admitted };
      store.push(...m.pending.splice(0));
      ageOut(store, nowMs);
      const allowed = store.length + req.need <= limit;
      if (allowed) for (let i = 0; i < req.need; i++) store.push(nowMs);
      decided = decideFromStore(m, req, { allowed, used: store.length, oldestMs: store[0] ?? nowMs, ...carried }, nowMs);
    }
    apply(m, decided.next, nowMs);
    if (decided.decision.allowed) for (let i = 0; i < req.need; i++) admittedAt.push(nowMs);
    out.push({ decision: decided.decision, need: req.need, inWindow, fromMemory });
  }
  return out;
}

const traffic = fc.record({ limit: fc.integer({ min: 1, max: 24 }), steps: fc.array(step, { minLength: 1, maxLength: 300 }) });

test('never more than the limit admitted in any 60 s window', (t) => {
  fc.assert(
    fc.property(traffic, ({ limit, steps }) => {
      for (const d of run(limit, steps)) if (d.decision.allowed && d.inWindow + d.need > limit) return false;
      return true;
    }),
  );
  t.pass();
});

test('a refusal made from memory is one the store would have made: the window held no room for the request', (t) => {
  fc.assert(
    fc.property(traffic, ({ limit, steps }) => {
      for (const d of run(limit, steps)) if (d.fromMemory && !d.decision.allowed && d.inWindow + d.need <= limit) return false;
      return true;
    }),
  );
  t.pass();
});

test('retry-after is set exactly on refusals and never below 1 ms; reset and remaining stay in range', (t) => {
  fc.assert(
    fc.property(traffic, ({ limit, steps }) => {
      for (const { decision: d } of run(limit, steps)) {
        if (d.allowed !== (d.retryAfterMs === null)) return false;
        if (d.retryAfterMs !== null && d.retryAfterMs < 1) return false;
        if (d.resetSeconds < 0 || d.resetSeconds > WINDOW_MS / 1000) return false;
        if (d.remaining < 0 || d.remaining > d.limit) return false;
      }
      return true;
    }),
  );
  t.pass();
});

test('far from the limit with a fresh view, memory admits with no store round trip', (t) => {
  const m = newModel();
  m.exchangedAt = 0;
  const decided = decideFromMemory(m, { bucket: 'default', limit: 100, need: 1 }, 500);
  t.true(decided?.decision.allowed);
  t.deepEqual(decided?.next, { take: 1, shared: false, admitted: 1 });
  // a stale view leaves the decision to the store
  t.is(decideFromMemory(m, { bucket: 'default', limit: 100, need: 1 }, 5_000), undefined);
});
