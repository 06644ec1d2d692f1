// Storage for the cross-cutting request policies (idempotency, rate limits, request records), shared by every
// process on the database so that two instances behave as one.

export interface IdempotencyRecord {
  keyId: string;
  route: string;
  idemKey: string;
  /** SHA-256 hex of the canonical request input */
  requestHash: string;
  state: 'running' | 'done';
  /** JSON text of the stored outcome, byte-for-byte what is replayed; null while running */
  response: string | null;
  /** a running record whose owner died may be taken over after this */
  lockedUntil: Date;
  createdAt: Date;
  expiresAt: Date;
}

export interface IdempotencyStore {
  /**
   * Inserts a running record, or takes over a running one whose lock expired. Returns 'claimed' when this caller
   * now owns the key, otherwise the existing record.
   */
  claim(record: IdempotencyRecord): Promise<'claimed' | IdempotencyRecord>;
  get(keyId: string, route: string, idemKey: string): Promise<IdempotencyRecord | null>;
  complete(keyId: string, route: string, idemKey: string, response: string): Promise<void>;
  /** forgets a claim (the call failed with a 5xx or threw): a retry runs again */
  release(keyId: string, route: string, idemKey: string): Promise<void>;
  /** removes records past expires_at; returns how many */
  deleteExpired(now: Date): Promise<number>;
}

export interface RateHitResult {
  allowed: boolean;
  /** hits in the window after this decision (including this one's when allowed) */
  used: number;
  /** the oldest hit still in the window (when a slot frees up) */
  oldest: Date;
}

export interface RateWindow {
  subject: string;
  bucket: string;
  /** hits of every process in the window, after the flush */
  used: number;
  /** oldest hit in the window, null when empty */
  oldest: Date | null;
}

/** One sliding window: whose, which bucket, its limit and its length. */
export interface RateWindowKey {
  subject: string;
  bucket: string;
  limit: number;
  windowMs: number;
}

export interface RateLimitStore {
  /**
   * The exact decision: adds `pending` (this process's hits not shared yet), ages out hits older than the window,
   * counts, and records `hits` hits (default 1) at `now` when they all fit under `limit`. Serialised per (subject, bucket)
   * across processes.
   */
  hit(window: RateWindowKey, request: { now: Date; pending: Date[]; hits?: number }): Promise<RateHitResult>;
  /** Shares pending hits and reads back the window of each (subject, bucket), in one round trip. */
  sync(entries: { subject: string; bucket: string; pending: Date[] }[], windowMs: number, now: Date): Promise<RateWindow[]>;
}

export interface RequestRecord {
  id: string;
  keyId: string;
  network: string;
  bucket: string;
  method: string;
  route: string;
  status: number;
  durationMs: number;
  at: Date;
}

export interface UsageRow {
  keyId: string;
  bucket: string;
  /** "2026-11-21" (UTC) */
  day: string;
  requests: number;
  errors: number;
  throttled: number;
}

export interface UsageQuery {
  keyId?: string | undefined;
  since: Date;
  /** newest day first, then key and bucket: the rows after this one (a page's cursor) */
  after?: { day: string; keyId: string; bucket: string } | undefined;
  limit?: number | undefined;
}

export interface RequestRecordStore {
  insertMany(records: RequestRecord[]): Promise<void>;
  /** per key, bucket and UTC day, from the UTC day of `since` on (the caller passes a UTC midnight) */
  usage(network: string, query: UsageQuery): Promise<UsageRow[]>;
  deleteOlderThan(cutoff: Date): Promise<number>;
}

export interface PolicyStore {
  idempotency: IdempotencyStore;
  rateLimits: RateLimitStore;
  requestRecords: RequestRecordStore;
}
