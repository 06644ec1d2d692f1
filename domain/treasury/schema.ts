import { z } from 'zod';
import { Network, StableSymbol } from '../shared/network.ts';

// hosted-api §4.4 (DECISIONS "Prepare / submit / events"): the treasury reads. Amounts are atomic decimal strings.

/** 'spl' (SPL Token) or 'token-2022': the spelling the prepare routes take (hosted-api §4.3 withdraw `token_program`). */
export const TokenProgram = z.enum(['spl', 'token-2022']);

/** One token account the treasury owns, e.g. { symbol: "USDC", mint: "4zMM…", token_program: "spl", token_account: "9xQe…", amount_atomic: "2500000", decimals: 6 } */
export const TreasuryToken = z.object({
  /** the curated stable's symbol; null for any other mint */
  symbol: StableSymbol.nullable(),
  mint: z.string(),
  token_program: TokenProgram,
  token_account: z.string(),
  amount_atomic: z.string(),
  decimals: z.number().int(),
});
export type TreasuryToken = z.infer<typeof TreasuryToken>;

export const TreasuryBalances = z.object({
  /** the agent's asset (mint) */
  agent: z.string(),
  /** the asset-signer PDA holding the funds */
  treasury: z.string(),
  network: Network,
  lamports: z.string(),
  /** TREASURY_RESERVE_LAMPORTS: kept in the treasury by withdraw-sol-all's default */
  reserve_lamports: z.string(),
  /** max(0, lamports − reserve_lamports) */
  spendable_lamports: z.string(),
  tokens: z.array(TreasuryToken),
  /** the ledger slot the balances were read at */
  slot: z.number().int(),
});
export type TreasuryBalances = z.infer<typeof TreasuryBalances>;

/** Where to pay the agent in one curated stable: the treasury (x402 payTo) and the token account a transfer credits. */
export const PayToEntry = z.object({
  currency: StableSymbol,
  /** the stable's mint */
  asset: z.string(),
  token_program: TokenProgram,
  /** the x402 payTo: the agent's treasury (hosted-api §2.3) */
  pay_to: z.string(),
  /** ATA(treasury, asset, token program): the account a payment credits */
  token_account: z.string(),
  /** whether token_account exists on the ledger now (stock x402 clients need it before paying) */
  ready: z.boolean(),
});
export type PayToEntry = z.infer<typeof PayToEntry>;

export const AgentPayTo = z.object({
  agent: z.string(),
  network: Network,
  treasury: z.string(),
  pay_to: z.array(PayToEntry),
});
export type AgentPayTo = z.infer<typeof AgentPayTo>;
