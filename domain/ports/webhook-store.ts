import type { Network } from '../shared/network.ts';
import type { EventRecord } from '../events/schema.ts';
import type { DeliveryStatus, WebhookDeliveryRecord, WebhookRecord } from '../webhooks/schema.ts';

// DECISIONS "Webhooks": the repositories of subscriptions and deliveries (part of the Store's Repositories). Every
// call names its network.

export interface WebhookListQuery {
  /** the owning principal; undefined: the whole network (an admin's read). Required so no caller forgets it. */
  owner: string | undefined;
  /** exclusive upper bound on id (newest first) */
  beforeId?: string | undefined;
  limit: number;
}

export interface WebhookRepository {
  insert(record: WebhookRecord): Promise<void>;
  /** inside a transaction the row is locked until commit */
  get(network: Network, id: string): Promise<WebhookRecord | null>;
  list(network: Network, query: WebhookListQuery): Promise<WebhookRecord[]>;
  /** replaces the signing secret; the row after, null when absent */
  rotateSecret(network: Network, id: string, secret: string, at: Date): Promise<WebhookRecord | null>;
  /** sets disabled_at once (keeps the first reason); true when this call disabled it */
  disable(network: Network, id: string, reason: string, at: Date): Promise<boolean>;
  /** removes the subscription and its deliveries; true when a row was removed */
  delete(network: Network, id: string): Promise<boolean>;
}

/** Where an attempt goes: the URL and secret as they are now (a rotated secret signs from the next attempt on). */
export type DeliveryTarget =
  | { ok: true; url: string; secret: string; event: EventRecord | null }
  /** the subscription was disabled or the link's webhook_url removed: the delivery fails without an attempt */
  | { ok: false; reason: string };

export interface DeliveryOutcome {
  status: DeliveryStatus;
  attempts: number;
  nextAttemptAt: Date | null;
  lastStatus: number | null;
  lastError: string | null;
  deliveredAt: Date | null;
  at: Date;
}

export interface WebhookDeliveryRepository {
  /**
   * The transactional outbox of one appended event, inside its transaction: a pending delivery for every enabled
   * subscription of the event's network that sees it (scope 'network', or the event's owner principal) and whose
   * patterns match its kind — at most one per (webhook, event, phase) — each enqueued as a deliver_webhook job in the
   * same transaction. Returns how many were made. The events repository calls it from `append`.
   */
  fanOut(event: Pick<EventRecord, 'id' | 'network' | 'kind' | 'phase' | 'owner' | 'createdAt'>): Promise<number>;
  /** a delivery made by a service (a payment link's webhook_url), enqueued in the same transaction */
  insert(record: WebhookDeliveryRecord): Promise<void>;
  get(network: Network, id: string): Promise<WebhookDeliveryRecord | null>;
  /** a subscription's deliveries, newest first, id < beforeId */
  listByWebhook(network: Network, webhookId: string, query: { beforeId?: string | undefined; limit: number }): Promise<WebhookDeliveryRecord[]>;
  /**
   * Takes the next attempt of a pending delivery that is due at `now` and not being attempted (no claim, a lapsed
   * lease, or a claim of a process that is gone); null otherwise. The claim names this process and `claim`.
   */
  claim(network: Network, id: string, claim: { token: string; now: Date; lockedUntil: Date }): Promise<WebhookDeliveryRecord | null>;
  target(delivery: WebhookDeliveryRecord): Promise<DeliveryTarget>;
  /** records an attempt's outcome while `token` still holds the claim; false when it no longer does (nothing written) */
  finish(network: Network, id: string, token: string, outcome: DeliveryOutcome): Promise<boolean>;
  /**
   * Manual retry: pending again, due at `at`, its schedule restarted (attempt_base = attempts); the row after, null
   * when the webhook has no such delivery.
   */
  requeue(network: Network, webhookId: string, id: string, at: Date): Promise<WebhookDeliveryRecord | null>;
  /** pending deliveries due at `now` that nobody is attempting, oldest due first, across networks */
  listDue(query: { now: Date; limit: number }): Promise<{ network: Network; id: string }[]>;
}
