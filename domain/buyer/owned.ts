import { canAccess, type Caller } from '../access/ownership.ts';
import type { AgentRecord } from '../agents/schema.ts';
import type { Store } from '../ports/store.ts';
import { DomainError } from '../shared/errors.ts';

/** The caller's agent: another principal's answers agent_not_found, like a missing one (existence is not disclosed). */
export async function ownedAgent(store: Store, caller: Caller, mint: string): Promise<AgentRecord> {
  const agent = await store.agents.get(caller.network, mint);
  if (!agent || !canAccess(caller, agent.ownerPrincipal)) {
    throw new DomainError('agent_not_found', `No agent ${mint} on ${caller.network}.`, { mint, network: caller.network });
  }
  return agent;
}
