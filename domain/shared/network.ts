import { z } from 'zod';

export const NETWORKS = ['chain-devnet', 'chain-mainnet'] as const;
export const Network = z.enum(NETWORKS).describe('chain-devnet or chain-mainnet; on /v1 the API key’s prefix fixes it (hosted-api §5.2)');
export type Network = z.infer<typeof Network>;

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

export const TOKEN_PROGRAM_ID = 'TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA';
export const TOKEN_2022_PROGRAM_ID = 'TokenzQdBNbLqP5VEhdkAS6EPFLC1PHnBqCXEpPxuEb';
export type TokenProgramName = 'spl' | 'token-2022';

export const STABLE_SYMBOLS = ['USDC', 'USDT', 'USDG'] as const;
export const StableSymbol = z.enum(STABLE_SYMBOLS).describe('stable symbol: USDC, USDT or USDG');
export type StableSymbol = z.infer<typeof StableSymbol>;

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
