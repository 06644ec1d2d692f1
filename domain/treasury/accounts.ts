import { z } from 'zod';
import { Address } from '../shared/address.ts';
import { DomainError } from '../shared/errors.ts';
import { CAIP2, STABLES, findStable, type Network, type StableSymbol } from '../shared/network.ts';
import type { Facilitator } from '../ports/facilitator.ts';
import { payToFor, treasuryOf } from './derive.ts';

// A seller's receiving token accounts, ready before the first payment.
// Stock x402 clients (x402-fetch 1.x) build a plain TransferChecked into ATA(payTo, asset) and simulate it before
// signing, so that account must exist already. When an agent is recorded and when a link is created, the gateway asks
// the link's facilitator to create what is missing — at the facilitator's expense, within its rent-sponsorship limits
// (one sponsored account per owner and mint, a daily budget) — and says in the link's answer whether each accept is
// ready.

/**
 * The facilitator's POST /accounts body, e.g. { network: "solana:EtWT…", owner: "<treasury>", assets: ["4zMM…"] }.
 * Not part of x402: a facilitator of ours answers it; another one answers 404 (→ facilitator_unavailable).
 */
export const PrepareAccountsRequest = z.strictObject({
  /** CAIP-2 (or the x402 v1 name) */
  network: z.string().min(1).max(64),
  /** the owner of the token accounts: a wallet or a PDA such as an agent treasury */
  owner: Address,
  assets: z.array(Address).min(1).max(8),
});
export type PrepareAccountsRequest = z.infer<typeof PrepareAccountsRequest>;

/** Why an account is not ready; the facilitator's words are in `message`. */
export const ACCOUNT_NOT_READY_REASONS = [
  /** the facilitator already sponsored an account of this owner and mint, or its daily rent budget is spent */
  'ata_creation_not_sponsored',
  /** the asset is not an SPL Token or Token-2022 mint on the network */
  'unsupported_asset',
  /** the facilitator does not settle on the network */
  'unsupported_network',
  /** the creation was sent and did not land */
  'account_creation_failed',
  /** the facilitator could not be asked (unreachable, or one that does not offer POST /accounts) */
  'facilitator_unavailable',
] as const;
export const AccountNotReadyReason = z.enum(ACCOUNT_NOT_READY_REASONS);
export type AccountNotReadyReason = z.infer<typeof AccountNotReadyReason>;

/** e.g. { asset: "4zMM…", account: "9xQe…", ready: true, created: true } or { …, ready: false, reason: "ata_creation_not_sponsored", message } */
export const PreparedAccount = z.union([
  z.object({ asset: z.string(), account: z.string().nullable(), ready: z.literal(true), created: z.boolean() }),
  z.object({ asset: z.string(), account: z.string().nullable(), ready: z.literal(false), reason: AccountNotReadyReason, message: z.string() }),
]);
export type PreparedAccount = z.infer<typeof PreparedAccount>;

export const PrepareAccountsResponse = z.object({
  network: z.string(),
  owner: z.string(),
  accounts: z.array(PreparedAccount),
});
export type PrepareAccountsResponse = z.infer<typeof PrepareAccountsResponse>;

/** Readiness of one accept of a link: whether ATA(treasury, mint) exists, and why not. */
export interface PayToReadiness {
  ready: boolean;
  reason?: AccountNotReadyReason;
  message?: string;
}

export interface TreasuryAccountsDeps {
  /** the facilitator the paywall settles through (in-process or HTTP); absent in a process without ledgers */
  facilitator: Facilitator | undefined;
  /** a refusal is an answer (pay_to_ready: false), not an error; it is logged for the operator */
  onWarning?: (message: string, context: Record<string, unknown>) => void;
}

export class TreasuryAccounts {
  constructor(private readonly deps: TreasuryAccountsDeps) {}

  /**
   * Makes sure the agent's treasury has a token account for each symbol (default: every curated stable of the
   * network). Never throws: what could not be made ready is answered as such (and logged).
   */
  async ensure(network: Network, agentAsset: string, symbols?: readonly StableSymbol[]): Promise<Map<StableSymbol, PayToReadiness>> {
    const stables = symbols ? symbols.map((s) => findStable(network, s)!) : [...STABLES[network]];
    const answer = new Map<StableSymbol, PayToReadiness>();
    if (stables.length === 0) return answer;
    const owner = treasuryOf(agentAsset);
    const unavailable = (message: string) => {
      for (const s of stables) answer.set(s.symbol, { ready: false, reason: 'facilitator_unavailable', message });
      this.deps.onWarning?.('treasury token accounts not prepared', { network, owner, reason: 'facilitator_unavailable', message });
      return answer;
    };
    if (!this.deps.facilitator) return unavailable('no facilitator in this process');
    let prepared: PrepareAccountsResponse;
    try {
      prepared = await this.deps.facilitator.prepareAccounts({ network: CAIP2[network], owner, assets: stables.map((s) => s.mint) });
    } catch (e) {
      // The agent or link is already committed: its answer must not become an error because of this step.
      return unavailable(e instanceof DomainError ? e.message : `the facilitator failed: ${(e as Error).message}`);
    }
    for (const s of stables) {
      const account = prepared.accounts.find((a) => a.asset === s.mint);
      if (!account) {
        answer.set(s.symbol, { ready: false, reason: 'facilitator_unavailable', message: `the facilitator did not answer for ${s.symbol}` });
      } else if (account.ready) {
        answer.set(s.symbol, { ready: true });
      } else {
        answer.set(s.symbol, { ready: false, reason: account.reason, message: account.message });
        this.deps.onWarning?.('treasury token account not prepared', {
          network,
          owner,
          asset: s.mint,
          account: payToFor(agentAsset, s),
          reason: account.reason,
        });
      }
    }
    return answer;
  }
}
