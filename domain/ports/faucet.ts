import type { Network } from '../shared/network.ts';

/** e.g. { network: "chain-devnet", to: "7Yk…", sol: "1", token: "USDC", amount: "10" } (decimal strings, whole units) */
export interface FaucetRequest {
  network: Network;
  to: string;
  sol?: string | undefined;
  token?: string | undefined;
  amount?: string | undefined;
}

export interface FaucetResult {
  network: Network;
  to: string;
  airdrop?: { signature: string; lamports: bigint };
  mint?: { signature: string; symbol: string | null; mint: string; tokenAccount: string; amount: bigint; decimals: number };
}

/** Funds wallets on a ledger the gateway runs itself (the embedded one); never on a real cluster. */
export type Faucet = (request: FaucetRequest) => Promise<FaucetResult>;
