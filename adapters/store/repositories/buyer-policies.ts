import type { Network } from '../../../domain/shared/network.ts';
import type { BuyerRepository } from '../../../domain/ports/buyer-store.ts';
import type { DailySpend, InFlightPayment, SpendPolicyRecord } from '../../../domain/buyer/schema.ts';
import type { StableSymbol } from '../../../domain/shared/network.ts';
import { date, one, query, type RepoContext } from './context.ts';
import { receiptFromRow } from './receipts.ts';

// buyer_policies and buyer_spend_daily (migrations/0016-buyer.ts is their definition); a spend receipt of a
// settlement is found through receipts_spend_tx_sig.

/** The policy column: atomic amounts as decimal strings (jsonb has no bigint). */
interface PolicyBody {
  limits: { currency: StableSymbol; per_call: string | null; daily: string | null }[];
  allowed_sellers: string[] | null;
  allowed_domains: string[] | null;
  min_identity_verdict: 'allow' | 'warn' | null;
}

interface PolicyRow {
  network: Network;
  agent: string;
  policy: PolicyBody;
  owner_principal: string;
  updated_at: Date;
}

const policyFromRow = (r: PolicyRow): SpendPolicyRecord => ({
  network: r.network,
  agent: r.agent,
  limits: r.policy.limits.map((l) => ({
    currency: l.currency,
    perCall: l.per_call === null ? null : BigInt(l.per_call),
    daily: l.daily === null ? null : BigInt(l.daily),
  })),
  allowedSellers: r.policy.allowed_sellers,
  allowedDomains: r.policy.allowed_domains,
  minIdentityVerdict: r.policy.min_identity_verdict,
  ownerPrincipal: r.owner_principal,
  updatedAt: date(r.updated_at),
});

const bodyOf = (p: SpendPolicyRecord): PolicyBody => ({
  limits: p.limits.map((l) => ({ currency: l.currency, per_call: l.perCall?.toString() ?? null, daily: l.daily?.toString() ?? null })),
  allowed_sellers: p.allowedSellers,
  allowed_domains: p.allowedDomains,
  min_identity_verdict: p.minIdentityVerdict,
});

interface SpendRow {
  asset: string;
  gross_atomic: string;
  receipts: number;
}

/** buyer payments: one transaction-scoped lock per (network, agent), keyed (PAYMENTS_LOCK, hashtext(…)) */
const PAYMENTS_LOCK = 7_201_014;

export function buyerRepository(ctx: RepoContext): BuyerRepository {
  const em = () => ctx.em();
  return {
    getPolicy: (network, agent) =>
      one<PolicyRow, SpendPolicyRecord>(
        em(),
        `select network, agent, policy, owner_principal, updated_at from buyer_policies where network = ? and agent = ?`,
        [network, agent],
        policyFromRow,
      ),
    putPolicy: async (p) => {
      await query(
        em(),
        `insert into buyer_policies (network, agent, policy, owner_principal, updated_at) values (?, ?, ?::jsonb, ?, ?)
         on conflict (network, agent) do update set policy = excluded.policy, owner_principal = excluded.owner_principal, updated_at = excluded.updated_at`,
        [p.network, p.agent, JSON.stringify(bodyOf(p)), p.ownerPrincipal, p.updatedAt],
      );
    },
    spentOn: async (network, agent, day) => {
      const rows = await query<SpendRow>(
        em(),
        `select asset, gross_atomic::text as gross_atomic, receipts from buyer_spend_daily where network = ? and agent = ? and day = ?::date`,
        [network, agent, day],
      );
      return rows.map((r): DailySpend => ({ asset: r.asset, grossAtomic: BigInt(r.gross_atomic), receipts: Number(r.receipts) }));
    },
    inFlight: async (network, agent) => {
      const rows = await query<{ asset: string | null; gross_atomic: string | null; state: 'prepared' | 'submitted'; last_valid_block_height: string }>(
        em(),
        `select e.metadata->'echo'->>'mint' as asset, e.metadata->'echo'->>'gross_atomic' as gross_atomic, p.state, p.last_valid_block_height::text as last_valid_block_height
           from prepared_transactions p join events e on e.id = p.event_id
          where p.network = ? and p.agent = ? and p.kind = 'buyer.payment' and p.state <> 'done'`,
        [network, agent],
      );
      return rows
        .filter((r) => r.asset !== null && r.gross_atomic !== null && /^\d{1,40}$/.test(r.gross_atomic))
        .map(
          (r): InFlightPayment => ({
            asset: r.asset!,
            grossAtomic: BigInt(r.gross_atomic!),
            state: r.state,
            lastValidBlockHeight: Number(r.last_valid_block_height),
          }),
        );
    },
    tryLockPayments: async (network, agent) => {
      if (!ctx.inTransaction) throw new Error('buyer.tryLockPayments must run inside store.transaction');
      const rows = await query<{ locked: boolean }>(em(), 'select pg_try_advisory_xact_lock(?, hashtext(?)) as locked', [PAYMENTS_LOCK, `${network}:${agent}`]);
      return rows[0]?.locked === true;
    },
    spendReceiptOf: async (network: Network, agent: string, txSig: string) => {
      const rows = await query<Parameters<typeof receiptFromRow>[0]>(
        em(),
        `select network, source, body, created_at, verification, verification_reason, verification_checked_at, verification_attempts
           from receipts where network = ? and agent = ? and tx_sig = ? and kind = 'spend' order by nonce limit 1`,
        [network, agent, txSig],
      );
      return rows[0] ? receiptFromRow(rows[0]) : null;
    },
  };
}
