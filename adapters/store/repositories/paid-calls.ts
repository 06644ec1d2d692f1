import type { Network } from '../../../domain/shared/network.ts';
import type { PaidCallRecord } from '../../../domain/paywall/schema.ts';
import type { PaidCallRepository } from '../../../domain/ports/store.ts';
import { ownerAlive } from '../process-owner.ts';
import { Coalescer } from './coalesce.ts';
import { affected, date, lockedInTransaction, one, prepared, query, type RepoContext } from './context.ts';

/** A row of `paid_calls` (migrations/0003-paid-calls.ts; owner from 0004-paid-call-owners.ts). */
interface PaidCallRow {
  network: Network;
  payment_key: string;
  link_pk: string;
  link_id: string;
  status: PaidCallRecord['status'];
  signature: string | null;
  attempted: boolean;
  payer: string | null;
  response: PaidCallRecord['response'];
  request: PaidCallRecord['request'];
  locked_until: Date;
  created_at: Date;
  updated_at: Date;
  expires_at: Date;
}

const fromRow = (r: PaidCallRow): PaidCallRecord => ({
  network: r.network,
  paymentKey: r.payment_key,
  linkPk: r.link_pk,
  linkId: r.link_id,
  status: r.status,
  signature: r.signature,
  attempted: r.attempted,
  payer: r.payer,
  response: r.response,
  request: r.request,
  lockedUntil: date(r.locked_until),
  createdAt: date(r.created_at),
  updatedAt: date(r.updated_at),
  expiresAt: date(r.expires_at),
});

type Claim = Parameters<PaidCallRepository['claim']>[0];
type ClaimedRow = PaidCallRow & { inserted: boolean };

/**
 * The claims of a group in one statement: each row decided as alone. Taken over: a pending call (its outcome
 * unknown, nobody on it), a running one whose lease lapsed, or one whose owner process is gone (after a crash
 * the replay is answered at once, not after the lease). With an attempt, a fresh row is inserted attempted (no separate
 * markAttempted); a row taken over keeps its attempted flag and request. `xmax = 0` tells the inserted row from the
 * updated one. One statement may not touch a row twice: a payment repeated in the group is claimed by its first claim
 * only (the others find the row taken, as they would one statement later).
 */
async function claimGroup(ctx: RepoContext, group: Claim[]): Promise<(ClaimedRow | undefined)[]> {
  const first = new Map<string, Claim>();
  for (const c of group) if (!first.has(`${c.network}:${c.paymentKey}`)) first.set(`${c.network}:${c.paymentKey}`, c);
  const rows = [...first.values()].map((c) => ({
    network: c.network,
    payment_key: c.paymentKey,
    link_pk: c.linkPk,
    link_id: c.linkId,
    attempted: c.attempt !== undefined,
    request: c.attempt ? c.attempt.request : null,
    locked_until: c.lockedUntil,
    at: c.at,
    expires_at: c.expiresAt,
  }));
  const claimed = await prepared<ClaimedRow>(
    ctx.em(),
    `insert into paid_calls (network, payment_key, link_pk, link_id, status, signature, payer, response, attempted, request, owner, locked_until, created_at, updated_at, expires_at)
     select x.network, x.payment_key, x.link_pk, x.link_id, 'running', null, null, null, x.attempted, x.request, ?::int, x.locked_until, x.at, x.at, x.expires_at
       from jsonb_to_recordset(?::jsonb) as x(network text, payment_key text, link_pk text, link_id text, attempted boolean, request jsonb, locked_until timestamptz, at timestamptz, expires_at timestamptz)
     on conflict (network, payment_key) do update
       set status = 'running', owner = excluded.owner, locked_until = excluded.locked_until, updated_at = excluded.updated_at
       where paid_calls.link_pk = excluded.link_pk and paid_calls.status in ('running', 'pending')
         and (paid_calls.locked_until <= excluded.updated_at or not ${ownerAlive('paid_calls.owner')})
     returning *, (xmax = 0) as inserted`,
    [ctx.owner?.epoch ?? null, JSON.stringify(rows)],
  );
  const won = new Map(claimed.map((r) => [`${r.network}:${r.payment_key}`, r]));
  return group.map((c) => (first.get(`${c.network}:${c.paymentKey}`) === c ? won.get(`${c.network}:${c.paymentKey}`) : undefined));
}

export function paidCallRepository(ctx: RepoContext): PaidCallRepository {
  // outside a transaction, the claims arriving while one claim statement runs go together in the next (coalesce.ts)
  const claims = ctx.inTransaction ? undefined : new Coalescer<Claim, ClaimedRow | undefined>((group) => claimGroup(ctx, group));
  const repo: PaidCallRepository = {
    claim: async (c) => {
      const row = claims ? await claims.add(c) : (await claimGroup(ctx, [c]))[0];
      if (row) return { claimed: true, record: fromRow(row), marked: c.attempt !== undefined && row.inserted };
      const existing = await repo.get(c.network, c.paymentKey);
      if (!existing) return repo.claim(c);
      return { claimed: false, record: existing };
    },
    get: async (network, paymentKey) => {
      // Inside a transaction the row is locked: the side effects of one payment are recorded once.
      return one(ctx.em(), `select * from paid_calls where network = ? and payment_key = ?${lockedInTransaction(ctx)}`, [network, paymentKey], fromRow);
    },
    getMany: async (network, paymentKeys) => {
      if (paymentKeys.length === 0) return [];
      // locked in one order (by key) so two batches sharing calls cannot deadlock
      const found = await prepared<PaidCallRow>(
        ctx.em(),
        `select * from paid_calls where network = ? and payment_key in (select jsonb_array_elements_text(?::jsonb)) order by payment_key${lockedInTransaction(ctx)}`,
        [network, JSON.stringify(paymentKeys)],
      );
      return found.map(fromRow);
    },
    markAttempted: async (network, paymentKey, a) => {
      const marked = await affected(
        ctx.em(),
        `update paid_calls set attempted = true, request = ?::jsonb, updated_at = ?
          where network = ? and payment_key = ? and status = 'running' and owner is not distinct from ?::int`,
        [JSON.stringify(a.request), a.at, network, paymentKey, ctx.owner?.epoch ?? null],
      );
      return marked > 0;
    },
    markPending: async (network, paymentKey, p) => {
      await query(
        ctx.em(),
        `update paid_calls set status = 'pending', attempted = true, signature = coalesce(?, signature), request = ?::jsonb,
           owner = null, locked_until = ?, updated_at = ?
          where network = ? and payment_key = ? and status <> 'done'`,
        [p.signature, JSON.stringify(p.request), p.at, p.at, network, paymentKey],
      );
    },
    listUnresolved: async (q) => {
      const rows = await query<PaidCallRow>(
        ctx.em(),
        `select * from paid_calls where status <> 'done' and updated_at <= ?
           and (status = 'pending' or locked_until <= ? or not ${ownerAlive('paid_calls.owner')})
         order by updated_at limit ?`,
        [q.before, q.now, q.limit],
      );
      return rows.map(fromRow);
    },
    forgetUnattempted: async (network, paymentKey, now) => {
      const forgotten = await affected(
        ctx.em(),
        `delete from paid_calls where network = ? and payment_key = ? and status = 'running' and not attempted
           and owner is not null and (locked_until <= ? or not ${ownerAlive('paid_calls.owner')})`,
        [network, paymentKey, now],
      );
      return forgotten > 0;
    },
    completeMany: async (network, done) => {
      if (done.length === 0) return;
      const rows = done.map((d) => ({ payment_key: d.paymentKey, signature: d.signature, payer: d.payer, response: d.response, at: d.at }));
      await prepared(
        ctx.em(),
        `update paid_calls p set status = 'done', signature = x.signature, payer = x.payer, response = x.response, owner = null, updated_at = x.at
           from jsonb_to_recordset(?::jsonb) as x(payment_key text, signature text, payer text, response jsonb, at timestamptz)
          where p.network = ? and p.payment_key = x.payment_key`,
        [JSON.stringify(rows), network],
      );
    },
    release: async (network, paymentKey) => {
      await query(ctx.em(), `delete from paid_calls where network = ? and payment_key = ? and status <> 'done'`, [network, paymentKey]);
    },
    deleteExpired: async (now) => {
      return affected(ctx.em(), `delete from paid_calls where status = 'done' and expires_at <= ?`, [now]);
    },
  };
  return repo;
}
