import { z } from 'zod';
import {
  CreatePaymentLinkInput,
  ListPaymentLinksInput,
  PaymentLink,
  PaymentLinkIdInput,
  PaymentLinkList,
  PaymentLinkPreview,
  PaymentLinkWithSecret,
  PreviewPaymentLinkInput,
  UpdatePaymentLinkInput,
} from '../../../domain/payment-links/schema.ts';
import { keyedProcedure, router } from '../init.ts';

const tags = ['payment-links'];
/** The webhook secret is answered once and never written to the Idempotency-Key store (a replay omits it). */
const secretFields = ['webhook_secret'] as const;

// Every procedure passes the caller's principal: another principal's link answers 404 (docs/architecture.md "Ownership").
export const paymentLinksRouter = router({
  create: keyedProcedure
    .meta({
      status: 201,
      secretFields,
      errors: ['agent_not_found', 'forbidden', 'conflict', 'agent_unproven', 'rpc_unavailable'],
      openapi: {
        method: 'POST',
        path: '/v1/payment-links',
        tags,
        summary: 'Create a payment link (its webhook_secret is shown once, here)',
        description:
          'A hosted paid HTTP endpoint at /x/{id}: buyers get a 402 offer until they pay `price`, which settles into the owner agent’s treasury (hosted-api §2.1, §4.1). Answers 201 with the link; a `webhook_url` makes a `webhook_secret`, shown only in this answer.',
      },
    })
    .input(CreatePaymentLinkInput)
    .output(PaymentLinkWithSecret)
    .mutation(({ ctx, input }) => ctx.services.paymentLinks.create(ctx.principal, ctx.principal.keyId, input)),

  list: keyedProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/v1/payment-links',
        tags,
        summary: 'List your payment links, newest first',
        description:
          'The links your key’s principal owns on its network, newest first, in the list envelope; `owner_agent` narrows to one agent (hosted-api §4.1).',
      },
    })
    .input(ListPaymentLinksInput)
    .output(PaymentLinkList)
    .query(({ ctx, input }) => ctx.services.paymentLinks.list(ctx.principal, input)),

  get: keyedProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/v1/payment-links/{id}',
        tags,
        summary: 'Get a payment link with live counters',
        description:
          'One link with its live counters; a disabled link is still readable (hosted-api §3.2). Another principal’s link answers 404 like a missing one.',
      },
    })
    .input(PaymentLinkIdInput)
    .output(PaymentLink)
    .query(({ ctx, input }) => ctx.services.paymentLinks.get(ctx.principal, input.id)),

  update: keyedProcedure
    .meta({
      secretFields,
      errors: ['agent_not_found', 'forbidden', 'agent_unproven', 'rpc_unavailable'],
      openapi: {
        method: 'PATCH',
        path: '/v1/payment-links/{id}',
        tags,
        summary: 'Update a payment link (incl. disabled)',
        description:
          'Any subset of the create-time fields plus `disabled` (hosted-api §2.1); `disabled: true` makes the paywall answer 410. Setting a first `webhook_url` makes a `webhook_secret`, shown only in this answer.',
      },
    })
    .input(UpdatePaymentLinkInput)
    .output(PaymentLinkWithSecret)
    .mutation(({ ctx, input }) => ctx.services.paymentLinks.update(ctx.principal, input)),

  rotateWebhookSecret: keyedProcedure
    .meta({
      secretFields,
      openapi: {
        method: 'POST',
        path: '/v1/payment-links/{id}/webhook-secret/rotate',
        tags,
        summary: 'Replace the webhook signing secret (the new one is shown once, here)',
        description: 'A new secret for the link’s webhook POSTs, shown only in this answer; the old one stops signing at once.',
      },
    })
    .input(PaymentLinkIdInput)
    .output(PaymentLinkWithSecret)
    .mutation(({ ctx, input }) => ctx.services.paymentLinks.rotateWebhookSecret(ctx.principal, input.id)),

  delete: keyedProcedure
    .meta({
      status: 204,
      openapi: {
        method: 'DELETE',
        path: '/v1/payment-links/{id}',
        tags,
        summary: 'Delete a payment link',
        description: 'Answers 204; the paywall then answers 404 and the slug is free again on this network (hosted-api §3.2).',
      },
    })
    .input(PaymentLinkIdInput)
    .output(z.void())
    .mutation(({ ctx, input }) => ctx.services.paymentLinks.delete(ctx.principal, input.id)),

  preview: keyedProcedure
    .meta({
      errors: ['agent_not_found', 'forbidden', 'agent_unproven', 'rpc_unavailable'],
      openapi: {
        method: 'POST',
        path: '/v1/payment-links/preview',
        tags,
        summary: 'Preview accepts[] and pay_to; stores nothing',
        description:
          '`pay_to` is the x402 payTo, the owner agent’s treasury (asset-signer PDA), here as on a link and in each accept (hosted-api §2.2–2.3); `pay_to_token_account` is the account the primary currency’s seller leg credits, ATA(pay_to, asset).',
      },
    })
    .input(PreviewPaymentLinkInput)
    .output(PaymentLinkPreview)
    .mutation(({ ctx, input }) => ctx.services.paymentLinks.preview(ctx.principal, input)),
});
