import type { EntityManager } from '@mikro-orm/postgresql';
import type { EventRecord } from '../../../domain/events/schema.ts';
import type { EventFilter, EventRepository } from '../../../domain/ports/store.ts';
import { date, dateOrNull, one, query, Where, type RepoContext } from './context.ts';

/** appends serialise on this transaction-scoped advisory lock until commit */
const EVENTS_LOCK = 7_201_002;
/** the NOTIFY channel an append wakes every node's feed on (payload: the new seq) */
export const EVENTS_CHANNEL = 'svc_events';

/** A row of `events` (migrations/0001-initial.ts, owner_principal from 0005-ownership.ts). */
interface EventRow {
  id: string;
  /** bigint, read as a decimal string */
  seq: string;
  network: EventRecord['network'];
  kind: string;
  phase: EventRecord['phase'];
  agent_asset: string | null;
  signature: string | null;
  /** bigint, read as a decimal string */
  block_time: string | null;
  confirmed_at: Date | null;
  /** bigint, read as a decimal string */
  slot: string | null;
  error_code: string | null;
  error_logs: string[] | null;
  metadata: Record<string, unknown>;
  client_reference: string | null;
  owner_principal: string | null;
  created_at: Date;
  updated_at: Date;
}

const fromRow = (r: EventRow): EventRecord => ({
  id: r.id,
  seq: BigInt(r.seq),
  kind: r.kind,
  phase: r.phase,
  network: r.network,
  agentAsset: r.agent_asset,
  signature: r.signature,
  blockTime: r.block_time === null ? null : Number(r.block_time),
  confirmedAt: dateOrNull(r.confirmed_at),
  slot: r.slot === null ? null : Number(r.slot),
  errorCode: r.error_code,
  errorLogs: r.error_logs,
  metadata: r.metadata,
  clientReference: r.client_reference,
  owner: r.owner_principal,
  createdAt: date(r.created_at),
  updatedAt: date(r.updated_at),
});

/** LIKE pattern from a kind pattern: "payment_link.*" → "payment\_link.%". */
function likePrefix(pattern: string): string {
  return pattern.slice(0, -1).replace(/[\\%_]/g, (c) => `\\${c}`) + '%';
}

/** The filter's predicates; each combination is served by an events_network_[principal_][kind|agent_]seq_idx. */
function filtered(network: string, filter: EventFilter): Where {
  const where = new Where().and('network = ?', network);
  if (filter.owner !== undefined) where.and('owner_principal = ?', filter.owner);
  if (filter.agent !== undefined) where.and('agent_asset = ?', filter.agent);
  if (filter.id !== undefined) where.and('id = ?', filter.id);
  if (filter.kinds && filter.kinds.length) {
    const prefix = (k: string) => k.endsWith('.*');
    where.and(`(${filter.kinds.map((k) => (prefix(k) ? 'kind like ?' : 'kind = ?')).join(' or ')})`, ...filter.kinds.map((k) => (prefix(k) ? likePrefix(k) : k)));
  }
  return where;
}

export function eventRepository(ctx: RepoContext): EventRepository {
  return {
    append: async (e) => {
      if (!ctx.inTransaction) throw new Error('events.append must run inside store.transaction');
      const em = ctx.em();
      // Serialise appends until commit so seq order equals commit order: a cursor on seq never skips a late commit.
      await query(em, 'select pg_advisory_xact_lock(?)', [EVENTS_LOCK]);
      const rows = await query<{ seq: string }>(
        em,
        `insert into events (id, network, kind, phase, agent_asset, owner_principal, signature, slot, block_time, metadata, confirmed_at, created_at, updated_at)
         values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?::jsonb, ?, ?, ?) returning seq::text as seq`,
        [e.id, e.network, e.kind, e.phase, e.agentAsset, e.owner, e.signature ?? null, e.slot ?? null, e.blockTime ?? null, JSON.stringify(e.metadata), e.confirmedAt ?? null, e.createdAt, e.createdAt],
      );
      const seq = rows[0]!.seq;
      await query(em, `select pg_notify('${EVENTS_CHANNEL}', ?)`, [seq]);
      return {
        id: e.id,
        seq: BigInt(seq),
        kind: e.kind,
        phase: e.phase,
        network: e.network,
        agentAsset: e.agentAsset,
        signature: e.signature ?? null,
        blockTime: e.blockTime ?? null,
        confirmedAt: e.confirmedAt ?? null,
        slot: e.slot ?? null,
        errorCode: null,
        errorLogs: null,
        metadata: e.metadata,
        clientReference: null,
        owner: e.owner,
        createdAt: e.createdAt,
        updatedAt: e.createdAt,
      };
    },
    transition: async (network, id, c) => {
      if (!ctx.inTransaction) throw new Error('events.transition must run inside store.transaction');
      const em = ctx.em();
      // The same lock as append: the new seq is taken in commit order, so a cursor never skips the change.
      await query(em, 'select pg_advisory_xact_lock(?)', [EVENTS_LOCK]);
      const rows = await query<EventRow>(
        em,
        `update events set phase = ?, seq = nextval('events_seq'), updated_at = ?,
                signature = coalesce(?, signature), slot = coalesce(?, slot), block_time = coalesce(?, block_time),
                confirmed_at = coalesce(?, confirmed_at), error_code = coalesce(?, error_code),
                error_logs = coalesce(?::jsonb, error_logs), client_reference = coalesce(?, client_reference)
          where network = ? and id = ? and phase in (select jsonb_array_elements_text(?::jsonb))
          returning *`,
        [
          c.phase,
          c.at,
          c.signature ?? null,
          c.slot ?? null,
          c.blockTime ?? null,
          c.confirmedAt ?? null,
          c.errorCode ?? null,
          c.errorLogs ? JSON.stringify(c.errorLogs) : null,
          c.clientReference ?? null,
          network,
          id,
          JSON.stringify(c.from),
        ],
      );
      if (!rows[0]) return null;
      await query(em, `select pg_notify('${EVENTS_CHANNEL}', ?)`, [rows[0].seq]);
      return fromRow(rows[0]);
    },
    get: async (network, id) => {
      return one(ctx.em(), 'select * from events where network = ? and id = ?', [network, id], fromRow);
    },
    list: async (network, filter) => {
      const where = filtered(network, filter);
      if (filter.beforeSeq !== undefined) where.and('seq < ?', filter.beforeSeq.toString());
      const rows = await query<EventRow>(ctx.em(), `select * from events where ${where.sql} order by seq desc limit ?`, [...where.params, filter.limit]);
      return rows.map(fromRow);
    },
    countByKind: async (network, { owner, since }) => {
      const where = new Where().and('network = ?', network);
      if (owner !== undefined) where.and('owner_principal = ?', owner);
      if (since) where.and('created_at >= ?', since);
      return query<{ kind: string; phase: string; count: number }>(
        ctx.em(),
        `select kind, phase, count(*)::int as count from events where ${where.sql} group by kind, phase order by kind, phase`,
        where.params,
      );
    },
    after: async (network, afterSeq, filter, limit) => {
      const where = filtered(network, filter).and('seq > ?', afterSeq.toString());
      const rows = await query<EventRow>(ctx.em(), `select * from events where ${where.sql} order by seq asc limit ?`, [...where.params, limit]);
      return rows.map(fromRow);
    },
  };
}

/** Events with seq > after across all networks, oldest first (the feed's catch-up query). */
export async function eventsSince(em: EntityManager, after: bigint, limit: number): Promise<EventRecord[]> {
  const rows = await query<EventRow>(em, 'select * from events where seq > ? order by seq asc limit ?', [after.toString(), limit]);
  return rows.map(fromRow);
}

/** The newest seq (0 when there is no event yet). */
export async function maxEventSeq(em: EntityManager): Promise<bigint> {
  const rows = await query<{ seq: string }>(em, 'select coalesce(max(seq), 0)::text as seq from events');
  return BigInt(rows[0]!.seq);
}
