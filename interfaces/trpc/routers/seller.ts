import { z } from 'zod';
import { Network } from '../../../domain/shared/network.ts';
import { listEnvelope } from '../../../domain/shared/pagination.ts';
import { ParsedPriceOutput, ParsePriceInput } from '../../../domain/payment-links/price.ts';
import { FacilitatorInfo } from '../../../domain/buyer/schema.ts';
import { keyedProcedure, router } from '../init.ts';

const tags = ['seller'];

const SellerNetworks = listEnvelope(
  z.object({
    network: Network,
    caip2: z.string(),
    x402_network: z.string(),
    current: z.boolean(),
    facilitator: z.string(),
    protocol_fee: z.object({ bps: z.number().int(), pct: z.string(), authority: z.string() }),
    stables: z.array(
      z.object({ symbol: z.string(), mint: z.string(), decimals: z.number().int(), token_program: z.string(), token_program_id: z.string() }),
    ),
  }),
);

export const sellerRouter = router({
  parsePrice: keyedProcedure
    .meta({ openapi: { method: 'POST', path: '/v1/seller/parse-price', tags, summary: 'Parse a display price into an atomic amount', description: 'The price forms a payment link accepts ($0.01, 0.01, 0.01 USDC, 1.5 usdt) → amount_atomic, currency, decimals and display (DECISIONS "Payment links"). Zero, negative or more than 6 decimals is invalid_request.' } })
    .input(ParsePriceInput)
    .output(ParsedPriceOutput)
    .mutation(({ ctx, input }) => ctx.services.paymentLinks.parsePrice(ctx.principal.network, input)),

  networks: keyedProcedure
    .meta({ openapi: { method: 'GET', path: '/v1/seller/networks', tags, summary: 'Networks, stables and fee settings', description: 'Both networks: a bounded list, one complete page of the list envelope.' } })
    .input(z.void())
    .output(SellerNetworks)
    .query(({ ctx }) => ctx.services.paymentLinks.networks(ctx.principal.network)),

  // The facilitator that settles this gateway's links: its URL, fee payer per network and its /health.
  facilitator: keyedProcedure
    .meta({ openapi: { method: 'GET', path: '/v1/seller/facilitator', tags, summary: 'The facilitator: URL, fee payer per network, health', description: 'The settlement service payment links use: its URL, its fee payer per network and whether it answers.' } })
    .input(z.void())
    .output(FacilitatorInfo)
    .query(({ ctx }) => ctx.services.buyer.catalog.facilitator()),
});
