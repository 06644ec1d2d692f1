import anyTest, { type TestFn } from 'ava';
import { createClient } from '../../interfaces/client/index.ts';
import { ataOf } from '../../domain/facilitator/ata.ts';
import { findStable } from '../../domain/shared/network.ts';
import { treasuryOf } from '../../domain/treasury/derive.ts';
import { http, issueKey, linkBody, recordAgent, startTestApp, type TestApp } from '../support/app.ts';

// Offers that real clients can pay, when the facilitator refuses to prepare the treasury's token account:
// with no rent budget it sponsors nothing, so the link's answer says pay_to_ready: false on every door (REST, tRPC,
// GraphQL), and the accept still names the offer's payTo and its token account.

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
