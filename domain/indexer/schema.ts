import { z } from 'zod';
import { Network } from '../shared/network.ts';
import { listEnvelope } from '../shared/pagination.ts';

// GET /v1/indexer/status (REST, tRPC indexer.status, GraphQL indexerStatus): one schema for the three doors.

export const IndexerNetworkStatus = z
  .object({
    network: Network,
    ledger_slot: z.number().int().nullable().describe('the ledger’s slot now; null when the ledger could not be read'),
    cursor_slot: z.number().int().nullable().describe('every watched address was scanned up to this slot by the last complete run; null before the first'),
    newest_cursor_slot: z.number().int().nullable().describe('the newest slot of a transaction processed for a watched address'),
    lag_slots: z.number().int().nullable().describe('ledger_slot − cursor_slot'),
    watched_addresses: z.number().int().describe('addresses on the watchlist'),
    last_run_at: z.string().nullable().describe('ISO 8601 time of the last run; null before the first'),
    last_error: z.string().nullable().describe('the error of the last run; null when it succeeded'),
    last_error_at: z.string().nullable().describe('when a run last failed'),
  })
  .describe('The background indexer on one network.');
export type IndexerNetworkStatus = z.infer<typeof IndexerNetworkStatus>;

/** one entry, the key's network: a bounded list, one complete page */
export const IndexerStatus = listEnvelope(IndexerNetworkStatus);
export type IndexerStatus = z.infer<typeof IndexerStatus>;
