import { z } from 'zod';
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

/**
 * Folds the event counters' deltas into their rollup (migration 0014): appends only insert deltas, so metrics reads
 * stay O(buckets) between their own compactions.
 */
export const compactEventCounts =
  (deps: { metrics: { compactEventCounts(): Promise<number> } }): TaskHandler =>
  async () => {
    await deps.metrics.compactEventCounts();
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

const ResolvePayload = z.looseObject({
  /** how long a buyer may take to come back before the job finishes the call itself; default 60 s */
  older_than_ms: z.number().int().min(0).optional(),
});

/**
 * Finishes paid calls nobody answered — an unknown settle outcome, or a process that died holding the claim — whose
 * buyer never came back (DECISIONS "x402 on the paywall": a payment that landed is always recorded).
 * Every process that runs jobs has a paywall (`npm run jobs` reaches the ledgers through the gateway's JSON-RPC).
 */
export const resolvePaidCalls =
  (deps: { paywall: PaywallService; log: JobLogger }): TaskHandler =>
  async (payload) => {
    const parsed = ResolvePayload.safeParse(payload ?? {});
    const tally = await deps.paywall.resolvePending({ olderThanMs: parsed.success ? parsed.data.older_than_ms : undefined });
    if (tally.resolved + tally.refused + tally.pending + tally.forgotten) deps.log.info(tally, 'resolved pending paid calls');
  };
