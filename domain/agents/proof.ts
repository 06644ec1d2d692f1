import { DomainError } from '../shared/errors.ts';
import type { Network } from '../shared/network.ts';
import type { Clock } from '../ports/clock.ts';
import type { Ledger } from '../ports/ledger.ts';
import type { Store } from '../ports/store.ts';
import { readLedger } from '../treasury/balances.ts';
import { treasuryOf } from '../treasury/derive.ts';
import { disproof, holdingOf } from './asset.ts';
import type { AgentRecord } from './schema.ts';

// DECISIONS "Agents, submissions and events": an agent exists only on the ledger, and no payment is taken into the
// treasury of an agent that is not proven there — its treasury is the asset-signer PDA of a Metaplex Core asset, and
// without that asset no key can ever sign for it. An agent is proven when the ledger is seen holding its AssetV1 with
// its recorded owner: at record time, when its mint through the API confirms, and for rows recorded before records
// were checked by the proof job or on first use (a link naming it, a paid call to its link, a buyer payment to it).

/** Why an agent is not proven: what the ledger holds at its address, in words and as details. */
export interface Disproof {
  said: string;
  details: Record<string, unknown>;
}

/** What an unproven agent was about to be used for, e.g. "own a payment link"; words of the refusal. */
export type AgentUse = 'link' | 'paywall' | 'buyer_payment' | 'settlement';

/** How long a first use on the paywall reuses a look that found no asset before it reads the ledger again. */
const MISS_TTL_MS = 2_000;
const MAX_MISSES = 10_000;
/** Treasuries this process knows payable (bounded: the oldest are forgotten and looked up again when paid). */
const MAX_PAYABLE = 50_000;

export interface AgentProofDeps {
  store: Store;
  clock: Clock;
  ledgers: Partial<Record<Network, Ledger>>;
}

export class AgentProof {
  /** Agents this process saw proven (proof is never withdrawn): a link read before its proof needs no new look. */
  private readonly proven = new Set<string>();
  /** The paywall's last look that found no asset, per agent: an anonymous caller cannot make it read the ledger per request. */
  private readonly misses = new Map<string, { at: number; error: DomainError }>();
  /**
   * Treasuries (per network) that are no unproven agent's: a proven agent's, or no recorded agent's. Such an answer
   * never turns: proof is never withdrawn, and every agent recorded now is proven when it is recorded (only rows from
   * before records were checked can be unproven).
   */
  private readonly payable = new Set<string>();

  constructor(private readonly deps: AgentProofDeps) {}

  /**
   * Reads the agent's address on its network's ledger (rpc_unavailable when it cannot be read) and records what it
   * found: proven (null) or checked and why not.
   */
  async check(agent: Pick<AgentRecord, 'network' | 'mint' | 'owner'>): Promise<Disproof | null> {
    const why = await this.look(agent.network, agent.mint, agent.owner);
    const now = this.deps.clock.now();
    if (why) {
      await this.deps.store.agents.markChecked(agent.network, agent.mint, now);
    } else {
      await this.deps.store.agents.markProven(agent.network, agent.mint, now);
      this.proven.add(keyOf(agent.network, agent.mint));
    }
    return why;
  }

  /** What the ledger holds at `mint` unless it is a Core AssetV1 owned by `owner` (null then); no write. */
  async look(network: Network, mint: string, owner: string): Promise<Disproof | null> {
    const account = await readLedger(this.deps.ledgers, network, (ledger) => ledger.getAccount(mint));
    return disproof(holdingOf(account), owner);
  }

  /** Proven as the row says, or as this process saw since it was read. */
  isProven(agent: Pick<AgentRecord, 'network' | 'mint' | 'provenAt'>): boolean {
    return agent.provenAt !== null || this.proven.has(keyOf(agent.network, agent.mint));
  }

  /** First use: an agent that is to be paid must be proven; an unproven row gets one more look at the ledger. */
  async requireProven(agent: AgentRecord, use: AgentUse): Promise<void> {
    if (this.isProven(agent)) return;
    const why = await this.check(agent);
    if (why) throw unproven(agent, why, use);
  }

  /**
   * The paywall's fast path: the link's owner agent is known proven without I/O. Its treasury is then known payable:
   * the facilitator's check of the settlement that follows costs nothing either.
   */
  linkPayableAtHand(link: { network: Network; ownerAgent: string; ownerAgentProven: boolean }): boolean {
    if (!link.ownerAgentProven && !this.proven.has(keyOf(link.network, link.ownerAgent))) return false;
    this.knowPayable(link.network, treasuryOf(link.ownerAgent));
    return true;
  }

  private knowPayable(network: Network, treasury: string): void {
    const key = keyOf(network, treasury);
    if (this.payable.has(key)) return;
    if (this.payable.size >= MAX_PAYABLE) this.payable.delete(this.payable.values().next().value!);
    this.payable.add(key);
  }

  /**
   * The paywall's check of a link it read (the row says whether its owner agent was proven then): no I/O for a proven
   * one. Otherwise the agent's row (the proof job may have proven it since), then — at most every MISS_TTL_MS per
   * agent — the ledger. Throws `agent_unproven` before anything is claimed or settled.
   */
  async requireLinkPayable(link: { network: Network; ownerAgent: string; ownerAgentProven: boolean }): Promise<void> {
    if (this.linkPayableAtHand(link)) return;
    const key = keyOf(link.network, link.ownerAgent);
    const agent = await this.deps.store.agents.get(link.network, link.ownerAgent);
    if (!agent) {
      throw new DomainError(
        'agent_unproven',
        `The agent ${link.ownerAgent} that owns this payment link is not recorded on ${link.network}; the link takes no payments.`,
        {
          mint: link.ownerAgent,
          network: link.network,
          found: 'not_recorded',
        },
      );
    }
    if (agent.provenAt) {
      this.proven.add(key);
      return;
    }
    const now = this.deps.clock.now().getTime();
    const miss = this.misses.get(key);
    if (miss && now - miss.at < MISS_TTL_MS) throw miss.error;
    try {
      await this.requireProven(agent, 'paywall');
      this.misses.delete(key);
    } catch (e) {
      if (e instanceof DomainError && e.code === 'agent_unproven') {
        if (this.misses.size >= MAX_MISSES) this.misses.delete(this.misses.keys().next().value!);
        this.misses.set(key, { at: now, error: e });
      }
      throw e;
    }
  }

  /**
   * A buyer payment to `payTo` (buyer/payment/prepare, a link's or a direct one): it pays agents, so `payTo` must be the
   * treasury of an agent recorded on the network and proven (first use: an unproven one gets a look at the ledger).
   * Anything else is `agent_unproven` — an address no recorded agent's treasury is, found `not_recorded`.
   */
  async requirePayToPayable(network: Network, payTo: string): Promise<void> {
    const agent = await this.deps.store.agents.findByTreasury(network, payTo);
    if (!agent) {
      throw new DomainError(
        'agent_unproven',
        `${payTo} is not the treasury of an agent recorded on ${network}: a buyer payment pays an agent's treasury (a payment link's, or pay_to = GET /v1/agents/{mint} treasury); the payment is not prepared, nothing moves.`,
        { pay_to: payTo, network, found: 'not_recorded', path: 'pay_to' },
      );
    }
    await this.requireProven(agent, 'buyer_payment');
    this.knowPayable(network, payTo);
  }

  /**
   * The facilitator's check of a settlement's payTo. The facilitator settles for any x402 seller
   * (fee-facilitator-mpp-tools §1, §2.5: any payTo), so only the treasury of an agent recorded here and not proven is
   * refused (first use: one more look at the ledger) — the money would be locked in a treasury no key can open. Answers
   * the refusal (`agent_unproven`), or null. A known-payable treasury costs no I/O.
   */
  async refusalOfPayTo(network: Network, payTo: string): Promise<DomainError | null> {
    if (this.payable.has(keyOf(network, payTo))) return null;
    const agent = await this.deps.store.agents.findByTreasury(network, payTo);
    if (agent) {
      try {
        await this.requireProven(agent, 'settlement');
      } catch (e) {
        if (e instanceof DomainError && e.code === 'agent_unproven') return e;
        throw e;
      }
    }
    this.knowPayable(network, payTo);
    return null;
  }

  /**
   * The proof job: looks at up to `limit` unproven agents, those looked at longest ago first (never-checked first),
   * skipping any looked at after `checkedBefore`. A ledger that cannot be read leaves the agent for the next run.
   */
  async proveUnproven(options: { limit: number; checkedBefore: Date }): Promise<{ checked: number; proven: number; failed: number }> {
    const rows = await this.deps.store.agents.listUnproven(options);
    const tally = { checked: 0, proven: 0, failed: 0 };
    for (const agent of rows) {
      try {
        const why = await this.check(agent);
        tally.checked++;
        if (!why) tally.proven++;
      } catch (e) {
        if (!(e instanceof DomainError && e.code === 'rpc_unavailable')) throw e;
        tally.failed++;
      }
    }
    return tally;
  }
}

const keyOf = (network: Network, mint: string) => `${network}\u0000${mint}`;

const WHAT_TO_DO =
  'Mint an agent through POST /v1/agents/prepare (its owner signs; the gateway records it once the mint confirms), or ' +
  'create its Metaplex Core asset owned by the recorded owner and POST /v1/agents/record it again.';

/** `agent_unproven`: why, what the ledger holds there, and what to do — worded for who meets it. */
export function unproven(agent: Pick<AgentRecord, 'network' | 'mint' | 'owner'>, why: Disproof, use: AgentUse): DomainError {
  const treasury = treasuryOf(agent.mint);
  const head = `Agent ${agent.mint} is not proven on ${agent.network}: the ledger holds ${why.said} at its address, so no key could ever move money out of its treasury ${treasury}.`;
  const tail =
    use === 'link'
      ? ` A payment link cannot name it. ${WHAT_TO_DO}`
      : use === 'paywall'
        ? ' This payment link takes no payments until its seller proves the agent; nothing was charged.'
        : use === 'settlement'
          ? ' The facilitator settles nothing into it; nothing was charged.'
          : ' The payment is not prepared; nothing moves.';
  return new DomainError('agent_unproven', head + tail, { mint: agent.mint, network: agent.network, owner: agent.owner, treasury, ...why.details });
}
