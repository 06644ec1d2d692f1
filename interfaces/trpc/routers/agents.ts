import { Agent, AgentMintInput, RecordAgentInput } from '../../../domain/agents/schema.ts';
import { keyedProcedure, router } from '../init.ts';

const tags = ['agents'];

export const agentsRouter = router({
  record: keyedProcedure
    .meta({ openapi: { method: 'POST', path: '/v1/agents/record', tags, summary: 'Record an agent minted outside the API' } })
    .input(RecordAgentInput)
    .output(Agent)
    .mutation(({ ctx, input }) => ctx.services.agents.record(ctx.principal, input)),

  get: keyedProcedure
    .meta({ bucket: 'agents.read', openapi: { method: 'GET', path: '/v1/agents/{mint}', tags, summary: 'Get an agent record' } })
    .input(AgentMintInput)
    .output(Agent)
    .query(({ ctx, input }) => ctx.services.agents.get(ctx.principal, input.mint)),
});
