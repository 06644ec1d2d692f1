import type { Network } from '../shared/network.ts';

// The facilitator's shared state (DECISIONS "Facilitator"): the duplicate-settlement guard keyed by transaction
// signature, and the rent-sponsorship ledger (one sponsored creation per (owner, mint), a daily lamport budget per
// network). In the database so every instance — the gateway's in-process facilitator and `npm run facilitator`
// processes alike — sees the same rows.

export type SettlementStatus = 'pending' | 'settled' | 'failed';

/**
 * e.g. { network: "chain-devnet", signature: "5VER…", status: "settled", payer: "7Yk…", error: null, blockhash: "EkSn…",
 * messageHash: "q3vB…=", paymentId: "pay_7HkQ2m9xLw4RtY8Z" }. A pending row whose error is "settlement_pending" was answered
 * settlement_pending: no request waits on it, the next settle of the same payment reconciles it.
 */
export interface SettlementRecord {
  network: Network;
  signature: string;
  status: SettlementStatus;
  payer: string;
  /** the transaction's recent blockhash: once it expired, a pending settlement that never landed never will */
  blockhash: string;
  error: string | null;
  /** base64 SHA-256 of the transaction message (the x402 reference facilitator's key of a payment); null on rows before it */
  messageHash: string | null;
  /** the payment-identifier extension's id the buyer gave, if any */
  paymentId: string | null;
  createdAt: Date;
  updatedAt: Date;
}

/** `ownerGone`: the process that claimed the existing row has died (a pending row of it is abandoned at once). */
export type ClaimResult = { claimed: true } | { claimed: false; existing: SettlementRecord; ownerGone: boolean };

/** e.g. { network: "chain-devnet", signature: "5VER…", payer: "7Yk…", blockhash: "EkSn…", messageHash: "q3vB…=", paymentId: null, at } */
export interface ClaimRequest {
  network: Network;
  signature: string;
  payer: string;
  blockhash: string;
  messageHash?: string | undefined;
  paymentId?: string | null | undefined;
  at: Date;
}

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
  claimSettlement(record: ClaimRequest): Promise<ClaimResult>;
  finishSettlement(record: { network: Network; signature: string; status: 'settled' | 'failed'; error: string | null; at: Date }): Promise<void>;
  getSettlement(network: Network, signature: string): Promise<SettlementRecord | null>;
  /**
   * x402 `settlement_pending`: the request holding a pending row stopped waiting and answered pending; the row stays
   * pending, marked so that the next settle of the same payment, on any instance, reconciles it (takePending).
   */
  leavePending(record: { network: Network; signature: string; at: Date }): Promise<void>;
  /** Takes a row left pending for this process (one taker across instances); false when it is not (any more) left pending. */
  takePending(record: { network: Network; signature: string; at: Date }): Promise<boolean>;
  /** The settlements a status question names, newest first (at most `limit`), on the networks given. */
  findSettlements(
    key: { signature: string } | { messageHash: string } | { paymentId: string },
    options: { networks: Network[]; limit: number },
  ): Promise<SettlementRecord[]>;
  /**
   * Latency of the newest settled settlements of a network (from the claim to the confirmation seen), over at most
   * `limit` rows settled since `since`: { count: 212, p50Ms: 410, p95Ms: 1280 } (null percentiles when count is 0).
   */
  settlementLatency(network: Network, options: { since: Date; limit: number }): Promise<{ count: number; p50Ms: number | null; p95Ms: number | null }>;
  /** Read-only check for verify: would this sponsorship be granted now? */
  checkSponsorship(request: Omit<SponsorshipRequest, 'signature'>): Promise<SponsorshipDecision>;
  /** Atomically records the sponsorship and spends the day's budget, or changes nothing and says why. */
  reserveSponsorship(request: SponsorshipRequest): Promise<SponsorshipDecision>;
  /** Gives back what a settlement reserved (it did not land: the accounts were not created). */
  releaseSponsorships(network: Network, signature: string): Promise<void>;
}
