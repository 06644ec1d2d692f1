import { z } from 'zod';
import { Network } from '../../../domain/shared/network.ts';
import { listEnvelope } from '../../../domain/shared/pagination.ts';
import { ParsedPriceOutput, ParsePriceInput } from '../../../domain/payment-links/price.ts';
import { FacilitatorInfo } from '../../../domain/buyer/schema.ts';
import { keyedProcedure, router } from '../init.ts';

const tags = ['seller'];

const SellerNetworks = listEnvelope(
  z
    .object({
      network: Network,
      caip2: z.string().describe('CAIP-2 network id (x402 v2)'),
      x402_network: z.string().describe('x402 v1 network name'),
      current: z.boolean().describe('the key’s own network: the only one its links can sell on'),
      facilitator: z.string().describe('URL of the facilitator links use'),
      protocol_fee: z
        .object({
          bps: z.number().int().describe('fee rate in basis points'),
          pct: z.string().describe('the same rate in percent, decimal string'),
          authority: z.string().describe('the fee authority'),
        })
        .describe('the protocol fee buyers pay on top of the price (fee-facilitator-mpp-tools §2.2)'),
      stables: z
        .array(
          z.object({
            symbol: z.string().describe('stable symbol'),
            mint: z.string().describe('the stable’s mint'),
            decimals: z.number().int().describe('the mint’s decimals'),
            token_program: z.string().describe("'spl' or 'token-2022'"),
            token_program_id: z.string().describe('the token program’s address'),
          }),
        )
        .describe('the curated stables a link can price in'),
    })
    .describe('A network a seller can sell on.'),
);

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
    .output(SellerNetworks)
    .query(({ ctx }) => ctx.services.paymentLinks.networks(ctx.principal.network)),

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
