// How the explorer writes times, amounts and long addresses: short enough for a fixed column, the full value in a
// tooltip.

const sameDay = new Intl.DateTimeFormat(undefined, { hour: '2-digit', minute: '2-digit', second: '2-digit' });
const otherDay = new Intl.DateTimeFormat(undefined, { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit' });
const dayOf = new Intl.DateTimeFormat(undefined, { year: 'numeric', month: '2-digit', day: '2-digit' });

/**
 * An ISO 8601 instant in the reader's time zone and locale: the time of day for today (14:03:27), else the date and
 * minute (27 Nov, 14:03). The API's ISO string is the tooltip.
 */
export function localTime(iso: string | null | undefined, now = new Date()): string {
  if (!iso) return '—';
  const at = new Date(iso);
  if (Number.isNaN(at.getTime())) return iso;
  return dayOf.format(at) === dayOf.format(now) ? sameDay.format(at) : otherDay.format(at);
}

/** An atomic amount as a decimal string (bigint arithmetic, no float). */
export function decimal(atomic: string | bigint, decimals: number): string {
  const n = BigInt(atomic);
  const d = 10n ** BigInt(decimals);
  const frac = (n % d).toString().padStart(decimals, '0').replace(/0+$/, '');
  return frac ? `${n / d}.${frac}` : `${n / d}`;
}

/** A curated stable as GET /v1/seller/networks lists it. */
export interface StableInfo {
  symbol: string;
  decimals: number;
}

/** An atomic amount of `mint` in its units when the network's stables name it (GET /v1/seller/networks), else atomic. */
export function amountOf(atomic: string | null | undefined, mint: string | undefined, stables: ReadonlyMap<string, StableInfo>): string {
  if (atomic === undefined || atomic === null) return '';
  const stable = mint === undefined ? undefined : stables.get(mint);
  return stable ? `${decimal(atomic, stable.decimals)} ${stable.symbol}` : `${atomic} (atomic)`;
}

/** A long base58 address or signature cut to its ends. */
export const short = (s: string | null | undefined): string => (s && s.length > 14 ? `${s.slice(0, 6)}…${s.slice(-6)}` : (s ?? ''));
