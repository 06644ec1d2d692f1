import type { EntityManager } from '@mikro-orm/postgresql';
import type { EventRecord } from '../../../domain/events/schema.ts';
import type { EventFilter, EventRepository } from '../../../domain/ports/store.ts';
import { date, dateOrNull, one, query, Where, type RepoContext } from './context.ts';

// Issue 19 (migration 0018): no lock between writers. A row's seq carries its transaction's id
// (svc_event_seq(), the column's default), and cursor readers stop at svc_events_horizon(): below it every writer has
// ended, so a row committing later always lands above what a reader has passed. Appends and transitions run in any
// order and commit concurrently.

/** the seq a change takes in its transaction (append: the column default; transition: set explicitly) */
const NEXT_SEQ = 'svc_event_seq()';
/** what a cursor reader may deliver: rows of transactions that have all ended (see migration 0018) */
const BELOW_HORIZON = 'seq < svc_events_horizon()';
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
      // One round trip: the row (its seq from its transaction, NEXT_SEQ) and the wake-up delivered at commit.
      const rows = await query<{ seq: string }>(
        em,
        `with added as (
           insert into events (id, network, kind, phase, agent_asset, owner_principal, signature, slot, block_time, metadata, confirmed_at, created_at, updated_at)
           values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?::jsonb, ?, ?, ?) returning seq)
         select seq::text as seq, pg_notify('${EVENTS_CHANNEL}', seq::text) from added`,
        [e.id, e.network, e.kind, e.phase, e.agentAsset, e.owner, e.signature ?? null, e.slot ?? null, e.blockTime ?? null, JSON.stringify(e.metadata), e.confirmedAt ?? null, e.createdAt, e.createdAt],
      );
      const seq = rows[0]!.seq;
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
      // A new seq from this transaction, as an append takes: a cursor reader gets the change once it is below the horizon.
      const rows = await query<EventRow>(
        em,
        `update events set phase = ?, seq = ${NEXT_SEQ}, updated_at = ?,
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
      const where = filtered(network, filter).and('seq > ?', afterSeq.toString()).and(BELOW_HORIZON);
      const rows = await query<EventRow>(ctx.em(), `select * from events where ${where.sql} order by seq asc limit ?`, [...where.params, limit]);
      return rows.map(fromRow);
    },
  };
}

/** Events with seq > after across all networks, oldest first (the feed's catch-up query). */
export async function eventsSince(em: EntityManager, after: bigint, limit: number): Promise<EventRecord[]> {
  const rows = await query<EventRow>(em, `select * from events where seq > ? and ${BELOW_HORIZON} order by seq asc limit ?`, [after.toString(), limit]);
  return rows.map(fromRow);
}

/** True when committed events wait above the horizon (an older transaction is still open): the feed looks again soon. */
export async function eventsHeldBack(em: EntityManager): Promise<boolean> {
  const rows = await query<{ held: boolean }>(em, `select exists (select 1 from events where seq >= svc_events_horizon()) as held`);
  return rows[0]!.held;
}

/** The newest seq a cursor reader may start after (0 when there is no event yet). */
export async function maxEventSeq(em: EntityManager): Promise<bigint> {
  const rows = await query<{ seq: string }>(em, `select coalesce(max(seq), 0)::text as seq from events where ${BELOW_HORIZON}`);
  return BigInt(rows[0]!.seq);
}
