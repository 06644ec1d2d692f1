import { z } from 'zod';
import { Network } from '../shared/network.ts';

// DECISIONS "Webhooks": the published retry schedule, the job that makes an attempt, and which subscriptions an
// event's kind reaches. Pure: the service and the store adapter share these.

/** Waits after the 1st, 2nd, … failed attempt: 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h; the 8th failure is final. */
export const RETRY_SCHEDULE_MS = [5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000] as const;

/** A receiver has this long to answer (DECISIONS "Webhooks"). */
export const DELIVERY_TIMEOUT_MS = 15_000;

/** How long a claimed attempt is its runner's alone: the timeout plus room to record the outcome. */
export const CLAIM_LEASE_MS = 60_000;

/** The graphile-worker task making one attempt of one delivery; the job key is the delivery id. */
export const DELIVER_WEBHOOK_TASK = 'deliver_webhook';
/** The recurring task that re-enqueues due deliveries nobody is attempting (a runner killed mid-delivery, a due time). */
export const SWEEP_WEBHOOKS_TASK = 'sweep_webhooks';

export const DeliverWebhookPayload = z.looseObject({ network: Network, delivery_id: z.string().min(1).max(64) });
export type DeliverWebhookPayload = z.infer<typeof DeliverWebhookPayload>;

export function deliverJob(network: Network, deliveryId: string): { task: string; payload: DeliverWebhookPayload; jobKey: string } {
  return { task: DELIVER_WEBHOOK_TASK, payload: { network, delivery_id: deliveryId }, jobKey: `webhook-delivery:${deliveryId}` };
}

/**
 * The wait before the next attempt after `failures` failed attempts since the schedule (re)started (1 → 5 s); null
 * when the schedule is spent and the delivery fails.
 */
export function retryDelayMs(failures: number): number | null {
  if (!Number.isInteger(failures) || failures < 1) throw new RangeError('failures counts from 1');
  return RETRY_SCHEDULE_MS[failures - 1] ?? null;
}

/**
 * Every subscription pattern that matches `kind` (the rule of events' `matchesKind`): "*", the kind itself and
 * each dotted prefix with ".*" — "payment_link.settled" → ["*", "payment_link.settled", "payment_link.*"]. A
 * subscription sees the event when its patterns overlap these, which the store answers with one array-overlap test.
 */
export function patternsMatching(kind: string): string[] {
  const out = ['*', kind];
  const parts = kind.split('.');
  for (let i = 1; i < parts.length; i++) out.push(`${parts.slice(0, i).join('.')}.*`);
  return out;
}

/** Whether a receiver's answer counts as delivered: any 2xx. */
export function delivered(status: number): boolean {
  return status >= 200 && status <= 299;
}
