import { z } from 'zod';
import {
  CreatePaymentLinkInput,
  ListPaymentLinksInput,
  PaymentLink,
  PaymentLinkIdInput,
  PaymentLinkList,
  PaymentLinkPreview,
  PreviewPaymentLinkInput,
  UpdatePaymentLinkInput,
} from '../../../domain/payment-links/schema.ts';
import { keyedProcedure, router } from '../init.ts';

const tags = ['payment-links'];

export const paymentLinksRouter = router({
  create: keyedProcedure
    .meta({ status: 201, openapi: { method: 'POST', path: '/v1/payment-links', tags, summary: 'Create a payment link' } })
    .input(CreatePaymentLinkInput)
    .output(PaymentLink)
    .mutation(({ ctx, input }) => ctx.services.paymentLinks.create(ctx.principal.network, ctx.principal.keyId, input)),

  list: keyedProcedure
    .meta({ openapi: { method: 'GET', path: '/v1/payment-links', tags, summary: 'List payment links, newest first' } })
    .input(ListPaymentLinksInput)
    .output(PaymentLinkList)
    .query(({ ctx, input }) => ctx.services.paymentLinks.list(ctx.principal.network, input)),

  get: keyedProcedure
    .meta({ openapi: { method: 'GET', path: '/v1/payment-links/{id}', tags, summary: 'Get a payment link with live counters' } })
    .input(PaymentLinkIdInput)
    .output(PaymentLink)
    .query(({ ctx, input }) => ctx.services.paymentLinks.get(ctx.principal.network, input.id)),

  update: keyedProcedure
    .meta({ openapi: { method: 'PATCH', path: '/v1/payment-links/{id}', tags, summary: 'Update a payment link (incl. disabled)' } })
    .input(UpdatePaymentLinkInput)
    .output(PaymentLink)
    .mutation(({ ctx, input }) => ctx.services.paymentLinks.update(ctx.principal.network, input)),

  delete: keyedProcedure
    .meta({ status: 204, openapi: { method: 'DELETE', path: '/v1/payment-links/{id}', tags, summary: 'Delete a payment link' } })
    .input(PaymentLinkIdInput)
    .output(z.void())
    .mutation(({ ctx, input }) => ctx.services.paymentLinks.delete(ctx.principal.network, input.id)),

  preview: keyedProcedure
    .meta({ openapi: { method: 'POST', path: '/v1/payment-links/preview', tags, summary: 'Preview accepts[] and pay_to; stores nothing' } })
    .input(PreviewPaymentLinkInput)
    .output(PaymentLinkPreview)
    .mutation(({ ctx, input }) => ctx.services.paymentLinks.preview(ctx.principal.network, input)),
});
