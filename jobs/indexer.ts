import type { JobQueue, TaskHandler } from '../domain/ports/job-queue.ts';
import type { ActivityFeed, AddressActivity } from '../domain/ports/ledger.ts';
import type { Network as NetworkName } from '../domain/shared/network.ts';
import { Network } from '../domain/shared/network.ts';
import type { IndexerService } from '../domain/indexer/service.ts';
import { INDEX_TASK, indexJobKey } from '../domain/indexer/watchlist.ts';
import type { JobLogger } from './maintenance.ts';

// The indexer job, one per network (job key index_ledger:<network>), and the followers that make it rarely needed.
// Where the ledger notifies (IndexFollower below), the job only hands a changed watchlist to this process's follower.
// Otherwise — a ledger without notifications, or while they are interrupted — a run follows the network's watchlist
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
  (deps: { indexer: IndexerService; queue: JobQueue; log: JobLogger; now: () => Date; followers?: IndexFollowers | undefined }): TaskHandler =>
  async (payload) => {
    const parsed = Network.safeParse((payload as { network?: unknown } | null)?.network);
    if (!parsed.success) {
      // the minute tick: (re)start the chain of every network this process follows
      for (const network of deps.indexer.networks()) await deps.queue.add(INDEX_TASK, { network }, { jobKey: indexJobKey(network) });
      return;
    }
    const network = parsed.data;
    if (!deps.indexer.networks().includes(network)) return;
    const follower = deps.followers?.of(network);
    if (follower?.following) {
      // notified: a new watch entry (or the minute tick) only widens what the follower listens to; it catches up itself
      await follower.refresh();
      return;
    }
    await follower?.refresh();
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

/** after a failed catch-up (ledger down, …), the next try; doubling up to INDEX_ERROR_DELAY_MS */
const CATCH_UP_RETRY_MS = 500;
/** how often an idle, caught-up follower records its sync point and the cursors it covered */
export const FOLLOW_SYNC_MS = 1_000;

type Item = { kind: 'activity'; activity: AddressActivity } | { kind: 'catch_up' };

/**
 * A network's indexer driven by the ledger's notifications of the watched addresses (hosted-api §6): each notified
 * transaction is indexed as it is confirmed; getSignaturesForAddress is read only to catch up — at start, after a gap
 * (a dropped socket), and for addresses newly followed. Every step is the indexer's own (indexer_seen writes each
 * event once), so two followers, a follower and a polling run, or a rescan never report twice. Work is serial: a
 * catch-up and the notifications are indexed in the order they came.
 *
 * Cursors: an address's cursor moves only past transactions this follower indexed itself with no gap since its last
 * complete catch-up (`covered`), so a later catch-up never skips one.
 */
export class IndexFollower {
  private feed: ActivityFeed | undefined;
  private live = false;
  private covered = false;
  private readonly queue: Item[] = [];
  private working: Promise<void> | null = null;
  private readonly cursors = new Map<string, { signature: string; slot: number }>();
  private dirty = false;
  private retryMs = CATCH_UP_RETRY_MS;
  private retry: NodeJS.Timeout | undefined;
  private syncTimer: NodeJS.Timeout | undefined;
  private stopped = false;
  /** an onGap since the last onLive (the operator's "back" line) */
  private interrupted = false;

  constructor(private readonly deps: { indexer: IndexerService; network: NetworkName; queue: JobQueue; log: JobLogger; now: () => Date }) {}

  /** false where the ledger has no notifications: the job chain polls as before */
  start(): boolean {
    const { indexer, network } = this.deps;
    this.feed = indexer.feed(network, {
      onActivity: (activity) => this.push({ kind: 'activity', activity }),
      onLive: () => {
        if (this.interrupted) this.deps.log.info({ network }, 'ledger notifications back; the indexer catches up and follows them again');
        this.interrupted = false;
        this.live = true;
        this.push({ kind: 'catch_up' });
      },
      onGap: (reason) => {
        this.interrupted = true;
        this.live = false;
        this.covered = false;
        this.deps.log.info({ network, reason }, 'ledger notifications interrupted; the indexer polls until they are back');
        void this.poll();
      },
    });
    if (!this.feed) return false;
    this.syncTimer = setInterval(() => void this.sync(), FOLLOW_SYNC_MS);
    this.syncTimer.unref();
    void this.refresh();
    return true;
  }

  /** following every watched address, and caught up since the last gap: the job chain need not poll */
  get following(): boolean {
    return this.live && !this.stopped;
  }

  /** Follows the watchlist as it is now (a new entry's job, the minute tick); a widened set catches up (onLive). */
  async refresh(): Promise<void> {
    if (this.stopped || !this.feed) return;
    try {
      this.feed.follow(await this.deps.indexer.watchedAddresses(this.deps.network));
    } catch (err) {
      this.deps.log.info({ err, network: this.deps.network }, 'watchlist not read; the next job tries again');
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.feed?.close();
    clearTimeout(this.retry);
    clearInterval(this.syncTimer);
    this.queue.length = 0;
    await this.working;
  }

  /** the job chain while notifications are interrupted (it stops once they are back: `following`) */
  private async poll(): Promise<void> {
    const { network, queue } = this.deps;
    await queue.add(INDEX_TASK, { network }, { jobKey: indexJobKey(network) }).catch(() => undefined);
  }

  private push(item: Item): void {
    if (this.stopped) return;
    if (item.kind === 'catch_up' && this.queue.some((q) => q.kind === 'catch_up')) return;
    this.queue.push(item);
    this.working ??= this.work().finally(() => {
      this.working = null;
    });
  }

  private async work(): Promise<void> {
    for (let item = this.queue.shift(); item && !this.stopped; item = this.queue.shift()) {
      if (item.kind === 'catch_up') await this.catchUp();
      else await this.index(item.activity);
    }
  }

  private async catchUp(): Promise<void> {
    const { indexer, network, log } = this.deps;
    const wasLive = this.live;
    try {
      const run = await indexer.run(network);
      if (run.events) log.info({ network, ...run, via: 'catch_up' }, 'indexer reported ledger activity');
      this.retryMs = CATCH_UP_RETRY_MS;
      // everything up to the run's listing is indexed, everything after it is notified: the cursors are ours to move
      if (wasLive && this.live) {
        this.covered = true;
        this.cursors.clear();
      }
    } catch (err) {
      log.info({ err, network }, 'indexer catch-up failed; will retry');
      clearTimeout(this.retry);
      this.retry = setTimeout(() => this.push({ kind: 'catch_up' }), this.retryMs);
      this.retry.unref();
      this.retryMs = Math.min(this.retryMs * 2, INDEX_ERROR_DELAY_MS);
    }
  }

  private async index(activity: AddressActivity): Promise<void> {
    const { indexer, network, log } = this.deps;
    try {
      const events = await indexer.indexNotified(network, activity);
      if (events) log.info({ network, signature: activity.signature, events, via: 'notification' }, 'indexer reported ledger activity');
      if (this.covered) {
        for (const address of activity.addresses) this.cursors.set(address, { signature: activity.signature, slot: activity.slot });
        this.dirty = true;
      }
    } catch (err) {
      // not indexed: a catch-up reads it again (its cursor never moved past it)
      log.info({ err, network, signature: activity.signature }, 'notified transaction not indexed; catching up');
      this.covered = false;
      this.push({ kind: 'catch_up' });
    }
  }

  /** Idle and caught up: the cursors covered and the sync point (slots before the ledger's current one are closed). */
  private async sync(): Promise<void> {
    if (this.stopped || !this.covered || this.working) return;
    const { indexer, network } = this.deps;
    try {
      const slot = await indexer.ledgerSlot(network);
      // anything notified meanwhile is indexed first: the next tick records it
      if (slot === null || this.working || !this.covered) return;
      if (this.dirty) {
        const cursors = new Map(this.cursors);
        this.cursors.clear();
        this.dirty = false;
        await indexer.advanceCursors(network, cursors);
      }
      await indexer.recordSynced(network, Math.max(slot - 1, 0));
    } catch {
      // the next tick tries again
    }
  }
}

/** One follower per network of this process whose ledger notifies (jobs/runner.ts starts and stops them). */
export class IndexFollowers {
  private readonly followers = new Map<NetworkName, IndexFollower>();

  constructor(private readonly deps: { indexer: IndexerService; queue: JobQueue; log: JobLogger; now: () => Date }) {}

  start(): void {
    for (const network of this.deps.indexer.networks()) {
      const follower = new IndexFollower({ ...this.deps, network });
      if (follower.start()) this.followers.set(network, follower);
    }
  }

  of(network: NetworkName): IndexFollower | undefined {
    return this.followers.get(network);
  }

  async stop(): Promise<void> {
    await Promise.all([...this.followers.values()].map((f) => f.stop()));
    this.followers.clear();
  }
}
