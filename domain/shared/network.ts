import { z } from 'zod';
import { NETWORKS, STABLE_SYMBOLS } from './chains.ts';

// The network and stable constants (chains.ts) with their zod schemas, which the wire's shared schemas use.
export * from './chains.ts';

export const Network = z.enum(NETWORKS).describe('chain-devnet or chain-mainnet; on /v1 the API key’s prefix fixes it (hosted-api §5.2)');
export type Network = z.infer<typeof Network>;

export const StableSymbol = z.enum(STABLE_SYMBOLS).describe('stable symbol: USDC, USDT or USDG');
export type StableSymbol = z.infer<typeof StableSymbol>;
