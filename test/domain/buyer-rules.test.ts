import test from 'ava';
import { allowedDomains, allowedSellers, dailyCap, domainMatches, evaluate, minIdentityVerdict, perCallMax } from '../../domain/buyer/rules.ts';
import { optionOf, readChallenge } from '../../domain/buyer/challenge.ts';
import type { Quote, QuoteOption, SpendPolicyRecord } from '../../domain/buyer/schema.ts';
import { DomainError } from '../../domain/shared/errors.ts';
import { CAIP2, STABLES, X402_V1_NETWORK } from '../../domain/shared/network.ts';

// Each spend-policy rule is a named pure function, tested here one by one, and the 402 reader.

const USDC = STABLES['chain-devnet'][0]!;
const SELLER_AGENT = 'So11111111111111111111111111111111111111112';
const PAY_TO = 'Sysvar1111111111111111111111111111111111111';
const FEE_AUTH = 'Vote111111111111111111111111111111111111111';

function option(netAtomic: bigint, overrides: Partial<QuoteOption> = {}): QuoteOption {
  return {
    ...optionOf(
      {
        scheme: 'exact',
        network: CAIP2['chain-devnet'],
        asset: USDC.mint,
        amount: netAtomic.toString(),
        payTo: PAY_TO,
        maxTimeoutSeconds: 60,
        extra: { 'svc.fee': { v: '1', bps: 100, feeAuthority: FEE_AUTH } },
      },
      2,
      'chain-devnet',
    ),
    ...overrides,
  };
}

function quote(options: QuoteOption[], overrides: Partial<Quote> = {}): Quote {
  return {
    source: 'url',
    url: 'https://api.example.com/weather',
    method: 'GET',
    domain: 'api.example.com',
    payment_link: null,
    resource: null,
    options,
    seller: { pay_to: PAY_TO, agent: SELLER_AGENT, identity: { verdict: 'warn', score: 50, checks: [] } },
    quoted_at: '2026-11-24T00:00:00.000Z',
    ...overrides,
  };
}

function policy(overrides: Partial<SpendPolicyRecord> = {}): SpendPolicyRecord {
  return {
    network: 'chain-devnet',
    agent: SELLER_AGENT,
    limits: [],
    allowedSellers: null,
    allowedDomains: null,
    minIdentityVerdict: null,
    ownerPrincipal: 'key:x',
    updatedAt: new Date(0),
    ...overrides,
  };
}

test('optionOf: net, fee (ceil of bps) and gross as decimals and atomics; payable only on the caller network', (t) => {
  const o = option(1_000_001n);
  t.like(o, {
    kind: 'x402',
    currency: 'USDC',
    net: '1.000001',
    net_atomic: '1000001',
    fee_atomic: '10001',
    fee: '0.010001',
    gross_atomic: '1010002',
    gross: '1.010002',
    fee_bps: 100,
    fee_authority: FEE_AUTH,
    payable: true,
  });
  const other = optionOf(
    { scheme: 'exact', network: CAIP2['chain-devnet'], asset: USDC.mint, amount: '5', payTo: PAY_TO, maxTimeoutSeconds: 60, extra: {} },
    2,
    'chain-mainnet',
  );
  t.like(other, { payable: false, fee_atomic: '0', gross_atomic: '5', network: 'chain-devnet' });
  const unknownMint = optionOf(
    { scheme: 'exact', network: CAIP2['chain-devnet'], asset: FEE_AUTH, amount: '5', payTo: PAY_TO, maxTimeoutSeconds: 60, extra: {} },
    2,
    'chain-devnet',
  );
  t.like(unknownMint, { payable: false, currency: null, net: null, net_atomic: '5' });
});

test('perCallMax: gross within the stable limit passes, above fails; no limit for the stable passes', (t) => {
  const p = policy({ limits: [{ currency: 'USDC', perCall: 1_010_000n, daily: null }] });
  t.true(perCallMax(p, { quote: quote([]), option: option(1_000_000n), spentToday: {} }).ok, 'gross 1.01 = limit');
  const over = perCallMax(p, { quote: quote([]), option: option(1_000_001n), spentToday: {} });
  t.false(over.ok);
  t.regex(over.detail, /above the per-call maximum of 1\.01 USDC/);
  t.true(perCallMax(policy(), { quote: quote([]), option: option(10n ** 12n), spentToday: {} }).ok);
});

test('dailyCap: today’s spend plus this gross within the cap passes, beyond fails', (t) => {
  const p = policy({ limits: [{ currency: 'USDC', perCall: null, daily: 2_000_000n }] });
  const o = option(990_099n); // gross 1_000_000 (fee ceil(9900.99) = 9901)
  t.is(o.gross_atomic, '1000000');
  t.true(dailyCap(p, { quote: quote([]), option: o, spentToday: { USDC: 1_000_000n } }).ok);
  const over = dailyCap(p, { quote: quote([]), option: o, spentToday: { USDC: 1_000_001n } });
  t.false(over.ok);
  t.regex(over.detail, /Spent 1\.000001 USDC today; this call would make 2\.000001 USDC, above the daily cap of 2 USDC/);
  t.true(dailyCap(p, { quote: quote([]), option: o, spentToday: {} }).ok, 'nothing spent yet');
  // payments in flight count as spent
  const flying = dailyCap(p, { quote: quote([]), option: o, spentToday: { USDC: 500_000n }, inFlight: { USDC: 500_001n } });
  t.false(flying.ok);
  t.regex(flying.detail, /Spent 1\.000001 USDC today \(0\.500001 USDC of it in payments not landed yet\)/);
  t.true(dailyCap(p, { quote: quote([]), option: o, spentToday: { USDC: 500_000n }, inFlight: { USDC: 500_000n } }).ok);
});

test('allowedSellers: the seller agent or the pay_to on the list passes; anyone else fails; no list passes', (t) => {
  const o = option(1n);
  t.true(allowedSellers(policy({ allowedSellers: [SELLER_AGENT] }), { quote: quote([o]), option: o, spentToday: {} }).ok);
  t.true(
    allowedSellers(policy({ allowedSellers: [PAY_TO] }), {
      quote: quote([o], { seller: { pay_to: PAY_TO, agent: null, identity: null } }),
      option: o,
      spentToday: {},
    }).ok,
  );
  t.false(allowedSellers(policy({ allowedSellers: [FEE_AUTH] }), { quote: quote([o]), option: o, spentToday: {} }).ok);
  t.true(allowedSellers(policy(), { quote: quote([o]), option: o, spentToday: {} }).ok);
});

test('allowedDomains: exact hosts and *.subdomain patterns; a direct payment names no domain', (t) => {
  t.true(domainMatches('api.example.com', 'API.example.com'));
  t.true(domainMatches('*.example.com', 'api.example.com'));
  t.false(domainMatches('*.example.com', 'example.com'));
  t.false(domainMatches('*.example.com', 'evil-example.com'));
  const o = option(1n);
  t.true(allowedDomains(policy({ allowedDomains: ['*.example.com'] }), { quote: quote([o]), option: o, spentToday: {} }).ok);
  t.false(allowedDomains(policy({ allowedDomains: ['other.org'] }), { quote: quote([o]), option: o, spentToday: {} }).ok);
  t.false(allowedDomains(policy({ allowedDomains: ['other.org'] }), { quote: quote([o], { domain: null, url: null }), option: o, spentToday: {} }).ok);
  t.true(allowedDomains(policy(), { quote: quote([o]), option: o, spentToday: {} }).ok);
});

test('minIdentityVerdict: warn admits warn and allow; allow refuses warn; an unknown seller counts as deny', (t) => {
  const o = option(1n);
  const facts = (verdict: 'allow' | 'warn' | 'deny' | null) => ({
    quote: quote([o], { seller: { pay_to: PAY_TO, agent: verdict ? SELLER_AGENT : null, identity: verdict ? { verdict, score: 0, checks: [] } : null } }),
    option: o,
    spentToday: {},
  });
  t.true(minIdentityVerdict(policy({ minIdentityVerdict: 'warn' }), facts('warn')).ok);
  t.true(minIdentityVerdict(policy({ minIdentityVerdict: 'warn' }), facts('allow')).ok);
  t.false(minIdentityVerdict(policy({ minIdentityVerdict: 'warn' }), facts('deny')).ok);
  t.false(minIdentityVerdict(policy({ minIdentityVerdict: 'allow' }), facts('warn')).ok);
  const unknown = minIdentityVerdict(policy({ minIdentityVerdict: 'warn' }), facts(null));
  t.false(unknown.ok);
  t.regex(unknown.detail, /no agent known/);
});

test('evaluate: the first option every rule passes is chosen; deny lists every failed rule; no payable option denies', (t) => {
  const cheap = option(100n);
  const dear = option(5_000_000n);
  const p = policy({ limits: [{ currency: 'USDC', perCall: 1_000_000n, daily: null }], allowedDomains: ['api.example.com'] });
  const allowed = evaluate(p, quote([dear, cheap]), { spentToday: {} });
  t.is(allowed.decision, 'allow');
  t.is(allowed.option, cheap);
  t.deepEqual(allowed.reasons, []);
  t.deepEqual(
    allowed.checks.map((c) => c.rule),
    ['per_call_max', 'daily_cap', 'allowed_sellers', 'allowed_domains', 'min_identity_verdict'],
  );
  const denied = evaluate({ ...p, allowedDomains: ['other.org'] }, quote([dear]), { spentToday: {} });
  t.is(denied.decision, 'deny');
  t.deepEqual(
    denied.checks.filter((c) => !c.ok).map((c) => c.rule),
    ['per_call_max', 'allowed_domains'],
  );
  t.is(denied.reasons.length, 2);
  const none = evaluate(p, quote([{ ...cheap, payable: false }]), { spentToday: {} });
  t.like(none, { decision: 'deny', option: null });
  t.is(none.checks[0]!.rule, 'payable_option');
  const noPolicy = evaluate(null, quote([dear]), { spentToday: {} });
  t.like(noPolicy, { decision: 'allow', option: dear });
  t.is(noPolicy.checks[0]!.rule, 'policy');
});

test('readChallenge: v2 header first, v1 body otherwise; garbage is challenge_invalid', (t) => {
  const accept = {
    scheme: 'exact',
    network: CAIP2['chain-devnet'],
    asset: USDC.mint,
    amount: '10000',
    payTo: PAY_TO,
    maxTimeoutSeconds: 60,
    extra: { feePayer: FEE_AUTH },
  };
  const v2 = Buffer.from(JSON.stringify({ x402Version: 2, resource: { url: 'https://x/y', description: 'Weather' }, accepts: [accept] })).toString('base64');
  const c2 = readChallenge({ 'payment-required': v2 }, new Uint8Array());
  t.like(c2, { version: 2, resource: { url: 'https://x/y', description: 'Weather', mime_type: null } });
  t.is(c2.accepts[0]!.amount, '10000');
  const v1body = JSON.stringify({
    x402Version: 1,
    accepts: [
      {
        scheme: 'exact',
        network: X402_V1_NETWORK['chain-devnet'],
        maxAmountRequired: '20000',
        resource: 'https://x/z',
        description: '',
        mimeType: '',
        payTo: PAY_TO,
        maxTimeoutSeconds: 60,
        asset: USDC.mint,
        extra: {},
      },
    ],
  });
  const c1 = readChallenge({}, Buffer.from(v1body));
  t.like(c1, { version: 1, resource: { url: 'https://x/z', description: null } });
  t.is(c1.accepts[0]!.amount, '20000');
  t.is(optionOf(c1.accepts[0]!, 1, 'chain-devnet').network, 'chain-devnet');
  const bad = t.throws(() => readChallenge({ 'payment-required': 'not base64 json' }, Buffer.from('<html>')));
  t.true(bad instanceof DomainError);
  t.is((bad as DomainError).code, 'challenge_invalid');
  const empty = t.throws(() => readChallenge({}, Buffer.from(JSON.stringify({ x402Version: 1, accepts: [{ scheme: 'exact' }] }))));
  t.is((empty as DomainError).code, 'challenge_invalid');
});
