import test from 'ava';
import { atomicToDecimal, bpsToPct, ceilDiv, decimalToAtomic, feeFor, parseAtomic, U64_MAX } from '../../domain/shared/money.ts';

test('decimalToAtomic scales plain decimals to atomic bigint', (t) => {
  t.is(decimalToAtomic('1.5', 6), 1_500_000n);
  t.is(decimalToAtomic('0.01', 6), 10_000n);
  t.is(decimalToAtomic('1', 6), 1_000_000n);
  t.is(decimalToAtomic('0.000001', 6), 1n);
  t.is(decimalToAtomic('1.000000', 6), 1_000_000n);
  t.is(decimalToAtomic('0', 6), 0n);
  t.is(decimalToAtomic('007.5', 6), 7_500_000n);
  t.is(decimalToAtomic('42', 0), 42n);
  t.is(decimalToAtomic('1.23', 2), 123n);
  // Beyond Number.MAX_SAFE_INTEGER stays exact: no float ever holds an amount.
  t.is(decimalToAtomic('18446744073709.551615', 6), 18_446_744_073_709_551_615n);
  t.is(decimalToAtomic('9007199254740993', 0), 9_007_199_254_740_993n);
});

test('decimalToAtomic refuses more precision than the decimals allow', (t) => {
  t.is(decimalToAtomic('0.0000001', 6), null);
  t.is(decimalToAtomic('1.5000000', 6), null);
  t.is(decimalToAtomic('1.0', 0), null);
  t.is(decimalToAtomic('1.234', 2), null);
});

test('decimalToAtomic refuses anything but a plain non-negative decimal', (t) => {
  for (const text of ['', '-1', '+1', '1e3', '.5', '1.', ' 1', '1 ', '1,5', '0x10', 'abc', '$1', '1.2.3', 'Infinity', 'NaN']) {
    t.is(decimalToAtomic(text, 6), null, text);
  }
});

test('every atomic amount fits u64: one more than u64 max is out of range, at any scale', (t) => {
  t.is(U64_MAX, 18_446_744_073_709_551_615n);
  t.deepEqual(parseAtomic('18446744073709551615', 0), { amount: U64_MAX });
  t.deepEqual(parseAtomic('18446744073709551616', 0), { problem: 'range' });
  t.deepEqual(parseAtomic('18446744073709.551616', 6), { problem: 'range' });
  t.deepEqual(parseAtomic('11111111111111111111111111111111', 6), { problem: 'range' });
  t.deepEqual(parseAtomic('9'.repeat(10_000), 6), { problem: 'range' });
  t.deepEqual(parseAtomic(`${'0'.repeat(40)}1`, 6), { amount: 1_000_000n });
  t.deepEqual(parseAtomic('1.5', 0), { problem: 'precision' });
  t.deepEqual(parseAtomic('1e3', 6), { problem: 'format' });
  t.is(decimalToAtomic('18446744073709.551616', 6), null);
});

test('atomicToDecimal writes the shortest exact decimal', (t) => {
  t.is(atomicToDecimal(1_500_000n, 6), '1.5');
  t.is(atomicToDecimal(1_000_000n, 6), '1');
  t.is(atomicToDecimal(10_000n, 6), '0.01');
  t.is(atomicToDecimal(1n, 6), '0.000001');
  t.is(atomicToDecimal(0n, 6), '0');
  t.is(atomicToDecimal(123_456_789n, 6), '123.456789');
  t.is(atomicToDecimal(-1_500_000n, 6), '-1.5');
  t.is(atomicToDecimal(42n, 0), '42');
  t.is(atomicToDecimal(18_446_744_073_709_551_615n, 6), '18446744073709.551615');
});

test('decimalToAtomic and atomicToDecimal round-trip', (t) => {
  for (const amount of [0n, 1n, 9n, 10n, 999_999n, 1_000_000n, 1_000_001n, 10n ** 18n + 7n]) {
    const text = atomicToDecimal(amount, 6);
    t.is(decimalToAtomic(text, 6), amount, text);
  }
});

test('ceilDiv rounds up on bigint and refuses bad operands', (t) => {
  t.is(ceilDiv(10n, 3n), 4n);
  t.is(ceilDiv(9n, 3n), 3n);
  t.is(ceilDiv(1n, 10_000n), 1n);
  t.is(ceilDiv(0n, 5n), 0n);
  t.is(ceilDiv(10n ** 30n + 1n, 10n ** 30n), 2n);
  t.throws(() => ceilDiv(1n, 0n), { instanceOf: RangeError });
  t.throws(() => ceilDiv(1n, -1n), { instanceOf: RangeError });
  t.throws(() => ceilDiv(-1n, 3n), { instanceOf: RangeError });
});

test('feeFor is ceil(amount × bps / 10000)', (t) => {
  t.is(feeFor(10_000n, 100), 100n); // $0.01 at 1 %: ceil(10000 × 100 / 10000)
  t.is(feeFor(1n, 100), 1n); // the smallest amount still pays one atom: ceil(1 × 100 / 10000)
  t.is(feeFor(0n, 100), 0n);
  t.is(feeFor(9_999n, 100), 100n); // 99.99 → 100
  t.is(feeFor(10_001n, 100), 101n); // 100.01 → 101
  t.is(feeFor(1_500_000n, 100), 15_000n);
  t.is(feeFor(1_000_000n, 0), 0n);
  t.is(feeFor(1_000_000n, 10_000), 1_000_000n);
  t.is(feeFor(1_000_000n, 1), 100n);
  t.is(feeFor(2n ** 64n, 100), 184_467_440_737_095_517n); // ceil(2^64 / 100), exact past 2^53
});

test('bpsToPct writes a percentage with two decimals', (t) => {
  t.is(bpsToPct(100), '1.00');
  t.is(bpsToPct(0), '0.00');
  t.is(bpsToPct(1), '0.01');
  t.is(bpsToPct(5), '0.05');
  t.is(bpsToPct(50), '0.50');
  t.is(bpsToPct(250), '2.50');
  t.is(bpsToPct(1234), '12.34');
  t.is(bpsToPct(10_000), '100.00');
});
