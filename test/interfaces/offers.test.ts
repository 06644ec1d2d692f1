import anyTest, { type TestFn } from 'ava';
import { HTTPFacilitatorClient } from '@x402/core/http';
import { PaymentRequiredV2Schema, PaymentRequirementsV2Schema } from '@x402/core/schemas';
import {
  extractDiscoveryInfo,
  sanitizeResourceServiceMetadata,
  validateDiscoveryExtension,
  validateDiscoveryExtensionSpec,
  withBazaar,
  type DiscoveryExtension,
  type DiscoveryResource,
} from '@x402/extensions/bazaar';
import { Challenge } from 'mppx';
import { DiscoveryDocument, validate as validateDiscoveryDocument } from 'mppx/discovery';
import { createClient } from '../../interfaces/client/index.ts';
import { ErrorEnvelope } from '../../interfaces/errors.ts';
import { ataOf } from '../../domain/facilitator/ata.ts';
import { CAIP2, findStable } from '../../domain/shared/network.ts';
import { treasuryOf } from '../../domain/treasury/derive.ts';
import { http, issueKey, linkBody, recordAgent, startTestApp, type TestApp } from '../support/app.ts';

// Offers that real clients can pay, when the facilitator refuses to prepare the treasury's token account:
// with no rent budget it sponsors nothing, so the link's answer says pay_to_ready: false on every door (REST, tRPC,
// GraphQL), and the accept still names the offer's payTo and its token account.
//
// Offers others can find (domain/discovery): the bazaar extension in a discoverable link's 402 and the bazaar lists,
// read with @x402/extensions 2.27's own client and validators; the MPP links' OpenAPI document read with mppx's
// discovery parser. Those tests are serial: they run before the others and count the catalogue's links.

const test = anyTest as TestFn<{ app: TestApp; key: string }>;
const USDC = findStable('chain-devnet', 'USDC')!;

test.before(async (t) => {
  const app = await startTestApp({ env: { SVC_FACILITATOR_RENT_BUDGET_LAMPORTS: '0' } });
  t.context = { app, key: await issueKey(app) };
});

test('a refused treasury token account is pay_to_ready: false in the create answer of REST, tRPC and GraphQL; reads say null', async (t) => {
  const { app, key } = t.context;
  const { mint } = await recordAgent(app, key);
  const treasury = treasuryOf(mint);
  const account = ataOf(treasury, USDC.mint, USDC.tokenProgramId);
  t.is(await app.services.ledgers['chain-devnet']!.getAccount(account), null, 'no budget: the facilitator created nothing at record time');
  const expected = { pay_to: treasury, pay_to_token_account: account, pay_to_ready: false };

  const rest = await http(app, 'POST', '/v1/payment-links', { key, body: linkBody(mint, { id: 'refused-rest' }) });
  t.is(rest.status, 201, JSON.stringify(rest.body));
  t.like(rest.body.accepts[0], expected);

  const trpc = createClient({ url: app.url, apiKey: key });
  const viaTrpc = await trpc.paymentLinks.create.mutate(linkBody(mint, { id: 'refused-trpc' }) as never);
  t.like(viaTrpc.accepts[0], expected);

  const gql = await http(app, 'POST', '/graphql', {
    key,
    body: {
      query: `mutation($input: CreatePaymentLinkInput!) { createPaymentLink(input: $input) { accepts { payTo payToTokenAccount payToReady } } }`,
      variables: { input: { id: 'refused-gql', label: 'Weather', ownerAgent: mint, method: 'GET', price: '$0.01', response: { body: { ok: true } } } },
    },
  });
  t.deepEqual(gql.body.data?.createPaymentLink.accepts, [{ payTo: treasury, payToTokenAccount: account, payToReady: false }], JSON.stringify(gql.body));

  const read = await http(app, 'GET', '/v1/payment-links/refused-rest', { key });
  t.like(read.body.accepts[0], { ...expected, pay_to_ready: null });

  // The offer the paywall states names the same payTo: one value in two spellings (hosted-api §2.3).
  const unpaid = await fetch(`${app.url}/x/refused-rest?network=chain-devnet`);
  t.is(unpaid.status, 402);
  const offer = JSON.parse(Buffer.from(unpaid.headers.get('PAYMENT-REQUIRED')!, 'base64').toString('utf8'));
  t.is(offer.accepts[0].payTo, rest.body.accepts[0].pay_to);
});

test('the facilitator answers why it did not prepare the account: ata_creation_not_sponsored, budget spent', async (t) => {
  const { app } = t.context;
  const owner = treasuryOf((await recordAgent(app, t.context.key)).mint);
  const answer = await app.services.facilitator!.prepareAccounts({ network: 'solana-devnet', owner, assets: [USDC.mint] });
  t.like(answer.accounts[0], { asset: USDC.mint, ready: false, reason: 'ata_creation_not_sponsored' });
  t.regex((answer.accounts[0] as { message: string }).message, /daily rent budget is spent/);
});

test('an update that changes the offer (owner, price, currencies) prepares again and answers pay_to_ready; other updates do not check (null)', async (t) => {
  const { app, key } = t.context;
  const { mint } = await recordAgent(app, key);
  const created = await http(app, 'POST', '/v1/payment-links', { key, body: linkBody(mint, { id: 'refused-update' }) });
  t.is(created.status, 201, JSON.stringify(created.body));
  const label = await http(app, 'PATCH', '/v1/payment-links/refused-update', { key, body: { label: 'Renamed' } });
  t.is(label.status, 200, JSON.stringify(label.body));
  t.is(label.body.accepts[0].pay_to_ready, null);
  const price = await http(app, 'PATCH', '/v1/payment-links/refused-update', { key, body: { price: '$0.02' } });
  t.is(price.status, 200, JSON.stringify(price.body));
  t.like(price.body.accepts[0], { amount: '20000', pay_to_ready: false });
});

/** The unpaid x402 402 of a devnet link: the decoded PAYMENT-REQUIRED and the raw body. */
async function unpaidOffer(app: TestApp, id: string, method = 'GET') {
  const res = await fetch(`${app.url}/x/${id}?network=chain-devnet`, { method, headers: { accept: 'application/json' } });
  const header = res.headers.get('payment-required');
  return { status: res.status, offer: header ? JSON.parse(Buffer.from(header, 'base64').toString('utf8')) : undefined, body: await res.text() };
}

async function createDiscoverable(t: { context: { app: TestApp; key: string } }, mint: string, fields: Record<string, unknown>) {
  const res = await http(t.context.app, 'POST', '/v1/payment-links', { key: t.context.key, body: linkBody(mint, fields) });
  if (res.status !== 201) throw new Error(`create link: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body as { id: string; share_url: string };
}

test.serial(
  'bazaar: a discoverable link’s 402 declares extensions.bazaar as @x402/extensions validates it, sanitised service metadata on resource, nothing paid; another link’s declares none',
  async (t) => {
    const { app, key } = t.context;
    const { mint } = await recordAgent(app, key);
    const paid = 'PAID-content-7d1f';
    const link = await createDiscoverable(t, mint, {
      id: 'bazaar-post',
      label: 'Forecast by city',
      method: 'POST',
      response: { body: { forecast: paid } },
      webhook_url: 'https://hooks.example.com/bazaar-private-hook',
      metadata: {
        discoverable: true,
        description: 'Tomorrow by city',
        capabilities: ['weather', 'WEATHER', 'x'.repeat(33), 'forecast', 'a', 'b', 'c', 'd'],
        icon_url: 'https://127.0.0.1/icon.png',
        expected_request_body: { city: 'Paris' },
        internal_note: 'NOTE-private-42',
      },
    });
    const unpaid = await unpaidOffer(app, 'bazaar-post', 'POST');
    t.is(unpaid.status, 402, unpaid.body);
    t.true(PaymentRequiredV2Schema.safeParse(unpaid.offer).success, 'the 402 is still an x402 v2 PaymentRequired');
    const bazaar = unpaid.offer.extensions.bazaar as DiscoveryExtension;
    t.deepEqual(validateDiscoveryExtension(bazaar), { valid: true });
    t.true(validateDiscoveryExtensionSpec(bazaar as never).valid);
    // a facilitator cataloguing the payment reads it as the reference does (the payload echoes the offer's resource)
    const accepted = unpaid.offer.accepts[0];
    const discovered = extractDiscoveryInfo(
      { x402Version: 2, resource: unpaid.offer.resource, accepted, payload: {}, extensions: unpaid.offer.extensions },
      accepted,
    );
    t.like(discovered, { method: 'POST', x402Version: 2, serviceName: 'Forecast by city', description: 'Forecast by city' });
    t.deepEqual(discovered?.discoveryInfo.input, { type: 'http', method: 'POST', bodyType: 'json', body: { city: 'Paris' } });
    // the service metadata is what the reference's sanitiser keeps: tags deduplicated, bounded, five; the loopback icon dropped
    const metadata = sanitizeResourceServiceMetadata(unpaid.offer.resource);
    t.deepEqual(metadata, { serviceName: 'Forecast by city', tags: ['weather', 'forecast', 'a', 'b', 'c'] });
    t.like(unpaid.offer.resource, { ...metadata, url: link.share_url });
    t.is(unpaid.offer.resource.iconUrl, undefined);
    // the gateway's other extensions ride beside it
    t.truthy(unpaid.offer.extensions['payment-identifier']);
    const wire = JSON.stringify(unpaid.offer) + unpaid.body;
    for (const hidden of [paid, 'bazaar-private-hook', 'NOTE-private-42']) t.false(wire.includes(hidden), hidden);

    // bounded: a body example too large to repeat in every 402 is left out; a name outside printable ASCII is dropped
    await createDiscoverable(t, mint, {
      id: 'bazaar-big',
      label: 'Prévisions météo',
      method: 'PUT',
      metadata: { discoverable: true, expected_request_body: { blob: 'y'.repeat(5000) }, icon_url: 'https://cdn.example.com/icon.png' },
    });
    const big = await unpaidOffer(app, 'bazaar-big', 'PUT');
    t.deepEqual(big.offer.extensions.bazaar.info.input, { type: 'http', method: 'PUT', bodyType: 'json', body: {} });
    t.true(validateDiscoveryExtension(big.offer.extensions.bazaar).valid);
    t.deepEqual(sanitizeResourceServiceMetadata(big.offer.resource), { iconUrl: 'https://cdn.example.com/icon.png' });
    t.is(big.offer.resource.serviceName, undefined);
    t.true(Buffer.byteLength(JSON.stringify(big.offer.extensions.bazaar)) < 2048);

    // a GET link declares its query input; a link nobody made discoverable declares nothing
    await createDiscoverable(t, mint, { id: 'bazaar-get', metadata: { discoverable: true } });
    const get = await unpaidOffer(app, 'bazaar-get');
    t.deepEqual(get.offer.extensions.bazaar.info, { input: { type: 'http', method: 'GET' }, output: { type: 'json', format: 'application/json' } });
    await createDiscoverable(t, mint, { id: 'bazaar-private', metadata: { capabilities: ['weather'] } });
    const hidden = await unpaidOffer(app, 'bazaar-private');
    t.is(hidden.status, 402);
    t.is(hidden.offer.extensions.bazaar, undefined);
    t.is(hidden.offer.resource.serviceName, undefined);
    t.truthy(hidden.offer.extensions['payment-identifier']);
  },
);

/** Every page of a bazaar list (by offset) through @x402/extensions' own client. */
async function listAll(client: ReturnType<typeof bazaarClient>, params: Record<string, string>): Promise<DiscoveryResource[]> {
  const all: DiscoveryResource[] = [];
  for (let offset = 0; ; ) {
    const page = await client.extensions.bazaar.listResources({ ...params, limit: 2, offset });
    all.push(...page.items);
    offset += page.items.length;
    if (page.items.length === 0 || offset >= page.pagination.total) return all;
  }
}

/** Every page of a bazaar search (by cursor). */
async function searchAll(client: ReturnType<typeof bazaarClient>, params: { query: string } & Record<string, string>): Promise<DiscoveryResource[]> {
  const all: DiscoveryResource[] = [];
  let cursor: string | undefined;
  do {
    const page = await client.extensions.bazaar.search({ ...params, limit: 2, ...(cursor ? { cursor } : {}) });
    all.push(...page.resources);
    cursor = page.pagination?.cursor ?? undefined;
  } while (cursor);
  return all;
}

const bazaarClient = (url: string) => withBazaar(new HTTPFacilitatorClient({ url }));
const urlsOf = (items: DiscoveryResource[]) => items.map((i) => i.resource);

test.serial(
  'bazaar lists: /discovery/resources and /discovery/search (root and /facilitator) in @x402/extensions’ shapes, paged to the end once each, filtered on payTo, scheme, network; the catalogue of /v1/discover',
  async (t) => {
    const { app, key } = t.context;
    const a = await recordAgent(app, key);
    const b = await recordAgent(app, key);
    const made: Record<string, string> = {};
    for (const [owner, id] of [
      [a.mint, 'zephyr-a1'],
      [a.mint, 'zephyr-a2'],
      [b.mint, 'zephyr-b1'],
      [b.mint, 'zephyr-b2'],
      [b.mint, 'zephyr-b3'],
    ] as const) {
      made[id] = (await createDiscoverable(t, owner, { id, label: `Zephyr feed ${id}`, metadata: { discoverable: true, capabilities: ['wind'] } })).share_url;
    }
    await createDiscoverable(t, a.mint, { id: 'zephyr-mpp', label: 'Zephyr feed mpp', protocol: 'mpp', metadata: { discoverable: true } });
    await createDiscoverable(t, a.mint, { id: 'zephyr-hidden', label: 'Zephyr feed hidden' });

    // the same catalogue as GET /v1/discover: its x402 links, each once, over every page
    const discover = await http(app, 'GET', '/v1/discover?source=svc&limit=100', { key });
    t.is(discover.status, 200, JSON.stringify(discover.body));
    const catalogue = (discover.body.data as Array<{ url: string; protocol: string }>).filter((i) => i.protocol === 'x402').map((i) => i.url);
    t.true(catalogue.length >= 5);
    for (const base of [app.url, `${app.url}/facilitator`]) {
      const client = bazaarClient(base);
      const listed = await listAll(client, { network: 'solana-devnet' });
      t.deepEqual([...urlsOf(listed)].sort(), [...catalogue].sort(), base);
      t.is(new Set(urlsOf(listed)).size, listed.length, 'no resource twice');
      for (const item of listed) {
        t.like(item, { type: 'http', x402Version: 2 });
        t.true(item.accepts.length > 0 && item.accepts.every((accept) => PaymentRequirementsV2Schema.safeParse(accept).success));
        t.true(validateDiscoveryExtension(item.extensions?.bazaar as DiscoveryExtension).valid, item.resource);
        t.false(Number.isNaN(Date.parse(item.lastUpdated)));
      }
      // a search pages by cursor to its end: the five Zephyr x402 links (never the MPP or the hidden one), each once
      const found = await searchAll(client, { query: 'zephyr FEED' });
      t.deepEqual([...urlsOf(found)].sort(), Object.values(made).sort(), base);
      t.like(await client.extensions.bazaar.search({ query: 'zephyr' }), { x402Version: 2, partialResults: false, pagination: { limit: 20, cursor: null } });
    }
    const client = bazaarClient(app.url);
    // a listed resource is what the link's 402 offers (less the blockhash, which a listing outlives)
    const one = (await listAll(client, { payTo: treasuryOf(a.mint) })).find((i) => i.resource === made['zephyr-a1'])!;
    const unpaid = await unpaidOffer(app, 'zephyr-a1');
    const { recentBlockhash: _b, lastValidBlockHeight: _h, ...extra } = unpaid.offer.accepts[0].extra;
    t.deepEqual(one.accepts, [{ ...unpaid.offer.accepts[0], extra }]);
    t.deepEqual(one.extensions?.bazaar, unpaid.offer.extensions.bazaar);

    // filters: payTo is a seller's treasury; scheme and network as x402 names them; what is not here lists nothing
    t.deepEqual(urlsOf(await listAll(client, { payTo: treasuryOf(a.mint) })).sort(), [made['zephyr-a1'], made['zephyr-a2']].sort());
    t.deepEqual(
      urlsOf(await searchAll(client, { query: 'zephyr', payTo: treasuryOf(b.mint) })).sort(),
      [made['zephyr-b1'], made['zephyr-b2'], made['zephyr-b3']].sort(),
    );
    t.is((await listAll(client, { scheme: 'exact', network: CAIP2['chain-devnet'] })).length, catalogue.length);
    t.is((await listAll(client, { extensions: 'bazaar' })).length, catalogue.length);
    for (const none of [
      { scheme: 'upto' },
      { network: CAIP2['chain-mainnet'] },
      { network: 'eip155:8453' },
      { type: 'mcp' },
      { extensions: 'sign-in-with-x' },
    ]) {
      const page = await client.extensions.bazaar.listResources(none);
      t.deepEqual([page.items, page.pagination.total], [[], 0], JSON.stringify(none));
    }

    // a link that stops being discoverable, or is disabled, leaves both lists and /v1/discover
    t.is((await http(app, 'PATCH', '/v1/payment-links/zephyr-a1', { key, body: { metadata: { capabilities: ['wind'] } } })).status, 200);
    t.is((await http(app, 'PATCH', '/v1/payment-links/zephyr-b1', { key, body: { disabled: true } })).status, 200);
    const left = [made['zephyr-a1'], made['zephyr-b1']];
    t.false(urlsOf(await listAll(client, {})).some((u) => left.includes(u)));
    t.deepEqual(urlsOf(await searchAll(client, { query: 'zephyr' })).sort(), [made['zephyr-a2'], made['zephyr-b2'], made['zephyr-b3']].sort());
    const after = await http(app, 'GET', '/v1/discover?source=svc&limit=100', { key });
    t.false((after.body.data as Array<{ url: string }>).some((i) => left.includes(i.url)));
    t.is((await unpaidOffer(app, 'zephyr-a1')).offer.extensions.bazaar, undefined, 'its 402 no longer declares it');
  },
);

test.serial(
  'mppx discovery: /x/openapi.json lists the public MPP links with x-payment-info as mppx validates it, each offer the one of its 402’s challenge',
  async (t) => {
    const { app, key } = t.context;
    const { mint } = await recordAgent(app, key);
    const treasury = treasuryOf(mint);
    await createDiscoverable(t, mint, {
      id: 'mppdoc-post',
      label: 'Summarise',
      method: 'POST',
      protocol: 'mpp',
      price: '$0.25',
      response: { body: { summary: 'PAID-summary' } },
      metadata: { discoverable: true, description: 'A summary of a text', capabilities: ['text'], expected_request_body: { text: 'hello' } },
    });
    await createDiscoverable(t, mint, { id: 'mppdoc-get', label: 'Quote', protocol: 'mpp', metadata: { discoverable: true } });
    await createDiscoverable(t, mint, { id: 'mppdoc-hidden', label: 'Hidden', protocol: 'mpp' });
    await createDiscoverable(t, mint, { id: 'mppdoc-x402', label: 'On x402', metadata: { discoverable: true } });

    const res = await http(app, 'GET', `/x/openapi.json?network=chain-devnet&payTo=${treasury}`);
    t.is(res.status, 200, JSON.stringify(res.body));
    const doc = res.body;
    t.deepEqual(validateDiscoveryDocument(doc), [], 'mppx finds no error and no warning');
    t.true(DiscoveryDocument.safeParse(doc).success);
    t.deepEqual(Object.keys(doc.paths).sort(), ['/mppdoc-get', '/mppdoc-post']);
    t.deepEqual(doc.servers, [{ url: `${app.services.settings.baseUrl}/x` }]);
    const post = doc.paths['/mppdoc-post'].post;
    t.like(post, { summary: 'Summarise', description: 'A summary of a text', tags: ['text'] });
    t.deepEqual(post.parameters, [
      { name: 'network', in: 'query', required: true, description: 'the network of this link', schema: { type: 'string', enum: ['chain-devnet'] } },
    ]);
    t.deepEqual(post.requestBody.content['application/json'].example, { text: 'hello' });
    t.truthy(post.responses['402']);
    t.false(JSON.stringify(doc).includes('PAID-summary'));

    // each offer is its 402's challenge: amount (the gross), currency (the mint), method and intent
    for (const [path, method] of [
      ['/mppdoc-post', 'POST'],
      ['/mppdoc-get', 'GET'],
    ] as const) {
      const unpaid = await fetch(`${doc.servers[0].url.replace(app.services.settings.baseUrl, app.url)}${path}?network=chain-devnet`, { method });
      t.is(unpaid.status, 402);
      const challenges = Challenge.fromResponseList(unpaid);
      const offers = doc.paths[path][method.toLowerCase()]['x-payment-info'].offers;
      t.deepEqual(
        offers,
        challenges.map((c) => ({
          amount: (c.request as { amount: string }).amount,
          currency: (c.request as { currency: string }).currency,
          description: c.description ?? (c.request as { description: string }).description,
          intent: c.intent,
          method: c.method,
        })),
      );
    }

    // the network's document without a seller: this one's links among the rest; chain-mainnet's has none here
    const all = await http(app, 'GET', '/x/openapi.json?network=chain-devnet');
    t.truthy(all.body.paths['/mppdoc-post']);
    t.false(Object.keys(all.body.paths).some((p) => p === '/mppdoc-x402' || p === '/mppdoc-hidden'));
    const mainnet = await http(app, 'GET', '/x/openapi.json');
    t.deepEqual([mainnet.status, mainnet.body.paths], [200, {}]);
    t.deepEqual(validateDiscoveryDocument(mainnet.body), []);
  },
);

test.serial('bad input to the discovery routes is a 400 in the standard envelope', async (t) => {
  const { app } = t.context;
  for (const path of [
    '/discovery/resources?limit=1000',
    '/discovery/resources?limit=0',
    '/discovery/resources?offset=-1',
    '/discovery/resources?network=solana%20devnet!',
    '/discovery/resources?payTo=not-an-address',
    '/discovery/resources?scheme=EXACT%20PLUS',
    '/discovery/resources?type=http&type=mcp',
    '/discovery/search?query=wind&cursor=not-a-cursor',
    '/discovery/search',
    '/facilitator/discovery/search?query=wind&limit=101',
    '/facilitator/discovery/resources?extensions=%3Cscript%3E',
    '/x/openapi.json?network=chain-moon',
    '/x/openapi.json?payTo=zz',
  ]) {
    const res = await http(app, 'GET', path);
    t.is(res.status, 400, path);
    t.is(res.body.error, 'invalid_request', `${path}: ${JSON.stringify(res.body)}`);
    t.true(ErrorEnvelope.safeParse(res.body).success, path);
  }
});
