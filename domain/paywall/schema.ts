import type { Network } from '../shared/network.ts';
import type { X402RequirementsV2 } from '../facilitator/wire.ts';
import type { MppChallenge } from '../facilitator/mpp.ts';

/** A response as served, kept for replays: body as base64 so any bytes survive. */
export interface StoredResponse {
  status: number;
  headers: Record<string, string>;
  /** base64 */
  body: string;
}

/**
 * What a paid call needs to be finished without its buyer: kept before it is settled, so after an unknown outcome or
 * a crash a replay or the reconciliation job can settle it again, forward it and record it (a payment that landed is
 * never left unrecorded).
 */
export interface PendingRequest {
  version: 1 | 2;
  /** base64 buyer-signed transaction */
  transaction: string;
  /** the x402 v2 accept it answers */
  accept: X402RequirementsV2;
  forwardQuery: string;
  contentType: string | null;
  accept_header: string | null;
  /** base64 request body; null without one */
  body: string | null;
  /** the MPP rail: the challenge the transaction is bound to (settled through POST /mpp/settle) */
  mpp?: { challenge: MppChallenge };
  /** the wallet rail: sent by the buyer's wallet and confirmed on the ledger (nothing to settle) */
  landed?: { signature: string; payer: string | null };
}

/** e.g. { network: "chain-devnet", paymentKey: "9f86…", status: "done", signature: "5VER…", response: {…} } */
export interface PaidCallRecord {
  network: Network;
  /** lowercase hex SHA-256 of the payment transaction's message bytes */
  paymentKey: string;
  linkPk: string;
  linkId: string;
  /** running: a request holds it · pending: settle outcome unknown · done: response stored */
  status: 'running' | 'pending' | 'done';
  signature: string | null;
  /** money may have moved: the request was kept and the facilitator asked to settle (a later claimant resumes it) */
  attempted: boolean;
  payer: string | null;
  response: StoredResponse | null;
  request: PendingRequest | null;
  lockedUntil: Date;
  createdAt: Date;
  updatedAt: Date;
  expiresAt: Date;
}
