import { z } from 'zod';
import { ParsedPriceOutput, ParsePriceInput } from '../../../domain/payment-links/price.ts';
import { FacilitatorInfo, NetworkCatalogue } from '../../../domain/buyer/schema.ts';
import { keyedProcedure, router } from '../init.ts';

const tags = ['seller'];

export const sellerRouter = router({
  parsePrice: keyedProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/v1/seller/parse-price',
        tags,
        summary: 'Parse a display price into an atomic amount',
        description:
          'The price forms a payment link accepts ($0.01, 0.01, 0.01 USDC, 1.5 usdt) → amount_atomic, currency, decimals and display (DECISIONS "Payment links"). Zero, negative or more than 6 decimals is invalid_request.',
      },
    })
    .input(ParsePriceInput)
    .output(ParsedPriceOutput)
    .mutation(({ ctx, input }) => ctx.services.paymentLinks.parsePrice(ctx.principal.network, input)),

  networks: keyedProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/v1/seller/networks',
        tags,
        summary: 'Networks, stables and fee settings',
        description: 'Both networks: a bounded list, one complete page of the list envelope.',
      },
    })
    .input(z.void())
    .output(NetworkCatalogue)
    // the buyer's catalogue: one list of networks, stables and fee for both sides
    .query(({ ctx }) => ctx.services.buyer.catalog.networks(ctx.principal.network)),

  // The facilitator that settles this gateway's links: its URL, fee payer per network and its /health.
  facilitator: keyedProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/v1/seller/facilitator',
        tags,
        summary: 'The facilitator: URL, fee payer per network, health',
        description: 'The settlement service payment links use: its URL, its fee payer per network and whether it answers.',
      },
    })
    .input(z.void())
    .output(FacilitatorInfo)
    .query(({ ctx }) => ctx.services.buyer.catalog.facilitator()),
});
