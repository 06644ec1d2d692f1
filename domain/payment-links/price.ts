import { z } from 'zod';
import { DomainError } from '../shared/errors.ts';
import { STABLE_SYMBOLS, findStable, type Network, type Stable } from '../shared/network.ts';
import { atomicToDecimal, parseAtomic, U64_MAX } from '../shared/money.ts';

export interface ParsedPrice {
  amountAtomic: bigint;
  stable: Stable;
  display: string;
}

const PRICE = /^\s*(\$)?\s*(\d+(?:\.\d+)?)\s*([A-Za-z]+)?\s*$/;

function fail(path: string, message: string): never {
  throw DomainError.invalid([{ path, message, code: 'invalid_price' }], message);
}

/**
 * DECISIONS "Payment links": `$0.01`, `0.01`, `0.01 USDC`, `1.5 usdt` (symbol case-insensitive); at most the
 * stable's decimals; zero and negative prices refused. `currency` is the default symbol when the text names none.
 */
export function parsePrice(text: string, network: Network, currency?: string): ParsedPrice {
  const m = PRICE.exec(text);
  if (!m) fail('price', `Unrecognised price "${text}": use forms like $0.01, 0.01, or 0.01 USDC`);
  const [, dollar, number, symbolText] = m;
  if (dollar && symbolText) fail('price', 'Use either a $ prefix or a stable symbol, not both');
  const symbol = (symbolText ?? currency ?? 'USDC').toUpperCase();
  if (symbolText && currency && currency.toUpperCase() !== symbol) {
    fail('currency', `The price names ${symbol} but currency is ${currency.toUpperCase()}`);
  }
  if (!(STABLE_SYMBOLS as readonly string[]).includes(symbol)) {
    fail(symbolText ? 'price' : 'currency', `Unknown stable ${symbol}; known: ${STABLE_SYMBOLS.join(', ')}`);
  }
  const stable = findStable(network, symbol);
  if (!stable) fail(symbolText ? 'price' : 'currency', `${symbol} is not available on ${network}`);
  const parsed = parseAtomic(number!, stable.decimals);
  if ('problem' in parsed) {
    fail(
      'price',
      parsed.problem === 'range'
        ? `The price exceeds the largest token amount (${atomicToDecimal(U64_MAX, stable.decimals)} ${symbol})`
        : `At most ${stable.decimals} decimal places for ${symbol}`,
    );
  }
  const amountAtomic = parsed.amount;
  if (amountAtomic <= 0n) fail('price', 'The price must be greater than zero');
  return { amountAtomic, stable, display: `${atomicToDecimal(amountAtomic, stable.decimals)} ${stable.symbol}` };
}

/** The stable symbol a price text names: "1.5 usdt" → "USDT"; undefined for "$1", "1" or unparsable text. */
export function priceSymbol(text: string): string | undefined {
  return PRICE.exec(text)?.[3]?.toUpperCase();
}

export const ParsePriceInput = z
  .strictObject({
    price: z.string().min(1).max(64).describe('$0.01, 0.01, 0.01 USDC or 1.5 usdt'),
    currency: z.string().min(1).max(16).describe('the stable when price names none; default USDC').optional(),
  })
  .describe('A display price to parse (DECISIONS "Payment links").');

export const ParsedPriceOutput = z
  .object({
    amount_atomic: z.string().describe('the price in atomic units, decimal string'),
    currency: z.string().describe('the stable symbol'),
    decimals: z.number().int().describe('the stable’s decimals'),
    display: z.string().describe('the price for display, e.g. 0.01 USDC'),
  })
  .describe('A parsed price.');
