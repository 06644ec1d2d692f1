import { DomainError } from '../../../domain/shared/errors.ts';
import type { Network } from '../../../domain/shared/network.ts';
import type { ReceiptPageQuery, ReceiptRepository, VerificationUpdate } from '../../../domain/ports/store.ts';
import { date, dateOrNull, prepared, query, uniqueOr, Where, type RepoContext } from './context.ts';
import {
  settlementSignature,
  type ChainHead,
  type Receipt,
  type ReceiptRecord,
  type StoredReceipt,
  type VerificationStatus,
} from '../../../domain/receipts/schema.ts';

// The receipts table (migrations 0003 and 0008 are its definition), raw SQL through the MikroORM connection.

/** receipt chains: one transaction-scoped lock per (network, agent), keyed (RECEIPTS_LOCK, hashtext(…)) */
const RECEIPTS_LOCK = 7_201_003;

interface ReceiptRow {
  network: Network;
  source: string;
  body: Receipt;
  created_at: Date;
  verification: VerificationStatus;
  verification_reason: string | null;
  verification_checked_at: Date | null;
  verification_attempts: number;
}

const COLUMNS = 'network, source, body, created_at, verification, verification_reason, verification_checked_at, verification_attempts';

export const receiptFromRow = (r: ReceiptRow): StoredReceipt => ({
  network: r.network,
  receipt: r.body,
  source: r.source,
  createdAt: date(r.created_at),
  verification: {
    status: r.verification,
    reason: r.verification_reason,
    checkedAt: dateOrNull(r.verification_checked_at),
    attempts: r.verification_attempts,
  },
});

/** The row values of an insert, in the order of INSERT_SQL. */
export function receiptInsertParams(r: ReceiptRecord, v?: VerificationUpdate): unknown[] {
  const hasTx = settlementSignature(r.receipt) !== null;
  const status = v?.status ?? (hasTx ? 'pending' : 'not_applicable');
  const nextCheck = v ? v.nextCheckAt : hasTx ? r.createdAt : null;
  return [
    r.network,
    r.receipt.agent,
    r.receipt.nonce,
    r.receipt.kind,
    r.receipt.decision,
    r.receipt.ts,
    r.receipt.ts,
    r.network,
    r.receipt.agent,
    r.receipt.nonce,
    r.receipt.receipt_hash,
    r.receipt.prev_receipt_hash,
    settlementSignature(r.receipt),
    r.source,
    JSON.stringify(r.receipt),
    r.createdAt,
    status,
    v?.reason ?? null,
    v?.checkedAt ?? null,
    v?.attempts ?? 0,
    status === 'pending' ? nextCheck : null,
  ];
}

/** ts_max is the running maximum of ts along the chain: the previous link's, or this ts (migration 0008). */
export const INSERT_SQL = `insert into receipts (network, agent, nonce, kind, decision, ts, ts_max, receipt_hash, prev_receipt_hash, tx_sig, source, body,
    created_at, verification, verification_reason, verification_checked_at, verification_attempts, verify_after)
  values (?, ?, ?, ?, ?, ?::timestamptz, greatest(?::timestamptz,
      (select p.ts_max from receipts p where p.network = ? and p.agent = ? and p.nonce = ?::bigint - 1)),
    ?, ?, ?, ?, ?::jsonb, ?, ?, ?, ?, ?, ?)`;

/**
 * Group commit: receipts appended together, in one statement. ts_max as INSERT_SQL makes it, computed
 * across the batch: the running maximum of ts along each chain's new links, and the link before the batch's first.
 * Each stored like `insert`: with its verification when it has one, else pending and due at once with a transaction,
 * else not_applicable.
 */
export function insertManySql(records: readonly (ReceiptRecord & { verification?: VerificationUpdate | undefined })[]): { sql: string; params: unknown[] } {
  const rows = records.map((r) => {
    const txSig = settlementSignature(r.receipt);
    const v = r.verification;
    const status = v?.status ?? (txSig !== null ? 'pending' : 'not_applicable');
    return {
      network: r.network,
      agent: r.receipt.agent,
      nonce: r.receipt.nonce,
      kind: r.receipt.kind,
      decision: r.receipt.decision,
      ts: r.receipt.ts,
      receipt_hash: r.receipt.receipt_hash,
      prev_receipt_hash: r.receipt.prev_receipt_hash,
      tx_sig: txSig,
      source: r.source,
      body: r.receipt,
      created_at: r.createdAt,
      verification: status,
      verification_reason: v?.reason ?? null,
      verification_checked_at: v?.checkedAt ?? null,
      verification_attempts: v?.attempts ?? 0,
      verify_after: status === 'pending' ? (v ? v.nextCheckAt : r.createdAt) : null,
    };
  });
  return {
    sql: `with x as (
            select x.*, max(x.ts) over (partition by x.network, x.agent order by x.nonce) as run, min(x.nonce) over (partition by x.network, x.agent) as first
              from jsonb_to_recordset(?::jsonb) as x(network text, agent text, nonce bigint, kind text, decision text, ts timestamptz, receipt_hash text,
                prev_receipt_hash text, tx_sig text, source text, body jsonb, created_at timestamptz, verification text, verification_reason text,
                verification_checked_at timestamptz, verification_attempts int, verify_after timestamptz))
          insert into receipts (network, agent, nonce, kind, decision, ts, ts_max, receipt_hash, prev_receipt_hash, tx_sig, source, body,
              created_at, verification, verification_reason, verification_checked_at, verification_attempts, verify_after)
          select network, agent, nonce, kind, decision, ts,
                 greatest(run, (select p.ts_max from receipts p where p.network = x.network and p.agent = x.agent and p.nonce = x.first - 1)),
                 receipt_hash, prev_receipt_hash, tx_sig, source, body, created_at, verification, verification_reason, verification_checked_at,
                 verification_attempts, verify_after
            from x order by network, agent, nonce`,
    params: [JSON.stringify(rows)],
  };
}

// The list statements, exported so the query-plan test EXPLAINs what runs.

/** a chain oldest first after a nonce (pull replication) */
export function receiptsAfterSql(network: string, agent: string, q: { afterNonce?: number | undefined; limit: number }): { sql: string; params: unknown[] } {
  return {
    sql: `select ${COLUMNS} from receipts where network = ? and agent = ? and nonce > ? order by nonce asc limit ?`,
    params: [network, agent, q.afterNonce ?? -1, q.limit],
  };
}

/** ts_max is monotonic in nonce: the first link whose ts_max reaches `since` starts the range (one index probe). */
export function receiptSinceProbeSql(network: string, agent: string, since: Date): { sql: string; params: unknown[] } {
  return {
    sql: `select nonce::int as nonce from receipts where network = ? and agent = ? and ts_max >= ? order by ts_max, nonce limit 1`,
    params: [network, agent, since],
  };
}

/** GET /v1/receipts/{agent}: newest first, each filter combination on its receipts_agent_*_nonce index */
export function receiptPageSql(network: string, agent: string, q: ReceiptPageQuery, fromNonce: number): { sql: string; params: unknown[] } {
  const where = new Where().and('network = ?', network).and('agent = ?', agent).and('nonce >= ?', fromNonce);
  if (q.beforeNonce !== undefined) where.and('nonce < ?', q.beforeNonce);
  if (q.kind) where.and('kind = ?', q.kind);
  if (q.decision) where.and('decision = ?', q.decision);
  if (q.since) where.and('ts >= ?', q.since);
  return { sql: `select ${COLUMNS} from receipts where ${where.sql} order by nonce desc limit ?`, params: [...where.params, q.limit] };
}

/**
 * GET /v1/receipts/{agent}/daily: the settled receipts since `since` by UTC day, kind and asset. A window starting at a
 * UTC midnight (every caller's) reads the receipt_daily rollup and its unfolded deltas (migration 0021): one row per
 * day, kind and asset, whatever a day's activity; any other start reads the window's receipts (receipts_agent_settled_ts).
 */
export function receiptDailySql(network: string, agent: string, since: Date): { sql: string; params: unknown[] } {
  if (since.getTime() % 86_400_000 === 0) {
    const day = since.toISOString().slice(0, 10);
    return {
      sql: `select to_char(day, 'YYYY-MM-DD') as day, kind, asset, sum(amount_atomic)::text as amount_atomic, sum(count)::int as count
         from (select day, kind, asset, count, amount_atomic from receipt_daily where network = ? and agent = ? and day >= ?::date
               union all
               select day, kind, asset, count, amount_atomic from receipt_daily_deltas where network = ? and agent = ? and day >= ?::date) u
        group by 1, 2, 3 having sum(count) <> 0 order by 1, 2, 3`,
      params: [network, agent, day, network, agent, day],
    };
  }
  return {
    sql: `select to_char(ts at time zone 'UTC', 'YYYY-MM-DD') as day, kind, coalesce(body->'price'->>'asset', '') as asset,
           sum(svc_atomic(body->'price'->>(case when kind = 'spend' then 'gross' else 'amount_atomic' end)))::text as amount_atomic,
           count(*)::int as count
         from receipts where network = ? and agent = ? and decision = 'allow' and ts >= ?
         group by 1, 2, 3 order by 1, 2, 3`,
    params: [network, agent, since],
  };
}

export function receiptRepository(ctx: RepoContext): ReceiptRepository {
  const em = () => ctx.em();
  /** the heads of the agents of `agents` (a JSON array), read once their chains are locked */
  const readHeads = async (network: Network, agents: string): Promise<Map<string, ChainHead | null>> => {
    const rows = await prepared<{ agent: string; nonce: number | null; receipt_hash: string | null }>(
      em(),
      `select a.agent, h.nonce::int as nonce, h.receipt_hash from jsonb_array_elements_text(?::jsonb) as a(agent)
         left join lateral (select nonce, receipt_hash from receipts where network = ? and agent = a.agent order by nonce desc limit 1) h on true`,
      [agents, network],
    );
    const heads = new Map<string, ChainHead | null>();
    for (const r of rows) heads.set(r.agent, r.nonce === null || r.receipt_hash === null ? null : { nonce: r.nonce, receiptHash: r.receipt_hash });
    return heads;
  };
  return {
    lockHead: async (network, agent) => {
      if (!ctx.inTransaction) throw new Error('receipts.lockHead must run inside store.transaction');
      const m = em();
      await m.execute('select pg_advisory_xact_lock(?, hashtext(?))', [RECEIPTS_LOCK, `${network}:${agent}`]);
      const rows = (await m.execute(`select nonce::int as nonce, receipt_hash from receipts where network = ? and agent = ? order by nonce desc limit 1`, [
        network,
        agent,
      ])) as { nonce: number; receipt_hash: string }[];
      return rows[0] ? { nonce: rows[0].nonce, receiptHash: rows[0].receipt_hash } : null;
    },
    lockHeads: async (network, agents) => {
      if (!ctx.inTransaction) throw new Error('receipts.lockHeads must run inside store.transaction');
      const heads = new Map<string, { nonce: number; receiptHash: string } | null>();
      if (agents.length === 0) return heads;
      const sorted = JSON.stringify([...new Set(agents)].sort());
      // the locks first, in sorted order; the heads in a statement of their own (its snapshot taken once they are held)
      await prepared(
        em(),
        `select count(pg_advisory_xact_lock(?::int, hashtext(?::text || ':' || s.agent))) from (select a as agent from jsonb_array_elements_text(?::jsonb) a order by a) s`,
        [RECEIPTS_LOCK, network, sorted],
      );
      return readHeads(network, sorted);
    },
    tryLockHeads: async (network, agents) => {
      if (!ctx.inTransaction) throw new Error('receipts.tryLockHeads must run inside store.transaction');
      if (agents.length === 0) return new Map();
      // each chain taken if free now, never waited for (no order needed: nothing waits, nothing deadlocks)
      const taken = await prepared<{ agent: string }>(
        em(),
        `select s.agent from (select a as agent from jsonb_array_elements_text(?::jsonb) a order by a) s
          where pg_try_advisory_xact_lock(?::int, hashtext(?::text || ':' || s.agent))`,
        [JSON.stringify([...new Set(agents)].sort()), RECEIPTS_LOCK, network],
      );
      return taken.length ? readHeads(network, JSON.stringify(taken.map((r) => r.agent))) : new Map();
    },
    insert: async (r, v) => {
      await uniqueOr(
        query(em(), INSERT_SQL, receiptInsertParams(r, v)),
        () => new DomainError('receipt_chain_invalid', `Receipt nonce ${r.receipt.nonce} or hash is already on the chain of ${r.receipt.agent}.`),
      );
    },
    insertMany: async (records) => {
      if (records.length === 0) return;
      const { sql, params } = insertManySql(records);
      await uniqueOr(
        prepared(em(), sql, params),
        () =>
          new DomainError(
            'receipt_chain_invalid',
            `A receipt nonce or hash of ${[...new Set(records.map((r) => r.receipt.agent))].join(', ')} is already on its chain.`,
          ),
      );
    },
    pendingAmong: async (network, receiptHashes) => {
      if (receiptHashes.length === 0) return new Set();
      const rows = await query<{ receipt_hash: string }>(
        em(),
        `select receipt_hash from receipts where network = ? and receipt_hash in (select jsonb_array_elements_text(?::jsonb)) and verification = 'pending'`,
        [network, JSON.stringify(receiptHashes)],
      );
      return new Set(rows.map((r) => r.receipt_hash));
    },
    paywallTxSigs: async (network, txSigs) => {
      if (txSigs.length === 0) return new Set();
      const rows = await prepared<{ tx_sig: string }>(
        em(),
        `select distinct tx_sig from receipts where network = ? and tx_sig in (select jsonb_array_elements_text(?::jsonb)) and source = 'paywall'`,
        [network, JSON.stringify(txSigs)],
      );
      return new Set(rows.map((r) => r.tx_sig));
    },
    get: async (network, receiptHash) => {
      const rows = (await em().execute(`select ${COLUMNS} from receipts where network = ? and receipt_hash = ?`, [network, receiptHash])) as ReceiptRow[];
      return rows[0] ? receiptFromRow(rows[0]) : null;
    },
    listByAgent: async (network, agent, q) => {
      const { sql, params } = receiptsAfterSql(network, agent, q);
      return ((await em().execute(sql, params)) as ReceiptRow[]).map(receiptFromRow);
    },
    page: async (network, agent, q: ReceiptPageQuery) => {
      const m = em();
      let fromNonce = 0;
      if (q.since) {
        const probe = receiptSinceProbeSql(network, agent, q.since);
        const first = (await m.execute(probe.sql, probe.params)) as { nonce: number }[];
        if (!first[0]) return [];
        fromNonce = first[0].nonce;
      }
      const { sql, params } = receiptPageSql(network, agent, q, fromNonce);
      return (await query<ReceiptRow>(m, sql, params)).map(receiptFromRow);
    },
    dailyTotals: async (network, agent, since) => {
      const { sql, params } = receiptDailySql(network, agent, since);
      const rows = await query<{ day: string; kind: 'earn' | 'spend'; asset: string; amount_atomic: string; count: number }>(em(), sql, params);
      return rows.map((r) => ({ day: r.day, kind: r.kind, asset: r.asset, amountAtomic: BigInt(r.amount_atomic), count: r.count }));
    },
    setVerification: async (network, receiptHash, u) => {
      const rows = (await em().execute(
        `update receipts set verification = ?, verification_reason = ?, verification_checked_at = ?, verification_attempts = ?,
           verify_after = ? where network = ? and receipt_hash = ? and verification = 'pending' returning 1`,
        [u.status, u.reason, u.checkedAt, u.attempts, u.status === 'pending' ? u.nextCheckAt : null, network, receiptHash],
      )) as unknown[];
      return rows.length > 0;
    },
    setVerifications: async (network, updates) => {
      if (updates.length === 0) return new Set();
      const rows = updates.map(({ receiptHash, update: u }) => ({
        receipt_hash: receiptHash,
        status: u.status,
        reason: u.reason,
        checked_at: u.checkedAt,
        attempts: u.attempts,
        verify_after: u.status === 'pending' ? u.nextCheckAt : null,
      }));
      const set = (await em().execute(
        `update receipts r set verification = x.status, verification_reason = x.reason, verification_checked_at = x.checked_at,
           verification_attempts = x.attempts, verify_after = x.verify_after
           from jsonb_to_recordset(?::jsonb) as x(receipt_hash text, status text, reason text, checked_at timestamptz, attempts int, verify_after timestamptz)
          where r.network = ? and r.receipt_hash = x.receipt_hash and r.verification = 'pending' returning r.receipt_hash`,
        [JSON.stringify(rows), network],
      )) as { receipt_hash: string }[];
      return new Set(set.map((r) => r.receipt_hash));
    },
    duePending: async (now, limit) => {
      const rows = (await em().execute(`select ${COLUMNS} from receipts where verification = 'pending' and verify_after <= ? order by verify_after limit ?`, [
        now,
        limit,
      ])) as ReceiptRow[];
      return rows.map(receiptFromRow);
    },
  };
}
