import type { PolicyMaintenance } from '../domain/policies/maintenance.ts';
import type { JobQueue, Recurring, TaskHandler } from '../domain/ports/job-queue.ts';
import type { PullService } from '../domain/receipts/pull.ts';
import type { ReceiptService } from '../domain/receipts/service.ts';
import type { PaidCallMaintenance } from '../domain/paywall/maintenance.ts';
import type { PaywallService } from '../domain/paywall/service.ts';
import { compactEventCounts, pruneIdempotency, prunePaidCalls, pruneRequestRecords, resolvePaidCalls, type JobLogger } from './maintenance.ts';
import type { WebhookService } from '../domain/webhooks/service.ts';
import { DELIVER_WEBHOOK_TASK, SWEEP_WEBHOOKS_TASK } from '../domain/webhooks/delivery.ts';
import { deliverWebhook, sweepWebhooks } from './webhooks.ts';
import { PULL_TASK, pullReceipts, verifyReceipts } from './receipts.ts';
import type { TransactionService } from '../domain/transactions/service.ts';
import { CONFIRM_TASK, confirmTransactions, EXPIRE_PREPARED_TASK, expirePrepared } from './transactions.ts';
import type { IndexerService } from '../domain/indexer/service.ts';
import { INDEX_TASK, IndexFollowers, indexLedger } from './indexer.ts';
import type { AgentProof } from '../domain/agents/proof.ts';
import { PROVE_AGENTS_TASK, proveAgents } from './agent-proof.ts';

/** Every task by name and the recurring schedule; the composition root hands these to the queue library. */
export function jobDefinitions(deps: {
  maintenance: PolicyMaintenance;
  /** the event counters' compaction (MetricsService) */
  metrics: { compactEventCounts(): Promise<number> };
  paidCalls: PaidCallMaintenance;
  paywall: PaywallService | undefined;
  webhooks: WebhookService;
  log: JobLogger;
  /** Receipt checks and the pull worker (absent: not registered) */
  receipts?: { receipts: ReceiptService; pull: PullService; queue: JobQueue; now: () => Date } | undefined;
  /** The confirmations job and the expiry of prepared events (absent: a process without ledgers) */
  transactions?: { transactions: TransactionService; queue: JobQueue; now: () => Date } | undefined;
  /** The indexer job per network (absent: a process without ledgers) */
  indexer?: { indexer: IndexerService; queue: JobQueue; now: () => Date } | undefined;
  /** The look for unproven agents' assets on the ledger (absent: a process without ledgers) */
  agentProof?: { proof: Pick<AgentProof, 'proveUnproven'>; now: () => Date } | undefined;
}): {
  tasks: Record<string, TaskHandler>;
  recurring: Recurring[];
  /** what runs beside the queue while the runner does: the indexer's followers of the ledgers' notifications */
  live: { start(): void; stop(): Promise<void> };
} {
  const { paywall } = deps;
  const followers = deps.indexer ? new IndexFollowers({ ...deps.indexer, log: deps.log }) : undefined;
  // A task is registered only where it can run: a process without a paywall (no ledgers) leaves resolve_paid_calls
  // to one that has it, rather than taking the job and doing nothing.
  return {
    tasks: {
      prune_idempotency: pruneIdempotency(deps),
      compact_event_counts: compactEventCounts(deps),
      prune_request_records: pruneRequestRecords(deps),
      prune_paid_calls: prunePaidCalls(deps),
      ...(paywall ? { resolve_paid_calls: resolvePaidCalls({ paywall, log: deps.log }) } : {}),
      [DELIVER_WEBHOOK_TASK]: deliverWebhook(deps),
      [SWEEP_WEBHOOKS_TASK]: sweepWebhooks(deps),
      ...(deps.receipts
        ? {
            verify_receipts: verifyReceipts({ receipts: deps.receipts.receipts, log: deps.log }),
            [PULL_TASK]: pullReceipts({ pull: deps.receipts.pull, queue: deps.receipts.queue, log: deps.log, now: deps.receipts.now }),
          }
        : {}),
      ...(deps.transactions
        ? {
            [CONFIRM_TASK]: confirmTransactions({ ...deps.transactions, log: deps.log }),
            [EXPIRE_PREPARED_TASK]: expirePrepared({ transactions: deps.transactions.transactions, log: deps.log }),
          }
        : {}),
      ...(deps.indexer ? { [INDEX_TASK]: indexLedger({ ...deps.indexer, log: deps.log, followers }) } : {}),
      ...(deps.agentProof ? { [PROVE_AGENTS_TASK]: proveAgents({ ...deps.agentProof, log: deps.log }) } : {}),
    },
    recurring: [
      { task: 'prune_idempotency', schedule: '*/10 * * * *' },
      { task: 'compact_event_counts', schedule: '* * * * *' },
      { task: 'prune_request_records', schedule: '17 * * * *' },
      { task: 'prune_paid_calls', schedule: '37 * * * *' },
      ...(paywall ? [{ task: 'resolve_paid_calls', schedule: '* * * * *' }] : []),
      { task: SWEEP_WEBHOOKS_TASK, schedule: '* * * * *' },
      // The pull worker reschedules itself per target cadence; the minute tick restarts it if that job was lost.
      ...(deps.receipts
        ? [
            { task: 'verify_receipts', schedule: '* * * * *' },
            { task: PULL_TASK, schedule: '* * * * *' },
          ]
        : []),
      // Submits wake the confirmations job at once; the minute tick restarts it if that job was lost.
      ...(deps.transactions
        ? [
            { task: CONFIRM_TASK, schedule: '* * * * *' },
            { task: EXPIRE_PREPARED_TASK, schedule: '*/10 * * * *' },
          ]
        : []),
      // Each network's indexer follows the ledger's notifications (its job chain polls only while they are interrupted);
      // the minute tick hands each follower the watchlist as it is and restarts a lost chain.
      ...(deps.indexer ? [{ task: INDEX_TASK, schedule: '* * * * *' }] : []),
      ...(deps.agentProof ? [{ task: PROVE_AGENTS_TASK, schedule: '* * * * *' }] : []),
    ],
    live: { start: () => followers?.start(), stop: async () => followers?.stop() },
  };
}
