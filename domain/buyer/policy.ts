import type { Caller } from '../access/ownership.ts';
import type { Clock } from '../ports/clock.ts';
import type { Store } from '../ports/store.ts';
import type { Ledger } from '../ports/ledger.ts';
import { DomainError } from '../shared/errors.ts';
import { atomicToDecimal } from '../shared/money.ts';
import { findStable, STABLES, type Network, type StableSymbol } from '../shared/network.ts';
import { parseInput } from '../shared/validation.ts';
import { wholeUnitsToAtomic } from '../agents/build/execute.ts';
import { ownedAgent } from './owned.ts';
import { evaluate, type RuleFacts } from './rules.ts';
import type { QuoteService } from './quote.ts';
import { AgentInput, EvaluateInput, PutPolicyInput, type Evaluation, type Quote, type SpendPolicy, type SpendPolicyRecord } from './schema.ts';

// A buyer agent's spend policy (PUT/GET /v1/buyer/policy), owned by the agent's owner principal, and its
// evaluation against a quote (POST /v1/buyer/policy/evaluate). The daily cap reads the day's spend rollup
// (buyer_spend_daily, one primary-key read), never the receipts themselves.

export interface SpendPolicyServiceDeps {
  store: Store;
  clock: Clock;
  quotes: QuoteService;
  /** block heights: whether a prepared payment can still be submitted */
  ledgers: Partial<Record<Network, Ledger>>;
}

export class SpendPolicyService {
  constructor(private readonly deps: SpendPolicyServiceDeps) {}

  async put(caller: Caller, input: PutPolicyInput): Promise<SpendPolicy> {
    const p = parseInput(PutPolicyInput, input);
    const agent = await ownedAgent(this.deps.store, caller, p.agent);
    const limits = (p.limits ?? []).map((l, i) => {
      const stable = findStable(caller.network, l.currency);
      if (!stable) {
        throw DomainError.invalid([{ path: `limits.${i}.currency`, message: `${l.currency} is not a stable of ${caller.network}`, code: 'invalid_currency' }]);
      }
      const atomic = (text: string | undefined, field: string) =>
        text === undefined ? null : wholeUnitsToAtomic(text, stable.decimals, `limits.${i}.${field}`, stable.symbol);
      return { currency: l.currency, perCall: atomic(l.per_call, 'per_call'), daily: atomic(l.daily, 'daily') };
    });
    const record: SpendPolicyRecord = {
      network: caller.network,
      agent: p.agent,
      limits,
      allowedSellers: p.allowed_sellers ?? null,
      allowedDomains: p.allowed_domains ?? null,
      minIdentityVerdict: p.min_identity_verdict ?? null,
      // the agent's owner: a policy follows its agent (an admin writing one does not take it over)
      ownerPrincipal: agent.ownerPrincipal ?? caller.owner,
      updatedAt: this.deps.clock.now(),
    };
    await this.deps.store.buyer.putPolicy(record);
    return toSpendPolicy(record);
  }

  async get(caller: Caller, input: AgentInput): Promise<SpendPolicy> {
    const { agent } = parseInput(AgentInput, input);
    await ownedAgent(this.deps.store, caller, agent);
    const record = await this.deps.store.buyer.getPolicy(caller.network, agent);
    if (!record) throw new DomainError('not_found', `Agent ${agent} has no spend policy; PUT /v1/buyer/policy sets one.`, { agent });
    return toSpendPolicy(record);
  }

  async evaluate(caller: Caller, input: EvaluateInput): Promise<Evaluation> {
    const q = parseInput(EvaluateInput, input);
    await ownedAgent(this.deps.store, caller, q.agent);
    const quote = q.quote ?? (await this.deps.quotes.quote(caller, q.url !== undefined ? { url: q.url } : { payment_link: q.payment_link! }));
    return this.decide(caller, q.agent, quote, q.currency);
  }

  /** The caller's agent, else agent_not_found. */
  async owned(caller: Caller, agent: string): Promise<void> {
    await ownedAgent(this.deps.store, caller, agent);
  }

  /** The policy over a quote, with today's spend and the payments in flight; `currency` restricts the options considered. */
  async decide(caller: Caller, agent: string, quote: Quote, currency?: StableSymbol): Promise<Evaluation> {
    const policy = await this.deps.store.buyer.getPolicy(caller.network, agent);
    const spentToday = await this.spentToday(caller.network, agent);
    const inFlight = await this.inFlight(caller.network, agent);
    const d = evaluate(policy, quote, { spentToday, currency, inFlight });
    const list = (m: RuleFacts['spentToday']) => Object.entries(m).map(([c, v]) => ({ currency: c as StableSymbol, gross_atomic: (v as bigint).toString() }));
    return { ...d, spent_today: list(spentToday), in_flight: list(inFlight), quote };
  }

  /** Gross spent today (UTC) per curated stable, from the rollup. */
  private async spentToday(network: Network, agent: string): Promise<RuleFacts['spentToday']> {
    const day = this.deps.clock.now().toISOString().slice(0, 10);
    return bySymbol(network, await this.deps.store.buyer.spentOn(network, agent, day));
  }

  /**
   * Buyer payments of the agent not landed yet: a submitted one may still land; a prepared one only while its
   * blockhash is valid (afterwards submit refuses it). Without them, payments prepared side by side would each pass
   * the daily cap alone.
   */
  private async inFlight(network: Network, agent: string): Promise<RuleFacts['spentToday']> {
    const open = await this.deps.store.buyer.inFlight(network, agent);
    if (open.length === 0) return {};
    let height: number | null = null;
    if (open.some((p) => p.state === 'prepared')) {
      // no ledger (or no answer): count every prepared payment, the cautious reading
      height = (await this.deps.ledgers[network]?.getBlockHeight().catch(() => null)) ?? null;
    }
    return bySymbol(
      network,
      open.filter((p) => p.state === 'submitted' || height === null || p.lastValidBlockHeight >= height),
    );
  }
}

function bySymbol(network: Network, rows: { asset: string; grossAtomic: bigint }[]): RuleFacts['spentToday'] {
  const out: RuleFacts['spentToday'] = {};
  for (const r of rows) {
    const stable = STABLES[network].find((s) => s.mint === r.asset);
    if (stable) out[stable.symbol] = (out[stable.symbol] ?? 0n) + r.grossAtomic;
  }
  return out;
}

export function toSpendPolicy(r: SpendPolicyRecord): SpendPolicy {
  const decimals = (symbol: StableSymbol) => findStable(r.network, symbol)?.decimals ?? 6;
  return {
    agent: r.agent,
    network: r.network,
    limits: r.limits.map((l) => ({
      currency: l.currency,
      per_call: l.perCall === null ? null : atomicToDecimal(l.perCall, decimals(l.currency)),
      daily: l.daily === null ? null : atomicToDecimal(l.daily, decimals(l.currency)),
    })),
    allowed_sellers: r.allowedSellers,
    allowed_domains: r.allowedDomains,
    min_identity_verdict: r.minIdentityVerdict,
    updated_at: r.updatedAt.toISOString(),
  };
}
