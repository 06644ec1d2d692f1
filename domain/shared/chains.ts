// The networks, their stables and wire names as plain constants. domain/shared/network.ts adds their zod schemas; the
// embedded ledger's thread imports this module alone and loads no schema library.
import { TOKEN_2022_PROGRAM_ID, TOKEN_PROGRAM_ID } from './program-ids.ts';

export { TOKEN_2022_PROGRAM_ID, TOKEN_PROGRAM_ID };

export const NETWORKS = ['chain-devnet', 'chain-mainnet'] as const;
export type Network = (typeof NETWORKS)[number];

/** hosted-api §5: the key prefix fixes the network. */
export const KEY_PREFIX: Record<Network, string> = {
  'chain-devnet': 'svc_test_',
  'chain-mainnet': 'svc_live_',
};

/** DECISIONS "x402 on the paywall": CAIP-2 ids (v2) and the v1 names. */
export const CAIP2: Record<Network, string> = {
  'chain-mainnet': 'solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp',
  'chain-devnet': 'solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1',
};
export const X402_V1_NETWORK: Record<Network, string> = {
  'chain-mainnet': 'solana',
  'chain-devnet': 'solana-devnet',
};

export type TokenProgramName = 'spl' | 'token-2022';

export const STABLE_SYMBOLS = ['USDC', 'USDT', 'USDG'] as const;
export type StableSymbol = (typeof STABLE_SYMBOLS)[number];

export interface Stable {
  symbol: StableSymbol;
  mint: string;
  decimals: number;
  tokenProgram: TokenProgramName;
  tokenProgramId: string;
}

const stable = (symbol: StableSymbol, mint: string, tokenProgram: TokenProgramName): Stable => ({
  symbol,
  mint,
  decimals: 6,
  tokenProgram,
  tokenProgramId: tokenProgram === 'spl' ? TOKEN_PROGRAM_ID : TOKEN_2022_PROGRAM_ID,
});

/** The curated stables per network (hosted-api §4.3 provision; issue "foundation"). */
export const STABLES: Record<Network, readonly Stable[]> = {
  'chain-devnet': [stable('USDC', '4zMMC9srt5Ri5X14GAgXhaHii3GnPAEERYPJgZJDncDU', 'spl')],
  'chain-mainnet': [
    stable('USDC', 'EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v', 'spl'),
    stable('USDT', 'Es9vMFrzaCERmJfrF4H2FYD4KCoNkY11McCe8BenwNYB', 'spl'),
    stable('USDG', '2u1tszSeqZ3qBWF3uNGPFc8TzMk2tdiwknnRMWGWjGWH', 'token-2022'),
  ],
};

export function findStable(network: Network, symbol: string): Stable | undefined {
  const wanted = symbol.toUpperCase();
  return STABLES[network].find((s) => s.symbol === wanted);
}
