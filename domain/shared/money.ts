// The only place that converts between display decimals and atomic bigint amounts.

const DECIMAL = /^(\d+)(?:\.(\d+))?$/;

/** The largest atomic amount there is: SPL token amounts and lamport balances are u64. */
export const U64_MAX = 2n ** 64n - 1n;

/** Why a decimal text is no atomic amount: not a plain decimal, more places than the decimals, or beyond u64. */
export type AtomicProblem = 'format' | 'precision' | 'range';

/** "1.5" with 6 decimals → { amount: 1500000n }; every amount returned fits u64. */
export function parseAtomic(text: string, decimals: number): { amount: bigint } | { problem: AtomicProblem } {
  const m = DECIMAL.exec(text);
  if (!m) return { problem: 'format' };
  const whole = m[1]!;
  const frac = m[2] ?? '';
  if (frac.length > decimals) return { problem: 'precision' };
  // u64 has 20 digits: longer whole parts (leading zeros aside) are out of range before any BigInt is built.
  if (whole.replace(/^0+/, '').length > 20) return { problem: 'range' };
  const amount = BigInt(whole) * 10n ** BigInt(decimals) + BigInt(frac.padEnd(decimals, '0') || '0');
  return amount > U64_MAX ? { problem: 'range' } : { amount };
}

/** "1.5" with 6 decimals → 1500000n. Null when the text is not a plain decimal, is too precise or exceeds u64. */
export function decimalToAtomic(text: string, decimals: number): bigint | null {
  const parsed = parseAtomic(text, decimals);
  return 'amount' in parsed ? parsed.amount : null;
}

/** Lamports per SOL as decimals: 1_000_000_000n lamports = "1" SOL. */
export const SOL_DECIMALS = 9;

/** 1500000n with 6 decimals → "1.5"; 1000000n → "1". */
export function atomicToDecimal(amount: bigint, decimals: number): string {
  const negative = amount < 0n;
  const abs = negative ? -amount : amount;
  const base = 10n ** BigInt(decimals);
  const whole = abs / base;
  const frac = (abs % base).toString().padStart(decimals, '0').replace(/0+$/, '');
  return `${negative ? '-' : ''}${whole}${frac ? `.${frac}` : ''}`;
}

/** Ceiling division of non-negative bigints (fee math, fee-facilitator-mpp-tools §2.2). */
export function ceilDiv(numerator: bigint, denominator: bigint): bigint {
  if (denominator <= 0n) throw new RangeError('denominator must be positive');
  if (numerator < 0n) throw new RangeError('numerator must be non-negative');
  return (numerator + denominator - 1n) / denominator;
}

/** fee = ceil(amount × bps / 10000). */
export function feeFor(amount: bigint, bps: number): bigint {
  return ceilDiv(amount * BigInt(bps), 10_000n);
}

/** 100 bps → "1.00" (percent with two decimals). */
export function bpsToPct(bps: number): string {
  return `${Math.trunc(bps / 100)}.${String(bps % 100).padStart(2, '0')}`;
}
