import { z } from 'zod';
import { Network, StableSymbol } from '../shared/network.ts';

// hosted-api §4.4 (DECISIONS "Prepare / submit / events"): the treasury reads. Amounts are atomic decimal strings.

/** 'spl' (SPL Token) or 'token-2022': the spelling the prepare routes take (hosted-api §4.3 withdraw `token_program`). */
export const TokenProgram = z.enum(['spl', 'token-2022']).describe("the mint's token program: 'spl' (SPL Token) or 'token-2022'");

/** One token account the treasury owns, e.g. { symbol: "USDC", mint: "4zMM…", token_program: "spl", token_account: "9xQe…", amount_atomic: "2500000", decimals: 6 } */
export const TreasuryToken = z
  .object({
    /** the curated stable's symbol; null for any other mint */
    symbol: StableSymbol.nullable().describe('the curated stable’s symbol; null for any other mint'),
    mint: z.string().describe('the token mint address'),
    token_program: TokenProgram,
    token_account: z.string().describe('the treasury’s token account for this mint'),
    amount_atomic: z.string().describe('balance in atomic units, decimal string'),
    decimals: z.number().int().describe('the mint’s decimals'),
  })
  .describe('One token account the treasury owns.');
export type TreasuryToken = z.infer<typeof TreasuryToken>;

export const TreasuryBalances = z
  .object({
    /** the agent's asset (mint) */
    agent: z.string().describe('the agent’s asset (mint)'),
    /** the asset-signer PDA holding the funds */
    treasury: z.string().describe('the treasury address holding the funds'),
    network: Network,
    lamports: z.string().describe('native balance in lamports, decimal string'),
    /** TREASURY_RESERVE_LAMPORTS: kept in the treasury by withdraw-sol-all's default */
    reserve_lamports: z.string().describe('lamports kept so the treasury can pay for its own transactions (withdraw-sol-all’s default reserve)'),
    /** max(0, lamports − reserve_lamports) */
    spendable_lamports: z.string().describe('max(0, lamports − reserve_lamports), decimal string'),
    tokens: z.array(TreasuryToken).describe('every token account of the treasury'),
    /** the ledger slot the balances were read at */
    slot: z.number().int().describe('the ledger slot the balances were read at'),
  })
  .describe('Native and token balances of an agent’s treasury (hosted-api §2.10).');
export type TreasuryBalances = z.infer<typeof TreasuryBalances>;

/** Where to pay the agent in one curated stable: the treasury (x402 payTo) and the token account a transfer credits. */
export const PayToEntry = z
  .object({
    currency: StableSymbol,
    /** the stable's mint */
    asset: z.string().describe('the stable’s mint'),
    token_program: TokenProgram,
    /** the x402 payTo: the agent's treasury (hosted-api §2.3) */
    pay_to: z.string().describe('the x402 payTo: the agent’s treasury'),
    /** ATA(treasury, asset, token program): the account a payment credits */
    token_account: z.string().describe('the associated token account a payment credits'),
    /** whether token_account exists on the ledger now (stock x402 clients need it before paying) */
    ready: z.boolean().describe('whether token_account exists on the ledger now (stock x402 clients need it before paying)'),
  })
  .describe('Where to pay the agent in one stable.');
export type PayToEntry = z.infer<typeof PayToEntry>;

export const AgentPayTo = z
  .object({
    agent: z.string().describe('the agent’s mint'),
    network: Network,
    treasury: z.string().describe('the agent’s treasury address'),
    pay_to: z.array(PayToEntry).describe('one entry per curated stable of the network'),
  })
  .describe('The payment destination of an agent (hosted-api §4.4).');
export type AgentPayTo = z.infer<typeof AgentPayTo>;
