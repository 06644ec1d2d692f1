import { DomainError } from '../shared/errors.ts';
import type { Network } from '../shared/network.ts';
import { iso } from '../shared/settings.ts';
import { parseInput } from '../shared/validation.ts';
import type { Store } from '../ports/store.ts';
import type { Clock } from '../ports/clock.ts';
import type { Ledger } from '../ports/ledger.ts';
import { canAccess, type Caller } from '../access/ownership.ts';
import { treasuryOf } from '../treasury/derive.ts';
import type { TreasuryAccounts } from '../treasury/accounts.ts';
import { coreAssetOwner } from './asset.ts';
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

/** A concurrent record of the same mint changed the row between our read and our write: decide again. */
const RECORD_ATTEMPTS = 3;

export class AgentService {
  /** treasuryAccounts (issue 9): the treasury's token accounts are prepared when an agent is recorded */
  constructor(
    private readonly deps: { store: Store; clock: Clock; ledgers: Partial<Record<Network, Ledger>>; treasuryAccounts?: TreasuryAccounts | undefined },
  ) {}

  /**
   * hosted-api §4.4 POST /v1/agents/record: an agent minted outside the API, owned by the caller's principal
   * (README "Ownership"). A key with an owner_wallet records agents of that wallet only. Recording an agent again
   * keeps it with its principal: another owner needs the ledger to show the asked owner (the Metaplex Core asset
   * account's owner field), and another principal with the same owner needs that too and a key of that wallet;
   * otherwise `conflict`. A legacy agent nobody owns yet is adopted by the first principal that records it with the
   * same owner.
   */
  async record(caller: Caller, input: RecordAgentInput): Promise<Agent> {
    const parsed = parseInput(RecordAgentInput, input);
    const { network } = caller;
    if (caller.ownerWallet !== null && parsed.owner !== caller.ownerWallet) {
      throw new DomainError('forbidden', `This API key records agents of its owner_wallet ${caller.ownerWallet} only.`, {
        path: 'owner',
        owner_wallet: caller.ownerWallet,
      });
    }
    const wanted: AgentRecord = {
      mint: parsed.mint,
      network,
      owner: parsed.owner,
      name: parsed.name ?? null,
      uri: parsed.uri ?? null,
      treasury: treasuryOf(parsed.mint),
      executive: null,
      source: 'recorded',
      ownerPrincipal: caller.owner,
      registeredAt: this.deps.clock.now(),
    };
    let ledgerOwner: string | null | undefined;
    for (let attempt = 0; attempt < RECORD_ATTEMPTS; attempt++) {
      const current = await this.deps.store.agents.get(network, parsed.mint);
      if (!current) {
        if (await this.deps.store.agents.insert(wanted)) return this.recorded(wanted);
        continue;
      }
      const sameOwner = current.owner === parsed.owner;
      if (!(sameOwner && (current.ownerPrincipal === caller.owner || current.ownerPrincipal === null))) {
        ledgerOwner ??= await this.ledgerOwner(network, parsed.mint);
        // Same owner, another principal: naming the (public) owner proves nothing; a key of that wallet does.
        const proven = ledgerOwner === parsed.owner && (!sameOwner || caller.ownerWallet === parsed.owner);
        if (!proven) {
          throw new DomainError(
            'conflict',
            sameOwner
              ? `Agent ${parsed.mint} is already recorded on ${network} by another principal; a key whose owner_wallet is the owner the ledger shows can take it over.`
              : `Agent ${parsed.mint} is already recorded on ${network} with another owner; the ledger does not show ${parsed.owner} as its owner.`,
            { mint: parsed.mint, path: 'owner' },
          );
        }
      }
      const next: AgentRecord = { ...current, owner: parsed.owner, ownerPrincipal: caller.owner, name: wanted.name, uri: wanted.uri };
      if (await this.deps.store.agents.replace(next, { owner: current.owner, ownerPrincipal: current.ownerPrincipal })) return this.recorded(next);
    }
    throw new DomainError('conflict', `Agent ${parsed.mint} is being recorded concurrently; try again.`, { mint: parsed.mint });
  }

  /** Refusals are logged by TreasuryAccounts; a link created later prepares its currencies again and says so. */
  private async recorded(agent: AgentRecord): Promise<Agent> {
    await this.deps.treasuryAccounts?.ensure(agent.network, agent.mint);
    return toAgent(agent);
  }

  /** Another principal's agent is not found (existence is not disclosed); an admin sees its whole network. */
  async get(caller: Caller, mint: string): Promise<Agent> {
    const agent = await this.require(caller.network, mint);
    if (!canAccess(caller, agent.ownerPrincipal)) throw notFound(caller.network, mint);
    return toAgent(agent);
  }

  /** Any principal's agent (the paywall, link checks that answer `forbidden` themselves). */
  async require(network: Network, mint: string): Promise<AgentRecord> {
    const agent = await this.deps.store.agents.get(network, mint);
    if (!agent) throw notFound(network, mint);
    return agent;
  }

  /** The agent as an owner_agent of the caller's link: it must exist (404) and be the caller's principal's (403). */
  async requireOwned(caller: Caller, mint: string): Promise<AgentRecord> {
    const agent = await this.require(caller.network, mint);
    if (!canAccess(caller, agent.ownerPrincipal)) {
      throw new DomainError('forbidden', `Agent ${mint} belongs to another principal; a link's owner_agent must be one of your agents.`, { mint });
    }
    return agent;
  }

  /** The owner field of the asset account on the network's ledger; null when absent, not a Core asset, or no ledger. */
  private async ledgerOwner(network: Network, mint: string): Promise<string | null> {
    const ledger = this.deps.ledgers[network];
    if (!ledger) return null;
    const account = await ledger.getAccount(mint);
    return account ? coreAssetOwner(account) : null;
  }
}

function notFound(network: Network, mint: string): DomainError {
  return new DomainError('agent_not_found', `No agent ${mint} on ${network}.`, { mint, network });
}
