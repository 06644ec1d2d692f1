import { atomicToDecimal } from '../shared/money.ts';
import type { StableSymbol } from '../shared/network.ts';
import { VERDICT_RANK, type Quote, type QuoteOption, type RuleResult, type SpendPolicyRecord } from './schema.ts';

// A buyer agent's spend policy, one named pure function per rule. Each answers a RuleResult (ok and why);
// evaluate() runs them all over each payable option and allows the first option every rule passes. No I/O: the
// service reads the policy, the day's spend and the quote, then asks these.

/** What the rules read besides the policy. */
export interface RuleFacts {
  quote: Quote;
  option: QuoteOption;
  /** gross atomic the agent already spent today, per stable symbol */
  spentToday: Partial<Record<StableSymbol, bigint>>;
  /** gross atomic of the agent's payments prepared or submitted and not landed yet (they may still land today) */
  inFlight?: Partial<Record<StableSymbol, bigint>>;
}

export type Rule = (policy: SpendPolicyRecord, facts: RuleFacts) => RuleResult;

const result = (rule: string, ok: boolean, detail: string, currency: StableSymbol | null = null): RuleResult => ({ rule, ok, detail, currency });
const show = (atomic: bigint, option: QuoteOption) =>
  option.decimals === null ? `${atomic} atomic` : `${atomicToDecimal(atomic, option.decimals)} ${option.currency}`;
const limitOf = (policy: SpendPolicyRecord, currency: StableSymbol | null) => (currency ? policy.limits.find((l) => l.currency === currency) : undefined);

/** The option's gross (net + fee) is at most the per-call maximum of its stable. */
export const perCallMax: Rule = (policy, { option }) => {
  const limit = limitOf(policy, option.currency)?.perCall ?? null;
  if (limit === null) return result('per_call_max', true, `No per-call maximum for ${option.currency ?? option.asset}.`, option.currency);
  const gross = BigInt(option.gross_atomic);
  return gross <= limit
    ? result('per_call_max', true, `The call costs ${show(gross, option)}, within the per-call maximum of ${show(limit, option)}.`, option.currency)
    : result('per_call_max', false, `The call costs ${show(gross, option)}, above the per-call maximum of ${show(limit, option)}.`, option.currency);
};

/** Today's spend in the option's stable plus this call's gross stays within the daily cap. */
export const dailyCap: Rule = (policy, { option, spentToday, inFlight = {} }) => {
  const cap = limitOf(policy, option.currency)?.daily ?? null;
  if (cap === null || option.currency === null) return result('daily_cap', true, `No daily cap for ${option.currency ?? option.asset}.`, option.currency);
  const flying = inFlight[option.currency] ?? 0n;
  const spent = (spentToday[option.currency] ?? 0n) + flying;
  const after = spent + BigInt(option.gross_atomic);
  const pending = flying > 0n ? ` (${show(flying, option)} of it in payments not landed yet)` : '';
  return after <= cap
    ? result(
        'daily_cap',
        true,
        `Spent ${show(spent, option)} today${pending}; with this call ${show(after, option)}, within the daily cap of ${show(cap, option)}.`,
        option.currency,
      )
    : result(
        'daily_cap',
        false,
        `Spent ${show(spent, option)} today${pending}; this call would make ${show(after, option)}, above the daily cap of ${show(cap, option)}.`,
        option.currency,
      );
};

/** The seller — its agent mint, or the pay_to address — is on the allow-list. */
export const allowedSellers: Rule = (policy, { quote, option }) => {
  const list = policy.allowedSellers;
  if (list === null) return result('allowed_sellers', true, 'Any seller is allowed.');
  const agent = quote.seller.agent;
  if (agent !== null && list.includes(agent)) return result('allowed_sellers', true, `The seller agent ${agent} is allowed.`);
  if (list.includes(option.pay_to)) return result('allowed_sellers', true, `The pay_to ${option.pay_to} is allowed.`);
  return result('allowed_sellers', false, `The seller ${agent ?? option.pay_to} is not among the ${list.length} allowed sellers.`);
};

/** "api.example.com" matches itself; "*.example.com" matches its subdomains (not example.com itself). */
export function domainMatches(pattern: string, host: string): boolean {
  const h = host.toLowerCase();
  return pattern.startsWith('*.') ? h.endsWith(pattern.slice(1)) && h.length > pattern.length - 1 : h === pattern;
}

/** The host of the paid URL is on the allow-list. */
export const allowedDomains: Rule = (policy, { quote }) => {
  const list = policy.allowedDomains;
  if (list === null) return result('allowed_domains', true, 'Any domain is allowed.');
  if (quote.domain === null) return result('allowed_domains', false, 'The payment names no URL, and the policy allows listed domains only.');
  const domain = quote.domain;
  return list.some((p) => domainMatches(p, domain))
    ? result('allowed_domains', true, `The domain ${quote.domain} is allowed.`)
    : result('allowed_domains', false, `The domain ${quote.domain} is not among the allowed domains (${list.join(', ')}).`);
};

/** The seller agent's identity verdict is at least the policy's minimum; a seller with no agent here has none (deny). */
export const minIdentityVerdict: Rule = (policy, { quote }) => {
  const min = policy.minIdentityVerdict;
  if (min === null) return result('min_identity_verdict', true, 'No minimum identity verdict.');
  const verdict = quote.seller.identity?.verdict ?? 'deny';
  const why = quote.seller.identity ? `The seller's identity verdict is ${verdict}` : 'The seller is no agent known to this gateway (verdict deny)';
  return VERDICT_RANK[verdict] >= VERDICT_RANK[min]
    ? result('min_identity_verdict', true, `${why}, at least ${min}.`)
    : result('min_identity_verdict', false, `${why}, below the minimum ${min}.`);
};

/** Every rule, in the order the checks are reported. */
export const RULES: readonly Rule[] = [perCallMax, dailyCap, allowedSellers, allowedDomains, minIdentityVerdict];

export interface Decision {
  decision: 'allow' | 'deny';
  reasons: string[];
  checks: RuleResult[];
  option: QuoteOption | null;
}

/**
 * The policy (null: the agent has none — every rule passes, said so) over the quote's payable options (restricted to
 * `currency` when given): the first option every rule passes is allowed; else deny with the first option's failures.
 */
export function evaluate(
  policy: SpendPolicyRecord | null,
  quote: Quote,
  facts: { spentToday: RuleFacts['spentToday']; currency?: StableSymbol; inFlight?: NonNullable<RuleFacts['inFlight']> },
): Decision {
  const { spentToday, currency, inFlight = {} } = facts;
  const options = quote.options.filter((o) => o.payable && (currency === undefined || o.currency === currency));
  if (options.length === 0) {
    const detail = currency
      ? `The quote offers no option in ${currency} this gateway can pay on the caller's network.`
      : "The quote offers no option this gateway can pay on the caller's network (a curated stable, scheme exact).";
    const checks = [result('payable_option', false, detail, currency ?? null)];
    return { decision: 'deny', reasons: [detail], checks, option: null };
  }
  let first: Decision | null = null;
  for (const option of options) {
    const checks = policy
      ? RULES.map((rule) => rule(policy, { quote, option, spentToday, inFlight }))
      : [result('policy', true, 'The agent has no spend policy: nothing limits it.', option.currency)];
    const failed = checks.filter((c) => !c.ok);
    const d: Decision = { decision: failed.length === 0 ? 'allow' : 'deny', reasons: failed.map((c) => c.detail), checks, option };
    if (d.decision === 'allow') return d;
    first ??= d;
  }
  return first!;
}
