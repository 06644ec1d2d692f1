import type { Clock } from '../ports/clock.ts';
import type { PolicyStore } from '../ports/policy-store.ts';

/** hosted-api §7/§8: request records are kept 30 days. */
export const REQUEST_RECORD_RETENTION_MS = 30 * 24 * 3600_000;

/** Clean-up of the policy tables; run by recurring jobs. Idempotent. */
export class PolicyMaintenance {
  constructor(private readonly deps: { store: PolicyStore; clock: Clock }) {}

  pruneIdempotency(): Promise<number> {
    return this.deps.store.idempotency.deleteExpired(this.deps.clock.now());
  }

  pruneRequestRecords(): Promise<number> {
    return this.deps.store.requestRecords.deleteOlderThan(new Date(this.deps.clock.now().getTime() - REQUEST_RECORD_RETENTION_MS));
  }
}
