import { createHash } from 'node:crypto';
import { DomainError, ERROR_CODES, isErrorCode } from '../shared/errors.ts';
import { canonicalJson } from '../shared/canonical-json.ts';
import type { Clock } from '../ports/clock.ts';
import type { IdempotencyRecord, IdempotencyStore } from '../ports/policy-store.ts';

// hosted-api §5.7 and DECISIONS "Wire conventions": Idempotency-Key on any POST.

export const IDEMPOTENCY_TTL_MS = 24 * 3600_000;
export const MAX_KEY_LENGTH = 64;
/** how long a second request with the same key waits for the first */
export const WAIT_MS = 10_000;
/** a claim whose owner vanished (crash) may be taken over after this */
const LEASE_MS = 60_000;

/** What is stored and replayed: the success value or the error, with the request id of the first call. */
export type Outcome =
  | { ok: true; data: unknown; requestId: string }
  | { ok: false; error: { code: string; message: string; details?: Record<string, unknown> }; requestId: string };

export function checkIdempotencyKey(key: string | undefined): string | undefined {
  if (key === undefined) return undefined;
  if (key.length === 0 || key.length > MAX_KEY_LENGTH) {
    throw DomainError.invalid(
      [{ path: 'Idempotency-Key', message: `must be 1 to ${MAX_KEY_LENGTH} characters`, code: 'too_big' }],
      `Idempotency-Key must be 1 to ${MAX_KEY_LENGTH} characters.`,
    );
  }
  return key;
}

export function requestHash(input: unknown): string {
  return createHash('sha256')
    .update(canonicalJson(input ?? null))
    .digest('hex');
}

export function outcomeError(outcome: Outcome & { ok: false }): DomainError {
  const { code, message, details } = outcome.error;
  return new DomainError(isErrorCode(code) ? code : 'internal_error', message, details);
}

export interface IdempotentCall {
  keyId: string;
  /** the operation, e.g. "paymentLinks.create": shared by REST, tRPC and GraphQL */
  route: string;
  idemKey: string;
  input: unknown;
  requestId: string;
  /**
   * What of a success value may be kept: a secret shown once (a new API key) is removed before storing, so a replay
   * returns the same answer without it.
   */
  redact?: (data: unknown) => unknown;
}

export class IdempotencyService {
  constructor(private readonly deps: { store: IdempotencyStore; clock: Clock }) {}

  /**
   * Runs `exec` once per (key id, route, key). Returns the outcome and whether it was replayed. A second call with
   * another body is 409 idempotency_body_mismatch; one arriving while the first runs waits up to 10 s, then 409
   * idempotency_in_progress. 5xx outcomes (thrown non-domain errors included) are not stored.
   */
  async run(call: IdempotentCall, exec: () => Promise<unknown>): Promise<{ outcome: Outcome; replayed: boolean }> {
    const hash = requestHash(call.input);
    const deadline = this.deps.clock.now().getTime() + WAIT_MS;
    let delay = 20;
    for (;;) {
      const now = this.deps.clock.now();
      const claim = await this.deps.store.claim({
        keyId: call.keyId,
        route: call.route,
        idemKey: call.idemKey,
        requestHash: hash,
        state: 'running',
        response: null,
        lockedUntil: new Date(now.getTime() + LEASE_MS),
        createdAt: now,
        expiresAt: new Date(now.getTime() + IDEMPOTENCY_TTL_MS),
      });
      if (claim === 'claimed') return { outcome: await this.execute(call, exec), replayed: false };
      this.checkSameBody(claim, hash);
      if (claim.state === 'done' && claim.response !== null) {
        return { outcome: JSON.parse(claim.response) as Outcome, replayed: true };
      }
      if (now.getTime() >= deadline) {
        throw new DomainError('idempotency_in_progress', 'A request with this Idempotency-Key is still running; retry later.', {
          idempotency_key: call.idemKey,
        });
      }
      await this.deps.clock.sleep(Math.min(delay, deadline - now.getTime()));
      delay = Math.min(delay * 2, 250);
    }
  }

  private checkSameBody(record: IdempotencyRecord, hash: string): void {
    if (record.requestHash !== hash) {
      throw new DomainError('idempotency_body_mismatch', 'This Idempotency-Key was used with a different request body.', {
        idempotency_key: record.idemKey,
      });
    }
  }

  private async execute(call: IdempotentCall, exec: () => Promise<unknown>): Promise<Outcome> {
    const { store } = this.deps;
    let outcome: Outcome;
    try {
      outcome = { ok: true, data: await exec(), requestId: call.requestId };
    } catch (e) {
      if (!(e instanceof DomainError) || ERROR_CODES[e.code].status >= 500) {
        await store.release(call.keyId, call.route, call.idemKey).catch(() => {});
        throw e;
      }
      const error: { code: string; message: string; details?: Record<string, unknown> } = { code: e.code, message: e.message };
      if (e.details !== undefined) error.details = e.details;
      outcome = { ok: false, error, requestId: call.requestId };
    }
    const kept = outcome.ok && call.redact ? { ...outcome, data: call.redact(outcome.data) } : outcome;
    await store.complete(call.keyId, call.route, call.idemKey, JSON.stringify(kept));
    return outcome;
  }
}
