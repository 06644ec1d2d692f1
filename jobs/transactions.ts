import type { JobQueue, TaskHandler } from '../domain/ports/job-queue.ts';
import { CONFIRM_TASK, type TransactionService } from '../domain/transactions/service.ts';
import type { JobLogger } from './maintenance.ts';
import { runAgainAt } from './receipts.ts';

// The confirmations job and the expiry of prepared events (hosted-api §3.1, DECISIONS "Prepare / submit /
// events"). Both are safe to run twice at once: a runner leases the rows it checks, and a phase changes only from
// the phase it is expected in.

export { CONFIRM_TASK };
export const EXPIRE_PREPARED_TASK = 'expire_prepared';

/** Checks due submitted transactions, then runs again when the next check is due (at most a minute away). */
export const confirmTransactions =
  (deps: { transactions: TransactionService; queue: JobQueue; log: JobLogger; now: () => Date }): TaskHandler =>
  async () => {
    let result: Awaited<ReturnType<TransactionService['checkDue']>>;
    do {
      result = await deps.transactions.checkDue();
      // One line per decided transaction (the console's confirmation line, interfaces/log.ts).
      for (const d of result.decisions) deps.log.info({ evt: 'confirmation', ...d }, d.phase === 'confirmed' ? 'transaction confirmed' : 'transaction failed');
    } while (result.checked > 0 && result.nextDue !== null && result.nextDue <= deps.now());
    if (result.nextDue !== null) await runAgainAt(deps.queue, CONFIRM_TASK, { due: result.nextDue, now: deps.now(), minMs: 100 });
  };

/** Prepared events older than 24 h → failed "expired". */
export const expirePrepared =
  (deps: { transactions: TransactionService; log: JobLogger }): TaskHandler =>
  async () => {
    const expired = await deps.transactions.expirePrepared();
    if (expired) deps.log.info({ expired }, 'prepared transactions expired');
  };
