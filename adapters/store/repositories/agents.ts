import type { AgentRecord } from '../../../domain/agents/schema.ts';
import type { AgentRepository } from '../../../domain/ports/store.ts';
import { affected, date, dateOrNull, one, query, type RepoContext } from './context.ts';

/** A row of `agents` (migrations/0001-initial.ts, owner_principal from 0005-ownership.ts, proof from 0024-agent-proof.ts). */
interface AgentRow {
  network: AgentRecord['network'];
  mint: string;
  owner: string;
  name: string | null;
  uri: string | null;
  treasury: string;
  executive: string | null;
  source: AgentRecord['source'];
  owner_principal: string | null;
  registered_at: Date;
  updated_at: Date;
  proven_at: Date | null;
  ledger_checked_at: Date | null;
}

const fromRow = (r: AgentRow): AgentRecord => ({
  mint: r.mint,
  network: r.network,
  owner: r.owner,
  name: r.name,
  uri: r.uri,
  treasury: r.treasury,
  executive: r.executive,
  source: r.source,
  ownerPrincipal: r.owner_principal,
  registeredAt: date(r.registered_at),
  provenAt: dateOrNull(r.proven_at),
});

export function agentRepository(ctx: RepoContext): AgentRepository {
  return {
    insert: async (r) => {
      const inserted = await affected(
        ctx.em(),
        `insert into agents (network, mint, owner, name, uri, treasury, executive, source, owner_principal, registered_at, updated_at, proven_at, ledger_checked_at)
         values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) on conflict (network, mint) do nothing`,
        [
          r.network,
          r.mint,
          r.owner,
          r.name,
          r.uri,
          r.treasury,
          r.executive,
          r.source,
          r.ownerPrincipal,
          r.registeredAt,
          r.registeredAt,
          r.provenAt,
          r.provenAt,
        ],
      );
      return inserted === 1;
    },
    replace: async (r, expected) => {
      const replaced = await affected(
        ctx.em(),
        `update agents set owner = ?, owner_principal = ?, name = ?, uri = ?, updated_at = ?, proven_at = coalesce(proven_at, ?::timestamptz)
          where network = ? and mint = ? and owner = ? and owner_principal is not distinct from ?`,
        [r.owner, r.ownerPrincipal, r.name, r.uri, new Date(), r.provenAt, r.network, r.mint, expected.owner, expected.ownerPrincipal],
      );
      return replaced === 1;
    },
    get: async (network, mint) => {
      return one(ctx.em(), 'select * from agents where network = ? and mint = ?', [network, mint], fromRow);
    },
    setExecutive: async (network, mint, executive, options) => {
      const guard = options?.ifCurrent !== undefined ? ' and executive = ?' : '';
      await query(ctx.em(), `update agents set executive = ?, updated_at = ? where network = ? and mint = ?${guard}`, [
        executive,
        new Date(),
        network,
        mint,
        ...(options?.ifCurrent !== undefined ? [options.ifCurrent] : []),
      ]);
    },
    findByTreasury: async (network, treasury) => {
      return one(ctx.em(), 'select * from agents where network = ? and treasury = ? limit 1', [network, treasury], fromRow);
    },
    markProven: async (network, mint, at) => {
      await query(ctx.em(), 'update agents set proven_at = coalesce(proven_at, ?), ledger_checked_at = ? where network = ? and mint = ?', [
        at,
        at,
        network,
        mint,
      ]);
    },
    markChecked: async (network, mint, at) => {
      await query(ctx.em(), 'update agents set ledger_checked_at = ? where network = ? and mint = ? and proven_at is null', [at, network, mint]);
    },
    listUnproven: async ({ limit, checkedBefore }) => {
      // agents_unproven_idx (migration 0024) holds exactly these rows in this order
      const rows = await query<AgentRow>(
        ctx.em(),
        `select * from agents where proven_at is null and (ledger_checked_at is null or ledger_checked_at < ?)
          order by ledger_checked_at nulls first, network, mint limit ?`,
        [checkedBefore, limit],
      );
      return rows.map(fromRow);
    },
  };
}
