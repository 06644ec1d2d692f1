import { z } from 'zod';
import { Network } from '../shared/network.ts';
import { Cursor, Limit, listEnvelope } from '../shared/pagination.ts';
import { Event, EventPhase, KindPattern } from '../events/schema.ts';

// DECISIONS "Webhooks" (hosted-api §5.8, §6): subscriptions and their deliveries, one zod schema per body and
// resource, shared by REST, tRPC and GraphQL.

const HttpUrl = z.url({ protocol: /^https?$/ }).max(2048);
const WebhookId = z.string().min(1).max(64).describe('the webhook subscription id');

export const CreateWebhookInput = z
  .strictObject({
    /** https to a public address (SVC_OUTBOUND_ALLOW names development targets) */
    url: HttpUrl.describe('where deliveries are POSTed: https on a public address (DECISIONS "Webhooks")'),
    /** kind patterns: exact kinds, `prefix.*`, or `*` (the default) */
    events: z.array(KindPattern).min(1).max(50).describe('event kind patterns to deliver (exact, prefix.* or *); default ["*"]').optional(),
    description: z.string().trim().max(500).describe('your note about the subscription').optional(),
  })
  .describe('A new webhook subscription (DECISIONS "Webhooks").');
export type CreateWebhookInput = z.input<typeof CreateWebhookInput>;

export const WebhookIdInput = z.object({ id: WebhookId });

export const ListWebhooksInput = z.object({ cursor: Cursor.optional(), limit: Limit });
export type ListWebhooksInput = z.input<typeof ListWebhooksInput>;

export const DeliveryStatus = z
  .enum(['pending', 'delivered', 'failed'])
  .describe('pending (to be tried or retried), delivered (a 2xx came back) or failed (retries exhausted)');
export type DeliveryStatus = z.infer<typeof DeliveryStatus>;

export const ListDeliveriesInput = z.object({ id: WebhookId, cursor: Cursor.optional(), limit: Limit });
export type ListDeliveriesInput = z.input<typeof ListDeliveriesInput>;

export const RetryDeliveryInput = z.object({ id: WebhookId, delivery_id: z.string().min(1).max(64).describe('the delivery to retry') });
export type RetryDeliveryInput = z.input<typeof RetryDeliveryInput>;

export const Webhook = z
  .object({
    id: z.string().describe('the subscription id'),
    network: Network,
    url: z.string().describe('where deliveries are POSTed'),
    events: z.array(z.string()).describe('the kind patterns delivered'),
    description: z.string().nullable().describe('your note; null when none'),
    /** true once disabled (a receiver answered 410 Gone): no further deliveries are made */
    disabled: z.boolean().describe('true once disabled (a receiver answering 410 disables it); nothing is delivered then'),
    /** why it was disabled, e.g. "the receiver answered 410 Gone"; null while enabled */
    disabled_reason: z.string().nullable().describe('why it was disabled; null while enabled'),
    created_at: z.string().describe('ISO 8601 creation time'),
    updated_at: z.string().describe('ISO 8601 time of the last change'),
  })
  .describe('A webhook subscription (DECISIONS "Webhooks").');
export type Webhook = z.infer<typeof Webhook>;

/** The answers that made a signing secret (create, rotate): `secret` is shown there only. */
export const WebhookWithSecret = Webhook.extend({
  /** whsec_…: verifies X-Svc-Signature and the Standard Webhooks webhook-signature of this subscription's deliveries */
  secret: z.string().describe('whsec_…: verifies X-Svc-Signature of the deliveries; shown only in this answer'),
}).describe('A webhook subscription with its signing secret, shown once.');
export type WebhookWithSecret = z.infer<typeof WebhookWithSecret>;

export const WebhookList = listEnvelope(Webhook);
export type WebhookList = z.infer<typeof WebhookList>;

export const WebhookDelivery = z
  .object({
    id: z.string().describe('the delivery id (the payload’s id and the X-Svc-Delivery header)'),
    webhook_id: z.string().describe('the subscription'),
    event_id: z.string().nullable().describe('the event delivered; null when the delivery is not about a stored event'),
    /** the event kind, e.g. "payment_link.settled" */
    type: z.string().describe('the event kind'),
    phase: EventPhase,
    status: DeliveryStatus,
    attempts: z.number().int().describe('attempts made so far'),
    next_attempt_at: z.string().nullable().describe('ISO 8601 time of the next attempt; null when none is due'),
    /** the HTTP status of the last answer; null when there was none (timeout, refused, not yet tried) */
    last_status: z.number().int().nullable().describe('HTTP status of the last attempt; null when none answered'),
    last_error: z.string().nullable().describe('why the last attempt failed; null when it did not'),
    delivered_at: z.string().nullable().describe('ISO 8601 time of the successful attempt; null until then'),
    created_at: z.string().describe('ISO 8601 creation time'),
  })
  .describe('One (webhook, event, phase) delivery and its attempts (DECISIONS "Webhooks").');
export type WebhookDelivery = z.infer<typeof WebhookDelivery>;

export const WebhookDeliveryList = listEnvelope(WebhookDelivery);
export type WebhookDeliveryList = z.infer<typeof WebhookDeliveryList>;

/** The body of every delivery (DECISIONS "Webhooks"): `data` is the event as stored. */
export const WebhookPayload = z
  .object({
    /** the delivery id, also `webhook-id` and X-Svc-Delivery: the same on every retry (receivers deduplicate on it) */
    id: z.string().describe('the delivery id (receivers deduplicate on it)'),
    type: z.string().describe('the event kind'),
    phase: EventPhase,
    created_at: z.string().describe('ISO 8601 time of the delivery'),
    data: Event.or(z.record(z.string(), z.unknown())).describe('the event'),
  })
  .describe('The body a webhook receiver gets (DECISIONS "Webhooks").');
export type WebhookPayload = z.infer<typeof WebhookPayload>;

export type WebhookScope = 'principal' | 'network';

export interface WebhookRecord {
  id: string;
  network: Network;
  /** the creating key's principal */
  ownerPrincipal: string;
  /** 'network' when an admin key made it: it receives every event of the network */
  scope: WebhookScope;
  url: string;
  events: string[];
  description: string | null;
  /** whsec_… */
  secret: string;
  disabledAt: Date | null;
  disabledReason: string | null;
  createdBy: string;
  createdAt: Date;
  updatedAt: Date;
}

export interface WebhookDeliveryRecord {
  id: string;
  network: Network;
  /** a subscription's delivery; null for a payment link's own webhook_url */
  webhookId: string | null;
  /** a payment link's webhook_url delivery (payment_links.pk); null for a subscription's */
  linkPk: string | null;
  eventId: string | null;
  kind: string;
  phase: EventPhase;
  /** the `data` sent (a link delivery's own shape); null: the event is sent as it is stored */
  payload: Record<string, unknown> | null;
  status: DeliveryStatus;
  attempts: number;
  /** attempts made before the last manual retry: the schedule restarts from there */
  attemptBase: number;
  nextAttemptAt: Date | null;
  lastStatus: number | null;
  lastError: string | null;
  deliveredAt: Date | null;
  createdAt: Date;
  updatedAt: Date;
}
