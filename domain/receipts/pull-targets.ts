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

export const PullFormat = z.enum(['json', 'jsonl']);
export type PullFormat = z.infer<typeof PullFormat>;

export const CreatePullTargetInput = z.strictObject({
  mint: Address,
  url: z.url({ protocol: /^https?$/ }).max(2048),
  format: PullFormat.default('jsonl'),
  interval_seconds: z.number().int().min(PULL_INTERVAL_FLOOR_SECONDS).max(86_400).default(60),
});
export type CreatePullTargetInput = z.input<typeof CreatePullTargetInput>;

export const PullTargetPath = z.object({ mint: Address, id: z.string().min(1).max(64) });

export const PullTarget = z.object({
  id: z.string(),
  network: z.string(),
  agent: z.string(),
  url: z.string(),
  format: PullFormat,
  interval_seconds: z.number().int(),
  next_run_at: z.string(),
  last_run_at: z.string().nullable(),
  /** "ok" | "failed" after the first run */
  last_status: z.enum(['ok', 'failed']).nullable(),
  last_error: z.string().nullable(),
  consecutive_failures: z.number().int(),
  accepted_total: z.number().int(),
  rejected_total: z.number().int(),
  created_at: z.string(),
});
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
