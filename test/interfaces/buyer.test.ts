import anyTest, { type TestFn } from 'ava';
import { createClient, errorCode } from '../../interfaces/client/index.ts';
import { STABLES } from '../../domain/shared/network.ts';
import { feeFor } from '../../domain/shared/money.ts';
import { http, issueKey, recordAgent, removeDataDir, startTestApp, type HttpResult } from '../support/app.ts';
import { buildReceipt } from '../support/receipts.ts';
import { createLink, startLocalServer, startPaywallApp, type PaywallWorld } from '../support/paywall.ts';

// hosted-api §4.8 "Buyer": the buyer routes on REST, tRPC and GraphQL against the real app — quotes of a
// payment link (resolved locally) and of URLs probed over HTTP on port 0 (x402 v2 and v1 challenges, and every way a
// URL can fail to be payable), spend policies owned per principal, their evaluation with the daily cap read from the
// spend rollup, networks/currency and GET /v1/seller/facilitator. The paid flow (execute → submit → finalize → verify)
// on the embedded ledger with the Metaplex Core program is in buyer-flow.test.ts.

const test = anyTest as TestFn<{ w: PaywallWorld; other: string }>;
const USDC = STABLES['chain-devnet'][0]!;

test.before(async (t) => {
  const w = await startPaywallApp();
  t.context = { w, other: await issueKey(w.app) };
});

/** `route` is "METHOD /path" */
const rest = (t: { context: { w: PaywallWorld } }, route: string, body?: unknown, key = t.context.w.key) => {
  const [method, path] = route.split(/ (.*)/s) as [string, string];
  return http(t.context.w.app, method, path, { key, ...(body === undefined ? {} : { body }) });
};
const gql = (t: { context: { w: PaywallWorld } }, query: string, variables?: Record<string, unknown>, key = t.context.w.key): Promise<HttpResult> =>
  http(t.context.w.app, 'POST', '/graphql', { key, body: { query, variables } });
const trpc = (t: { context: { w: PaywallWorld } }, key = t.context.w.key) => createClient({ url: t.context.w.app.url, apiKey: key });

const OPTION_FIELDS = 'kind x402Version scheme network currency asset payTo net netAtomic fee feeAtomic gross grossAtomic feeBps feeAuthority feePayer payable';

test('GET /v1/buyer/networks and /v1/buyer/currency on REST, tRPC and GraphQL: the one STABLES list, the key’s network current', async (t) => {
  const networks = await rest(t, 'GET /v1/buyer/networks');
  t.is(networks.status, 200, JSON.stringify(networks.body));
  const devnet = networks.body.data.find((n: { network: string }) => n.network === 'chain-devnet');
  t.like(devnet, { current: true, rails: ['x402', 'mpp'], caip2: 'solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1', x402_network: 'solana-devnet' });
  t.deepEqual(devnet.stables, [{ symbol: 'USDC', mint: USDC.mint, decimals: 6, token_program: 'spl', token_program_id: USDC.tokenProgramId }]);
  const mainnet = networks.body.data.find((n: { network: string }) => n.network === 'chain-mainnet');
  t.false(mainnet.current);
  t.deepEqual(
    mainnet.stables.map((s: { symbol: string }) => s.symbol),
    STABLES['chain-mainnet'].map((s) => s.symbol),
  );
  t.is(devnet.facilitator, t.context.w.app.services.settings.facilitatorUrl);
  // one catalogue: the seller side answers the same list
  const seller = await rest(t, 'GET /v1/seller/networks');
  t.deepEqual(seller.body, networks.body);

  const currency = await rest(t, 'GET /v1/buyer/currency');
  t.is(currency.status, 200);
  t.deepEqual(currency.body, { network: 'chain-devnet', data: devnet.stables, next_cursor: null, has_more: false });

  const client = trpc(t);
  t.deepEqual(await client.buyer.networks.query(), networks.body);
  t.deepEqual(await client.buyer.currency.query(), currency.body);

  const g = await gql(
    t,
    '{ buyerNetworks { network current rails facilitator stables { symbol mint decimals tokenProgram } } buyerCurrencies { network data { symbol mint } } }',
  );
  t.falsy(g.body.errors, JSON.stringify(g.body.errors));
  t.like(
    g.body.data.buyerNetworks.find((n: { network: string }) => n.network === 'CHAIN_DEVNET'),
    { current: true, rails: ['x402', 'mpp'], facilitator: devnet.facilitator },
  );
  t.deepEqual(g.body.data.buyerCurrencies, { network: 'CHAIN_DEVNET', data: [{ symbol: 'USDC', mint: USDC.mint }] });
});

test('GET /v1/seller/facilitator on REST, tRPC and GraphQL: its URL, fee payer per network and its /health', async (t) => {
  const { app } = t.context.w;
  const res = await rest(t, 'GET /v1/seller/facilitator');
  t.is(res.status, 200, JSON.stringify(res.body));
  const feePayer = app.services.facilitator!.feePayer;
  t.is(res.body.url, app.services.settings.facilitatorUrl);
  t.like(
    res.body.networks.find((n: { network: string }) => n.network === 'chain-devnet'),
    { fee_payer: feePayer, supported: true },
  );
  t.like(res.body.health, { ok: true, fee_payer: feePayer, protocol_fee: { bps: app.services.settings.fee.bps } });
  t.is(res.body.health_error, null);
  t.deepEqual(await trpc(t).seller.facilitator.query(), res.body);
  const g = await gql(t, '{ sellerFacilitator { url networks { network feePayer supported } health healthError } }');
  t.falsy(g.body.errors, JSON.stringify(g.body.errors));
  t.is(g.body.data.sellerFacilitator.url, res.body.url);
  t.like(
    g.body.data.sellerFacilitator.networks.find((n: { network: string }) => n.network === 'CHAIN_DEVNET'),
    { feePayer, supported: true },
  );
  t.like(g.body.data.sellerFacilitator.health, { ok: true });
});

test('quote a payment link on REST, tRPC and GraphQL: net, fee and gross per currency, the seller agent and its verdict', async (t) => {
  const { w } = t.context;
  const { link, agent, treasury } = await createLink(w, { price: '$0.01' });
  const bps = w.app.services.settings.fee.bps;
  const fee = feeFor(10_000n, bps);
  const res = await rest(t, 'POST /v1/buyer/quote', { payment_link: link.id });
  t.is(res.status, 200, JSON.stringify(res.body));
  t.like(res.body, { source: 'payment_link', payment_link: link.id, method: 'GET', url: link.share_url, domain: new URL(link.share_url).host });
  t.is(res.body.options.length, 1);
  t.like(res.body.options[0], {
    kind: 'x402',
    x402_version: 2,
    network: 'chain-devnet',
    currency: 'USDC',
    asset: USDC.mint,
    pay_to: treasury,
    net: '0.01',
    net_atomic: '10000',
    fee_atomic: fee.toString(),
    gross_atomic: (10_000n + fee).toString(),
    fee_bps: bps,
    fee_payer: w.app.services.facilitator!.feePayer,
    payable: true,
  });
  t.like(res.body.seller, { pay_to: treasury, agent });
  t.true(['allow', 'warn', 'deny'].includes(res.body.seller.identity.verdict));
  // the verdict is POST /v1/identity/verify's
  const verdict = await rest(t, 'POST /v1/identity/verify', { mint: agent });
  t.is(res.body.seller.identity.verdict, verdict.body.verdict);

  const viaTrpc = await trpc(t).buyer.quote.mutate({ payment_link: link.id });
  t.deepEqual({ ...viaTrpc, quoted_at: '' }, { ...res.body, quoted_at: '' });

  const g = await gql(
    t,
    `mutation($id: String) { buyerQuote(paymentLink: $id) { source paymentLink options { ${OPTION_FIELDS} } seller { agent payTo identity { verdict } } } }`,
    { id: link.id },
  );
  t.falsy(g.body.errors, JSON.stringify(g.body.errors));
  t.like(g.body.data.buyerQuote, { source: 'PAYMENT_LINK', paymentLink: link.id, seller: { agent, payTo: treasury } });
  t.like(g.body.data.buyerQuote.options[0], {
    net: '0.01',
    grossAtomic: (10_000n + fee).toString(),
    currency: 'USDC',
    kind: 'X402',
    network: 'CHAIN_DEVNET',
    payable: true,
  });

  // a URL of this gateway's own paywall is the same link, resolved locally (the gateway never calls itself)
  const own = await rest(t, 'POST /v1/buyer/quote', { url: link.share_url });
  t.is(own.status, 200, JSON.stringify(own.body));
  t.like(own.body, { source: 'url', payment_link: link.id });
  t.deepEqual(own.body.options, res.body.options);
});

test('quote a URL probed over HTTP: the real paywall’s 402 (v2 header and v1 body) served by a local server', async (t) => {
  const { w } = t.context;
  const { link, agent, treasury } = await createLink(w, { price: '$0.25' });
  // The paywall's own unpaid answer, replayed byte for byte by an allow-listed server (the gateway refuses to probe
  // its own port, so a seller elsewhere is a server elsewhere).
  const unpaid = await fetch(link.share_url);
  t.is(unpaid.status, 402);
  const header = unpaid.headers.get('payment-required')!;
  const body = await unpaid.text();
  const v2 = await startLocalServer(() => ({ status: 402, headers: { 'content-type': 'application/json', 'payment-required': header }, body }));
  const v1 = await startLocalServer(() => ({ status: 402, headers: { 'content-type': 'application/json' }, body }));
  t.teardown(() => Promise.all([v2.close(), v1.close()]));

  const q2 = await rest(t, 'POST /v1/buyer/quote', { url: `${v2.url}/weather?city=Paris` });
  t.is(q2.status, 200, JSON.stringify(q2.body));
  t.like(q2.body, { source: 'url', payment_link: null, domain: new URL(v2.url).host, resource: { url: link.share_url } });
  t.like(q2.body.options[0], { kind: 'x402', x402_version: 2, net: '0.25', pay_to: treasury, payable: true });
  t.like(q2.body.seller, { agent, pay_to: treasury });
  const received = await v2.waitFor(1);
  t.is(received.method, 'GET');
  t.is(received.url, '/weather?city=Paris');

  const q1 = await trpc(t).buyer.quote.mutate({ url: `${v1.url}/weather`, method: 'GET' });
  t.like(q1.options[0], { x402_version: 1, network: 'chain-devnet', net: '0.25', gross_atomic: q2.body.options[0].gross_atomic, payable: true });

  const g = await gql(t, `mutation($u: String) { buyerQuote(url: $u) { source options { x402Version net } seller { agent } } }`, { u: `${v1.url}/weather` });
  t.falsy(g.body.errors, JSON.stringify(g.body.errors));
  t.like(g.body.data.buyerQuote, { source: 'URL', options: [{ x402Version: 1, net: '0.25' }], seller: { agent } });
});

test('quote: not a 402, a malformed challenge, an unreachable or refused URL and an unknown link are clear 4xx, never 500', async (t) => {
  const ok = await startLocalServer(() => ({ status: 200, body: 'free' }));
  const garbage = await startLocalServer(() => ({ status: 402, headers: { 'payment-required': 'bm90IGpzb24=' }, body: '<html>pay me</html>' }));
  const closed = await startLocalServer();
  await closed.close();
  t.teardown(() => Promise.all([ok.close(), garbage.close()]));

  const notPayable = await rest(t, 'POST /v1/buyer/quote', { url: `${ok.url}/free` });
  t.is(notPayable.status, 422, JSON.stringify(notPayable.body));
  t.like(notPayable.body, { error: 'payment_not_required', details: { status: 200 } });
  t.truthy(notPayable.body.request_id);

  const malformed = await rest(t, 'POST /v1/buyer/quote', { url: `${garbage.url}/x` });
  t.is(malformed.status, 422);
  t.is(malformed.body.error, 'challenge_invalid');
  t.true(malformed.body.details.problems.length >= 2, JSON.stringify(malformed.body));

  const down = await rest(t, 'POST /v1/buyer/quote', { url: `${closed.url}/x` });
  t.is(down.status, 422, JSON.stringify(down.body));
  t.like(down.body, { error: 'quote_unreachable', details: { reason: 'network' } });

  const refused = await rest(t, 'POST /v1/buyer/quote', { url: 'http://10.1.2.3/pay' });
  t.is(refused.status, 400, JSON.stringify(refused.body));
  t.is(refused.body.error, 'invalid_request');
  t.is(refused.body.details.issues[0].code, 'url_refused');

  for (const body of [{}, { url: 'ftp://example.com/x' }, { url: 'https://example.com', payment_link: 'x' }]) {
    const bad = await rest(t, 'POST /v1/buyer/quote', body);
    t.is(bad.status, 400, JSON.stringify(body));
    t.is(bad.body.error, 'invalid_request');
  }
  // this gateway's own paywall URL with a malformed escape in the link id: 400, not a URIError's 500
  const badEscape = await rest(t, 'POST /v1/buyer/quote', { url: `${t.context.w.app.services.settings.baseUrl}/x/%zz` });
  t.is(badEscape.status, 400, JSON.stringify(badEscape.body));
  t.like(badEscape.body, { error: 'invalid_request', details: { path: 'url' } });
  const missing = await rest(t, 'POST /v1/buyer/quote', { payment_link: 'no-such-link' });
  t.is(missing.status, 404);
  t.is(missing.body.error, 'payment_link_not_found');

  // the same codes on tRPC and GraphQL
  const err = await trpc(t)
    .buyer.quote.mutate({ url: `${ok.url}/free` })
    .catch((e: unknown) => e);
  t.is(errorCode(err), 'payment_not_required');
  const g = await gql(t, 'mutation($u: String) { buyerQuote(url: $u) { source } }', { u: `${garbage.url}/x` });
  t.is(g.body.errors?.[0]?.extensions?.code, 'challenge_invalid');
});

test('spend policy: PUT and GET on REST, tRPC and GraphQL; owned by the agent’s principal (another gets 404)', async (t) => {
  const { w, other } = t.context;
  const { mint } = await recordAgent(w.app, w.key);
  const missing = await rest(t, `GET /v1/buyer/policy?agent=${mint}`);
  t.is(missing.status, 404);
  t.is(missing.body.error, 'not_found');

  const body = { agent: mint, limits: [{ currency: 'USDC', per_call: '0.50', daily: '2' }], allowed_domains: ['*.example.com'], min_identity_verdict: 'warn' };
  const put = await rest(t, 'PUT /v1/buyer/policy', body);
  t.is(put.status, 200, JSON.stringify(put.body));
  t.like(put.body, {
    agent: mint,
    network: 'chain-devnet',
    limits: [{ currency: 'USDC', per_call: '0.5', daily: '2' }],
    allowed_sellers: null,
    allowed_domains: ['*.example.com'],
    min_identity_verdict: 'warn',
  });
  const got = await rest(t, `GET /v1/buyer/policy?agent=${mint}`);
  t.deepEqual(got.body, put.body);
  t.deepEqual(await trpc(t).buyer.policy.query({ agent: mint }), put.body);

  // another principal: neither reads nor writes it, and cannot tell it exists
  const foreign = await rest(t, `GET /v1/buyer/policy?agent=${mint}`, undefined, other);
  t.is(foreign.status, 404);
  t.is(foreign.body.error, 'agent_not_found');
  const foreignPut = await rest(t, 'PUT /v1/buyer/policy', body, other);
  t.is(foreignPut.status, 404);
  t.is(foreignPut.body.error, 'agent_not_found');
  const foreignEval = await rest(t, 'POST /v1/buyer/policy/evaluate', { agent: mint, payment_link: 'x' }, other);
  t.is(foreignEval.status, 404);

  // bad input: a stable the network does not have, too many decimals, a duplicate currency, a bad verdict
  for (const bad of [
    { agent: mint, limits: [{ currency: 'USDT', per_call: '1' }] },
    { agent: mint, limits: [{ currency: 'USDC', per_call: '0.0000001' }] },
    { agent: mint, limits: [{ currency: 'USDC' }, { currency: 'USDC' }] },
    { agent: mint, min_identity_verdict: 'deny' },
    { agent: mint, allowed_domains: ['Not A Host'] },
  ]) {
    const res = await rest(t, 'PUT /v1/buyer/policy', bad);
    t.is(res.status, 400, JSON.stringify(bad));
    t.is(res.body.error, 'invalid_request');
  }

  const g = await gql(
    t,
    `mutation($input: SpendPolicyInput!) { setSpendPolicy(input: $input) { agent limits { currency perCall daily } allowedSellers minIdentityVerdict } }`,
    { input: { agent: mint, limits: [{ currency: 'USDC', perCall: '1.25' }], allowedSellers: [mint] } },
  );
  t.falsy(g.body.errors, JSON.stringify(g.body.errors));
  t.deepEqual(g.body.data.setSpendPolicy, {
    agent: mint,
    limits: [{ currency: 'USDC', perCall: '1.25', daily: null }],
    allowedSellers: [mint],
    minIdentityVerdict: null,
  });
  const read = await gql(t, 'query($a: String!) { spendPolicy(agent: $a) { limits { perCall } allowedDomains } }', { a: mint });
  t.deepEqual(read.body.data.spendPolicy, { limits: [{ perCall: '1.25' }], allowedDomains: null });
});

test('evaluate on REST, tRPC and GraphQL: each rule reported by name; the daily cap counts today’s spend receipts', async (t) => {
  const { w } = t.context;
  const buyer = await recordAgent(w.app, w.key);
  const { link, agent: seller } = await createLink(w, { price: '$1' });
  const bps = w.app.services.settings.fee.bps;
  const gross = 1_000_000n + feeFor(1_000_000n, bps);

  // no policy: allowed, and said so
  const free = await rest(t, 'POST /v1/buyer/policy/evaluate', { agent: buyer.mint, payment_link: link.id });
  t.is(free.status, 200, JSON.stringify(free.body));
  t.like(free.body, { decision: 'allow', reasons: [], checks: [{ rule: 'policy', ok: true }] });

  await rest(t, 'PUT /v1/buyer/policy', { agent: buyer.mint, limits: [{ currency: 'USDC', per_call: '2', daily: '3' }], allowed_sellers: [seller] });
  const allowed = await rest(t, 'POST /v1/buyer/policy/evaluate', { agent: buyer.mint, payment_link: link.id });
  t.like(allowed.body, { decision: 'allow', reasons: [], option: { currency: 'USDC', gross_atomic: gross.toString() }, spent_today: [], in_flight: [] });
  t.deepEqual(
    allowed.body.checks.map((c: { rule: string; ok: boolean }) => [c.rule, c.ok]),
    [
      ['per_call_max', true],
      ['daily_cap', true],
      ['allowed_sellers', true],
      ['allowed_domains', true],
      ['min_identity_verdict', true],
    ],
  );

  // Two spend receipts of today on the agent's chain (pushed): the rollup holds their gross; a third call breaks the cap.
  const now = new Date().toISOString();
  const spend = (nonce: number, prev: string | null) =>
    buildReceipt(buyer.mint, prev ? { nonce: nonce - 1, receiptHash: prev } : null, {
      kind: 'spend',
      ts: now,
      price: {
        amount: '1',
        currency: 'USDC',
        asset: USDC.mint,
        network: 'solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1',
        amount_atomic: '1000000',
        fee: '10000',
        gross: '1010000',
        feeBps: 100,
        feeAuthority: seller,
      },
    });
  const r0 = spend(0, null);
  const r1 = spend(1, r0.receipt_hash);
  for (const r of [r0, r1]) t.is((await rest(t, `POST /v1/receipts/${buyer.mint}`, r)).status, 200);
  const capped = await rest(t, 'POST /v1/buyer/policy/evaluate', { agent: buyer.mint, payment_link: link.id });
  t.is(capped.status, 200);
  t.like(capped.body, { decision: 'deny', spent_today: [{ currency: 'USDC', gross_atomic: '2020000' }] });
  t.deepEqual(
    capped.body.checks.filter((c: { ok: boolean }) => !c.ok).map((c: { rule: string }) => c.rule),
    ['daily_cap'],
  );
  t.is(capped.body.reasons.length, 1);
  t.regex(capped.body.reasons[0], /Spent 2\.02 USDC today/);

  // an allow-list that excludes the seller and a domain list, via tRPC; a quote given back is evaluated as is
  await trpc(t).buyer.putPolicy.mutate({ agent: buyer.mint, allowed_sellers: [buyer.mint], allowed_domains: ['api.example.com'] });
  const quote = await trpc(t).buyer.quote.mutate({ payment_link: link.id });
  const denied = await trpc(t).buyer.evaluate.mutate({ agent: buyer.mint, quote });
  t.is(denied.decision, 'deny');
  t.deepEqual(
    denied.checks.filter((c) => !c.ok).map((c) => c.rule),
    ['allowed_sellers', 'allowed_domains'],
  );

  const g = await gql(
    t,
    'mutation($a: String!, $id: String) { evaluateSpendPolicy(agent: $a, paymentLink: $id) { decision reasons checks { rule ok } option { grossAtomic } } }',
    {
      a: buyer.mint,
      id: link.id,
    },
  );
  t.falsy(g.body.errors, JSON.stringify(g.body.errors));
  t.is(g.body.data.evaluateSpendPolicy.decision, 'DENY');
  t.is(g.body.data.evaluateSpendPolicy.reasons.length, 2);

  // evaluate input errors: none or two of quote/url/payment_link
  const none = await rest(t, 'POST /v1/buyer/policy/evaluate', { agent: buyer.mint });
  t.is(none.status, 400);
});

test('the daily rollup is one row per (agent, stable, UTC day) kept by the receipts insert, read by its primary key', async (t) => {
  const { w } = t.context;
  const { mint } = await recordAgent(w.app, w.key);
  const day = (iso: string) => buildReceipt(mint, null, { kind: 'spend', ts: iso });
  const a = day('2026-03-01T23:59:59.000Z');
  const b = buildReceipt(mint, { nonce: 0, receiptHash: a.receipt_hash }, { kind: 'spend', ts: '2026-03-02T00:00:00.000Z' });
  const earn = buildReceipt(mint, { nonce: 1, receiptHash: b.receipt_hash }, { kind: 'earn', ts: '2026-03-02T00:00:01.000Z' });
  const denied = buildReceipt(mint, { nonce: 2, receiptHash: earn.receipt_hash }, { kind: 'spend', decision: 'deny', ts: '2026-03-02T00:00:02.000Z' });
  for (const r of [a, b, earn, denied]) t.is((await rest(t, `POST /v1/receipts/${mint}`, r)).status, 200);
  const spent = (d: string) =>
    w.app.database.orm.em
      .fork()
      .execute(`select asset, gross_atomic::text as gross, receipts from buyer_spend_daily where network = 'chain-devnet' and agent = ? and day = ?::date`, [
        mint,
        d,
      ]);
  t.deepEqual(await spent('2026-03-01'), [{ asset: USDC.mint, gross: '10000', receipts: 1 }]);
  t.deepEqual(await spent('2026-03-02'), [{ asset: USDC.mint, gross: '10000', receipts: 1 }], 'earn and deny receipts are not spend');
  // and the primary key serves the read (no scan of receipts)
  const plan = (await w.app.database.orm.em
    .fork()
    .execute(`explain select gross_atomic from buyer_spend_daily where network = 'chain-devnet' and agent = ? and day = '2026-03-02'::date`, [mint])) as {
    'QUERY PLAN': string;
  }[];
  t.notRegex(plan.map((r) => r['QUERY PLAN']).join(' '), /receipts/);
});

test('receipt verify and finalize: chain position of a pushed chain, a receipt not on the chain, and another principal gets 404', async (t) => {
  const { w, other } = t.context;
  const { mint } = await recordAgent(w.app, w.key);
  const r0 = buildReceipt(mint, null, { kind: 'spend' });
  const r1 = buildReceipt(mint, { nonce: 0, receiptHash: r0.receipt_hash }, { kind: 'spend' });
  const r2 = buildReceipt(mint, { nonce: 1, receiptHash: r1.receipt_hash }, { kind: 'spend' });
  for (const r of [r0, r1, r2]) t.is((await rest(t, `POST /v1/receipts/${mint}`, r)).status, 200);

  const middle = await rest(t, 'POST /v1/buyer/receipt/verify', { receipt_hash: r1.receipt_hash });
  t.is(middle.status, 200, JSON.stringify(middle.body));
  t.like(middle.body, { ok: true, nonce: 1, agent: mint, settlement: 'not_applicable' });
  t.regex(middle.body.checks.find((c: { name: string }) => c.name === 'chain_position').detail, /links to .* and is linked from nonce 2/);

  // a well-formed receipt that claims nonce 1 but links elsewhere: its own hash is right, it is not on the chain
  const forged = buildReceipt(mint, { nonce: 0, receiptHash: r2.receipt_hash }, { kind: 'spend', ts: '2026-02-01T00:00:00.000Z' });
  const v = await trpc(t).buyer.verifyReceipt.mutate({ receipt: forged });
  t.false(v.ok);
  t.deepEqual(
    v.checks.map((c) => [c.name, c.ok]),
    [
      ['hash', true],
      ['stored', false],
      ['chain_position', false],
      ['settlement', true],
    ],
  );

  // another principal: the receipt and the agent do not exist for it
  const foreign = await rest(t, 'POST /v1/buyer/receipt/verify', { receipt_hash: r1.receipt_hash }, other);
  t.is(foreign.status, 404);
  t.is(foreign.body.error, 'receipt_not_found');
  const foreignBody = await rest(t, 'POST /v1/buyer/receipt/verify', { receipt: forged }, other);
  t.is(foreignBody.status, 404);
  const foreignFinalize = await rest(t, 'POST /v1/buyer/receipt/finalize', { agent: mint, signature: '5'.repeat(88) }, other);
  t.is(foreignFinalize.status, 404);
  t.is(foreignFinalize.body.error, 'agent_not_found');

  // finalize of a signature the ledger never saw: 422, nothing recorded; bad input: 400
  const unseen = await rest(t, 'POST /v1/buyer/receipt/finalize', { agent: mint, signature: '5'.repeat(88) });
  t.is(unseen.status, 422, JSON.stringify(unseen.body));
  t.like(unseen.body, { error: 'transaction_invalid', details: { retry: true } });
  for (const bad of [{ agent: mint }, { agent: mint, signature: 'x', payment_response: 'y' }, { agent: mint, payment_response: 'bm90IGpzb24=' }]) {
    const res = await rest(t, 'POST /v1/buyer/receipt/finalize', bad);
    t.is(res.status, 400, JSON.stringify(bad));
  }
  const g = await gql(t, 'mutation($h: String) { verifyBuyerReceipt(receiptHash: $h) { ok nonce checks { name ok } } }', { h: r2.receipt_hash });
  t.falsy(g.body.errors, JSON.stringify(g.body.errors));
  t.like(g.body.data.verifyBuyerReceipt, { ok: true, nonce: 2 });
});

test('GET /v1/seller/facilitator with a facilitator that does not answer: 200 with health null and the reason', async (t) => {
  const down = await startLocalServer();
  await down.close();
  const app = await startTestApp({ env: { SVC_PAYWALL_FACILITATOR_URL: `${down.url}/facilitator` } });
  t.teardown(async () => {
    await app.close();
    await removeDataDir(app.dataDir);
  });
  const key = await issueKey(app);
  const res = await http(app, 'GET', '/v1/seller/facilitator', { key });
  t.is(res.status, 200, JSON.stringify(res.body));
  t.is(res.body.url, `${down.url}/facilitator`);
  t.is(res.body.health, null);
  t.is(typeof res.body.health_error, 'string');
  t.true(res.body.networks.every((n: { fee_payer: string | null; supported: boolean }) => n.fee_payer === null && n.supported === false));
});
