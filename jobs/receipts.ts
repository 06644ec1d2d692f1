import { z } from 'zod';
import type { JobQueue, TaskHandler } from '../domain/ports/job-queue.ts';
import type { PullService } from '../domain/receipts/pull.ts';
import type { ReceiptService } from '../domain/receipts/service.ts';
import type { JobLogger } from './maintenance.ts';

// The receipt checks' retry job and the pull worker. Both are safe to run twice at once: a check's decision
// is recorded only while the receipt is still pending, and the worker leases each target it runs.

const Payload = z.looseObject({ limit: z.number().int().min(1).max(1000).optional() });

/** Re-checks pending receipts whose retry time has come (every minute, and on demand). */
export const verifyReceipts =
  (deps: { receipts: ReceiptService; log: JobLogger }): TaskHandler =>
  async (payload) => {
    const { limit } = Payload.parse(payload ?? {});
    for (;;) {
      const { checked, decided } = await deps.receipts.verifyDue(limit ?? 100);
      if (decided) deps.log.info({ checked, decided }, 'receipt checks decided');
      if (checked < (limit ?? 100)) return;
    }
  };

/** The job that runs due pull targets; it schedules itself for the next due target (the floor is 10 s). */
export const PULL_TASK = 'pull_receipts';

/** Runs due pull targets, then asks the queue to run again when the next one is due (at most a minute away). */
export const pullReceipts =
  (deps: { pull: PullService; queue: JobQueue; log: JobLogger; now: () => Date }): TaskHandler =>
  async () => {
    let result: Awaited<ReturnType<PullService['runDue']>>;
    do {
      result = await deps.pull.runDue();
      for (const run of result.runs)
        deps.log.info({ pull_target_id: run.targetId, ok: run.ok, accepted: run.accepted, rejected: run.rejected.length, error: run.error }, 'pulled receipts');
    } while (result.runs.length > 0 && result.nextDue !== null && result.nextDue <= deps.now());
    await runAgainAt(deps.queue, PULL_TASK, { due: result.nextDue ?? new Date(deps.now().getTime() + 60_000), now: deps.now(), minMs: 1000 });
  };

/**
 * A self-scheduling task asks the queue to run it again when its next item is due: not sooner than `minMs` from now,
 * not later than a minute (its minute tick backs it up). One pending job per task (jobKey).
 */
export async function runAgainAt(queue: JobQueue, task: string, when: { due: Date; now: Date; minMs: number }): Promise<void> {
  const { due, now, minMs } = when;
  const at = Math.min(Math.max(due.getTime(), now.getTime() + minMs), now.getTime() + 60_000);
  await queue.add(task, {}, { jobKey: task, runAt: new Date(at) });
}
