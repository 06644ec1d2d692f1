import type { Check, Identity, Verdict, VerifyInput } from './schema.ts';

// DECISIONS "Identity": POST /v1/identity/verify judges an agent with named rules, each a pure function of
// what the gateway knows (the facts below), each tested on its own (test/domain/identity-checks.test.ts).
//
// Verdict rules:
// - every check has a severity: `deny` (the agent cannot be trusted for the call) or `warn` (worth a second look);
// - a failed `deny` check → verdict deny; else a failed `warn` check → warn; else allow;
// - the caller's thresholds (min_rating, min_settled_calls, require_verified_domain) are its own minimums: not met →
//   deny; without a threshold, a missing handle or verified domain, an absent asset, an undeclared capability or a
//   registration document that cannot be read back warn; an intent the agent does not fit warns (pay, hire) or denies
//   (delegate: authority over funds);
// - score = the weighted share of checks passed, 0–100 (deny checks weigh 3, warn checks 1), rounded down.

/** What a verification knows about the agent it judges. */
export interface VerifyFacts {
  /** the identity read (null: no agent recorded under the mint/handle/domain asked) */
  identity: Identity | null;
  /** the asset account on the ledger: absent, a live Core asset, or an account that is no longer one (burned/closed) */
  asset: 'absent' | 'live' | 'not_core';
  /** the agent's paid endpoints (enabled payment links) */
  paidEndpoints: number;
}

export type Severity = 'deny' | 'warn';

export interface Rule {
  name: string;
  /** null: the rule does not apply to this request (e.g. no capability asked) */
  run(facts: VerifyFacts, input: VerifyInputParsed): { ok: boolean; detail: string; severity: Severity } | null;
}

export type VerifyInputParsed = Pick<VerifyInput, 'capability' | 'thresholds' | 'intent'>;

const pass = (detail: string, severity: Severity) => ({ ok: true, detail, severity });
const fail = (detail: string, severity: Severity) => ({ ok: false, detail, severity });

export const agentRecorded: Rule = {
  name: 'agent_recorded',
  run: ({ identity }) =>
    identity
      ? pass(`agent ${identity.mint} is recorded on ${identity.network}`, 'deny')
      : fail('no agent is recorded under this mint, handle or domain', 'deny'),
};

export const assetOnLedger: Rule = {
  name: 'asset_on_ledger',
  run: ({ identity, asset }) => {
    if (!identity) return null;
    return asset === 'absent' ? fail(`the ledger holds no account at ${identity.mint}`, 'warn') : pass(`the ledger holds the asset ${identity.mint}`, 'warn');
  },
};

export const notDisabled: Rule = {
  name: 'not_disabled',
  run: ({ identity, asset }) => {
    if (!identity) return null;
    return asset === 'not_core'
      ? fail(`the account at ${identity.mint} is no longer a Metaplex Core asset (burned or replaced)`, 'deny')
      : pass('the asset is not burned or replaced', 'deny');
  },
};

export const handleSet: Rule = {
  name: 'handle_set',
  run: ({ identity }) => {
    if (!identity) return null;
    return identity.profile.handle ? pass(`handle @${identity.profile.handle}`, 'warn') : fail('the agent has no handle', 'warn');
  },
};

export const domainVerified: Rule = {
  name: 'domain_verified',
  run: ({ identity }, input) => {
    if (!identity) return null;
    const severity: Severity = input.thresholds?.require_verified_domain ? 'deny' : 'warn';
    const first = identity.domains[0];
    return first ? pass(`verified domain ${first.domain}`, severity) : fail('the agent has verified no domain', severity);
  },
};

/** Where the agent declares a capability: a public capability card, else its profile's list; null when it does not. */
export function declaration(identity: Identity, capability: string): string | null {
  const card = identity.capability_cards.find((c) => c.public && c.capability === capability);
  if (card) return `capability card ${card.id}`;
  return identity.profile.capabilities.includes(capability) ? 'its profile' : null;
}

export const capabilityDeclared: Rule = {
  name: 'capability_declared',
  run: ({ identity }, input) => {
    if (!identity || input.capability === undefined) return null;
    const where = declaration(identity, input.capability);
    return where ? pass(`the agent declares ${input.capability} (${where})`, 'warn') : fail(`the agent does not declare ${input.capability}`, 'warn');
  },
};

/** The agent's registration document, read back: missing, unreachable or not registration-v1 warns. */
export const registrationValid: Rule = {
  name: 'registration',
  run: ({ identity }) => {
    const r = identity?.registration;
    if (!r) return null;
    return r.ok ? pass(r.detail, 'warn') : fail(r.detail, 'warn');
  },
};

/**
 * The caller's intent against what the agent declares:
 * - `pay`: the agent sells at least one paid endpoint (an enabled payment link) — else warn;
 * - `hire`: it declares the capability asked, or any public capability (card or profile) when none is asked — else warn;
 * - `delegate` (authority over funds): a live Core asset on the ledger and a verified domain — else deny.
 */
export const intentCompatible: Rule = {
  name: 'intent',
  run: ({ identity, asset, paidEndpoints }, input) => {
    if (!identity || input.intent === undefined) return null;
    if (input.intent === 'pay') {
      return paidEndpoints > 0
        ? pass(`pay: the agent sells ${paidEndpoints} paid endpoint${paidEndpoints === 1 ? '' : 's'}`, 'warn')
        : fail('pay: the agent sells no paid endpoint (no enabled payment link)', 'warn');
    }
    if (input.intent === 'hire') {
      if (input.capability !== undefined) {
        return declaration(identity, input.capability)
          ? pass(`hire: the agent declares ${input.capability}`, 'warn')
          : fail(`hire: the agent does not declare ${input.capability}`, 'warn');
      }
      const any = identity.capability_cards.some((c) => c.public) || identity.profile.capabilities.length > 0;
      return any ? pass('hire: the agent declares capabilities', 'warn') : fail('hire: the agent declares no capability', 'warn');
    }
    if (asset !== 'live') return fail('delegate: the agent’s asset is not a live Core asset on the ledger', 'deny');
    if (!identity.domains[0]) return fail('delegate: authority over funds needs a verified domain', 'deny');
    return pass(`delegate: a live asset and the verified domain ${identity.domains[0].domain}`, 'deny');
  },
};

export const ratingAboveThreshold: Rule = {
  name: 'rating',
  run: ({ identity }, input) => {
    const min = input.thresholds?.min_rating;
    if (!identity || min === undefined) return null;
    const rating = identity.reputation.rating;
    if (rating === null) return fail(`no settled call yet to rate (min_rating ${min})`, 'deny');
    return rating >= min ? pass(`rating ${rating} ≥ ${min}`, 'deny') : fail(`rating ${rating} < ${min}`, 'deny');
  },
};

export const volumeAboveThreshold: Rule = {
  name: 'settled_calls',
  run: ({ identity }, input) => {
    const min = input.thresholds?.min_settled_calls;
    if (!identity || min === undefined) return null;
    const n = identity.reputation.settled_calls;
    return n >= min ? pass(`${n} settled calls ≥ ${min}`, 'deny') : fail(`${n} settled calls < ${min}`, 'deny');
  },
};

/** In the order they are reported. */
export const RULES: readonly Rule[] = [
  agentRecorded,
  assetOnLedger,
  notDisabled,
  handleSet,
  domainVerified,
  capabilityDeclared,
  registrationValid,
  intentCompatible,
  ratingAboveThreshold,
  volumeAboveThreshold,
];

const WEIGHT: Record<Severity, number> = { deny: 3, warn: 1 };

/** Runs every rule that applies and derives the verdict and score (rules above). */
export function judge(facts: VerifyFacts, input: VerifyInputParsed): { verdict: Verdict; score: number; checks: Check[] } {
  const results = RULES.flatMap((rule) => {
    const r = rule.run(facts, input);
    return r ? [{ name: rule.name, ...r }] : [];
  });
  const failed = (s: Severity) => results.some((r) => !r.ok && r.severity === s);
  const verdict: Verdict = failed('deny') ? 'deny' : failed('warn') ? 'warn' : 'allow';
  const total = results.reduce((sum, r) => sum + WEIGHT[r.severity], 0);
  const passed = results.reduce((sum, r) => sum + (r.ok ? WEIGHT[r.severity] : 0), 0);
  const score = total === 0 ? 0 : Math.floor((passed * 100) / total);
  return { verdict, score, checks: results.map(({ name, ok, detail }) => ({ name, ok, detail })) };
}
