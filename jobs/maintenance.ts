import type { PolicyMaintenance } from '../domain/policies/maintenance.ts';
import type { TaskHandler } from '../domain/ports/job-queue.ts';
import type { PaidCallMaintenance } from '../domain/paywall/maintenance.ts';

export interface JobLogger {
  info(obj: object, msg: string): void;
}

/** Removes idempotency records past their 24 h (hosted-api §5.7). */
export const pruneIdempotency =
  (deps: { maintenance: PolicyMaintenance; log: JobLogger }): TaskHandler =>
  async () => {
    const removed = await deps.maintenance.pruneIdempotency();
    if (removed) deps.log.info({ removed }, 'pruned expired idempotency records');
  };

/** Removes request records older than 30 days (hosted-api §7). */
export const pruneRequestRecords =
  (deps: { maintenance: PolicyMaintenance; log: JobLogger }): TaskHandler =>
  async () => {
    const removed = await deps.maintenance.pruneRequestRecords();
    if (removed) deps.log.info({ removed }, 'pruned request records older than 30 days');
  };

/** Removes answered paid calls past their 24 h replay window (DECISIONS "x402 on the paywall"). */
export const prunePaidCalls =
  (deps: { paidCalls: PaidCallMaintenance; log: JobLogger }): TaskHandler =>
  async () => {
    const removed = await deps.paidCalls.prune();
    if (removed) deps.log.info({ removed }, 'pruned paid calls past their replay window');
  };
