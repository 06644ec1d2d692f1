import { DomainError } from '../../../domain/shared/errors.ts';
import type { Network } from '../../../domain/shared/network.ts';
import type { PullTargetRepository } from '../../../domain/ports/store.ts';
import type { PullFormat, PullTargetRecord } from '../../../domain/receipts/pull-targets.ts';
import { date, dateOrNull, uniqueOr, type RepoContext } from './context.ts';

// The pull_targets table (migration 0008 is its definition), raw SQL through the MikroORM connection.

interface PullTargetRow {
  id: string;
  network: Network;
  agent: string;
  owner_principal: string;
  url: string;
  format: PullFormat;
  interval_seconds: number;
  next_run_at: Date;
  last_run_at: Date | null;
  last_status: 'ok' | 'failed' | null;
  last_error: string | null;
  consecutive_failures: number;
  accepted_total: string | number;
  rejected_total: string | number;
  created_at: Date;
}

export const pullTargetFromRow = (r: PullTargetRow): PullTargetRecord => ({
  id: r.id,
  network: r.network,
  agent: r.agent,
  ownerPrincipal: r.owner_principal,
  url: r.url,
  format: r.format,
  intervalSeconds: r.interval_seconds,
  nextRunAt: date(r.next_run_at),
  lastRunAt: dateOrNull(r.last_run_at),
  lastStatus: r.last_status,
  lastError: r.last_error,
  consecutiveFailures: r.consecutive_failures,
  acceptedTotal: Number(r.accepted_total),
  rejectedTotal: Number(r.rejected_total),
  createdAt: date(r.created_at),
});

export function pullTargetRepository(ctx: RepoContext): PullTargetRepository {
  const em = () => ctx.em();
  return {
    insert: async (t) => {
      await uniqueOr(
        em().execute(
          `insert into pull_targets (id, network, agent, owner_principal, url, format, interval_seconds, next_run_at, created_at)
           values (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
          [t.id, t.network, t.agent, t.ownerPrincipal, t.url, t.format, t.intervalSeconds, t.nextRunAt, t.createdAt],
        ),
        () => new DomainError('conflict', `Agent ${t.agent} already has a pull target for ${t.url}.`, { url: t.url }),
      );
    },
    get: async (network, id) => {
      const rows = (await em().execute(`select * from pull_targets where network = ? and id = ?`, [network, id])) as PullTargetRow[];
      return rows[0] ? pullTargetFromRow(rows[0]) : null;
    },
    listByAgent: async (network, agent, q) => {
      const rows = (await em().execute(`select * from pull_targets where network = ? and agent = ? and id > ? order by id limit ?`, [
        network,
        agent,
        q.afterId ?? '',
        q.limit,
      ])) as PullTargetRow[];
      return rows.map(pullTargetFromRow);
    },
    delete: async (network, id) => {
      const rows = (await em().execute(`delete from pull_targets where network = ? and id = ? returning 1`, [network, id])) as unknown[];
      return rows.length > 0;
    },
    claimDue: async (now, leaseUntil, limit) => {
      const rows = (await em().execute(
        `update pull_targets set leased_until = ? where id in (
           select id from pull_targets where next_run_at <= ? and (leased_until is null or leased_until <= ?)
           order by next_run_at limit ? for update skip locked)
         returning *`,
        [leaseUntil, now, now, limit],
      )) as PullTargetRow[];
      return rows.map(pullTargetFromRow);
    },
    recordRun: async (network, id, o) => {
      await em().execute(
        `update pull_targets set leased_until = null, last_run_at = ?, last_status = ?, last_error = ?, next_run_at = ?,
           consecutive_failures = case when ? then 0 else consecutive_failures + 1 end,
           accepted_total = accepted_total + ?, rejected_total = rejected_total + ?
         where network = ? and id = ?`,
        [o.at, o.ok ? 'ok' : 'failed', o.error, o.nextRunAt, o.ok, o.accepted, o.rejected, network, id],
      );
    },
    nextDue: async () => {
      const rows = (await em().execute(`select min(next_run_at) as at from pull_targets`)) as { at: Date | null }[];
      return rows[0]?.at ? date(rows[0].at) : null;
    },
  };
}
