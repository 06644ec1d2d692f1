import { randomBytes } from 'node:crypto';
import { DomainError } from '../shared/errors.ts';
import { newId } from '../shared/ids.ts';
import { newEvent } from '../events/kinds.ts';
import type { Network } from '../shared/network.ts';
import { iso, isoOrNull } from '../shared/settings.ts';
import { parseInput } from '../shared/validation.ts';
import type { Store } from '../ports/store.ts';
import type { Clock } from '../ports/clock.ts';
import type { Ledger } from '../ports/ledger.ts';
import { canAccess, type Caller } from '../access/ownership.ts';
import { treasuryOf } from '../treasury/derive.ts';
import type { TreasuryAccounts } from '../treasury/accounts.ts';
import { readLedger, stableAccounts } from '../treasury/balances.ts';
import { decodeTokenAccount } from '../shared/token-account.ts';
import { decodeCoreAsset, type CoreAsset } from './asset.ts';
import { AgentProof } from './proof.ts';
import { RecordAgentInput, type Agent, type AgentRecord } from './schema.ts';
import type { Watchlist } from '../indexer/watchlist.ts';

/** What the ledger shows of an agent: its Core asset (null when absent) and the delegations on its treasury. */
export interface AgentOnLedger {
  asset: CoreAsset | null;
  delegations: Agent['delegations'];
}

/**
 * The agent record (DECISIONS "Prepare / submit / events"). The ledger wins over the recorded row for owner, name and
 * uri when the asset exists; delegations come from the ledger only (none without it).
 */
export function toAgent(r: AgentRecord, onLedger?: AgentOnLedger): Agent {
  const asset = onLedger?.asset ?? null;
  return {
    mint: r.mint,
    network: r.network,
    owner: asset?.owner ?? r.owner,
    name: asset ? asset.name : r.name,
    uri: asset ? asset.uri : r.uri,
    treasury: r.treasury,
    executive: r.executive,
    delegations: onLedger?.delegations ?? [],
    source: r.source,
    registered_at: iso(r.registeredAt),
    proven_at: isoOrNull(r.provenAt),
  };
}

/** A concurrent record of the same mint changed the row between our read and our write: decide again. */
const RECORD_ATTEMPTS = 3;

export class AgentService {
  /** Whether agents are proven on the ledger, and the first-use checks of those that are not */
  readonly proof: AgentProof;

  /** treasuryAccounts: the treasury's token accounts are prepared when an agent is recorded */
  constructor(
    private readonly deps: {
      store: Store;
      clock: Clock;
      ledgers: Partial<Record<Network, Ledger>>;
      treasuryAccounts?: TreasuryAccounts | undefined;
      /** A recorded agent joins the indexer's watchlist */
      watchlist?: Pick<Watchlist, 'watchAgent'> | undefined;
      /** the process's proof (shared with its facilitator, so what one learns the other knows); default one of its own */
      proof?: AgentProof | undefined;
    },
  ) {
    this.proof = deps.proof ?? new AgentProof(deps);
  }

  /**
   * hosted-api §4.4 POST /v1/agents/record: an agent minted outside the API, owned by the caller's principal
   * (docs/architecture.md "Ownership"). DECISIONS "Agents, submissions and events": only an address where the caller network's
   * ledger holds a Metaplex Core AssetV1 whose owner is `owner` is recorded (and proven); anything else is
   * `agent_not_on_ledger` saying what the ledger holds there, and a ledger that cannot be read is `rpc_unavailable` —
   * nothing is recorded either way. A key with an owner_wallet records agents of that wallet only. Recording an agent
   * again keeps it with its principal: another owner needs the ledger to show the asked owner (as every record does),
   * and another principal with the same owner needs a key of that wallet too; otherwise `conflict`. A legacy agent
   * nobody owns yet is adopted by the first principal that records it with the same owner.
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
    const why = await this.proof.look(network, parsed.mint, parsed.owner);
    if (why) {
      throw new DomainError(
        'agent_not_on_ledger',
        `The ${network} ledger holds ${why.said} at ${parsed.mint}: an agent is a Metaplex Core asset owned by its owner, and only one can hold a treasury someone can sign for. ` +
          'Mint one with POST /v1/agents/prepare (the gateway records it once the mint confirms), or record the address of an existing Core asset with its owner.',
        { mint: parsed.mint, owner: parsed.owner, network, path: 'mint', ...why.details },
      );
    }
    const now = this.deps.clock.now();
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
      registeredAt: now,
      provenAt: now,
    };
    for (let attempt = 0; attempt < RECORD_ATTEMPTS; attempt++) {
      const current = await this.deps.store.agents.get(network, parsed.mint);
      if (!current) {
        if (await this.deps.store.agents.insert(wanted)) return this.recorded(wanted);
        continue;
      }
      const sameOwner = current.owner === parsed.owner;
      // Same owner, another principal: naming the (public) owner proves nothing; a key of that wallet does.
      if (sameOwner && current.ownerPrincipal !== caller.owner && current.ownerPrincipal !== null && caller.ownerWallet !== parsed.owner) {
        throw new DomainError(
          'conflict',
          `Agent ${parsed.mint} is already recorded on ${network} by another principal; a key whose owner_wallet is the owner the ledger shows can take it over.`,
          { mint: parsed.mint, path: 'owner' },
        );
      }
      const next: AgentRecord = {
        ...current,
        owner: parsed.owner,
        ownerPrincipal: caller.owner,
        name: wanted.name,
        uri: wanted.uri,
        provenAt: current.provenAt ?? now,
      };
      const expected = { owner: current.owner, ownerPrincipal: current.ownerPrincipal };
      const replaced = sameOwner ? await this.deps.store.agents.replace(next, expected) : await this.replaceOwner(next, expected, now);
      if (replaced) return this.recorded(next);
    }
    throw new DomainError('conflict', `Agent ${parsed.mint} is being recorded concurrently; try again.`, { mint: parsed.mint });
  }

  /**
   * Recorded with a new owner (the asset changed hands on the ledger): in the same transaction its identity goes back to
   * unverified under the new owner — the handle released, the claimed domains unverified with fresh tokens — since what
   * the former owner proved (a domain it controls, a name it chose) says nothing of the new one. The released handle
   * is written in the agent's history (identity.profile.updated).
   */
  private async replaceOwner(next: AgentRecord, expected: { owner: string; ownerPrincipal: string | null }, now: Date): Promise<boolean> {
    return this.deps.store.transaction(async (tx) => {
      if (!(await tx.agents.replace(next, expected))) return false;
      const before = await tx.identity.resetForNewOwner(next.network, next.mint, {
        ownerPrincipal: next.ownerPrincipal,
        secret: randomBytes(24).toString('base64url'),
      });
      if (before?.handle) {
        await tx.events.append(
          newEvent(
            'identity.profile.updated',
            {
              id: newId(now.getTime()),
              phase: 'confirmed',
              network: next.network,
              agentAsset: next.mint,
              owner: next.ownerPrincipal,
              createdAt: now,
              confirmedAt: now,
            },
            { mint: next.mint, handle: null, previous_handle: before.handle, display_name: before.displayName, capabilities: before.capabilities },
          ),
        );
      }
      return true;
    });
  }

  /** Refusals are logged by TreasuryAccounts; a link created later prepares its currencies again and says so. */
  private async recorded(agent: AgentRecord): Promise<Agent> {
    await this.deps.watchlist?.watchAgent(agent.network, agent.mint, agent.ownerPrincipal);
    await this.deps.treasuryAccounts?.ensure(agent.network, agent.mint);
    return toAgent(agent);
  }

  /**
   * hosted-api §4.4 GET /v1/agents/{mint}: the record with what the ledger shows (the Core asset's owner, name and
   * uri; the SPL delegations on the treasury's curated-stable token accounts), in one read of the ledger. A ledger
   * that cannot be read is `rpc_unavailable`. Another principal's agent is not found.
   */
  async get(caller: Caller, mint: string): Promise<Agent> {
    const agent = await this.requireVisible(caller, mint);
    return toAgent(agent, await this.onLedger(agent));
  }

  /** Another principal's agent is not found (existence is not disclosed); an admin sees its whole network. */
  async requireVisible(caller: Caller, mint: string): Promise<AgentRecord> {
    const agent = await this.require(caller.network, mint);
    if (!canAccess(caller, agent.ownerPrincipal)) throw notFound(caller.network, mint);
    return agent;
  }

  /** The asset account and the treasury's curated-stable token accounts, read together. */
  private async onLedger(agent: AgentRecord): Promise<AgentOnLedger> {
    const stables = stableAccounts(agent.network, agent.mint);
    const [assetAccount, ...tokenAccounts] = await readLedger(this.deps.ledgers, agent.network, (ledger) =>
      ledger.getMultipleAccounts([agent.mint, ...stables.map((s) => s.address)]),
    );
    const delegations: Agent['delegations'] = [];
    stables.forEach((s, i) => {
      const account = tokenAccounts[i];
      const state = decodeTokenAccount(account);
      // an SPL Token ATA's owner can be reassigned (SetAuthority): then its delegate is not the treasury's
      if (state?.delegate && state.owner === agent.treasury && state.mint === s.mint)
        delegations.push({ stable_symbol: s.symbol, delegate: state.delegate, allowance_atomic: state.delegatedAmount.toString() });
    });
    return { asset: assetAccount ? decodeCoreAsset(assetAccount) : null, delegations };
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
}

function notFound(network: Network, mint: string): DomainError {
  return new DomainError('agent_not_found', `No agent ${mint} on ${network}.`, { mint, network });
}
