import type { PolicyMaintenance } from '../domain/policies/maintenance.ts';
import type { Recurring, TaskHandler } from '../domain/ports/job-queue.ts';
import type { PaidCallMaintenance } from '../domain/paywall/maintenance.ts';
import type { PaywallService } from '../domain/paywall/service.ts';
import { pruneIdempotency, prunePaidCalls, pruneRequestRecords, resolvePaidCalls, type JobLogger } from './maintenance.ts';
import type { WebhookService } from '../domain/webhooks/service.ts';
import { DELIVER_WEBHOOK_TASK, SWEEP_WEBHOOKS_TASK } from '../domain/webhooks/delivery.ts';
import { deliverWebhook, sweepWebhooks } from './webhooks.ts';

/** Every task by name and the recurring schedule; the composition root hands these to the queue library. */
export function jobDefinitions(deps: {
  maintenance: PolicyMaintenance;
  paidCalls: PaidCallMaintenance;
  paywall: PaywallService | undefined;
  webhooks: WebhookService;
  log: JobLogger;
}): {
  tasks: Record<string, TaskHandler>;
  recurring: Recurring[];
} {
  const { paywall } = deps;
  // A task is registered only where it can run: a process without a paywall (no ledgers) leaves resolve_paid_calls
  // to one that has it, rather than taking the job and doing nothing.
  return {
    tasks: {
      prune_idempotency: pruneIdempotency(deps),
      prune_request_records: pruneRequestRecords(deps),
      prune_paid_calls: prunePaidCalls(deps),
      ...(paywall ? { resolve_paid_calls: resolvePaidCalls({ paywall, log: deps.log }) } : {}),
      [DELIVER_WEBHOOK_TASK]: deliverWebhook(deps),
      [SWEEP_WEBHOOKS_TASK]: sweepWebhooks(deps),
    },
    recurring: [
      { task: 'prune_idempotency', schedule: '*/10 * * * *' },
      { task: 'prune_request_records', schedule: '17 * * * *' },
      { task: 'prune_paid_calls', schedule: '37 * * * *' },
      ...(paywall ? [{ task: 'resolve_paid_calls', schedule: '* * * * *' }] : []),
      { task: SWEEP_WEBHOOKS_TASK, schedule: '* * * * *' },
    ],
  };
}
