import type { Network } from '../../../domain/shared/network.ts';
import type { IndexerRepository, WatchedAddress, WatchRole } from '../../../domain/ports/indexer-store.ts';
import { affected, date, dateOrNull, query, type RepoContext } from './context.ts';

/** A row of `indexer_watch` (migrations/0011-indexer.ts). */
interface WatchRow {
  network: Network;
  address: string;
  role: WatchRole;
  agent: string | null;
  owner_principal: string | null;
  mint: string | null;
  cursor_signature: string | null;
  /** bigint, read as a decimal string */
  cursor_slot: string | null;
  added_at: Date;
}

const fromRow = (r: WatchRow): WatchedAddress => ({
  network: r.network,
  address: r.address,
  role: r.role,
  agent: r.agent,
  ownerPrincipal: r.owner_principal,
  mint: r.mint,
  cursorSignature: r.cursor_signature,
  cursorSlot: r.cursor_slot === null ? null : Number(r.cursor_slot),
  addedAt: date(r.added_at),
});

const COLUMNS = 'network, address, role, agent, owner_principal, mint, cursor_signature, cursor_slot::text as cursor_slot, added_at';

export function indexerRepository(ctx: RepoContext): IndexerRepository {
  const em = () => ctx.em();
  return {
    watch: async (entries, at) => {
      if (!entries.length) return 0;
      // one statement for all, the entries as one JSON parameter (the driver would splice a bound array into a list)
      return affected(
        em(),
        `insert into indexer_watch (network, address, role, agent, owner_principal, mint, added_at)
         select e.network, e.address, e.role, e.agent, e.owner_principal, e.mint, ?
           from jsonb_to_recordset(?::jsonb) as e(network text, address text, role text, agent text, owner_principal text, mint text)
         on conflict (network, address) do nothing`,
        [
          at,
          JSON.stringify(
            entries.map((e) => ({ network: e.network, address: e.address, role: e.role, agent: e.agent, owner_principal: e.ownerPrincipal, mint: e.mint })),
          ),
        ],
      );
    },
    listWatched: async (network, q) =>
      (
        await query<WatchRow>(em(), `select ${COLUMNS} from indexer_watch where network = ? and address > ? order by address limit ?`, [
          network,
          q.afterAddress ?? '',
          q.limit,
        ])
      ).map(fromRow),
    lookup: async (network, addresses) => {
      if (!addresses.length) return [];
      return (
        await query<WatchRow>(em(), `select ${COLUMNS} from indexer_watch where network = ? and address in (select jsonb_array_elements_text(?::jsonb))`, [
          network,
          JSON.stringify(addresses),
        ])
      ).map(fromRow);
    },
    advanceCursor: async (network, address, c) => {
      await query(
        em(),
        `update indexer_watch set cursor_signature = ?, cursor_slot = ?
          where network = ? and address = ? and (cursor_slot is null or cursor_slot <= ?)`,
        [c.signature, c.slot, network, address, c.slot],
      );
    },
    resetCursors: async (network, address) =>
      address === undefined
        ? affected(em(), `update indexer_watch set cursor_signature = null, cursor_slot = null where network = ?`, [network])
        : affected(em(), `update indexer_watch set cursor_signature = null, cursor_slot = null where network = ? and address = ?`, [network, address]),
    markSeen: async ({ network, signature, key, eventId, at }) =>
      (await affected(em(), `insert into indexer_seen (network, signature, key, event_id, created_at) values (?, ?, ?, ?, ?) on conflict do nothing`, [
        network,
        signature,
        key,
        eventId,
        at,
      ])) > 0,
    countSeen: async (network, signature) => {
      const rows = await query<{ n: number }>(em(), `select count(*)::int as n from indexer_seen where network = ? and signature = ?`, [network, signature]);
      return rows[0]!.n;
    },
    preparedAgentOf: async (network, signature) => {
      const rows = await query<{ agent: string }>(em(), `select agent from prepared_transactions where network = ? and signature = ? limit 1`, [
        network,
        signature,
      ]);
      return rows[0]?.agent ?? null;
    },
    recordRun: async (network, run) => {
      await query(
        em(),
        `insert into indexer_runs (network, last_run_at, synced_slot, last_error, last_error_at) values (?, ?, ?, ?, ?)
         on conflict (network) do update set
           last_run_at = excluded.last_run_at,
           synced_slot = coalesce(excluded.synced_slot, indexer_runs.synced_slot),
           last_error = excluded.last_error,
           last_error_at = coalesce(excluded.last_error_at, indexer_runs.last_error_at)`,
        [network, run.at, run.syncedSlot, run.error, run.error === null ? null : run.at],
      );
    },
    status: async (network) => {
      const [watch] = await query<{ n: number; min: string | null; max: string | null }>(
        em(),
        `select count(*)::int as n, min(cursor_slot)::text as min, max(cursor_slot)::text as max from indexer_watch where network = ?`,
        [network],
      );
      const [run] = await query<{ last_run_at: Date | null; synced_slot: string | null; last_error: string | null; last_error_at: Date | null }>(
        em(),
        `select last_run_at, synced_slot::text as synced_slot, last_error, last_error_at from indexer_runs where network = ?`,
        [network],
      );
      const num = (v: string | null | undefined) => (v === null || v === undefined ? null : Number(v));
      return {
        network,
        watched: watch!.n,
        minCursorSlot: num(watch!.min),
        maxCursorSlot: num(watch!.max),
        syncedSlot: num(run?.synced_slot),
        lastRunAt: dateOrNull(run?.last_run_at ?? null),
        lastError: run?.last_error ?? null,
        lastErrorAt: dateOrNull(run?.last_error_at ?? null),
      };
    },
  };
}
