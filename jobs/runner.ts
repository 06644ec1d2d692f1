import type { PolicyMaintenance } from '../domain/policies/maintenance.ts';
import type { Recurring, TaskHandler } from '../domain/ports/job-queue.ts';
import type { PaidCallMaintenance } from '../domain/paywall/maintenance.ts';
import type { PaywallService } from '../domain/paywall/service.ts';
import { pruneIdempotency, prunePaidCalls, pruneRequestRecords, resolvePaidCalls, type JobLogger } from './maintenance.ts';

/** Every task by name and the recurring schedule; the composition root hands these to the queue library. */
export function jobDefinitions(deps: { maintenance: PolicyMaintenance; paidCalls: PaidCallMaintenance; paywall: PaywallService | undefined; log: JobLogger }): {
  tasks: Record<string, TaskHandler>;
  recurring: Recurring[];
} {
  return {
    tasks: {
      prune_idempotency: pruneIdempotency(deps),
      prune_request_records: pruneRequestRecords(deps),
      prune_paid_calls: prunePaidCalls(deps),
      resolve_paid_calls: resolvePaidCalls(deps),
    },
    recurring: [
      { task: 'prune_idempotency', schedule: '*/10 * * * *' },
      { task: 'prune_request_records', schedule: '17 * * * *' },
      { task: 'prune_paid_calls', schedule: '37 * * * *' },
      { task: 'resolve_paid_calls', schedule: '* * * * *' },
    ],
  };
}
