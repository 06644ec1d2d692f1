import type { MikroORM } from '@mikro-orm/postgresql';
import type { Network } from '../../../domain/shared/network.ts';
import type {
  ClaimRequest,
  ClaimResult,
  FacilitatorStore,
  SettlementRecord,
  SponsorshipDecision,
  SponsorshipRequest,
} from '../../../domain/ports/facilitator-store.ts';
import { ownerAlive, type ProcessOwner } from '../process-owner.ts';
import { Coalescer } from './coalesce.ts';
import { date, preparedOnPool, query } from './context.ts';

/** A row of `facilitator_settlements` (migrations/0003-paid-calls.ts; owner from 0004, message_hash and payment_id from 0029). */
interface SettlementRow {
  network: Network;
  signature: string;
  status: SettlementRecord['status'];
  payer: string;
  blockhash: string;
  error: string | null;
  message_hash: string | null;
  payment_id: string | null;
  created_at: Date;
  updated_at: Date;
}

const fromRow = (r: SettlementRow): SettlementRecord => ({
  network: r.network,
  signature: r.signature,
  status: r.status,
  payer: r.payer,
  blockhash: r.blockhash,
  error: r.error,
  messageHash: r.message_hash,
  paymentId: r.payment_id,
  createdAt: date(r.created_at),
  updatedAt: date(r.updated_at),
});

type FinishRequest = { network: Network; signature: string; status: 'settled' | 'failed'; error: string | null; at: Date };

/** A sponsorship of (network, owner, mint, account) whose settlement has not finished yet. */
const IN_FLIGHT = `select 1 from rent_sponsorships r join facilitator_settlements f
    on f.network = r.network and f.signature = regexp_replace(r.signature, '^precreate:', '')
  where r.network = ? and r.owner = ? and r.mint = ? and r.account = ? and f.status = 'pending'`;

/** The mark of a pending row whose settle answered settlement_pending (FacilitatorStore.leavePending). */
const LEFT_PENDING = 'settlement_pending';

/** The facilitator's tables in plain SQL: each decision is one statement or one short transaction. */
export class MikroOrmFacilitatorStore implements FacilitatorStore {
  constructor(
    private readonly orm: MikroORM,
    /** this process's liveness number, written into the settlements it claims */
    private readonly owner?: ProcessOwner,
  ) {}

  private exec<T>(sql: string, params: unknown[] = []): Promise<T[]> {
    return query<T>(this.orm.em.fork({ useContext: false }), sql, params);
  }

  /** the guard's hot statements: named, prepared once per connection (context.ts `prepared`) */
  private run<T>(sql: string, params: unknown[]): Promise<T[]> {
    return preparedOnPool<T>(this.orm, sql, params);
  }

  /**
   * The guard's claims and finishes are grouped (coalesce.ts): the ones that arrive while one statement of
   * their kind runs are written by the next one, each row decided exactly as alone.
   */
  private readonly claims = new Coalescer<ClaimRequest, boolean>((group) => this.claimGroup(group));
  private readonly finishes = new Coalescer<FinishRequest, undefined>((group) => this.finishGroup(group));

  async claimSettlement(r: ClaimRequest): Promise<ClaimResult> {
    if (await this.claims.add(r)) return { claimed: true };
    const rows = await this.exec<SettlementRow & { alive: boolean }>(
      `select *, ${ownerAlive('owner')} as alive from facilitator_settlements where network = ? and signature = ?`,
      [r.network, r.signature],
    );
    if (!rows[0]) return this.claimSettlement(r); // deleted in between: try again
    return { claimed: false, existing: fromRow(rows[0]), ownerGone: !rows[0].alive };
  }

  /** The claims of a group in one statement: which of them this process now holds, in order. */
  private async claimGroup(group: ClaimRequest[]): Promise<boolean[]> {
    // The primary key is the decision point across instances; a failed row (nothing landed) may be claimed again. One
    // statement may not touch a row twice: a signature repeated in the group is claimed by its first request only.
    const first = new Map<string, ClaimRequest>();
    for (const r of group) if (!first.has(`${r.network}:${r.signature}`)) first.set(`${r.network}:${r.signature}`, r);
    const rows = [...first.values()].map((r) => ({
      network: r.network,
      signature: r.signature,
      payer: r.payer,
      blockhash: r.blockhash,
      message_hash: r.messageHash ?? null,
      payment_id: r.paymentId ?? null,
      at: r.at,
    }));
    const claimed = await this.run<{ network: string; signature: string }>(
      `insert into facilitator_settlements (network, signature, status, payer, blockhash, error, owner, message_hash, payment_id, created_at, updated_at)
       select x.network, x.signature, 'pending', x.payer, x.blockhash, null, ?::int, x.message_hash, x.payment_id, x.at, x.at
         from jsonb_to_recordset(?::jsonb)
           as x(network text, signature text, payer text, blockhash text, message_hash text, payment_id text, at timestamptz)
       on conflict (network, signature) do update
         set status = 'pending', error = null, owner = excluded.owner, updated_at = excluded.updated_at
         where facilitator_settlements.status = 'failed'
       returning network, signature`,
      [this.owner?.epoch ?? null, JSON.stringify(rows)],
    );
    const won = new Set(claimed.map((c) => `${c.network}:${c.signature}`));
    return group.map((r) => won.has(`${r.network}:${r.signature}`) && first.get(`${r.network}:${r.signature}`) === r);
  }

  async finishSettlement(record: { network: Network; signature: string; status: 'settled' | 'failed'; error: string | null; at: Date }): Promise<void> {
    await this.finishes.add(record);
  }

  /** The finishes of a group in one statement (a signature finished twice in one group: its last finish). */
  private async finishGroup(group: FinishRequest[]): Promise<undefined[]> {
    const last = new Map(group.map((f) => [`${f.network}:${f.signature}`, f]));
    await this.run(
      `update facilitator_settlements f set status = x.status, error = x.error, updated_at = x.at
         from jsonb_to_recordset(?::jsonb) as x(network text, signature text, status text, error text, at timestamptz)
        where f.network = x.network and f.signature = x.signature`,
      [JSON.stringify([...last.values()])],
    );
    return group.map(() => undefined);
  }

  async getSettlement(network: Network, signature: string): Promise<SettlementRecord | null> {
    const rows = await this.exec<SettlementRow>(`select * from facilitator_settlements where network = ? and signature = ?`, [network, signature]);
    return rows[0] ? fromRow(rows[0]) : null;
  }

  async leavePending(r: { network: Network; signature: string; at: Date }): Promise<void> {
    await this.exec(`update facilitator_settlements set error = '${LEFT_PENDING}', updated_at = ? where network = ? and signature = ? and status = 'pending'`, [
      r.at,
      r.network,
      r.signature,
    ]);
  }

  async takePending(r: { network: Network; signature: string; at: Date }): Promise<boolean> {
    // The conditional update is the decision across instances: one taker clears the mark, the others find none.
    const taken = await this.exec(
      `update facilitator_settlements set error = null, owner = ?::int, updated_at = ?
        where network = ? and signature = ? and status = 'pending' and error = '${LEFT_PENDING}' returning signature`,
      [this.owner?.epoch ?? null, r.at, r.network, r.signature],
    );
    return taken.length > 0;
  }

  async findSettlements(
    key: { signature: string } | { messageHash: string } | { paymentId: string },
    options: { networks: Network[]; limit: number },
  ): Promise<SettlementRecord[]> {
    const [column, value] =
      'signature' in key ? ['signature', key.signature] : 'messageHash' in key ? ['message_hash', key.messageHash] : ['payment_id', key.paymentId];
    const rows = await this.exec<SettlementRow>(
      `select * from facilitator_settlements where ${column} = ? and network = any(?::text[]) order by created_at desc limit ?`,
      [value, `{${options.networks.join(',')}}`, options.limit],
    );
    return rows.map(fromRow);
  }

  async settlementLatency(network: Network, options: { since: Date; limit: number }): Promise<{ count: number; p50Ms: number | null; p95Ms: number | null }> {
    // The newest settled rows through facilitator_settlements_settled_idx: at most `limit` rows read, whatever the table holds.
    const rows = await this.exec<{ count: number; p50: number | null; p95: number | null }>(
      `select count(*)::int as count,
              percentile_disc(0.5) within group (order by ms) as p50,
              percentile_disc(0.95) within group (order by ms) as p95
         from (select greatest(0, round(extract(epoch from updated_at - created_at) * 1000))::int as ms
                 from facilitator_settlements
                where network = ? and status = 'settled' and updated_at >= ?
                order by updated_at desc limit ?) newest`,
      [network, options.since, options.limit],
    );
    const row = rows[0];
    return { count: row?.count ?? 0, p50Ms: row?.p50 ?? null, p95Ms: row?.p95 ?? null };
  }

  async checkSponsorship(r: Omit<SponsorshipRequest, 'signature'>): Promise<SponsorshipDecision> {
    const rows = await this.exec<{ sponsored: boolean; in_flight: boolean; used: string }>(
      `select exists (select 1 from rent_sponsorships where network = ? and owner = ? and mint = ?) as sponsored,
              exists (${IN_FLIGHT}) as in_flight,
              coalesce((select lamports_used from rent_budget where network = ? and day = ?), 0)::text as used`,
      [r.network, r.owner, r.mint, r.network, r.owner, r.mint, r.account, r.network, r.day],
    );
    const row = rows[0]!;
    if (row.in_flight) return 'ok';
    if (row.sponsored) return 'already_sponsored';
    return BigInt(row.used) + r.lamports > r.dailyBudget ? 'budget_exhausted' : 'ok';
  }

  async reserveSponsorship(r: SponsorshipRequest): Promise<SponsorshipDecision> {
    return this.orm.em.fork({ useContext: false }).transactional(async (em) => {
      const inserted = await query(
        em,
        `insert into rent_sponsorships (network, owner, mint, account, lamports, signature, day, created_at)
         values (?, ?, ?, ?, ?, ?, ?, now()) on conflict do nothing returning owner`,
        [r.network, r.owner, r.mint, r.account, r.lamports.toString(), r.signature, r.day],
      );
      if (!inserted.length) {
        // Another buyer's settlement creating the same account is in flight: its creation is ours too (idempotent,
        // one rent). Once it landed, a missing account means it was closed — the create-close-reclaim drain.
        const shared = await query(em, IN_FLIGHT, [r.network, r.owner, r.mint, r.account]);
        return shared.length ? 'ok' : 'already_sponsored';
      }
      await query(em, `insert into rent_budget (network, day, lamports_used) values (?, ?, 0) on conflict do nothing`, [r.network, r.day]);
      // Conditional increment: concurrent reservations serialise on the budget row and none overspends.
      const spent = await query(
        em,
        `update rent_budget set lamports_used = lamports_used + ? where network = ? and day = ? and lamports_used + ? <= ? returning day`,
        [r.lamports.toString(), r.network, r.day, r.lamports.toString(), r.dailyBudget.toString()],
      );
      if (!spent.length) {
        await query(em, `delete from rent_sponsorships where network = ? and owner = ? and mint = ?`, [r.network, r.owner, r.mint]);
        return 'budget_exhausted';
      }
      return 'ok';
    });
  }

  async releaseSponsorships(network: Network, signature: string): Promise<void> {
    await this.orm.em.fork({ useContext: false }).transactional(async (em) => {
      const released = await query<{ lamports: string; day: string }>(
        em,
        `delete from rent_sponsorships where network = ? and signature = ? returning lamports::text as lamports, day::text as day`,
        [network, signature],
      );
      for (const r of released) {
        await query(em, `update rent_budget set lamports_used = greatest(lamports_used - ?, 0) where network = ? and day = ?`, [r.lamports, network, r.day]);
      }
    });
  }
}
