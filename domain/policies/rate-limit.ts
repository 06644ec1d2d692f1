import { z } from 'zod';
import { DomainError } from '../shared/errors.ts';
import type { Clock } from '../ports/clock.ts';
import type { RateLimitStore } from '../ports/policy-store.ts';

/** hosted-api §8 and DECISIONS: limits per 60 s; `default` covers routes outside the table, `paywall` is per client IP. */
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

function decide(bucket: Bucket, limit: number, allowed: boolean, used: number, oldestMs: number, nowMs: number): RateDecision {
  const freesAt = oldestMs + WINDOW_MS;
  const waitMs = Math.max(0, freesAt - nowMs);
  return {
    bucket,
    allowed,
    limit,
    remaining: Math.max(0, limit - used),
    resetSeconds: Math.ceil(waitMs / 1000),
    retryAfterMs: allowed ? null : Math.max(1, waitMs),
  };
}

/** Sliding-window log per (subject, bucket) shared through the store: every hit counts for 60 s. */
export class RateLimiter {
  constructor(private readonly deps: { store: RateLimitStore; clock: Clock; limits: Record<Bucket, number> }) {}

  limitOf(bucket: Bucket): number {
    return this.deps.limits[bucket];
  }

  async hit(subject: string, bucket: Bucket): Promise<RateDecision> {
    const now = this.deps.clock.now();
    const limit = this.deps.limits[bucket];
    const r = await this.deps.store.hit(subject, bucket, limit, WINDOW_MS, now);
    return decide(bucket, limit, r.allowed, r.used, r.oldest.getTime(), now.getTime());
  }
}

/**
 * The same sliding log kept in this process's memory: for the public paywall's per-IP bucket, which must not cost
 * a database round trip per challenge. Each process counts on its own (documented in the README).
 */
export class MemoryRateLimiter {
  private readonly logs = new Map<string, number[]>();
  private sweeps = 0;

  constructor(private readonly deps: { clock: Clock; limits: Record<Bucket, number> }) {}

  hit(subject: string, bucket: Bucket): RateDecision {
    const nowMs = this.deps.clock.now().getTime();
    const limit = this.deps.limits[bucket];
    const id = `${bucket}|${subject}`;
    let log = this.logs.get(id);
    if (!log) this.logs.set(id, (log = []));
    let drop = 0;
    while (drop < log.length && log[drop]! <= nowMs - WINDOW_MS) drop++;
    if (drop) log.splice(0, drop);
    const allowed = log.length < limit;
    if (allowed) log.push(nowMs);
    if (++this.sweeps % 10_000 === 0) this.sweep(nowMs);
    return decide(bucket, limit, allowed, log.length, log[0] ?? nowMs, nowMs);
  }

  /** forgets idle subjects so memory follows the active set */
  private sweep(nowMs: number): void {
    for (const [id, log] of this.logs) if (!log.length || log[log.length - 1]! <= nowMs - WINDOW_MS) this.logs.delete(id);
  }
}
