import { z } from 'zod';
import {
  CreateWebhookInput,
  ListDeliveriesInput,
  ListWebhooksInput,
  RetryDeliveryInput,
  Webhook,
  WebhookDelivery,
  WebhookDeliveryList,
  WebhookIdInput,
  WebhookList,
  WebhookWithSecret,
} from '../../../domain/webhooks/schema.ts';
import { keyedProcedure, router } from '../init.ts';

const tags = ['webhooks'];
/** The signing secret is answered once and never written to the Idempotency-Key store (a replay omits it). */
const secretFields = ['secret'] as const;

// DECISIONS "Webhooks": subscriptions owned per principal; another principal's answers 404 webhook_not_found.
export const webhooksRouter = router({
  create: keyedProcedure
    .meta({ status: 201, secretFields, openapi: { method: 'POST', path: '/v1/webhooks', tags, summary: 'Subscribe a URL to events (its signing secret is shown once, here)' } })
    .input(CreateWebhookInput)
    .output(WebhookWithSecret)
    .mutation(({ ctx, input }) => ctx.services.webhooks.create(ctx.principal, ctx.principal.keyId, input)),

  list: keyedProcedure
    .meta({ openapi: { method: 'GET', path: '/v1/webhooks', tags, summary: 'List your webhook subscriptions, newest first' } })
    .input(ListWebhooksInput)
    .output(WebhookList)
    .query(({ ctx, input }) => ctx.services.webhooks.list(ctx.principal, input)),

  get: keyedProcedure
    .meta({ openapi: { method: 'GET', path: '/v1/webhooks/{id}', tags, summary: 'Get a webhook subscription' } })
    .input(WebhookIdInput)
    .output(Webhook)
    .query(({ ctx, input }) => ctx.services.webhooks.get(ctx.principal, input.id)),

  delete: keyedProcedure
    .meta({ status: 204, openapi: { method: 'DELETE', path: '/v1/webhooks/{id}', tags, summary: 'Delete a webhook subscription and its deliveries' } })
    .input(WebhookIdInput)
    .output(z.void())
    .mutation(({ ctx, input }) => ctx.services.webhooks.delete(ctx.principal, input.id)),

  rotateSecret: keyedProcedure
    .meta({
      secretFields,
      openapi: { method: 'POST', path: '/v1/webhooks/{id}/secret/rotate', tags, summary: 'Replace the signing secret (the new one is shown once, here)' },
    })
    .input(WebhookIdInput)
    .output(WebhookWithSecret)
    .mutation(({ ctx, input }) => ctx.services.webhooks.rotateSecret(ctx.principal, input.id)),

  deliveries: keyedProcedure
    .meta({ openapi: { method: 'GET', path: '/v1/webhooks/{id}/deliveries', tags, summary: 'List the deliveries of a subscription, newest first' } })
    .input(ListDeliveriesInput)
    .output(WebhookDeliveryList)
    .query(({ ctx, input }) => ctx.services.webhooks.listDeliveries(ctx.principal, input)),

  retryDelivery: keyedProcedure
    .meta({
      openapi: { method: 'POST', path: '/v1/webhooks/{id}/deliveries/{delivery_id}/retry', tags, summary: 'Attempt a delivery again now (its retry schedule restarts)' },
    })
    .input(RetryDeliveryInput)
    .output(WebhookDelivery)
    .mutation(({ ctx, input }) => ctx.services.webhooks.retryDelivery(ctx.principal, input)),
});
