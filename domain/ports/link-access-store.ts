import type { Network } from '../shared/network.ts';

/**
 * Returning payers (sign-in-with-x on links with an access_window): which wallet last paid which link, and the
 * sign-in nonces already spent. Shared by every node through the database.
 */
export interface LinkAccessRepository {
  /** a paid call of `payer` (base58 wallet) on the link at `at`; keeps the latest of several */
  recordPayment(network: Network, linkPk: string, payer: string, at: Date): Promise<void>;
  /** when `payer` last paid the link (e.g. 2026-11-28T16:00:00Z); null when never */
  lastPaid(network: Network, linkPk: string, payer: string): Promise<Date | null>;
  /**
   * Spends a sign-in nonce, once: true for the first call on any node, false for every later one. `expiresAt` is when
   * the nonce's challenge stops being accepted anyway (after it the row may go); spent rows expired before `now` are
   * removed on the way.
   */
  useNonce(nonce: string, expiresAt: Date, now: Date): Promise<boolean>;
}
