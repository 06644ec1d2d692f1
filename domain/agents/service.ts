import { DomainError } from '../shared/errors.ts';
import type { Network } from '../shared/network.ts';
import { iso } from '../shared/settings.ts';
import { parseInput } from '../shared/validation.ts';
import type { Store } from '../ports/store.ts';
import type { Clock } from '../ports/clock.ts';
import { treasuryOf } from '../treasury/derive.ts';
import type { TreasuryAccounts } from '../treasury/accounts.ts';
import { RecordAgentInput, type Agent, type AgentRecord } from './schema.ts';

export function toAgent(r: AgentRecord): Agent {
  return {
    mint: r.mint,
    network: r.network,
    owner: r.owner,
    name: r.name,
    uri: r.uri,
    treasury: r.treasury,
    executive: r.executive,
    delegations: [],
    source: r.source,
    registered_at: iso(r.registeredAt),
  };
}

export class AgentService {
  /** treasuryAccounts (issue 9): the treasury's token accounts are prepared when an agent is recorded */
  constructor(private readonly deps: { store: Store; clock: Clock; treasuryAccounts?: TreasuryAccounts | undefined }) {}

  /** hosted-api §4.4 POST /v1/agents/record: an agent minted outside the API. */
  async record(network: Network, input: RecordAgentInput): Promise<Agent> {
    const parsed = parseInput(RecordAgentInput, input);
    const stored = await this.deps.store.agents.upsert({
      mint: parsed.mint,
      network,
      owner: parsed.owner,
      name: parsed.name ?? null,
      uri: parsed.uri ?? null,
      treasury: treasuryOf(parsed.mint),
      executive: null,
      source: 'recorded',
      registeredAt: this.deps.clock.now(),
    });
    // Refusals are logged by TreasuryAccounts; a link created later prepares its currencies again and says so.
    await this.deps.treasuryAccounts?.ensure(network, parsed.mint);
    return toAgent(stored);
  }

  async get(network: Network, mint: string): Promise<Agent> {
    return toAgent(await this.require(network, mint));
  }

  async require(network: Network, mint: string): Promise<AgentRecord> {
    const agent = await this.deps.store.agents.get(network, mint);
    if (!agent) throw new DomainError('agent_not_found', `No agent ${mint} on ${network}.`, { mint, network });
    return agent;
  }
}
