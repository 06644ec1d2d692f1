import anyTest, { type TestFn } from 'ava';
import { Keypair } from '@solana/web3.js';
import { Challenge } from 'mppx';
import { createClient, errorCode } from '../../interfaces/client/index.ts';
import { buildPaymentTransaction } from '../../domain/facilitator/build.ts';
import type { PaymentRequirements } from '../../domain/facilitator/schema.ts';
import { MPL_CORE_PROGRAM_ID, treasuryOf } from '../../domain/treasury/derive.ts';
import type { LedgerThread } from '../../adapters/ledger/embedded/ledger-thread.ts';
import { proveAgents } from '../../jobs/agent-proof.ts';
import { http, linkBody, randomAddress, recordAgent, writeAgentAsset } from '../support/app.ts';
import { faultyLedger, refuses } from '../support/faulty-ledger.ts';
import { writeCoreAsset } from '../support/core-asset.ts';
import {
  base64Json,
  createLink,
  fundBuyer,
  fundFeeVault,
  legacyAgentWithLink,
  payingFetch,
  startPaywallApp,
  tokenBalance,
  unpaidOffer,
  USDC,
  type PaywallWorld,
} from '../support/paywall.ts';

// DECISIONS "Agents, submissions and events": no route, door or client makes the gateway take a payment into the
// treasury of an agent that is not on the ledger. Recording an address that holds no Core asset of the given owner is
// refused on every door; a legacy unproven agent (a row from before records were checked) gets no new link, and its
// existing link refuses x402 and MPP payments and buyer payments with nothing moved — until its asset is found (the
// proof job, or a first use), after which it works. A ledger that cannot be read records nothing.

const SECRET = 'proof-test-mpp-secret-0123456789abcdef01234';
const test = anyTest as TestFn<PaywallWorld>;

test.before(async (t) => {
  const w = await startPaywallApp({ SVC_MPP_SECRET: SECRET });
  await fundFeeVault(w);
  t.context = w;
});

const devnet = (w: PaywallWorld) => w.app.ledgers.embedded['chain-devnet'] as LedgerThread;

async function gql(w: PaywallWorld, query: string, variables: Record<string, unknown>): Promise<any> {
  const res = await http(w.app, 'POST', '/graphql', { key: w.key, body: { query, variables } });
  return res.body;
}

/** The same record on REST, tRPC and GraphQL: each refused with `code`, and nothing recorded. */
async function refusedOnEveryDoor(
  t: { context: PaywallWorld; is: (a: unknown, b: unknown, m?: string) => void; like: (a: any, b: any, m?: string) => void },
  body: { mint: string; owner: string },
  expected: { code: string; status: number; details: Record<string, unknown> },
) {
  const { code, status, details } = expected;
  const w = t.context;
  const rest = await http(w.app, 'POST', '/v1/agents/record', { key: w.key, body });
  t.is(rest.status, status, JSON.stringify(rest.body));
  t.like(rest.body, { error: code, details });
  t.is(typeof rest.body.message, 'string');
  const trpc = await createClient({ url: w.app.url, apiKey: w.key })
    .agents.record.mutate(body)
    .then(
      () => null,
      (e: unknown) => e,
    );
  t.is(errorCode(trpc), code, 'tRPC');
  const graph = await gql(w, `mutation($input: RecordAgentInput!) { recordAgent(input: $input) { mint } }`, { input: body });
  t.is(graph.errors?.[0]?.extensions?.code, code, `GraphQL ${JSON.stringify(graph)}`);
  t.is((await http(w.app, 'GET', `/v1/agents/${body.mint}`, { key: w.key })).status, 404, 'nothing was recorded');
}

test.serial('recording an address that holds no Core asset of that owner is refused on REST, tRPC and GraphQL, saying what the ledger holds', async (t) => {
  const w = t.context;
  const owner = await randomAddress();
  // nothing there
  await refusedOnEveryDoor(t, { mint: await randomAddress(), owner }, { code: 'agent_not_on_ledger', status: 422, details: { found: 'nothing' } });
  // another program's account: the USDC mint (SPL Token)
  const mintAccount = await w.app.services.ledgers['chain-devnet']!.getAccount(USDC.mint);
  await refusedOnEveryDoor(
    t,
    { mint: USDC.mint, owner },
    { code: 'agent_not_on_ledger', status: 422, details: { found: 'account_of_another_program', program: mintAccount!.owner } },
  );
  // a Core asset owned by someone else
  const theirs = await writeAgentAsset(w.app, 'chain-devnet');
  await refusedOnEveryDoor(
    t,
    { mint: theirs.mint, owner },
    { code: 'agent_not_on_ledger', status: 422, details: { found: 'asset_of_another_owner', asset_owner: theirs.owner } },
  );
  // a Core program account that is no AssetV1
  const junk = await randomAddress();
  await devnet(w).setAccount(junk, { lamports: 10_000_000n, data: new Uint8Array([5, 1, 2, 3]), owner: MPL_CORE_PROGRAM_ID });
  await refusedOnEveryDoor(t, { mint: junk, owner }, { code: 'agent_not_on_ledger', status: 422, details: { found: 'not_asset_v1' } });
  // the refusal says how to mint one
  const res = await http(w.app, 'POST', '/v1/agents/record', { key: w.key, body: { mint: junk, owner } });
  t.regex(res.body.message, /POST \/v1\/agents\/prepare/);

  // the asset with its owner: recorded, and proven
  const mine = await writeAgentAsset(w.app, 'chain-devnet', { owner });
  const ok = await http(w.app, 'POST', '/v1/agents/record', { key: w.key, body: { mint: mine.mint, owner } });
  t.is(ok.status, 200, JSON.stringify(ok.body));
  t.is(typeof ok.body.proven_at, 'string');
});

test.serial('a ledger that cannot be read: 502 rpc_unavailable and nothing recorded', async (t) => {
  const w = t.context;
  const { mint, owner } = await writeAgentAsset(w.app, 'chain-devnet');
  const ledgers = w.app.services.ledgers;
  const real = ledgers['chain-devnet']!;
  ledgers['chain-devnet'] = faultyLedger(real, {
    getAccount: refuses(new Error('connection refused')),
    getMultipleAccounts: refuses(new Error('connection refused')),
  });
  try {
    const res = await http(w.app, 'POST', '/v1/agents/record', { key: w.key, body: { mint, owner } });
    t.is(res.status, 502, JSON.stringify(res.body));
    t.is(res.body.error, 'rpc_unavailable');
  } finally {
    ledgers['chain-devnet'] = real;
  }
  t.is((await http(w.app, 'GET', `/v1/agents/${mint}`, { key: w.key })).status, 404, 'nothing was recorded');
  t.is((await http(w.app, 'POST', '/v1/agents/record', { key: w.key, body: { mint, owner } })).status, 200, 'recorded once the ledger answers');
});

test.serial('an unproven legacy agent gets no new link, and its links take no x402, MPP or buyer payment — until its asset is found', async (t) => {
  const w = t.context;
  const x402 = await legacyAgentWithLink(w, { protocol: 'x402' });
  const { mint, owner } = x402;
  const treasury = treasuryOf(mint);

  // no new link (create, preview), on REST and tRPC
  const created = await http(w.app, 'POST', '/v1/payment-links', { key: w.key, body: linkBody(mint) });
  t.is(created.status, 409, JSON.stringify(created.body));
  t.like(created.body, { error: 'agent_unproven', details: { mint, found: 'nothing', path: 'owner_agent' } });
  t.regex(created.body.message, /POST \/v1\/agents\/prepare/);
  t.is(
    (await http(w.app, 'POST', '/v1/payment-links/preview', { key: w.key, body: { owner_agent: mint, method: 'GET', price: '$0.01' } })).body.error,
    'agent_unproven',
  );
  const viaTrpc = await createClient({ url: w.app.url, apiKey: w.key })
    .paymentLinks.create.mutate(linkBody(mint) as never)
    .then(
      () => null,
      (e: unknown) => e,
    );
  t.is(errorCode(viaTrpc), 'agent_unproven');

  // its existing link reads as not ready, and its paywall offers nothing (also on the 402 fast path)
  const read = await http(w.app, 'GET', `/v1/payment-links/${x402.link.id}`, { key: w.key });
  t.is(read.status, 200);
  t.true(
    read.body.accepts.every((a: { pay_to_ready: boolean | null }) => a.pay_to_ready === false),
    JSON.stringify(read.body.accepts),
  );
  for (let i = 0; i < 2; i++) {
    const unpaid = await unpaidOffer(x402.url);
    t.is(unpaid.status, 409, `unpaid ${i}`);
    t.is(unpaid.v1.error, 'agent_unproven');
    t.is(unpaid.headers.get('payment-required'), null);
  }

  // a well-formed x402 payment into its treasury (the offer of a proven twin link, paying this treasury instead)
  const buyer = await fundBuyer(w, '1');
  const before = await tokenBalance(w, buyer.publicKey.toBase58());
  const twin = await createLink(w);
  const offer = await unpaidOffer(twin.url);
  const accepted = { ...offer.v2.accepts[0], payTo: treasury };
  const requirements: PaymentRequirements = {
    scheme: 'exact',
    network: 'chain-devnet',
    payTo: treasury,
    asset: accepted.asset,
    amount: BigInt(accepted.amount),
    tokenProgram: USDC.tokenProgramId as PaymentRequirements['tokenProgram'],
    decimals: USDC.decimals,
    fee: { bps: accepted.extra['svc.fee'].bps, feeAuthority: accepted.extra['svc.fee'].feeAuthority },
  };
  const { blockhash } = await w.app.services.ledgers['chain-devnet']!.getLatestBlockhash();
  const tx = buildPaymentTransaction({ feePayer: accepted.extra.feePayer, payer: buyer.publicKey.toBase58(), requirements, blockhash });
  tx.sign([buyer]);
  const transaction = Buffer.from(tx.serialize()).toString('base64');
  const paid = await fetch(x402.url, {
    headers: { 'payment-signature': base64Json({ x402Version: 2, resource: offer.v2.resource, accepted, payload: { transaction } }) },
  });
  t.is(paid.status, 409);
  t.is(((await paid.json()) as { error: string }).error, 'agent_unproven');

  // an MPP credential for its MPP link (a twin's challenge, the transaction paying this treasury)
  const mpp = await legacyAgentWithLink(w, { protocol: 'mpp' });
  t.is((await fetch(mpp.url)).status, 409, 'no MPP challenge for an unproven seller');
  const mppTwin = await createLink(w, { protocol: 'mpp' });
  const challenge = Challenge.deserializeList((await fetch(mppTwin.url)).headers.get('www-authenticate') ?? '')[0]!;
  const r = challenge.request as Record<string, any>;
  const mppTx = buildPaymentTransaction({
    feePayer: r.methodDetails.feePayerKey,
    payer: buyer.publicKey.toBase58(),
    requirements: { ...requirements, payTo: treasuryOf(mpp.mint) },
    blockhash,
    memo: challenge.id,
  });
  mppTx.sign([buyer]);
  const plain = {
    id: challenge.id,
    realm: challenge.realm,
    method: challenge.method,
    intent: challenge.intent,
    request: challenge.request,
    expires: challenge.expires,
  };
  const credential = `Payment ${Buffer.from(JSON.stringify({ challenge: plain, payload: { transaction: Buffer.from(mppTx.serialize()).toString('base64') } })).toString('base64url')}`;
  const mppPaid = await fetch(mpp.url, { headers: { authorization: credential } });
  t.is(mppPaid.status, 409);
  t.is(((await mppPaid.json()) as { error: string }).error, 'agent_unproven');

  // buyer/payment: to its link, and to its treasury directly
  const buyerAgent = await recordAgent(w.app, w.key);
  const executive = Keypair.generate().publicKey.toBase58();
  for (const body of [
    { payment_link: x402.link.id, buyer_agent: buyerAgent.mint, executive },
    { pay_to: treasury, amount: '0.01', currency: 'USDC', buyer_agent: buyerAgent.mint, executive },
  ]) {
    const refused = await http(w.app, 'POST', '/v1/buyer/payment/prepare', { key: w.key, body });
    t.is(refused.status, 409, JSON.stringify(refused.body));
    t.is(refused.body.error, 'agent_unproven');
  }

  // nothing moved: the buyer still holds its USDC, the treasuries nothing, no paid call was claimed
  t.is(await tokenBalance(w, buyer.publicKey.toBase58()), before);
  t.is(await tokenBalance(w, treasury), 0n);
  t.is(await tokenBalance(w, treasuryOf(mpp.mint)), 0n);
  const claimed = (await w.app.database.orm.em
    .fork()
    .execute(`select count(*)::int as n from paid_calls where link_id in (?, ?)`, [x402.link.id, mpp.link.id])) as { n: number }[];
  t.is(claimed[0]!.n, 0);

  // The asset appears; the proof job finds it (the MPP agent's is left for its first use below).
  await writeCoreAsset(devnet(w), mint, { owner });
  await writeCoreAsset(devnet(w), mpp.mint, { owner: mpp.owner });
  const job = proveAgents({
    proof: { proveUnproven: (o) => w.app.services.agents.proof.proveUnproven({ ...o, checkedBefore: new Date(Date.now() + 60_000) }) },
    log: { info: () => {} },
    now: () => new Date(),
  });
  const onlyFirst = await w.app.database.store.agents.get('chain-devnet', mpp.mint);
  t.is(onlyFirst!.provenAt, null);
  await job({ limit: 10_000 });
  t.not((await w.app.database.store.agents.get('chain-devnet', mint))!.provenAt, null, 'the job proved it');

  // now it pays: the buyer kit pays the legacy link, the money lands in the treasury
  const pay = payingFetch(w, buyer);
  const res = await pay(x402.url);
  t.is(res.status, 200, await res.clone().text());
  t.is(await tokenBalance(w, treasury), BigInt(accepted.amount));
  // and may own a new link
  t.is((await http(w.app, 'POST', '/v1/payment-links', { key: w.key, body: linkBody(mint) })).status, 201);
  // buyer/payment gets past the proof (and stops at the buyer's own missing token account)
  const next = await http(w.app, 'POST', '/v1/buyer/payment/prepare', {
    key: w.key,
    body: { pay_to: treasury, amount: '0.01', currency: 'USDC', buyer_agent: buyerAgent.mint, executive },
  });
  t.not(next.body.error, 'agent_unproven', JSON.stringify(next.body));
});

test.serial('first use proves an agent whose asset appeared: a link naming it', async (t) => {
  const w = t.context;
  const legacy = await legacyAgentWithLink(w, { protocol: 'x402' });
  t.is((await http(w.app, 'POST', '/v1/payment-links', { key: w.key, body: linkBody(legacy.mint) })).status, 409);
  await writeCoreAsset(devnet(w), legacy.mint, { owner: legacy.owner });
  const created = await http(w.app, 'POST', '/v1/payment-links', { key: w.key, body: linkBody(legacy.mint) });
  t.is(created.status, 201, JSON.stringify(created.body));
  t.not((await w.app.database.store.agents.get('chain-devnet', legacy.mint))!.provenAt, null);
  // its older link pays again too (the paywall reads the proof with the link)
  const offer = await unpaidOffer(legacy.url);
  t.is(offer.status, 402);
  t.is(offer.v2.accepts[0].payTo, treasuryOf(legacy.mint));
});

test.serial('an asset of another owner does not prove a legacy agent', async (t) => {
  const w = t.context;
  const legacy = await legacyAgentWithLink(w, { protocol: 'x402' });
  const other = await randomAddress();
  await writeCoreAsset(devnet(w), legacy.mint, { owner: other });
  const refused = await http(w.app, 'POST', '/v1/payment-links', { key: w.key, body: linkBody(legacy.mint) });
  t.is(refused.status, 409);
  t.like(refused.body.details, { found: 'asset_of_another_owner', asset_owner: other });
  t.is((await unpaidOffer(legacy.url)).status, 409);
});
