import pg from 'pg';
import type { EventFeed } from '../../domain/ports/store.ts';
import type { EventRecord } from '../../domain/events/schema.ts';
import type { MikroOrmStore } from './mikro-orm-store.ts';
import { EVENTS_CHANNEL } from './repositories/events.ts';

export interface FeedLogger {
  warn(obj: object, msg: string): void;
}

const PAGE = 500;
/**
 * How soon the feed looks again while committed events wait behind an open older transaction. No notification comes
 * when that transaction ends without writing an event (it may be any transaction: migration 0018's horizon), so the
 * feed must look by itself; short, because a held event is late by this much past that end, and safe to be short
 * because at most one look is pending (pump below), which bounds the horizon queries to 1000 / HELD_BACK_RETRY_MS a
 * second under a steady write load.
 */
const HELD_BACK_RETRY_MS = 5;
/** after a failed catch-up (the database away): slow enough not to spin on a failing database; nothing is lost meanwhile, the next catch-up starts from the last seq */
const FAILED_CATCH_UP_RETRY_MS = 500;
/** the first reconnect after a lost LISTEN connection, doubling to RECONNECT_MAX_MS: the same, for a database restarting */
const RECONNECT_FIRST_MS = 200;
const RECONNECT_MAX_MS = 5000;

/**
 * LISTEN/NOTIFY bridge: one connection per process listens on the events channel; each notification triggers
 * one catch-up query (seq > last seen) whose rows are fanned out, in seq order, to every local subscriber. Every event
 * write (append, appendMany, transition: repositories/events.ts) notifies in its own statement, delivered at its
 * commit, so a subscriber waits for no poll: the one timer on the way is the held-back look below.
 * After a lost connection it reconnects and catches up from the last seq, so subscribers see no gap.
 */
export class PgEventFeed implements EventFeed {
  private readonly listeners = new Set<(e: EventRecord) => void>();
  private client: pg.Client | undefined;
  private lastSeq = 0n;
  private pumping = false;
  private again = false;
  private closed = false;
  private retry: NodeJS.Timeout | undefined;
  /** the pending look again while events are held back (at most one) */
  private heldRetry: NodeJS.Timeout | undefined;

  constructor(
    private readonly url: string,
    private readonly store: MikroOrmStore,
    private readonly log: FeedLogger,
  ) {}

  async start(): Promise<void> {
    this.lastSeq = await this.store.maxEventSeq();
    await this.connect();
  }

  subscribe(listener: (e: EventRecord) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retry);
    clearTimeout(this.heldRetry);
    this.listeners.clear();
    await this.client?.end().catch(() => {});
  }

  private async connect(): Promise<void> {
    const client = new pg.Client({ connectionString: this.url });
    client.on('notification', () => void this.pump());
    client.on('error', (err) => this.lost(client, err));
    client.on('end', () => this.lost(client, new Error('connection ended')));
    await client.connect();
    await client.query(`LISTEN ${EVENTS_CHANNEL}`);
    this.client = client;
    // Anything committed while we were not listening is picked up here.
    void this.pump();
  }

  private lost(client: pg.Client, err: Error): void {
    if (this.closed || this.client !== client) return;
    this.client = undefined;
    this.log.warn({ err: err.message }, 'event feed connection lost; reconnecting');
    const attempt = (delay: number) => {
      this.retry = setTimeout(() => {
        this.connect().catch(() => attempt(Math.min(delay * 2, RECONNECT_MAX_MS)));
      }, delay);
    };
    attempt(RECONNECT_FIRST_MS);
  }

  private async pump(): Promise<void> {
    if (this.pumping) {
      this.again = true;
      return;
    }
    this.pumping = true;
    try {
      do {
        this.again = false;
        for (;;) {
          if (this.closed) return;
          const rows = await this.store.eventsSince(this.lastSeq, PAGE);
          for (const e of rows) {
            this.lastSeq = e.seq;
            for (const listener of this.listeners) listener(e);
          }
          if (rows.length < PAGE) break;
        }
        // Committed events above the horizon wait for an older transaction to end; look again shortly — one
        // look pending at most: under a steady write load the horizon is nearly always held, and a look per finished
        // catch-up (each notification's) piled up into hundreds of polls a second of the costly horizon.
        if (!this.again && !this.heldRetry && (await this.store.eventsHeldBack())) {
          this.heldRetry = setTimeout(() => {
            this.heldRetry = undefined;
            void this.pump();
          }, HELD_BACK_RETRY_MS);
          this.heldRetry.unref();
        }
      } while (this.again);
    } catch (err) {
      if (!this.closed) {
        this.log.warn({ err: (err as Error).message }, 'event feed catch-up failed; retrying');
        setTimeout(() => void this.pump(), FAILED_CATCH_UP_RETRY_MS).unref();
      }
    } finally {
      this.pumping = false;
    }
  }
}
