import { MikroORM, PostgreSqlDriver, type EntityManager } from '@mikro-orm/postgresql';
import pg from 'pg';
import type { Repositories, Store } from '../../domain/ports/store.ts';
import type { EventRecord } from '../../domain/events/schema.ts';
import { MIGRATIONS, migrationsList } from '../../migrations/index.ts';
import type { ProcessOwner } from './process-owner.ts';
import { currentScope, outsideScope, runScoped, tagQuery } from './request-scope.ts';
import { localHeavySlots, type HeavySlots } from './heavy-slots.ts';
import { DomainError } from '../../domain/shared/errors.ts';
import type { RequestScope } from '../../domain/ports/store.ts';
import { rawOn, type RepoContext } from './repositories/context.ts';
import { apiKeyRepository } from './repositories/api-keys.ts';
import { agentRepository } from './repositories/agents.ts';
import { paymentLinkRepository } from './repositories/payment-links.ts';
import { receiptRepository } from './repositories/receipts.ts';
import { paidCallRepository } from './repositories/paid-calls.ts';
import { paymentIdRepository } from './repositories/payment-ids.ts';
import { eventRepository, eventsHeldBack, eventsSince, maxEventSeq } from './repositories/events.ts';
import { pullTargetRepository } from './repositories/pull-targets.ts';
import { preparedTransactionRepository } from './repositories/prepared-transactions.ts';
import { identityRepository } from './repositories/identity.ts';
import { buyerRepository } from './repositories/buyer-policies.ts';
import { fanOutMatched, transactionalJobQueue, webhookDeliveryRepository, webhookRepository } from './repositories/webhooks.ts';
import type { EventRepository } from '../../domain/ports/store.ts';
import { indexerRepository } from './repositories/indexer.ts';
import { discoveryRepository } from './repositories/discovery.ts';
import { streamTokenRepository } from './repositories/stream-tokens.ts';
import { linkAccessRepository } from './repositories/link-access.ts';

/** Advisory lock keys (arbitrary constants, one per purpose; the others sit with their repositories). */
const MIGRATION_LOCK = 7_201_001;

export async function initOrm(url: string, poolMax = 10, options: { statementTimeoutMs?: number; acquireTimeoutMs?: number } = {}): Promise<MikroORM> {
  const { statementTimeoutMs, acquireTimeoutMs } = options;
  // A Unix socket directory in the URL's `host` parameter (the embedded cluster's: embedded-postgres.ts) is what
  // node-postgres connects through; MikroORM reads the host from the URL's address unless it is given.
  const socketHost = new URL(url).searchParams.get('host');
  return MikroORM.init({
    driver: PostgreSqlDriver,
    clientUrl: url,
    ...(socketHost ? { host: socketHost } : {}),
    // Migrations are hand-written SQL listed in migrations/index.ts (its list is set when one is pending: migratorOf);
    // no snapshot is written at run time.
    migrations: { silent: true, transactional: true, allOrNothing: true, snapshot: false },
    pool: {
      min: 0,
      max: poolMax,
      ...(acquireTimeoutMs ? { acquireTimeoutMillis: acquireTimeoutMs } : {}),
      // A pool of one request class: its statements stop server-side too (a backstop to the scope's own timer).
      ...(statementTimeoutMs
        ? {
            afterCreate: (conn: pg.Client, done: (err: Error | null, conn: pg.Client) => void) =>
              void conn.query(`set statement_timeout = ${Math.floor(statementTimeoutMs)}`, (err) => done(err, conn)),
          }
        : {}),
    },
    // Statements of a scoped request carry its tag (request-scope.ts), so a timeout or a client that left cancels them.
    onQuery: tagQuery,
    debug: false,
    allowGlobalContext: false,
    forceUtcTimezone: true,
    discovery: { warnWhenNoEntities: false },
  });
}

/**
 * Runs pending migrations; an advisory lock keeps two processes starting together from racing. A database that has
 * every migration is seen from the migrations table alone, without loading the migrator (a start's largest import).
 */
export async function migrate(orm: MikroORM, url: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  let locked = false;
  try {
    if (!(await hasPendingMigrations(client))) return;
    await client.query('select pg_advisory_lock($1)', [MIGRATION_LOCK]);
    locked = true;
    await (await migratorOf(orm)).up();
  } finally {
    if (locked) await client.query('select pg_advisory_unlock($1)', [MIGRATION_LOCK]).catch(() => {});
    await client.end();
  }
}

/** MikroORM's migrator over migrations/index.ts, for `orm`'s database. */
export async function migratorOf(orm: MikroORM): Promise<import('@mikro-orm/migrations').Migrator> {
  const [{ Migrator }, list] = await Promise.all([import('@mikro-orm/migrations'), migrationsList()]);
  orm.config.set('migrations', { ...orm.config.get('migrations'), migrationsList: list });
  return new Migrator(orm.em);
}

async function hasPendingMigrations(client: pg.Client): Promise<boolean> {
  const table = await client.query<{ found: string | null }>("select to_regclass('mikro_orm_migrations') as found");
  if (!table.rows[0]?.found) return true;
  const done = await client.query<{ name: string }>('select name from mikro_orm_migrations');
  const executed = new Set(done.rows.map((row) => row.name));
  return MIGRATIONS.some(({ name }) => !executed.has(name));
}

class Repos implements Repositories, RepoContext {
  constructor(
    readonly em: () => EntityManager,
    readonly inTransaction: boolean,
    /** this process's liveness number for the claims it takes (none: claims are held by their lease only) */
    readonly owner: ProcessOwner | undefined,
    readonly raw?: RepoContext['raw'],
  ) {}

  readonly apiKeys = apiKeyRepository(this);
  readonly agents = agentRepository(this);
  readonly paymentLinks = paymentLinkRepository(this);
  readonly receipts = receiptRepository(this);
  readonly paidCalls = paidCallRepository(this);
  readonly paymentIds = paymentIdRepository(this);
  readonly pullTargets = pullTargetRepository(this);
  readonly preparedTransactions = preparedTransactionRepository(this);
  readonly identity = identityRepository(this);
  readonly buyer = buyerRepository(this);
  readonly webhooks = webhookRepository(
    () => this.em(),
    () => this.inTransaction,
  );
  readonly webhookDeliveries = webhookDeliveryRepository(
    () => this.em(),
    () => this.owner?.epoch ?? null,
  );
  readonly jobs = transactionalJobQueue(() => this.em());
  readonly indexer = indexerRepository(this);
  readonly discovery = discoveryRepository(this);
  readonly streamTokens = streamTokenRepository(this);
  readonly linkAccess = linkAccessRepository(this);

  private readonly eventRows = eventRepository(this);
  readonly events: EventRepository = {
    ...this.eventRows,
    append: async (e) => {
      if (!this.inTransaction) throw new Error('events.append must run inside store.transaction');
      // DECISIONS "Webhooks": the event's deliveries and their jobs commit with it (transactional outbox). Made before
      // the append, whose lock every append holds until commit.
      await this.webhookDeliveries.fanOut({ id: e.id, network: e.network, kind: e.kind, phase: e.phase, owner: e.owner, createdAt: e.createdAt });
      return this.eventRows.append(e);
    },
    appendMany: async (events) => {
      if (!this.inTransaction) throw new Error('events.appendMany must run inside store.transaction');
      // the rows and the subscriptions that see them in one statement; deliveries (rare) in a second
      const matches = await this.eventRows.appendMatching(events);
      await fanOutMatched(() => this.em(), events, matches);
    },
    transition: async (network, id, change) => {
      const moved = await this.eventRows.transition(network, id, change);
      // Each phase is its own delivery (DECISIONS "Webhooks"), made in the transaction that records the phase.
      if (moved) await this.webhookDeliveries.fanOut({ id: moved.id, network, kind: moved.kind, phase: moved.phase, owner: moved.owner, createdAt: change.at });
      return moved;
    },
  };
}

/**
 * Request classes: `timeoutMs` for every scoped request, `heavyTimeoutMs` for heavy ones (lists and
 * aggregates), at most `heavyPerPrincipal` heavy requests of one principal at once across every process sharing
 * `slots` (the database's advisory locks: heavy-slots.ts), which run on the heavy pool (its own connections, so the
 * main pool always has room for everyone else's requests).
 */
export interface RequestClasses {
  timeoutMs: number;
  heavyTimeoutMs: number;
  heavyPerPrincipal: number;
  /** the heavy pool's ORM (initOrm with its share of the connections and heavyTimeoutMs); none: heavy shares the main pool */
  heavyOrm?: MikroORM | undefined;
  /** where the per-principal slots are counted; none: in this process only */
  slots?: HeavySlots | undefined;
}

const DEFAULT_CLASSES: RequestClasses = { timeoutMs: 30_000, heavyTimeoutMs: 10_000, heavyPerPrincipal: 2 };

/** The Store port on MikroORM + PostgreSQL: one fork per call, one per transaction. */
export class MikroOrmStore extends Repos implements Store {
  /** principal → request tag → its heavy procedures running, and the slot the request holds */
  private readonly heavyRunning = new Map<string, Map<string, { count: number; slot: Promise<number | undefined> }>>();
  private readonly slots: HeavySlots;

  constructor(
    private readonly orm: MikroORM,
    owner?: ProcessOwner,
    private readonly classes: RequestClasses = DEFAULT_CLASSES,
  ) {
    // A heavy request's reads take the heavy pool; everything else (and every transaction) the main one.
    const pool = () => (currentScope()?.heavy && classes.heavyOrm ? classes.heavyOrm : orm);
    super(() => pool().em.fork({ clear: true, useContext: false }), false, owner, rawOn(pool));
    this.slots = classes.slots ?? localHeavySlots();
  }

  async scoped<T>(scope: RequestScope, work: () => Promise<T>): Promise<T> {
    const { heavy, principal, tag } = scope;
    // The cap counts requests, not procedures: one GraphQL operation's several list fields share its request's slot.
    // A request's first heavy procedure takes one of the principal's slots (shared by every process on the database).
    let requests: Map<string, { count: number; slot: Promise<number | undefined> }> | undefined;
    let entry: { count: number; slot: Promise<number | undefined> } | undefined;
    if (heavy) {
      requests = this.heavyRunning.get(principal) ?? new Map();
      this.heavyRunning.set(principal, requests);
      entry = requests.get(tag);
      if (!entry) {
        entry = { count: 0, slot: this.slots.take(principal, this.classes.heavyPerPrincipal) };
        requests.set(tag, entry);
      }
      entry.count++;
    }
    try {
      if (entry && (await entry.slot) === undefined) {
        throw new DomainError(
          'rate_limited',
          `At most ${this.classes.heavyPerPrincipal} list or aggregate requests of one key run at once; retry when one has answered.`,
          {
            retry_after_ms: 1000,
            limit: this.classes.heavyPerPrincipal,
            class: 'heavy',
          },
        );
      }
      const timeoutMs = heavy ? this.classes.heavyTimeoutMs : this.classes.timeoutMs;
      return await runScoped({ ...scope, timeoutMs }, (tagPrefix) => this.cancelTagged(tagPrefix), work);
    } finally {
      if (requests && entry && --entry.count === 0) {
        requests.delete(tag);
        if (requests.size === 0 && this.heavyRunning.get(principal) === requests) this.heavyRunning.delete(principal);
        void entry.slot.then((slot) => slot !== undefined && this.slots.give(principal, slot));
      }
    }
  }

  unscoped<T>(work: () => Promise<T>): Promise<T> {
    return outsideScope(work);
  }

  /** Cancels the statements running with this tag (from a connection of the main pool). */
  private async cancelTagged(tagPrefix: string): Promise<void> {
    await this.orm.em
      .fork({ useContext: false })
      .execute(
        `select pg_cancel_backend(pid) from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid() and state = 'active' and left(query, ?) = ?`,
        [tagPrefix.length, tagPrefix],
      );
  }

  transaction<T>(work: (tx: Repositories) => Promise<T>): Promise<T> {
    return this.orm.em.fork({ useContext: false }).transactional((em) => work(new Repos(() => em, true, this.owner)));
  }

  /** Events with seq > after across all networks, oldest first (the feed's catch-up query). */
  eventsSince(after: bigint, limit: number): Promise<EventRecord[]> {
    return eventsSince(this.orm.em.fork({ useContext: false }), after, limit);
  }

  /** Committed events a cursor reader may not deliver yet (an older transaction is open; migration 0018). */
  eventsHeldBack(): Promise<boolean> {
    return eventsHeldBack(this.orm.em.fork({ useContext: false }));
  }

  maxEventSeq(): Promise<bigint> {
    return maxEventSeq(this.orm.em.fork({ useContext: false }));
  }
}
