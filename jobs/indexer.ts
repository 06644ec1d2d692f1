import type { JobQueue, TaskHandler } from '../domain/ports/job-queue.ts';
import { Network } from '../domain/shared/network.ts';
import type { IndexerService } from '../domain/indexer/service.ts';
import { INDEX_TASK, indexJobKey } from '../domain/indexer/watchlist.ts';
import type { JobLogger } from './maintenance.ts';

// The indexer job, one per network (job key index_ledger:<network>). A run follows the network's watchlist
// once, then the job schedules itself again: soon while runs find transactions, a little later when idle; the minute
// tick (no payload) starts one per network in case that chain of jobs was lost. Two runs at once are safe (the
// exactly-once record is in the database), only wasteful.

export { INDEX_TASK };
/** the next run after one that found transactions, and after an idle one */
export const INDEX_BUSY_DELAY_MS = 500;
export const INDEX_IDLE_DELAY_MS = 1_500;
/** after a failed run (ledger down, …) */
export const INDEX_ERROR_DELAY_MS = 10_000;

export const indexLedger =
  (deps: { indexer: IndexerService; queue: JobQueue; log: JobLogger; now: () => Date }): TaskHandler =>
  async (payload) => {
    const parsed = Network.safeParse((payload as { network?: unknown } | null)?.network);
    if (!parsed.success) {
      // the minute tick: (re)start the chain of every network this process follows
      for (const network of deps.indexer.networks()) await deps.queue.add(INDEX_TASK, { network }, { jobKey: indexJobKey(network) });
      return;
    }
    const network = parsed.data;
    if (!deps.indexer.networks().includes(network)) return;
    let delay = INDEX_IDLE_DELAY_MS;
    try {
      const run = await deps.indexer.run(network);
      if (run.events) deps.log.info({ network, ...run }, 'indexer reported ledger activity');
      if (run.watched === 0) return; // nothing to follow: a new watch entry or the minute tick starts it again
      if (run.signatures > 0) delay = INDEX_BUSY_DELAY_MS;
    } catch (err) {
      deps.log.info({ err, network }, 'indexer run failed; will retry');
      delay = INDEX_ERROR_DELAY_MS;
    }
    await deps.queue.add(INDEX_TASK, { network }, { jobKey: indexJobKey(network), runAt: new Date(deps.now().getTime() + delay) });
  };
