import type { Network } from '../shared/network.ts';

/** A response as served, kept for replays: body as base64 so any bytes survive. */
export interface StoredResponse {
  status: number;
  headers: Record<string, string>;
  /** base64 */
  body: string;
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
  /** an earlier request got as far as settling it (its outcome was unknown): a later one may resume it */
  attempted: boolean;
  payer: string | null;
  response: StoredResponse | null;
  lockedUntil: Date;
  createdAt: Date;
  updatedAt: Date;
  expiresAt: Date;
}
