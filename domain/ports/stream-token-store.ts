import type { Network } from '../shared/network.ts';

/** A subscription token as stored (its SHA-256, never the token). */
export interface StreamTokenRecord {
  /** SHA-256 hex of the full token, e.g. "9f86d08…" */
  tokenHash: string;
  network: Network;
  /** the API key it was issued to (its principal is the token's) */
  keyId: string;
  ownerPrincipal: string;
  createdAt: Date;
  expiresAt: Date;
}

export interface StreamTokenRepository {
  /** stores a new token and deletes the tokens expired before `record.createdAt` */
  insert(record: StreamTokenRecord): Promise<void>;
  /**
   * Marks the token used, once: the first call while it is unused and unexpired at `at` answers the SHA-256 hash of the
   * key it was issued to (e.g. "5e88489…") and its network; every later call, on any node, answers null.
   */
  redeem(tokenHash: string, at: Date): Promise<{ network: Network; keyHash: string } | null>;
}
