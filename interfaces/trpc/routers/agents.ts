import { Agent, AgentMintInput, RecordAgentInput } from '../../../domain/agents/schema.ts';
import { AgentPayTo, TreasuryBalances } from '../../../domain/treasury/schema.ts';
import { keyedProcedure, router } from '../init.ts';

const tags = ['agents'];

export const agentsRouter = router({
  record: keyedProcedure
    .meta({
      errors: ['forbidden', 'conflict', 'agent_not_on_ledger', 'rpc_unavailable'],
      openapi: {
        method: 'POST',
        path: '/v1/agents/record',
        tags,
        summary: 'Record an agent minted outside the API',
        description:
          'Only an address where the network’s ledger holds a Metaplex Core AssetV1 whose owner is `owner` is recorded; anything else is 422 agent_not_on_ledger saying what the ledger holds there (mint one with POST /v1/agents/prepare). A ledger that cannot be read is 502 rpc_unavailable; nothing is recorded.',
      },
    })
    .input(RecordAgentInput)
    .output(Agent)
    .mutation(({ ctx, input }) => ctx.services.agents.record(ctx.principal, input)),

  get: keyedProcedure
    .meta({
      bucket: 'agents.read',
      openapi: {
        method: 'GET',
        path: '/v1/agents/{mint}',
        tags,
        summary: 'Get an agent record',
        description:
          'The record with what the ledger shows: the Core asset’s owner, name and uri when the asset exists, and the SPL delegations on the treasury’s stable token accounts. `executive`: the wallet of the last executive or token delegation the gateway prepared and saw confirmed (agent.executive.delegate, agent.delegation.set), null until one confirms and after a confirmed agent.executive.revoke of it.',
      },
    })
    .input(AgentMintInput)
    .output(Agent)
    .query(({ ctx, input }) => ctx.services.agents.get(ctx.principal, input.mint)),

  balances: keyedProcedure
    .meta({
      bucket: 'agents.read',
      openapi: {
        method: 'GET',
        path: '/v1/agents/{mint}/treasury/balances',
        tags,
        summary: 'Read the treasury’s balances',
        description:
          'Lamports, the reserve kept by withdraw-sol-all, spendable lamports and every SPL Token and Token-2022 account of the treasury, read from the ledger.',
      },
    })
    .input(AgentMintInput)
    .output(TreasuryBalances)
    .query(({ ctx, input }) => ctx.services.treasury.balances(ctx.principal, input.mint)),

  payTo: keyedProcedure
    .meta({
      bucket: 'agents.read',
      openapi: {
        method: 'GET',
        path: '/v1/agents/{mint}/pay-to',
        tags,
        summary: 'Where to pay the agent',
        description: 'Per curated stable of the network: the treasury (x402 payTo), the token account a payment credits and whether it exists.',
      },
    })
    .input(AgentMintInput)
    .output(AgentPayTo)
    .query(({ ctx, input }) => ctx.services.treasury.payTo(ctx.principal, input.mint)),
});
