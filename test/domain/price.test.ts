import test from 'ava';
import { parsePrice, priceSymbol } from '../../domain/payment-links/price.ts';
import { DomainError } from '../../domain/shared/errors.ts';

const DEVNET_USDC = '4zMMC9srt5Ri5X14GAgXhaHii3GnPAEERYPJgZJDncDU';

function invalid(t: import('ava').ExecutionContext, fn: () => unknown, path: string): void {
  const error = t.throws(fn, { instanceOf: DomainError });
  t.is(error?.code, 'invalid_request');
  const issues = (error?.details as { issues?: { path: string; message: string; code: string }[] } | undefined)?.issues;
  t.truthy(issues?.length, 'details.issues is set');
  t.is(issues?.[0]?.path, path);
  t.is(typeof issues?.[0]?.message, 'string');
  t.is(typeof issues?.[0]?.code, 'string');
}

test('every accepted form of DECISIONS "Payment links" parses', (t) => {
  for (const text of ['$0.01', '0.01', '0.01 USDC', '0.01 usdc', '0.01USDC', ' $ 0.01 ', '0.010000']) {
    const p = parsePrice(text, 'chain-devnet');
    t.is(p.amountAtomic, 10_000n, text);
    t.is(p.stable.symbol, 'USDC', text);
    t.is(p.stable.mint, DEVNET_USDC, text);
    t.is(p.stable.decimals, 6, text);
    t.is(p.display, '0.01 USDC', text);
  }
  t.is(parsePrice('1.5 usdc', 'chain-devnet').amountAtomic, 1_500_000n);
  t.is(parsePrice('2', 'chain-devnet').display, '2 USDC');
  t.is(parsePrice('0.000001', 'chain-devnet').amountAtomic, 1n);
});

test('mainnet knows USDC, USDT and USDG', (t) => {
  const usdt = parsePrice('1.5 usdt', 'chain-mainnet');
  t.is(usdt.amountAtomic, 1_500_000n);
  t.is(usdt.stable.symbol, 'USDT');
  t.is(usdt.stable.mint, 'Es9vMFrzaCERmJfrF4H2FYD4KCoNkY11McCe8BenwNYB');
  t.is(usdt.display, '1.5 USDT');
  const usdg = parsePrice('3 USDG', 'chain-mainnet');
  t.is(usdg.stable.tokenProgram, 'token-2022');
  t.is(usdg.amountAtomic, 3_000_000n);
  t.is(parsePrice('$0.01', 'chain-mainnet').stable.mint, 'EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v');
});

test('the currency argument is the default symbol and must agree with a named one', (t) => {
  t.is(parsePrice('1', 'chain-mainnet', 'usdt').stable.symbol, 'USDT');
  t.is(parsePrice('1 USDT', 'chain-mainnet', 'USDT').stable.symbol, 'USDT');
  t.is(parsePrice('$1', 'chain-mainnet', 'USDG').stable.symbol, 'USDG');
  invalid(t, () => parsePrice('1 USDC', 'chain-mainnet', 'USDT'), 'currency');
  invalid(t, () => parsePrice('1', 'chain-devnet', 'USDT'), 'currency');
  invalid(t, () => parsePrice('1', 'chain-devnet', 'EUR'), 'currency');
});

test('a stable that the network lacks is refused', (t) => {
  invalid(t, () => parsePrice('1.5 usdt', 'chain-devnet'), 'price');
  invalid(t, () => parsePrice('1 USDG', 'chain-devnet'), 'price');
  invalid(t, () => parsePrice('1 EUR', 'chain-mainnet'), 'price');
});

test('more than 6 decimals, zero and negative prices are invalid_request', (t) => {
  invalid(t, () => parsePrice('0.0000001', 'chain-devnet'), 'price');
  invalid(t, () => parsePrice('$0.0000001', 'chain-devnet'), 'price');
  invalid(t, () => parsePrice('1.1234567 USDC', 'chain-devnet'), 'price');
  invalid(t, () => parsePrice('0', 'chain-devnet'), 'price');
  invalid(t, () => parsePrice('$0.00', 'chain-devnet'), 'price');
  invalid(t, () => parsePrice('0.000000 USDC', 'chain-devnet'), 'price');
  invalid(t, () => parsePrice('-1', 'chain-devnet'), 'price');
  invalid(t, () => parsePrice('$-1', 'chain-devnet'), 'price');
});

test('malformed price text is invalid_request', (t) => {
  for (const text of ['', 'abc', '$', '1e3', '1,000', '.5', '1.', '$1 USDC', '1 USDC USDT', '1/2', 'NaN']) {
    invalid(t, () => parsePrice(text, 'chain-devnet'), 'price');
  }
});

test('priceSymbol names the symbol a price text carries, if any', (t) => {
  t.is(priceSymbol('1.5 usdt'), 'USDT');
  t.is(priceSymbol('0.01 USDC'), 'USDC');
  t.is(priceSymbol('0.01USDG'), 'USDG');
  t.is(priceSymbol('$0.01'), undefined);
  t.is(priceSymbol('0.01'), undefined);
  t.is(priceSymbol('not a price'), undefined);
});

test('a price beyond the u64 atomic maximum is invalid_request at price', (t) => {
  t.is(parsePrice('18446744073709.551615', 'chain-devnet').amountAtomic, 18_446_744_073_709_551_615n);
  for (const text of ['18446744073709.551616', '11111111111111111111111111111111', '$99999999999999999999']) {
    invalid(t, () => parsePrice(text, 'chain-devnet'), 'price');
    t.regex((t.throws(() => parsePrice(text, 'chain-devnet')) as DomainError).message, /largest token amount/);
  }
});
