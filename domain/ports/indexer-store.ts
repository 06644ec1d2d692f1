import type { Network } from '../shared/network.ts';

// The indexer's watchlist, its cursors, its exactly-once record and its runs (migrations/0011-indexer.ts).

/**
 * What an address is to the indexer: an agent's Core asset, its treasury (the asset-signer PDA), one of the treasury's
 * token accounts, or one of the fee authority's token accounts (fee-facilitator-mpp-tools §6 "svc_fee_ata").
 */
export type WatchRole = 'agent_asset' | 'treasury' | 'treasury_token' | 'fee_token';

/** e.g. { network: "chain-devnet", address: "9xQe…", role: "treasury_token", agent: "Asset…", ownerPrincipal: "key:…", mint: "4zMM…" } */
export interface WatchEntry {
  network: Network;
  address: string;
  role: WatchRole;
  /** the agent (Core asset) the address belongs to; null for a fee account */
  agent: string | null;
  /** the principal that added it (the agent's owner principal at the time) */
  ownerPrincipal: string | null;
  /** the token account's mint, when known */
  mint: string | null;
}

export interface WatchedAddress extends WatchEntry {
  /** the newest signature processed for the address, and its slot; null before its first scan */
  cursorSignature: string | null;
  cursorSlot: number | null;
  addedAt: Date;
}

export interface IndexerRunStatus {
  network: Network;
  watched: number;
  /** lowest and highest cursor slot over the watched addresses (null when none was scanned) */
  minCursorSlot: number | null;
  maxCursorSlot: number | null;
  /** every watched address was scanned up to this ledger slot by the last complete run */
  syncedSlot: number | null;
  lastRunAt: Date | null;
  lastError: string | null;
  lastErrorAt: Date | null;
}

export interface IndexerRepository {
  /** adds the entries not watched yet (insert … on conflict do nothing); returns how many were new */
  watch(entries: readonly WatchEntry[], at: Date): Promise<number>;
  /** by address, address > afterAddress */
  listWatched(network: Network, query: { afterAddress?: string | undefined; limit: number }): Promise<WatchedAddress[]>;
  /** the watched ones among `addresses` */
  lookup(network: Network, addresses: readonly string[]): Promise<WatchedAddress[]>;
  /** moves the address's cursor forward (never back: an overlapping runner that read less cannot undo a newer one) */
  advanceCursor(network: Network, address: string, cursor: { signature: string; slot: number }): Promise<void>;
  /** forgets the cursors (all, or one address's): the next run rescans their recent history; returns how many */
  resetCursors(network: Network, address?: string): Promise<number>;
  /** inside the transaction that appends the event: false when (network, signature, key) was reported already */
  markSeen(seen: { network: Network; signature: string; key: string; eventId: string; at: Date }): Promise<boolean>;
  /** how many events the indexer reported for one signature (tests, diagnostics) */
  countSeen(network: Network, signature: string): Promise<number>;
  /** the agent of the prepared transaction that was submitted through /v1/submit with this signature; null if none */
  preparedAgentOf(network: Network, signature: string): Promise<string | null>;
  recordRun(network: Network, run: { at: Date; syncedSlot: number | null; error: string | null }): Promise<void>;
  status(network: Network): Promise<IndexerRunStatus>;
}
