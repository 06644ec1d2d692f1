import test from 'ava';
import {
  agentRecorded,
  assetOnLedger,
  capabilityDeclared,
  domainVerified,
  handleSet,
  intentCompatible,
  judge,
  registrationValid,
  notDisabled,
  ratingAboveThreshold,
  volumeAboveThreshold,
  type VerifyFacts,
} from '../../domain/identity/checks.ts';
import { summarize } from '../../domain/identity/service.ts';
import { buildRegistration, isOwnRegistrationUrl, REGISTRATION_TYPE, RegistrationV1, registrationUrl } from '../../domain/identity/registration.ts';
import type { Identity } from '../../domain/identity/schema.ts';

// Each verify rule on its own, then the verdict and score rules of domain/identity/checks.ts.

function identity(overrides: Partial<Identity> = {}): Identity {
  return {
    mint: 'Mint1111111111111111111111111111111111111111',
    network: 'chain-devnet',
    owner: 'Owner111111111111111111111111111111111111111',
    name: null,
    profile: { handle: null, display_name: null, description: null, image: null, capabilities: [], updated_at: null },
    domains: [],
    claims: [],
    capability_cards: [],
    reputation: { settled_calls: 0, rating: null, volume: [], last_settled_at: null },
    registration: null,
    ...overrides,
  };
}

const facts = (i: Identity | null, asset: VerifyFacts['asset'] = 'live', paidEndpoints = 0): VerifyFacts => ({ identity: i, asset, paidEndpoints });
const card = (capability: string, isPublic = true): Identity['capability_cards'][number] => ({
  id: `cap_${capability}`,
  mint: identity().mint,
  capability,
  title: null,
  description: null,
  endpoint: null,
  tags: [],
  public: isPublic,
  created_at: '2026-01-01T00:00:00.000Z',
  updated_at: '2026-01-01T00:00:00.000Z',
});
const verifiedDomain = [{ domain: 'a.example', verified_at: '2026-01-01T00:00:00.000Z' }];
const withProfile = (p: Partial<Identity['profile']>) => identity({ profile: { ...identity().profile, ...p } });
const withReputation = (r: Partial<Identity['reputation']>) => identity({ reputation: { ...identity().reputation, ...r } });

test('agent_recorded: deny severity; fails without an agent', (t) => {
  t.like(agentRecorded.run(facts(null), {}), { ok: false, severity: 'deny' });
  t.like(agentRecorded.run(facts(identity()), {}), { ok: true, severity: 'deny' });
});

test('asset_on_ledger: warn; fails when the ledger holds no account; skipped without an agent', (t) => {
  t.is(assetOnLedger.run(facts(null), {}), null);
  t.like(assetOnLedger.run(facts(identity(), 'absent'), {}), { ok: false, severity: 'warn' });
  t.like(assetOnLedger.run(facts(identity(), 'live'), {}), { ok: true });
  t.like(assetOnLedger.run(facts(identity(), 'not_core'), {}), { ok: true });
});

test('not_disabled: deny; fails only when the account is no longer a Core asset', (t) => {
  t.like(notDisabled.run(facts(identity(), 'not_core'), {}), { ok: false, severity: 'deny' });
  t.like(notDisabled.run(facts(identity(), 'absent'), {}), { ok: true });
  t.like(notDisabled.run(facts(identity(), 'live'), {}), { ok: true });
});

test('handle_set: warn; passes with a handle', (t) => {
  t.like(handleSet.run(facts(identity()), {}), { ok: false, severity: 'warn' });
  t.like(handleSet.run(facts(withProfile({ handle: 'weather' })), {}), { ok: true, detail: 'handle @weather' });
});

test('domain_verified: warn, deny when require_verified_domain', (t) => {
  t.like(domainVerified.run(facts(identity()), {}), { ok: false, severity: 'warn' });
  t.like(domainVerified.run(facts(identity()), { thresholds: { require_verified_domain: true } }), { ok: false, severity: 'deny' });
  t.like(domainVerified.run(facts(identity({ domains: [{ domain: 'a.example', verified_at: '2026-01-01T00:00:00.000Z' }] })), {}), { ok: true });
});

test('capability_declared: only when a capability is asked; warn', (t) => {
  t.is(capabilityDeclared.run(facts(identity()), {}), null);
  t.like(capabilityDeclared.run(facts(identity()), { capability: 'x.y' }), { ok: false, severity: 'warn' });
  t.like(capabilityDeclared.run(facts(withProfile({ capabilities: ['x.y'] })), { capability: 'x.y' }), { ok: true });
});

test('capability_declared: a public capability card declares it; a private card does not', (t) => {
  t.like(capabilityDeclared.run(facts(identity({ capability_cards: [card('x.y')] })), { capability: 'x.y' }), {
    ok: true,
    detail: 'the agent declares x.y (capability card cap_x.y)',
  });
  t.like(capabilityDeclared.run(facts(identity({ capability_cards: [card('x.y', false)] })), { capability: 'x.y' }), { ok: false });
  t.like(capabilityDeclared.run(facts(identity({ capability_cards: [card('x.z')] })), { capability: 'x.y' }), { ok: false });
});

test('registration: only when read back; warn; fails with the read-back detail', (t) => {
  t.is(registrationValid.run(facts(identity()), {}), null);
  t.is(registrationValid.run(facts(null), {}), null);
  const bad = {
    uri: 'https://a.example/r.json',
    hosted: false,
    ok: false,
    detail: 'the document at https://a.example/r.json is not registration-v1: type: Invalid input',
  };
  t.deepEqual(registrationValid.run(facts(identity({ registration: bad })), {}), { ok: false, detail: bad.detail, severity: 'warn' });
  t.like(registrationValid.run(facts(identity({ registration: { ...bad, ok: true, detail: 'fine' } })), {}), { ok: true, severity: 'warn' });
});

test('intent pay: warn; passes when the agent sells a paid endpoint', (t) => {
  t.is(intentCompatible.run(facts(identity()), {}), null);
  t.is(intentCompatible.run(facts(null), { intent: 'pay' }), null);
  t.like(intentCompatible.run(facts(identity(), 'live', 0), { intent: 'pay' }), { ok: false, severity: 'warn' });
  t.like(intentCompatible.run(facts(identity(), 'live', 2), { intent: 'pay' }), {
    ok: true,
    severity: 'warn',
    detail: 'pay: the agent sells 2 paid endpoints',
  });
});

test('intent hire: warn; the asked capability must be declared, else any public capability', (t) => {
  t.like(intentCompatible.run(facts(identity()), { intent: 'hire' }), { ok: false, severity: 'warn' });
  t.like(intentCompatible.run(facts(identity({ capability_cards: [card('a.b', false)] })), { intent: 'hire' }), { ok: false });
  t.like(intentCompatible.run(facts(identity({ capability_cards: [card('a.b')] })), { intent: 'hire' }), { ok: true });
  t.like(intentCompatible.run(facts(withProfile({ capabilities: ['c.d'] })), { intent: 'hire' }), { ok: true });
  t.like(intentCompatible.run(facts(identity({ capability_cards: [card('a.b')] })), { intent: 'hire', capability: 'x.y' }), { ok: false });
  t.like(intentCompatible.run(facts(identity({ capability_cards: [card('x.y')] })), { intent: 'hire', capability: 'x.y' }), { ok: true });
});

test('intent delegate: deny; needs a live Core asset and a verified domain', (t) => {
  t.like(intentCompatible.run(facts(identity({ domains: verifiedDomain }), 'absent'), { intent: 'delegate' }), { ok: false, severity: 'deny' });
  t.like(intentCompatible.run(facts(identity({ domains: verifiedDomain }), 'not_core'), { intent: 'delegate' }), { ok: false, severity: 'deny' });
  t.like(intentCompatible.run(facts(identity(), 'live'), { intent: 'delegate' }), { ok: false, severity: 'deny' });
  t.like(intentCompatible.run(facts(identity({ domains: verifiedDomain }), 'live'), { intent: 'delegate' }), { ok: true, severity: 'deny' });
  // the verdict: a failed delegate intent denies an agent that is otherwise allowed
  const full = identity({ profile: { ...identity().profile, handle: 'h' }, domains: verifiedDomain });
  t.like(judge(facts(full, 'live'), { intent: 'delegate' }), { verdict: 'allow', score: 100 });
  t.like(judge(facts(identity({ profile: full.profile }), 'live'), { intent: 'delegate' }), { verdict: 'deny' });
  t.like(judge(facts(full, 'live', 0), { intent: 'pay' }), { verdict: 'warn' });
});

test('rating: only with min_rating; deny; no calls fails; equal passes', (t) => {
  t.is(ratingAboveThreshold.run(facts(identity()), {}), null);
  t.like(ratingAboveThreshold.run(facts(identity()), { thresholds: { min_rating: 1 } }), { ok: false, severity: 'deny' });
  t.like(ratingAboveThreshold.run(facts(withReputation({ settled_calls: 2, rating: 4 })), { thresholds: { min_rating: 4 } }), { ok: true });
  t.like(ratingAboveThreshold.run(facts(withReputation({ settled_calls: 2, rating: 3.9 })), { thresholds: { min_rating: 4 } }), { ok: false });
});

test('settled_calls: only with min_settled_calls; deny', (t) => {
  t.is(volumeAboveThreshold.run(facts(identity()), {}), null);
  t.like(volumeAboveThreshold.run(facts(withReputation({ settled_calls: 2 })), { thresholds: { min_settled_calls: 3 } }), { ok: false, severity: 'deny' });
  t.like(volumeAboveThreshold.run(facts(withReputation({ settled_calls: 3 })), { thresholds: { min_settled_calls: 3 } }), { ok: true });
});

test('judge: allow when all pass, warn on a failed warn check, deny on a failed deny check; score weighs deny 3, warn 1', (t) => {
  const full = identity({
    profile: { ...identity().profile, handle: 'h' },
    domains: [{ domain: 'a.example', verified_at: '2026-01-01T00:00:00.000Z' }],
  });
  t.like(judge(facts(full), {}), { verdict: 'allow', score: 100 });
  // handle missing: warn, (3+3+1+1)/(3+1+3+1+1) = 8/9
  t.like(judge(facts(identity({ domains: full.domains })), {}), { verdict: 'warn', score: 88 });
  t.like(judge(facts(full, 'not_core'), {}), { verdict: 'deny' });
  t.deepEqual(judge(facts(null), {}), {
    verdict: 'deny',
    score: 0,
    checks: [{ name: 'agent_recorded', ok: false, detail: 'no agent is recorded under this mint, handle or domain' }],
  });
});

test('summarize: rating is 5 × the 2xx share with one decimal, volume per currency, latest settlement', (t) => {
  t.deepEqual(summarize([]), { settled_calls: 0, rating: null, volume: [], last_settled_at: null });
  const s = summarize([
    { currency: 'USDC', asset: 'A', calls: 2, okCalls: 2, amountAtomic: 20n, lastAt: new Date('2026-01-02T00:00:00Z') },
    { currency: 'USDT', asset: 'B', calls: 1, okCalls: 0, amountAtomic: 5n, lastAt: new Date('2026-01-03T00:00:00Z') },
  ]);
  t.deepEqual(s, {
    settled_calls: 3,
    rating: 3.3,
    volume: [
      { currency: 'USDC', asset: 'A', amount_atomic: '20', calls: 2 },
      { currency: 'USDT', asset: 'B', amount_atomic: '5', calls: 1 },
    ],
    last_settled_at: '2026-01-03T00:00:00.000Z',
  });
});

// ── registration-v1 (fee-facilitator-mpp-tools §2.7) ────────────────────────────────────────────────────────────────

const minimal = { type: REGISTRATION_TYPE, name: 'n', description: 'd', image: '' };

test('RegistrationV1: the type constant and name, description, image are required; no extra property at any level', (t) => {
  t.true(RegistrationV1.safeParse(minimal).success);
  t.false(RegistrationV1.safeParse({ ...minimal, type: 'https://eips.ethereum.org/EIPS/eip-8004#registration-v2' }).success);
  for (const field of ['name', 'description', 'image'] as const) {
    const { [field]: _dropped, ...rest } = minimal;
    t.false(RegistrationV1.safeParse(rest).success, field);
  }
  t.false(RegistrationV1.safeParse({ ...minimal, x402support: true }).success, 'a root property §2.7 does not list');
  t.true(RegistrationV1.safeParse({ ...minimal, services: [{ name: 'a', endpoint: 'b', version: '1', skills: [{ any: 1 }], domains: ['x'] }] }).success);
  t.false(RegistrationV1.safeParse({ ...minimal, services: [{ name: 'a' }] }).success, 'a service needs its endpoint');
  t.false(RegistrationV1.safeParse({ ...minimal, services: [{ name: 'a', endpoint: 'b', extra: 1 }] }).success);
  t.false(RegistrationV1.safeParse({ ...minimal, registrations: [{ agentId: 'a' }] }).success, 'a registration needs its agentRegistry');
  t.false(RegistrationV1.safeParse({ ...minimal, registrations: [{ agentId: 'a', agentRegistry: 'r', extra: 1 }] }).success);
  t.true(RegistrationV1.safeParse({ ...minimal, active: false, supportedTrust: ['reputation'] }).success);
  t.false(RegistrationV1.safeParse({ ...minimal, active: 'yes' }).success);
});

test('RegistrationV1 svc block: v 0.1, rulesUri a URI or ipfs://…, receiptsFeed, anchor required; killSwitch optional; strict', (t) => {
  const svc = { v: '0.1', rulesUri: 'ipfs://bafy', receiptsFeed: 'https://gw.example/v1/receipts/a', anchor: { program: 'p', merkleAccount: 'm' } };
  t.true(RegistrationV1.safeParse({ ...minimal, svc }).success);
  t.true(
    RegistrationV1.safeParse({
      ...minimal,
      svc: { ...svc, rulesUri: 'https://example.com/rules', killSwitch: { onchain: 'x', endpoint: 'https://k.example' } },
    }).success,
  );
  t.false(RegistrationV1.safeParse({ ...minimal, svc: { ...svc, v: '0.2' } }).success);
  t.false(RegistrationV1.safeParse({ ...minimal, svc: { ...svc, rulesUri: 'rules.json' } }).success, 'neither a URI nor ipfs://…');
  t.false(RegistrationV1.safeParse({ ...minimal, svc: { ...svc, anchor: { program: 'p' } } }).success);
  t.false(RegistrationV1.safeParse({ ...minimal, svc: { ...svc, killSwitch: { endpoint: 'not a uri' } } }).success);
  t.false(RegistrationV1.safeParse({ ...minimal, svc: { ...svc, extra: 1 } }).success);
});

test('buildRegistration: paid services (x402 or mpp, by the link’s rail) carry the skills and domains, each verified domain is a web service, listed services, receipts, registry', (t) => {
  const doc = buildRegistration({
    network: 'chain-mainnet',
    mint: 'Mint1111111111111111111111111111111111111111',
    name: 'Agent',
    description: '',
    image: '',
    paidEndpoints: [
      { endpoint: 'https://gw.example/x/a', protocol: 'x402' },
      { endpoint: 'https://gw.example/x/m', protocol: 'mpp' },
    ],
    listed: [{ name: 'A2A', endpoint: 'https://agent.example/a2a' }],
    domains: ['agent.example'],
    skills: ['weather.forecast'],
    receiptsUrl: 'https://gw.example/v1/receipts/Mint1111111111111111111111111111111111111111',
  });
  t.deepEqual(doc.services, [
    { name: 'x402', endpoint: 'https://gw.example/x/a', skills: ['weather.forecast'], domains: ['agent.example'] },
    { name: 'mpp', endpoint: 'https://gw.example/x/m', skills: ['weather.forecast'], domains: ['agent.example'] },
    { name: 'web', endpoint: 'https://agent.example/' },
    { name: 'A2A', endpoint: 'https://agent.example/a2a' },
    { name: 'receipts', endpoint: 'https://gw.example/v1/receipts/Mint1111111111111111111111111111111111111111' },
  ]);
  t.deepEqual(doc.registrations, [
    {
      agentId: 'Mint1111111111111111111111111111111111111111',
      agentRegistry: 'solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp:1DREGFgysWYxLnRnKQnwrxnJQeSMk2HmGaC6whw2B2p',
    },
  ]);
  t.true(doc.active);
  // the URL names devnet (mainnet is the route's default, as the paywall's share URLs)
  t.is(registrationUrl('https://gw.example', 'chain-mainnet', 'M'), 'https://gw.example/v1/agents/M/registration.json');
  t.is(registrationUrl('https://gw.example', 'chain-devnet', 'M'), 'https://gw.example/v1/agents/M/registration.json?network=chain-devnet');
});

test('isOwnRegistrationUrl: the gateway’s URL of this agent on this network, however the network is spelt; nothing else', (t) => {
  const base = 'https://gw.example';
  t.true(isOwnRegistrationUrl('https://gw.example/v1/agents/M/registration.json', base, 'chain-mainnet', 'M'));
  t.true(isOwnRegistrationUrl('https://gw.example/v1/agents/M/registration.json?network=chain-mainnet', base, 'chain-mainnet', 'M'));
  t.true(isOwnRegistrationUrl('https://GW.example:443/v1/agents/M/registration.json?network=chain-devnet', base, 'chain-devnet', 'M'));
  t.false(isOwnRegistrationUrl('https://gw.example/v1/agents/M/registration.json', base, 'chain-devnet', 'M'), 'a devnet agent’s URL names devnet');
  t.false(isOwnRegistrationUrl('https://gw.example/v1/agents/N/registration.json', base, 'chain-mainnet', 'M'), 'another agent');
  t.false(isOwnRegistrationUrl('https://other.example/v1/agents/M/registration.json', base, 'chain-mainnet', 'M'));
  t.false(isOwnRegistrationUrl('https://gw.example/v1/agents/M/registration.json?network=chain-mainnet&x=1', base, 'chain-mainnet', 'M'));
  t.false(isOwnRegistrationUrl('not a url', base, 'chain-mainnet', 'M'));
});
