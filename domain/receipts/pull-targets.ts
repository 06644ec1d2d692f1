import { z } from 'zod';
import { Address } from '../shared/address.ts';
import type { Network } from '../shared/network.ts';

// hosted-api §2.9 and DECISIONS "Receipts": a feed of an agent's receipts the pull worker fetches on its own cadence.

/** DECISIONS: the global floor of interval_seconds. */
export const PULL_INTERVAL_FLOOR_SECONDS = 10;
/** The largest body the worker reads from a target. */
export const PULL_MAX_BYTES = 1024 * 1024;
/** Items one fetch may carry. */
export const PULL_MAX_ITEMS = 1000;
/** Backoff after consecutive failures: interval × 2^failures, at most this. */
export const PULL_MAX_BACKOFF_SECONDS = 3600;

export const PullFormat = z.enum(['json', 'jsonl']).describe('json (an array of receipts) or jsonl (one receipt per line)');
export type PullFormat = z.infer<typeof PullFormat>;

export const CreatePullTargetInput = z
  .strictObject({
    mint: Address.describe('the agent’s mint (path parameter)'),
    url: z
      .url({ protocol: /^https?$/ })
      .max(2048)
      .describe('https URL on a public address, fetched with a plain GET and no auth'),
    format: PullFormat.default('jsonl'),
    interval_seconds: z.number().int().min(PULL_INTERVAL_FLOOR_SECONDS).max(86_400).default(60).describe('seconds between fetches: default 60, at least 10'),
  })
  .describe('A receipt feed the pull worker fetches (hosted-api §2.9).');
export type CreatePullTargetInput = z.input<typeof CreatePullTargetInput>;

export const PullTargetPath = z.object({ mint: Address.describe('the agent’s mint'), id: z.string().min(1).max(64).describe('the pull target id') });

export const PullTarget = z
  .object({
    id: z.string().describe('the pull target id'),
    network: z.string().describe('chain-devnet or chain-mainnet'),
    agent: z.string().describe('the agent’s mint'),
    url: z.string().describe('the feed URL'),
    format: PullFormat,
    interval_seconds: z.number().int().describe('seconds between fetches'),
    next_run_at: z.string().describe('ISO 8601 time of the next fetch'),
    last_run_at: z.string().nullable().describe('ISO 8601 time of the last fetch; null before the first'),
    /** "ok" | "failed" after the first run */
    last_status: z.enum(['ok', 'failed']).nullable().describe('ok or failed after the first fetch; null before it'),
    last_error: z.string().nullable().describe('why the last fetch failed; null when it did not'),
    consecutive_failures: z.number().int().describe('failed fetches in a row (the worker backs off)'),
    accepted_total: z.number().int().describe('receipts ingested from this feed'),
    rejected_total: z.number().int().describe('items of this feed refused'),
    created_at: z.string().describe('ISO 8601 creation time'),
  })
  .describe('A registered receipt feed and its worker state (hosted-api §2.9).');
export type PullTarget = z.infer<typeof PullTarget>;

export interface PullTargetRecord {
  id: string;
  network: Network;
  agent: string;
  ownerPrincipal: string;
  url: string;
  format: PullFormat;
  intervalSeconds: number;
  nextRunAt: Date;
  lastRunAt: Date | null;
  lastStatus: 'ok' | 'failed' | null;
  lastError: string | null;
  consecutiveFailures: number;
  acceptedTotal: number;
  rejectedTotal: number;
  createdAt: Date;
}

/** What one run of a target did, recorded on it. */
export interface PullOutcome {
  at: Date;
  ok: boolean;
  error: string | null;
  accepted: number;
  rejected: number;
  nextRunAt: Date;
}

/** The delay before the next run: the interval, doubled per consecutive failure up to PULL_MAX_BACKOFF_SECONDS. */
export function nextPullDelaySeconds(intervalSeconds: number, consecutiveFailures: number): number {
  if (consecutiveFailures <= 0) return intervalSeconds;
  return Math.min(PULL_MAX_BACKOFF_SECONDS, intervalSeconds * 2 ** Math.min(consecutiveFailures, 16));
}
