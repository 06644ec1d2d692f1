import type { Network } from '../shared/network.ts';

// The facilitator's shared state (DECISIONS "Facilitator"): the duplicate-settlement guard keyed by transaction
// signature, and the rent-sponsorship ledger (one sponsored creation per (owner, mint), a daily lamport budget per
// network). In the database so every instance — the gateway's in-process facilitator and `npm run facilitator`
// processes alike — sees the same rows.

export type SettlementStatus = 'pending' | 'settled' | 'failed';

/** e.g. { network: "chain-devnet", signature: "5VER…", status: "settled", payer: "7Yk…", error: null, blockhash: "EkSn…" } */
export interface SettlementRecord {
  network: Network;
  signature: string;
  status: SettlementStatus;
  payer: string;
  /** the transaction's recent blockhash: once it expired, a pending settlement that never landed never will */
  blockhash: string;
  error: string | null;
  createdAt: Date;
  updatedAt: Date;
}

/** `ownerGone`: the process that claimed the existing row has died (a pending row of it is abandoned at once). */
export type ClaimResult = { claimed: true } | { claimed: false; existing: SettlementRecord; ownerGone: boolean };

export interface SponsorshipRequest {
  network: Network;
  /** the settlement that pays for it */
  signature: string;
  owner: string;
  mint: string;
  /** the token account created */
  account: string;
  lamports: bigint;
  /** UTC day, e.g. "2026-11-22" */
  day: string;
  dailyBudget: bigint;
}

export type SponsorshipDecision = 'ok' | 'already_sponsored' | 'budget_exhausted';

export interface FacilitatorStore {
  /**
   * Claims a signature for settlement for this process: inserts a pending row, or takes over a `failed` one
   * (nothing landed; the same bytes may be tried again). Otherwise returns the existing row untouched, and whether
   * the process that claimed it is gone.
   */
  claimSettlement(record: { network: Network; signature: string; payer: string; blockhash: string; at: Date }): Promise<ClaimResult>;
  finishSettlement(record: { network: Network; signature: string; status: 'settled' | 'failed'; error: string | null; at: Date }): Promise<void>;
  getSettlement(network: Network, signature: string): Promise<SettlementRecord | null>;
  /** Read-only check for verify: would this sponsorship be granted now? */
  checkSponsorship(request: Omit<SponsorshipRequest, 'signature'>): Promise<SponsorshipDecision>;
  /** Atomically records the sponsorship and spends the day's budget, or changes nothing and says why. */
  reserveSponsorship(request: SponsorshipRequest): Promise<SponsorshipDecision>;
  /** Gives back what a settlement reserved (it did not land: the accounts were not created). */
  releaseSponsorships(network: Network, signature: string): Promise<void>;
}
