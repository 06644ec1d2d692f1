import type { EntityManager } from '@mikro-orm/postgresql';
import { EVENT_KIND_NAMES } from '../../../domain/events/kinds.ts';
import type { EventPhaseEntry, EventRecord, NewEvent } from '../../../domain/events/schema.ts';
import { patternsMatching } from '../../../domain/webhooks/delivery.ts';
import type { EventFilter, EventRepository } from '../../../domain/ports/store.ts';
import { date, dateOrNull, one, prepared, query, Where, type RepoContext } from './context.ts';

// Migration 0018: no lock between writers. A row's seq carries its transaction's id
// (svc_event_seq(), the column's default), and cursor readers stop at svc_events_horizon(): below it every writer has
// ended, so a row committing later always lands above what a reader has passed. Appends and transitions run in any
// order and commit concurrently.

/** the seq a change takes in its transaction (append: the column default; transition: set explicitly) */
const NEXT_SEQ = 'svc_event_seq()';
// The horizon as a scalar subquery, computed once per statement. As a bare call it is a per-row filter
// whenever the planner picks a scan or a branch takes it as a filter (a young table whose statistics lag, e.g. a fresh
// database under load), and each call reads a snapshot and pg_stat_activity: milliseconds per statement.
/** what a cursor reader may deliver: rows of transactions that have all ended (see migration 0018) */
const BELOW_HORIZON = 'seq < (select svc_events_horizon())';
/** the same on the feed's own (seq + 0) index (migration 0014), which no network-scoped list can take */
const FEED_BELOW_HORIZON = 'seq + 0 < (select svc_events_horizon())';
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
  /** migration 0025: [{ phase, at, signature }], empty on rows written before it */
  phases: { phase: EventRecord['phase']; at: string; signature: string | null }[];
}

/**
 * An event's transitions as stored (migration 0025), oldest first. A row written before that column existed has
 * none: it reads as its one known phase, the current one, at its last update.
 */
export function phasesOf(
  stored: EventRow['phases'] | null | undefined,
  current: { phase: EventRecord['phase']; updatedAt: Date; signature: string | null },
): EventPhaseEntry[] {
  if (!stored?.length) return [{ phase: current.phase, at: current.updatedAt, signature: current.signature }];
  return stored.map((p) => ({ phase: p.phase, at: new Date(p.at), signature: p.signature ?? null }));
}

/** The first entry of `phases` for a new row: the phase it is written in, at its creation, with its signature. */
const FIRST_PHASE_SQL = (phase: string, at: string, signature: string) =>
  `jsonb_build_array(jsonb_build_object('phase', ${phase}, 'at', ${at}, 'signature', ${signature}))`;

const fromRow = (r: EventRow): EventRecord => ({
  id: r.id,
  seq: BigInt(r.seq),
  kind: r.kind,
  phase: r.phase,
  phases: phasesOf(r.phases, { phase: r.phase, updatedAt: date(r.updated_at), signature: r.signature }),
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
  return `${pattern.slice(0, -1).replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

/** A statement with its bound `?` values, as a repository runs it (exported so the query-plan test EXPLAINs it). */
export interface Sql {
  sql: string;
  params: unknown[];
}

/** Which events one list page reads: the filter with its kinds already exact (see `expandKinds`). */
export interface EventPageQuery {
  owner: string | undefined;
  agent?: string | undefined;
  id?: string | undefined;
  /** exact kinds; undefined: every kind; empty: nothing matches (the caller answers [] without a query) */
  kinds: readonly string[] | undefined;
  /** newest first below `before`, or oldest first above `after` (a subscriber's replay) */
  before?: bigint | undefined;
  after?: bigint | undefined;
  limit: number;
}

/** The SQL that finds the exact kinds a network has matching `patterns` (exact kinds and prefixes ending in ".*"). */
export function eventKindsSql(network: string, patterns: readonly string[]): Sql {
  const prefixes = patterns.filter((k) => k.endsWith('.*')).map(likePrefix);
  return {
    sql: `select kind from event_kinds where network = ? and kind like any(array(select jsonb_array_elements_text(?::jsonb))) order by kind`,
    params: [network, JSON.stringify(prefixes)],
  };
}

/**
 * One list page, served by an index in its order: events_network_[principal_][agent_][kind_]seq_idx. Several kinds
 * read as a UNION ALL of per-kind branches, each `order by seq limit n` on its (…, kind, seq) index, merged in seq order
 * (Merge Append): PostgreSQL cannot walk an OR of kinds in seq order, and the seq index would discard every other kind.
 */
export function eventPageSql(network: string, q: EventPageQuery): Sql {
  const order = q.after !== undefined ? 'asc' : 'desc';
  const base = () => {
    const where = new Where().and('network = ?', network);
    if (q.owner !== undefined) where.and('owner_principal = ?', q.owner);
    if (q.agent !== undefined) where.and('agent_asset = ?', q.agent);
    if (q.id !== undefined) where.and('id = ?', q.id);
    // a cursor read forward stops at the horizon: a row that commits late lands above it (migration 0018). So does
    // the newest-first first page, whose top a client takes as its subscription's `after`: a row above the horizon
    // could be followed by one committing later BELOW it, which that subscription would never deliver. Pages below
    // a `before` need no cut: the first page's top was already below its horizon.
    if (q.after !== undefined) where.and('seq > ?', q.after.toString()).and(BELOW_HORIZON);
    else if (q.before !== undefined) where.and('seq < ?', q.before.toString());
    else where.and(BELOW_HORIZON);
    return where;
  };
  if (q.kinds === undefined || q.kinds.length === 1) {
    const where = base();
    if (q.kinds) where.and('kind = ?', q.kinds[0]);
    return { sql: `select * from events where ${where.sql} order by seq ${order} limit ?`, params: [...where.params, q.limit] };
  }
  const params: unknown[] = [];
  const branches = q.kinds.map((kind) => {
    const where = base().and('kind = ?', kind);
    params.push(...where.params, q.limit);
    return `(select * from events where ${where.sql} order by seq ${order} limit ?)`;
  });
  return { sql: `select * from (${branches.join(' union all ')}) e order by seq ${order} limit ?`, params: [...params, q.limit] };
}

/**
 * Counters of one owner scope ('*': the network) since an hour (none: all time), from the rollup: the hours before
 * the first whole UTC day, then whole days — at most 24 + days buckets per (kind, phase), whatever the table holds.
 */
export function eventCountsSql(network: string, filter: { owner: string | undefined; since?: Date | undefined }): Sql {
  const scope = filter.owner ?? '*';
  // each bucket read from the folded counters and from the deltas not folded yet (migration 0014): exact at any moment
  const both = (where: string) =>
    `select kind, phase, count from event_counts where ${where} union all select kind, phase, d from event_count_deltas where ${where}`;
  if (!filter.since) {
    return {
      sql: `select kind, phase, sum(count)::text as count from (${both("network = ? and owner_key = ? and grain = 't'")}) c
             group by kind, phase having sum(count) <> 0 order by kind, phase`,
      params: [network, scope, network, scope],
    };
  }
  const hour = new Date(Math.floor(filter.since.getTime() / 3_600_000) * 3_600_000);
  const day = new Date(Math.ceil(hour.getTime() / 86_400_000) * 86_400_000);
  return {
    sql: `select kind, phase, sum(count)::text as count from (
             ${both("network = ? and owner_key = ? and grain = 'h' and bucket >= ? and bucket < ?")}
             union all
             ${both("network = ? and owner_key = ? and grain = 'd' and bucket >= ?")}
           ) c group by kind, phase having sum(count) <> 0 order by kind, phase`,
    params: [network, scope, hour, day, network, scope, hour, day, network, scope, day, network, scope, day],
  };
}

/** Folds the counters' deltas into event_counts (its own statement; at most one compaction at a time). */
export async function compactEventCounts(em: EntityManager): Promise<number> {
  const rows = await query<{ n: string }>(em, 'select svc_compact_event_counts()::text as n');
  return Number(rows[0]!.n);
}

/** Folds the receipt rollups' deltas (reputation and daily buckets, migration 0021) into their counters. */
export async function compactReceiptRollups(em: EntityManager): Promise<number> {
  const rows = await query<{ n: string }>(em, 'select svc_compact_receipt_rollups()::text as n');
  return Number(rows[0]!.n);
}

/** A webhook subscription that sees one of the events of an `appendMany` (`event`: its index in the batch). */
export interface EventSubscriberMatch {
  event: number;
  webhookId: string;
}

/**
 * Group commit: the events of one batch in one statement — the rows (their seqs from this transaction, in
 * the batch's order), one wake-up each at commit, and the enabled subscriptions that see each event (the rule of
 * webhookDeliveries.fanOut: scope 'network' or the event's owner, a pattern matching its kind), read in the same
 * statement so the usual case (nobody subscribed) costs nothing more.
 */
export function appendManySql(events: readonly NewEvent[]): Sql {
  const rows = events.map((e, i) => ({
    i,
    id: e.id,
    network: e.network,
    kind: e.kind,
    phase: e.phase,
    agent_asset: e.agentAsset,
    owner_principal: e.owner,
    signature: e.signature ?? null,
    slot: e.slot ?? null,
    block_time: e.blockTime ?? null,
    metadata: e.metadata,
    confirmed_at: e.confirmedAt ?? null,
    created_at: e.createdAt,
    patterns: patternsMatching(e.kind),
  }));
  return {
    sql: `with x as (
            select * from jsonb_to_recordset(?::jsonb) as x(i int, id text, network text, kind text, phase text, agent_asset text, owner_principal text,
              signature text, slot bigint, block_time bigint, metadata jsonb, confirmed_at timestamptz, created_at timestamptz, patterns jsonb)),
          added as (
            insert into events (id, network, kind, phase, agent_asset, owner_principal, signature, slot, block_time, metadata, confirmed_at, created_at, updated_at, phases)
            select id, network, kind, phase, agent_asset, owner_principal, signature, slot, block_time, metadata, confirmed_at, created_at, created_at,
                   ${FIRST_PHASE_SQL('phase', 'created_at', 'signature')}
              from x order by i
            returning seq),
          -- one notification per statement (a paid call's group appends several events per call; the feed
          -- reads from its last seq whatever the payload, so one wake-up, naming the newest seq, does for all)
          woke as (select a.n, pg_notify('${EVENTS_CHANNEL}', a.m) as notified from (select count(*)::int as n, max(seq)::text as m from added) a)
          select s.i, s.webhook_id, woke.n from woke left join lateral (
            select x.i, w.id as webhook_id from x join webhooks w
              on w.network = x.network and w.disabled_at is null and (w.scope = 'network' or w.owner_principal = x.owner_principal)
             and w.events && array(select jsonb_array_elements_text(x.patterns))) s on true`,
    params: [JSON.stringify(rows)],
  };
}

/** The events repository, with `appendMatching`: appendMany's rows and the subscriptions that see them (the store fans out). */
export function eventRepository(ctx: RepoContext): EventRepository & { appendMatching(events: readonly NewEvent[]): Promise<EventSubscriberMatch[]> } {
  return {
    appendMatching: async (events) => {
      if (!ctx.inTransaction) throw new Error('events.appendMany must run inside store.transaction');
      if (events.length === 0) return [];
      const { sql, params } = appendManySql(events);
      const rows = await prepared<{ i: number | null; webhook_id: string | null; n: number }>(ctx.em(), sql, params);
      if (rows[0]?.n !== events.length) throw new Error(`events.appendMany: ${rows[0]?.n ?? 0} of ${events.length} events written`);
      return rows.filter((r) => r.i !== null && r.webhook_id !== null).map((r) => ({ event: r.i!, webhookId: r.webhook_id! }));
    },
    appendMany: async () => {
      throw new Error('events.appendMany runs through the store (it fans the events out to webhooks)');
    },
    append: async (e) => {
      if (!ctx.inTransaction) throw new Error('events.append must run inside store.transaction');
      const em = ctx.em();
      // One round trip: the row (its seq from its transaction, NEXT_SEQ) and the wake-up delivered at commit.
      const rows = await query<{ seq: string }>(
        em,
        `with added as (
           insert into events (id, network, kind, phase, agent_asset, owner_principal, signature, slot, block_time, metadata, confirmed_at, created_at, updated_at, phases)
           values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?::jsonb, ?, ?, ?, ${FIRST_PHASE_SQL('?::text', '?::timestamptz', '?::text')}) returning seq)
         select seq::text as seq, pg_notify('${EVENTS_CHANNEL}', seq::text) from added`,
        [
          ...[e.id, e.network, e.kind, e.phase, e.agentAsset, e.owner, e.signature ?? null, e.slot ?? null, e.blockTime ?? null, JSON.stringify(e.metadata)],
          ...[e.confirmedAt ?? null, e.createdAt, e.createdAt, e.phase, e.createdAt, e.signature ?? null],
        ],
      );
      const seq = rows[0]!.seq;
      return {
        id: e.id,
        seq: BigInt(seq),
        kind: e.kind,
        phase: e.phase,
        phases: [{ phase: e.phase, at: e.createdAt, signature: e.signature ?? null }],
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
      // One round trip, as an append: the row and the feed's wake-up, delivered at commit (none when no row moved).
      const rows = await query<EventRow>(
        em,
        `with moved as (
         update events set phase = ?, seq = ${NEXT_SEQ}, updated_at = ?,
                -- the transition joins the history (a row from before migration 0025 first gets its known phase)
                phases = (case when jsonb_array_length(phases) = 0 then ${FIRST_PHASE_SQL('phase', 'updated_at', 'signature')} else phases end)
                         || jsonb_build_array(jsonb_build_object('phase', ?::text, 'at', ?::timestamptz, 'signature', coalesce(?::text, signature))),
                signature = coalesce(?, signature), slot = coalesce(?, slot), block_time = coalesce(?, block_time),
                confirmed_at = coalesce(?, confirmed_at), error_code = coalesce(?, error_code),
                error_logs = coalesce(?::jsonb, error_logs), client_reference = coalesce(?, client_reference)
          where network = ? and id = ? and phase in (select jsonb_array_elements_text(?::jsonb))
          returning *)
         select moved.*, pg_notify('${EVENTS_CHANNEL}', moved.seq::text) as woke from moved`,
        [
          c.phase,
          c.at,
          c.phase,
          c.at,
          c.signature ?? null,
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
      return fromRow(rows[0]);
    },
    get: async (network, id) => {
      return one(ctx.em(), 'select * from events where network = ? and id = ?', [network, id], fromRow);
    },
    list: async (network, filter) => {
      // the first page is cut at the horizon (eventPageSql): first let the rows committed before this read pass it
      if (filter.beforeSeq === undefined && !ctx.inTransaction) await awaitCommittedBelowHorizon(ctx.em());
      return readPage(ctx.em(), network, filter, { before: filter.beforeSeq, limit: filter.limit });
    },
    countByKind: async (network, filter) => {
      // fold what appends left since the last compaction, so the read sums few deltas (not inside a caller's transaction)
      if (!ctx.inTransaction) await compactEventCounts(ctx.em());
      const { sql, params } = eventCountsSql(network, filter);
      const rows = await query<{ kind: string; phase: string; count: string }>(ctx.em(), sql, params);
      return rows.map((r) => ({ kind: r.kind, phase: r.phase, count: Number(r.count) }));
    },
    after: async (network, afterSeq, filter, limit) => readPage(ctx.em(), network, filter, { after: afterSeq, limit }),
    compactCounts: async () => {
      if (ctx.inTransaction) throw new Error('events.compactCounts runs in a transaction of its own');
      // the compact_event_counts job also folds the receipt rollups' deltas (migration 0021), in a statement of their own
      const folded = await compactEventCounts(ctx.em());
      return folded + (await compactReceiptRollups(ctx.em()));
    },
  };
}

/** The exact kinds `patterns` name on a network (prefixes expanded through event_kinds and the catalogue); undefined: every kind. */
export async function expandKinds(em: EntityManager, network: string, patterns: readonly string[] | undefined): Promise<string[] | undefined> {
  if (!patterns || patterns.length === 0) return undefined;
  const exact = patterns.filter((k) => !k.endsWith('.*'));
  if (exact.length === patterns.length) return [...new Set(exact)];
  const { sql, params } = eventKindsSql(network, patterns);
  const found = await query<{ kind: string }>(em, sql, params);
  // event_kinds is filled by the compaction: the catalogue's kinds cover one appended a moment ago
  const prefixes = patterns.filter((k) => k.endsWith('.*')).map((k) => k.slice(0, -1));
  const catalogued = EVENT_KIND_NAMES.filter((k) => prefixes.some((p) => k.startsWith(p)));
  return [...new Set([...exact, ...found.map((r) => r.kind), ...catalogued])].sort();
}

async function readPage(
  em: EntityManager,
  network: string,
  filter: EventFilter,
  page: { before?: bigint | undefined; after?: bigint | undefined; limit: number },
): Promise<EventRecord[]> {
  const kinds = await expandKinds(em, network, filter.kinds);
  if (kinds && kinds.length === 0) return [];
  const { sql, params } = eventPageSql(network, { owner: filter.owner, agent: filter.agent, id: filter.id, kinds, ...page });
  return (await query<EventRow>(em, sql, params)).map(fromRow);
}

/** The feed's catch-up: `seq + 0` reads the feed's own index (migration 0014), which no network-scoped list can take. */
export function eventsSinceSql(after: bigint, limit: number): Sql {
  return { sql: `select * from events where seq + 0 > ? and ${FEED_BELOW_HORIZON} order by seq + 0 asc limit ?`, params: [after.toString(), limit] };
}

/** Events with seq > after across all networks, oldest first (the feed's catch-up query). */
export async function eventsSince(em: EntityManager, after: bigint, limit: number): Promise<EventRecord[]> {
  const { sql, params } = eventsSinceSql(after, limit);
  const rows = await query<EventRow>(em, sql, params);
  return rows.map(fromRow);
}

/** How long a first page waits for older writers to end before it answers without the rows they hold back. */
const HELD_WAIT_MS = 100;

/**
 * Read-your-writes for the first page, which is cut at the horizon: when rows already committed wait above it (an
 * older writer is still open), wait — a few milliseconds, backing off, at most HELD_WAIT_MS — until the horizon has passed the
 * newest of them. Rows committing after this read began do not extend the wait, so a busy network cannot hold a
 * list back; after the bound the page answers without them, and a subscription from its top still delivers them.
 */
async function awaitCommittedBelowHorizon(em: EntityManager): Promise<void> {
  const held = await query<{ m: string | null }>(em, `select max(seq + 0)::text as m from events where seq + 0 >= svc_events_horizon()`);
  const newest = held[0]!.m;
  if (newest === null) return;
  const deadline = Date.now() + HELD_WAIT_MS;
  // backing off (2, 4, 8, … ms): a few round trips at most, each reading the horizon (a snapshot and pg_stat_activity)
  for (let pause = 2; Date.now() < deadline; pause *= 2) {
    await new Promise((r) => setTimeout(r, Math.min(pause, Math.max(1, deadline - Date.now()))));
    const h = await query<{ passed: boolean }>(em, `select svc_events_horizon() > ?::bigint as passed`, [newest]);
    if (h[0]!.passed) return;
  }
}

export const EVENTS_HELD_BACK_SQL = `select exists (select 1 from events where seq + 0 >= (select svc_events_horizon())) as held`;

/** True when committed events wait above the horizon (an older transaction is still open): the feed looks again soon. */
export async function eventsHeldBack(em: EntityManager): Promise<boolean> {
  const rows = await query<{ held: boolean }>(em, EVENTS_HELD_BACK_SQL);
  return rows[0]!.held;
}

/** The newest seq a cursor reader may start after (0 when there is no event yet). */
export async function maxEventSeq(em: EntityManager): Promise<bigint> {
  const rows = await query<{ seq: string }>(em, `select coalesce(max(seq + 0), 0)::text as seq from events where ${FEED_BELOW_HORIZON}`);
  return BigInt(rows[0]!.seq);
}
