import { z } from 'zod';
import {
  AgentInput,
  BuyerCurrencies,
  NetworkCatalogue,
  Evaluation,
  EvaluateInput,
  ExecuteInput,
  ExecuteResult,
  FinalizeInput,
  FinalizeResult,
  PutPolicyInput,
  Quote,
  QuoteInput,
  SpendPolicy,
  VerifyReceiptInput,
  VerifyReceiptResult,
} from '../../../domain/buyer/schema.ts';
import { keyedProcedure, router } from '../init.ts';

// hosted-api §4.8 "Buyer": REST and OpenAPI are generated from these procedures; GraphQL
// (interfaces/graphql/schema/buyer.ts) calls the same services.

const tags = ['buyer'];

export const buyerRouter = router({
  networks: keyedProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/v1/buyer/networks',
        tags,
        summary: 'Networks a buyer can pay on, with their stables and fee',
        description: 'Per network: the curated stables, the facilitator and the protocol fee a buyer pays on top of the price.',
      },
    })
    .input(z.void())
    .output(NetworkCatalogue)
    .query(({ ctx }) => ctx.services.buyer.catalog.networks(ctx.principal.network)),

  currency: keyedProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/v1/buyer/currency',
        tags,
        summary: 'Curated stables of the key’s network (mint, decimals, token program)',
        description: "The stables a payment can use on the key's network.",
      },
    })
    .input(z.void())
    .output(BuyerCurrencies)
    .query(({ ctx }) => ctx.services.buyer.catalog.currencies(ctx.principal.network)),

  quote: keyedProcedure
    .meta({
      errors: ['payment_link_not_found', 'quote_unreachable', 'payment_not_required', 'challenge_invalid'],
      openapi: {
        method: 'POST',
        path: '/v1/buyer/quote',
        tags,
        summary: 'What paying a URL or a payment link costs',
        description:
          'Probes the URL once through the guarded outbound client and reads its 402 (x402 v2 PAYMENT-REQUIRED, else the v1 body; MPP WWW-Authenticate: Payment challenges as options of kind mpp); a payment link of this gateway is resolved locally. Each option has net, fee and gross; the seller is the agent whose treasury pay_to is, with its identity verdict. 422 quote_unreachable, payment_not_required or challenge_invalid when there is nothing to pay.',
      },
    })
    .input(QuoteInput)
    .output(Quote)
    .mutation(({ ctx, input }) => ctx.services.buyer.quotes.quote(ctx.principal, input)),

  putPolicy: keyedProcedure
    .meta({
      openapi: {
        method: 'PUT',
        path: '/v1/buyer/policy',
        tags,
        summary: 'Set a buyer agent’s spend policy (the whole policy)',
        description:
          "Replaces the agent's spend policy: per-currency limits per call and per day, allowed sellers and domains, the minimum identity verdict. Payments over it are refused before anything is signed.",
      },
    })
    .input(PutPolicyInput)
    .output(SpendPolicy)
    .mutation(({ ctx, input }) => ctx.services.buyer.policies.put(ctx.principal, input)),

  policy: keyedProcedure
    .meta({
      bucket: 'agents.read',
      openapi: {
        method: 'GET',
        path: '/v1/buyer/policy',
        tags,
        summary: 'A buyer agent’s spend policy',
        description: "The agent's spend policy and what it spent today.",
      },
    })
    .input(AgentInput)
    .output(SpendPolicy)
    .query(({ ctx, input }) => ctx.services.buyer.policies.get(ctx.principal, input)),

  evaluate: keyedProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/v1/buyer/policy/evaluate',
        tags,
        summary: 'Evaluate a buyer agent’s spend policy against a quote',
        description:
          'Each rule (per_call_max, daily_cap, allowed_sellers, allowed_domains, min_identity_verdict) is reported; the first payable option every rule passes is allowed.',
      },
    })
    .input(EvaluateInput)
    .output(Evaluation)
    .mutation(({ ctx, input }) => ctx.services.buyer.policies.evaluate(ctx.principal, input)),

  execute: keyedProcedure
    .meta({
      bucket: 'prepare',
      errors: ['spend_denied', 'agent_not_found', 'conflict', 'insufficient_allowance', 'agent_unproven'],
      openapi: {
        method: 'POST',
        path: '/v1/buyer/payment/execute',
        tags,
        summary: 'Policy check, then the prepared buyer payment to sign and submit',
        description:
          'The body of buyer/payment/prepare. 403 spend_denied (details.reasons) when the agent’s spend policy denies it; 422 insufficient_allowance (details.allowance_atomic, required_atomic) when the executive’s remaining delegation is below the gross (amount + protocol fee); 409 agent_unproven when the payee is not the treasury of an agent proven on the ledger; otherwise the prepared envelope: sign it client-side and send it to POST /v1/submit. A payment of a link is its sale once confirmed (counters, earn receipt, events).',
      },
    })
    .input(ExecuteInput)
    .output(ExecuteResult)
    .mutation(({ ctx, input }) => ctx.services.buyer.payments.execute(ctx.principal, input)),

  finalize: keyedProcedure
    .meta({
      bucket: 'receipts.write',
      openapi: {
        method: 'POST',
        path: '/v1/buyer/receipt/finalize',
        tags,
        summary: 'Record the buyer agent’s spend receipt of a paid response',
        description:
          'From the settlement signature or the PAYMENT-RESPONSE header: the price is read from the landed transaction, the receipt chained on the agent’s receipts. Idempotent per settlement: recorded is false when it already had its receipt.',
      },
    })
    .input(FinalizeInput)
    .output(FinalizeResult)
    .mutation(({ ctx, input }) => ctx.services.buyer.receipts.finalize(ctx.principal, input)),

  verifyReceipt: keyedProcedure
    .meta({
      bucket: 'receipts.read',
      openapi: {
        method: 'POST',
        path: '/v1/buyer/receipt/verify',
        tags,
        summary: 'Check a receipt’s hash, chain position and on-chain settlement',
        description:
          'Recomputes receipt_hash, checks nonce and prev_receipt_hash against the stored chain and the settlement against the ledger; pass a receipt or a receipt_hash.',
      },
    })
    .input(VerifyReceiptInput)
    .output(VerifyReceiptResult)
    .mutation(({ ctx, input }) => ctx.services.buyer.receipts.verify(ctx.principal, input)),
});
