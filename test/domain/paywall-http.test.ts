import test from 'ava';
import { PaywallHttp } from '../../domain/paywall/http.ts';
import type { PaywallResult } from '../../domain/paywall/core.ts';
import type { OfferTerms } from '../../domain/paywall/offer.ts';
import type { PaymentLinkRecord } from '../../domain/payment-links/schema.ts';
import { CAIP2, findStable } from '../../domain/shared/network.ts';

// The paywall's HTTP layer is pure — status, headers and body from the core's result union — so it
// is tested without a server, a database or a ledger.

const USDC = findStable('chain-devnet', 'USDC')!;
const link = { network: 'chain-devnet', id: 'weather', metadata: {} } as unknown as PaymentLinkRecord;
const terms: OfferTerms = { feePayer: '9EsQZSEGNQdQmcqfS7ptk3hyng4s7miSDSdE8WfxTqrz', fee: null };
const accept = {
  scheme: 'exact',
  network: CAIP2['chain-devnet'],
  asset: USDC.mint,
  amount: '10000',
  payTo: 'J9EfyzFfaRjqxE4gDPGEUdJnTpQ9rxL7oW5rgZLLNEyW',
  maxTimeoutSeconds: 60,
  extra: { feePayer: terms.feePayer },
};
const NOW = Date.parse('2026-11-28T12:00:00Z');
const resource = { url: 'http://gw.example/x/weather?network=chain-devnet', description: 'Weather', mimeType: 'application/json' };

function unpaid(withTerms: OfferTerms | null, built: { n: number }, renewAt?: number): PaywallResult {
  return {
    kind: 'payment_required',
    link,
    terms: withTerms,
    reason: withTerms ? 'payment_required' : 'wrong_amount',
    message: 'pay',
    offer: () => {
      built.n++;
      return { accepts: [accept], resource, renewAt };
    },
  };
}

test('a 402: PAYMENT-REQUIRED carries the v2 offer, the body its v1 form with the reason and message', (t) => {
  const res = new PaywallHttp().render(unpaid(null, { n: 0 }), NOW);
  t.is(res.status, 402);
  t.is(res.headers['cache-control'], 'no-store');
  const v2 = JSON.parse(Buffer.from(res.headers['payment-required']!, 'base64').toString('utf8'));
  t.like(v2, { x402Version: 2, error: 'wrong_amount', resource, accepts: [accept] });
  const v1 = JSON.parse(Buffer.from(res.body).toString('utf8'));
  t.like(v1, { x402Version: 1, error: 'wrong_amount', message: 'pay' });
  t.is(v1.accepts[0].maxAmountRequired, '10000');
});

test('the unpaid 402 is rendered once per link record and terms; other terms or refusals are rendered each time', (t) => {
  const http = new PaywallHttp();
  const built = { n: 0 };
  const first = http.render(unpaid(terms, built), NOW);
  t.is(http.render(unpaid(terms, built), NOW), first, 'the same rendered answer');
  t.is(built.n, 1, 'the offer was built once');
  http.render(unpaid({ ...terms }, built), NOW);
  t.is(built.n, 2, 'new terms: rendered again');
  http.render(unpaid(null, built), NOW);
  http.render(unpaid(null, built), NOW);
  t.is(built.n, 4, 'a refusal is never cached');
});

test('an unpaid 402 carrying signed offers is served until its renewAt, then built again (offer-receipt validUntil)', (t) => {
  const http = new PaywallHttp();
  const built = { n: 0 };
  const first = http.render(unpaid(terms, built, NOW + 1000), NOW);
  t.is(http.renderedChallenge(link, terms, NOW + 999), first, 'fresh: the fast path serves it');
  t.is(http.render(unpaid(terms, built, NOW + 1000), NOW + 999), first);
  t.is(built.n, 1);
  t.is(http.renderedChallenge(link, terms, NOW + 1000), undefined, 'due: the fast path leaves it to handle');
  t.not(http.render(unpaid(terms, built, NOW + 2000), NOW + 1000), first, 'rendered again');
  t.is(built.n, 2);
});

test('a served response is sent as stored; a replay says so with X-Svc-Replayed', (t) => {
  const http = new PaywallHttp();
  const response = { status: 201, headers: { 'content-type': 'text/plain', 'payment-response': 'e30=' }, body: Buffer.from('hello').toString('base64') };
  const fresh = http.render({ kind: 'served', response, replayed: false }, NOW);
  t.is(fresh.status, 201);
  t.deepEqual(fresh.headers, response.headers);
  t.is(Buffer.from(fresh.body).toString('utf8'), 'hello');
  const again = http.render({ kind: 'served', response, replayed: true }, NOW);
  t.is(again.headers['x-svc-replayed'], 'true');
  t.false('x-svc-replayed' in response.headers, 'the stored response is not changed');
});
