import { z } from 'zod';
import { Address } from '../shared/address.ts';
import { atomicToDecimal } from '../shared/money.ts';
import { STABLES, type Network } from '../shared/network.ts';

// fee-facilitator-mpp-tools §4.3 svc_transaction_history / svc_daily_transactions: an agent's settled
// receipts of the last N days in UTC daily buckets. Amounts are bigint inside and USD decimal strings on the wire: the
// curated stables count one unit as one US dollar; receipts in any other asset are left out of the USD figures.
// Spend receipts count their gross (seller leg + fee: what left the treasury), earn receipts their amount_atomic.

export const MAX_DAYS = 90;
/** USD figures carry six decimals (the stables' precision). */
const USD_DECIMALS = 6;

/** GET /v1/receipts/{agent}/daily */
export const DailyTransactionsInput = z.object({
  agent: Address.describe('the agent’s mint'),
  days: z.coerce.number().int().min(1).max(MAX_DAYS).default(7).describe('window in days, today (UTC) included; default 7'),
});
export type DailyTransactionsInput = z.input<typeof DailyTransactionsInput>;

const Usd = z.string().describe('US dollars, decimal string');

export const DailyBucket = z
  .object({
    /** YYYY-MM-DD, UTC */
    date: z.string().describe('the UTC day, YYYY-MM-DD'),
    sent_usd: Usd.describe('US dollars spent (settled spend receipts), decimal string'),
    received_usd: Usd.describe('US dollars earned (settled earn receipts), decimal string'),
    net_usd: Usd.describe('received_usd − sent_usd, decimal string'),
    sent_count: z.number().int().describe('settled spend receipts'),
    received_count: z.number().int().describe('settled earn receipts'),
  })
  .describe('Totals of one UTC day (fee-facilitator-mpp-tools §4.3 svc_daily_transactions).');
export type DailyBucket = z.infer<typeof DailyBucket>;

export const DailyTransactions = z
  .object({
    agent: z.string().describe('the agent’s mint'),
    network: z.string().describe('chain-devnet or chain-mainnet'),
    days: z.number().int().describe('the window in days'),
    /** start of the window: midnight UTC of the first day */
    since: z.string().describe('start of the window: midnight UTC of the first day, ISO 8601'),
    /** oldest first, one per day of the window (empty days included) */
    buckets: z.array(DailyBucket).describe('oldest first, one per day of the window (empty days included)'),
    totals: DailyBucket.omit({ date: true }).describe('the sums over the window'),
  })
  .describe('Settled earn and spend receipts of an agent in daily buckets.');
export type DailyTransactions = z.infer<typeof DailyTransactions>;

/** One aggregate row of the store: settled (decision allow) receipts of one day, kind and asset. */
export interface DailyTotalRow {
  /** YYYY-MM-DD, UTC */
  day: string;
  kind: 'earn' | 'spend';
  asset: string;
  /** spend: sum of gross; earn: sum of amount_atomic */
  amountAtomic: bigint;
  count: number;
}

/** Midnight UTC of the first day of a window of `days` days ending today. */
export function windowStart(now: Date, days: number): Date {
  const start = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate()));
  start.setUTCDate(start.getUTCDate() - (days - 1));
  return start;
}

function usdAtomic(network: Network, asset: string, amount: bigint): bigint | null {
  const stable = STABLES[network].find((s) => s.mint === asset);
  if (!stable) return null;
  const shift = USD_DECIMALS - stable.decimals;
  return shift >= 0 ? amount * 10n ** BigInt(shift) : amount / 10n ** BigInt(-shift);
}

const usd = (atomic: bigint): string => atomicToDecimal(atomic, USD_DECIMALS);

/** Folds the store's aggregate rows into one bucket per day of the window, and the window's totals. */
export function dailyBuckets(input: { agent: string; network: Network; days: number; now: Date; rows: DailyTotalRow[] }): DailyTransactions {
  const since = windowStart(input.now, input.days);
  const acc = new Map<string, { sent: bigint; received: bigint; sentCount: number; receivedCount: number }>();
  for (let i = 0; i < input.days; i++) {
    const d = new Date(since);
    d.setUTCDate(d.getUTCDate() + i);
    acc.set(d.toISOString().slice(0, 10), { sent: 0n, received: 0n, sentCount: 0, receivedCount: 0 });
  }
  for (const r of input.rows) {
    const bucket = acc.get(r.day);
    const amount = usdAtomic(input.network, r.asset, r.amountAtomic);
    if (!bucket || amount === null) continue;
    if (r.kind === 'spend') {
      bucket.sent += amount;
      bucket.sentCount += r.count;
    } else {
      bucket.received += amount;
      bucket.receivedCount += r.count;
    }
  }
  const total = { sent: 0n, received: 0n, sentCount: 0, receivedCount: 0 };
  const buckets: DailyBucket[] = [];
  for (const [date, b] of acc) {
    total.sent += b.sent;
    total.received += b.received;
    total.sentCount += b.sentCount;
    total.receivedCount += b.receivedCount;
    buckets.push({ date, ...wire(b) });
  }
  return { agent: input.agent, network: input.network, days: input.days, since: since.toISOString(), buckets, totals: wire(total) };
}

function wire(b: { sent: bigint; received: bigint; sentCount: number; receivedCount: number }): Omit<DailyBucket, 'date'> {
  return {
    sent_usd: usd(b.sent),
    received_usd: usd(b.received),
    net_usd: usd(b.received - b.sent),
    sent_count: b.sentCount,
    received_count: b.receivedCount,
  };
}
