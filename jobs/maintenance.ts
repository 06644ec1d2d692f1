import type { PolicyMaintenance } from '../domain/policies/maintenance.ts';
import type { TaskHandler } from '../domain/ports/job-queue.ts';
import type { PaidCallMaintenance } from '../domain/paywall/maintenance.ts';
import type { PaywallService } from '../domain/paywall/service.ts';

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

/**
 * Finishes paid calls whose settle outcome was unknown and whose buyer never came back (DECISIONS "x402 on the
 * paywall": a payment that landed is always recorded). Needs the paywall: a runner without ledgers skips it.
 */
export const resolvePaidCalls =
  (deps: { paywall: PaywallService | undefined; log: JobLogger }): TaskHandler =>
  async () => {
    if (!deps.paywall) return;
    const tally = await deps.paywall.resolvePending();
    if (tally.resolved + tally.refused + tally.pending) deps.log.info(tally, 'resolved pending paid calls');
  };
