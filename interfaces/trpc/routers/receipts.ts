import { z } from 'zod';
import { Address } from '../../../domain/shared/address.ts';
import {
  AgentPathInput,
  ChainReport,
  ListReceiptsInput,
  PushReceiptResult,
  ReceiptHashInput,
  ReceiptList,
  StoredReceiptOutput,
} from '../../../domain/receipts/schema.ts';
import { CreatePullTargetInput, PullTarget, PullTargetPath } from '../../../domain/receipts/pull-targets.ts';
import { listEnvelope } from '../../../domain/shared/pagination.ts';
import { keyedProcedure, router } from '../init.ts';

const tags = ['receipts'];

/**
 * POST /v1/receipts/{agent_mint}: the body is the receipt itself (ReceiptV1 or v0.2), whose own `agent` field must name
 * the path's agent — so the path parameter has its own name, and the receipt is parsed by the service with the one
 * Receipt schema (its strict objects name an unknown field rather than dropping it).
 */
const PushInput = z
  .looseObject({ agent_mint: Address.describe('the agent whose chain the receipt joins') })
  .describe('A ReceiptV1 (v "0.1") or v0.2 receipt (DECISIONS "Receipts"), plus the path agent.');

export const receiptsRouter = router({
  push: keyedProcedure
    .meta({
      bucket: 'receipts.write',
      errors: ['receipt_agent_mismatch', 'receipt_hash_invalid', 'receipt_chain_invalid'],
      openapi: {
        method: 'POST',
        path: '/v1/receipts/{agent_mint}',
        tags,
        summary: 'Push a receipt onto its agent’s hash chain',
        description:
          'The body is the receipt. Its nonce must be the chain’s last + 1 and prev_receipt_hash the last receipt_hash (else 422 receipt_chain_invalid); a repeat of a stored receipt is 200 duplicate: true and writes nothing (hosted-api §4.7).',
      },
    })
    .input(PushInput)
    .output(PushReceiptResult)
    .mutation(({ ctx, input }) => {
      const { agent_mint, ...receipt } = input;
      return ctx.services.receipts.push(ctx.principal, agent_mint, receipt);
    }),

  list: keyedProcedure
    .meta({
      bucket: 'receipts.read',
      openapi: {
        method: 'GET',
        path: '/v1/receipts/{agent}',
        tags,
        summary: 'An agent’s receipts, nonce descending',
        description: 'Newest (highest nonce) first in the list envelope; filter by kind, decision or since (hosted-api §4.7).',
      },
    })
    .input(ListReceiptsInput)
    .output(ReceiptList)
    .query(({ ctx, input }) => ctx.services.receipts.list(ctx.principal, input)),

  byHash: keyedProcedure
    .meta({
      bucket: 'receipts.read',
      openapi: {
        method: 'GET',
        path: '/v1/receipts/by-hash/{hash}',
        tags,
        summary: 'One receipt by receipt_hash',
        description: 'One receipt plus its network, source and ledger check; a hash on another network answers 404 (hosted-api §4.7).',
      },
    })
    .input(ReceiptHashInput)
    .output(StoredReceiptOutput)
    .query(({ ctx, input }) => ctx.services.receipts.getByHash(ctx.principal, input.hash)),

  verifyChain: keyedProcedure
    .meta({
      bucket: 'receipts.read',
      openapi: {
        method: 'GET',
        path: '/v1/receipts/{agent}/verify-chain',
        tags,
        summary: 'Walk the stored chain and report the first break',
        description: 'Checks every stored receipt of the agent: its hash, its prev_receipt_hash link and gapless nonces; reports the head and the first break.',
      },
    })
    .input(AgentPathInput)
    .output(ChainReport)
    .query(({ ctx, input }) => ctx.services.receipts.verifyChain(ctx.principal, input.agent)),

  createPullTarget: keyedProcedure
    // hosted-api §4.7 spells the create singular; the plural collection path of DECISIONS (GET, DELETE) takes it too
    .meta({
      status: 201,
      restAliases: ['/v1/agents/{mint}/pull-targets'],
      openapi: {
        method: 'POST',
        path: '/v1/agents/{mint}/pull-target',
        tags,
        summary: 'Register a pull target (hosted-api §2.9)',
        description:
          'A feed of the agent’s receipts the pull worker fetches every interval_seconds, ingesting new receipts idempotently and writing receipt.pulled per accepted item (hosted-api §4.7).',
      },
    })
    .input(CreatePullTargetInput)
    .output(PullTarget)
    .mutation(({ ctx, input }) => ctx.services.pull.create(ctx.principal, input)),

  listPullTargets: keyedProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/v1/agents/{mint}/pull-targets',
        tags,
        summary: 'An agent’s pull targets',
        description: 'The feeds registered for the agent, with their worker state.',
      },
    })
    .input(z.object({ mint: Address.describe('the agent’s mint') }))
    .output(listEnvelope(PullTarget))
    .query(({ ctx, input }) => ctx.services.pull.list(ctx.principal, input.mint)),

  deletePullTarget: keyedProcedure
    .meta({
      status: 204,
      openapi: {
        method: 'DELETE',
        path: '/v1/agents/{mint}/pull-targets/{id}',
        tags,
        summary: 'Delete a pull target',
        description: 'Answers 204; the worker stops fetching it.',
      },
    })
    .input(PullTargetPath)
    .output(z.void())
    .mutation(({ ctx, input }) => ctx.services.pull.delete(ctx.principal, input.mint, input.id)),
});
