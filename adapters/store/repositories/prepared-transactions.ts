import type { Network } from '../../../domain/shared/network.ts';
import type { PreparedKind } from '../../../domain/events/kinds.ts';
import type { PreparedState, PreparedTransactionRecord } from '../../../domain/transactions/schema.ts';
import type { PreparedTransactionRepository } from '../../../domain/ports/store.ts';
import { affected, date, dateOrNull, lockedInTransaction, one, query, type RepoContext } from './context.ts';

/** A row of `prepared_transactions` (migrations/0010-prepared-transactions.ts). */
interface PreparedRow {
  event_id: string;
  network: Network;
  kind: PreparedKind;
  agent: string;
  owner_principal: string | null;
  message: Buffer;
  signers: string[];
  recent_blockhash: string;
  /** bigint, read as a decimal string */
  last_valid_block_height: string;
  state: PreparedState;
  signature: string | null;
  transaction: Buffer | null;
  client_reference: string | null;
  submitted_at: Date | null;
  next_check_at: Date | null;
  checks: number;
  created_at: Date;
}

const fromRow = (r: PreparedRow): PreparedTransactionRecord => ({
  eventId: r.event_id,
  network: r.network,
  kind: r.kind,
  agent: r.agent,
  owner: r.owner_principal,
  message: new Uint8Array(r.message),
  signers: r.signers,
  recentBlockhash: r.recent_blockhash,
  lastValidBlockHeight: Number(r.last_valid_block_height),
  state: r.state,
  signature: r.signature,
  transaction: r.transaction ? new Uint8Array(r.transaction) : null,
  clientReference: r.client_reference,
  submittedAt: dateOrNull(r.submitted_at),
  nextCheckAt: dateOrNull(r.next_check_at),
  checks: r.checks,
  createdAt: date(r.created_at),
});

export function preparedTransactionRepository(ctx: RepoContext): PreparedTransactionRepository {
  return {
    insert: async (r) => {
      await query(
        ctx.em(),
        `insert into prepared_transactions (event_id, network, kind, agent, owner_principal, message, signers, recent_blockhash,
           last_valid_block_height, state, created_at)
         values (?, ?, ?, ?, ?, ?, array(select jsonb_array_elements_text(?::jsonb)), ?, ?, 'prepared', ?)`,
        [
          r.eventId,
          r.network,
          r.kind,
          r.agent,
          r.owner,
          Buffer.from(r.message),
          JSON.stringify(r.signers),
          r.recentBlockhash,
          r.lastValidBlockHeight,
          r.createdAt,
        ],
      );
    },
    get: async (network, eventId) =>
      one(ctx.em(), `select * from prepared_transactions where network = ? and event_id = ?${lockedInTransaction(ctx)}`, [network, eventId], fromRow),
    markSubmitted: async (network, eventId, s) =>
      (await affected(
        ctx.em(),
        `update prepared_transactions set state = 'submitted', signature = ?, transaction = ?, client_reference = ?, submitted_at = ?, next_check_at = ?
          where network = ? and event_id = ? and state = 'prepared'`,
        [s.signature, Buffer.from(s.transaction), s.clientReference, s.at, s.nextCheckAt, network, eventId],
      )) === 1,
    claimDue: async (now, leaseUntil, limit) => {
      const rows = await query<PreparedRow>(
        ctx.em(),
        `update prepared_transactions p set next_check_at = ?
           from (select event_id from prepared_transactions where state = 'submitted' and next_check_at <= ?
                  order by next_check_at limit ? for update skip locked) due
          where p.event_id = due.event_id
          returning p.*`,
        [leaseUntil, now, limit],
      );
      return rows.map(fromRow);
    },
    scheduleCheck: async (network, eventId, nextCheckAt) => {
      await query(
        ctx.em(),
        `update prepared_transactions set next_check_at = ?, checks = checks + 1 where network = ? and event_id = ? and state = 'submitted'`,
        [nextCheckAt, network, eventId],
      );
    },
    finish: async (network, eventId) => {
      await query(ctx.em(), `update prepared_transactions set state = 'done', next_check_at = null where network = ? and event_id = ?`, [network, eventId]);
    },
    nextDue: async () => {
      const rows = await query<{ at: Date | null }>(ctx.em(), `select min(next_check_at) as at from prepared_transactions where state = 'submitted'`);
      return dateOrNull(rows[0]?.at ?? null);
    },
    listStalePrepared: async (before, limit) => {
      const rows = await query<PreparedRow>(
        ctx.em(),
        `select * from prepared_transactions where state = 'prepared' and created_at < ? order by created_at limit ?`,
        [before, limit],
      );
      return rows.map(fromRow);
    },
  };
}
