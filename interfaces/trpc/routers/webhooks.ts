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
    .meta({
      status: 201,
      secretFields,
      openapi: {
        method: 'POST',
        path: '/v1/webhooks',
        tags,
        summary: 'Subscribe a URL to events (its signing secret is shown once, here)',
        description:
          'Each phase transition of a matching event is delivered at least once, signed X-Svc-Signature t=…,v1=… with the secret, retried after 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h (DECISIONS "Webhooks").',
      },
    })
    .input(CreateWebhookInput)
    .output(WebhookWithSecret)
    .mutation(({ ctx, input }) => ctx.services.webhooks.create(ctx.principal, ctx.principal.keyId, input)),

  list: keyedProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/v1/webhooks',
        tags,
        summary: 'List your webhook subscriptions, newest first',
        description: 'Your subscriptions on the key’s network in the list envelope; secrets are never shown here.',
      },
    })
    .input(ListWebhooksInput)
    .output(WebhookList)
    .query(({ ctx, input }) => ctx.services.webhooks.list(ctx.principal, input)),

  get: keyedProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/v1/webhooks/{id}',
        tags,
        summary: 'Get a webhook subscription',
        description: 'One subscription; another principal’s answers 404 like a missing one.',
      },
    })
    .input(WebhookIdInput)
    .output(Webhook)
    .query(({ ctx, input }) => ctx.services.webhooks.get(ctx.principal, input.id)),

  delete: keyedProcedure
    .meta({
      status: 204,
      openapi: {
        method: 'DELETE',
        path: '/v1/webhooks/{id}',
        tags,
        summary: 'Delete a webhook subscription and its deliveries',
        description: 'Answers 204; nothing more is delivered to it.',
      },
    })
    .input(WebhookIdInput)
    .output(z.void())
    .mutation(({ ctx, input }) => ctx.services.webhooks.delete(ctx.principal, input.id)),

  rotateSecret: keyedProcedure
    .meta({
      secretFields,
      openapi: {
        method: 'POST',
        path: '/v1/webhooks/{id}/secret/rotate',
        tags,
        summary: 'Replace the signing secret (the new one is shown once, here)',
        description: 'A new whsec_ secret, shown only in this answer; the old one stops signing at once.',
      },
    })
    .input(WebhookIdInput)
    .output(WebhookWithSecret)
    .mutation(({ ctx, input }) => ctx.services.webhooks.rotateSecret(ctx.principal, input.id)),

  deliveries: keyedProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/v1/webhooks/{id}/deliveries',
        tags,
        summary: 'List the deliveries of a subscription, newest first',
        description: 'Each (event, phase) delivery with its attempts and last answer, in the list envelope.',
      },
    })
    .input(ListDeliveriesInput)
    .output(WebhookDeliveryList)
    .query(({ ctx, input }) => ctx.services.webhooks.listDeliveries(ctx.principal, input)),

  retryDelivery: keyedProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/v1/webhooks/{id}/deliveries/{delivery_id}/retry',
        tags,
        summary: 'Attempt a delivery again now (its retry schedule restarts)',
        description: 'Delivers once more now, whatever its status; a failure restarts the retry schedule (DECISIONS "Webhooks").',
      },
    })
    .input(RetryDeliveryInput)
    .output(WebhookDelivery)
    .mutation(({ ctx, input }) => ctx.services.webhooks.retryDelivery(ctx.principal, input)),
});
