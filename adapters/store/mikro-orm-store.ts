import { LockMode, MikroORM, PostgreSqlDriver, UniqueConstraintViolationException, type EntityManager } from '@mikro-orm/postgresql';
import { Migrator } from '@mikro-orm/migrations';
import pg from 'pg';
import { DomainError } from '../../domain/shared/errors.ts';
import type { Network } from '../../domain/shared/network.ts';
import type {
  EventFilter,
  EventRepository,
  Repositories,
  Store,
} from '../../domain/ports/store.ts';
import type { EventRecord, NewEvent } from '../../domain/events/schema.ts';
import { migrationsList } from '../../migrations/index.ts';
import { ownerAlive, type ProcessOwner } from './process-owner.ts';
import type { RepoContext } from './repositories/context.ts';
import { apiKeyRepository } from './repositories/api-keys.ts';
import { agentRepository } from './repositories/agents.ts';
import { paymentLinkRepository } from './repositories/payment-links.ts';
import { receiptRepository } from './repositories/receipts.ts';
import { paidCallRepository } from './repositories/paid-calls.ts';
import { EventEntity, entities, type EventRow } from './entities.ts';
import { eventFromRow } from './mappers.ts';

/** Advisory lock keys (arbitrary constants, one per purpose). */
const MIGRATION_LOCK = 7_201_001;
const EVENTS_LOCK = 7_201_002;
export const EVENTS_CHANNEL = 'svc_events';

export async function initOrm(url: string, poolMax = 10): Promise<MikroORM> {
  return MikroORM.init({
    driver: PostgreSqlDriver,
    clientUrl: url,
    entities,
    extensions: [Migrator],
    // Migrations are hand-written SQL listed in migrations/index.ts; no snapshot is written at run time.
    migrations: { migrationsList, silent: true, transactional: true, allOrNothing: true, snapshot: false },
    pool: { min: 0, max: poolMax },
    debug: false,
    allowGlobalContext: false,
    forceUtcTimezone: true,
    discovery: { warnWhenNoEntities: false },
  });
}

/** Runs pending migrations; an advisory lock keeps two processes starting together from racing. */
export async function migrate(orm: MikroORM, url: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query('select pg_advisory_lock($1)', [MIGRATION_LOCK]);
    await orm.getMigrator().up();
  } finally {
    await client.query('select pg_advisory_unlock($1)', [MIGRATION_LOCK]).catch(() => {});
    await client.end();
  }
}

/** LIKE pattern from a kind pattern: "payment_link.*" → "payment\_link.%". */
function likePrefix(pattern: string): string {
  return pattern.slice(0, -1).replace(/[\\%_]/g, (c) => `\\${c}`) + '%';
}

function eventWhere(network: Network, filter: EventFilter): Record<string, unknown> {
  const where: Record<string, unknown> = { network };
  if (filter.owner !== undefined) where.ownerPrincipal = filter.owner;
  if (filter.agent !== undefined) where.agentAsset = filter.agent;
  if (filter.id !== undefined) where.id = filter.id;
  if (filter.kinds && filter.kinds.length) {
    where.$or = filter.kinds.map((k) => (k.endsWith('.*') ? { kind: { $like: likePrefix(k) } } : { kind: k }));
  }
  return where;
}

class Repos implements Repositories, RepoContext {
  constructor(
    readonly em: () => EntityManager,
    readonly inTransaction: boolean,
    /** this process's liveness number for the claims it takes (none: claims are held by their lease only) */
    readonly owner: ProcessOwner | undefined,
  ) {}

  readonly apiKeys = apiKeyRepository(this);

  readonly agents = agentRepository(this);

  readonly paymentLinks = paymentLinkRepository(this);

  readonly receipts = receiptRepository(this);

  readonly paidCalls = paidCallRepository(this);

  readonly events: EventRepository = {
    append: async (e: NewEvent): Promise<EventRecord> => {
      if (!this.inTransaction) throw new Error('events.append must run inside store.transaction');
      const em = this.em();
      await em.flush();
      // Serialise appends until commit so seq order equals commit order: a cursor on seq never skips a late commit.
      await em.execute('select pg_advisory_xact_lock(?)', [EVENTS_LOCK]);
      const rows = (await em.execute(
        `insert into events (id, network, kind, phase, agent_asset, owner_principal, signature, metadata, confirmed_at, created_at, updated_at)
         values (?, ?, ?, ?, ?, ?, ?, ?::jsonb, ?, ?, ?) returning seq::text as seq`,
        [e.id, e.network, e.kind, e.phase, e.agentAsset, e.owner, e.signature ?? null, JSON.stringify(e.metadata), e.confirmedAt ?? null, e.createdAt, e.createdAt],
      )) as { seq: string }[];
      const seq = rows[0]!.seq;
      await em.execute(`select pg_notify('${EVENTS_CHANNEL}', ?)`, [seq]);
      return {
        id: e.id,
        seq: BigInt(seq),
        kind: e.kind,
        phase: e.phase,
        network: e.network,
        agentAsset: e.agentAsset,
        signature: e.signature ?? null,
        blockTime: null,
        confirmedAt: e.confirmedAt ?? null,
        slot: null,
        errorCode: null,
        errorLogs: null,
        metadata: e.metadata,
        clientReference: null,
        owner: e.owner,
        createdAt: e.createdAt,
        updatedAt: e.createdAt,
      };
    },
    get: async (network: Network, id: string) => {
      const row = await this.em().findOne(EventEntity, { network, id });
      return row ? eventFromRow(row) : null;
    },
    list: async (network, filter) => {
      const where = eventWhere(network, filter);
      if (filter.beforeSeq !== undefined) where.seq = { $lt: filter.beforeSeq.toString() };
      const rows = await this.em().find(EventEntity, where, { orderBy: { seq: 'desc' }, limit: filter.limit });
      return rows.map(eventFromRow);
    },
    countByKind: async (network, { owner, since }) => {
      const params: unknown[] = [network];
      if (owner !== undefined) params.push(owner);
      if (since) params.push(since);
      const rows = (await this.em().execute(
        `select kind, phase, count(*)::int as count from events where network = ? ${owner !== undefined ? 'and owner_principal = ?' : ''}
          ${since ? 'and created_at >= ?' : ''} group by kind, phase order by kind, phase`,
        params,
      )) as { kind: string; phase: string; count: number }[];
      return rows;
    },
    after: async (network, afterSeq, filter, limit) => {
      const where = { ...eventWhere(network, filter), seq: { $gt: afterSeq.toString() } };
      const rows = await this.em().find(EventEntity, where, { orderBy: { seq: 'asc' }, limit });
      return rows.map(eventFromRow);
    },
  };
}

/** The Store port on MikroORM + PostgreSQL: one fork per call, one per transaction. */
export class MikroOrmStore extends Repos implements Store {
  constructor(
    private readonly orm: MikroORM,
    owner?: ProcessOwner,
  ) {
    super(() => orm.em.fork({ clear: true, useContext: false }), false, owner);
  }

  transaction<T>(work: (tx: Repositories) => Promise<T>): Promise<T> {
    return this.orm.em.fork({ useContext: false }).transactional((em) => work(new Repos(() => em, true, this.owner)));
  }

  /** Events with seq > after across all networks, oldest first (the feed's catch-up query). */
  async eventsSince(after: bigint, limit: number): Promise<EventRecord[]> {
    const rows: EventRow[] = await this.orm.em
      .fork({ useContext: false })
      .find(EventEntity, { seq: { $gt: after.toString() } }, { orderBy: { seq: 'asc' }, limit });
    return rows.map(eventFromRow);
  }

  async maxEventSeq(): Promise<bigint> {
    const rows = (await this.orm.em.fork({ useContext: false }).execute('select coalesce(max(seq), 0)::text as seq from events')) as {
      seq: string;
    }[];
    return BigInt(rows[0]!.seq);
  }
}
