import anyTest, { type TestFn } from 'ava';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { Keypair } from '@solana/web3.js';
import { createClient, errorCode } from '../../interfaces/client/index.ts';
import { ToolContext, ToolError } from '../../interfaces/mcp/context.ts';
import { payPaymentLink } from '../../interfaces/mcp/tools/payments.ts';
import { buildPaymentTransaction } from '../../domain/facilitator/build.ts';
import type { PaymentRequirements } from '../../domain/facilitator/schema.ts';
import { treasuryOf } from '../../domain/treasury/derive.ts';
import { http, recordAgent } from '../support/app.ts';
import {
  base64Json,
  createLink,
  fundBuyer,
  fundFeeVault,
  legacyAgentWithLink,
  startPaywallApp,
  tokenBalance,
  unpaidOffer,
  USDC,
  type PaywallWorld,
} from '../support/paywall.ts';

// DECISIONS "Agents, submissions and events": no payment goes into the treasury of an agent that is not proven on the
// ledger, by any door. One legacy agent (a row from before records were checked: no Core asset at its address) owns a
// link; every door is tried with a well-formed payment into its treasury — the public paywall, the gateway's
// facilitator (/facilitator/verify and /settle: it settles for any payTo, fee-facilitator-mpp-tools §1, so it refuses
// exactly the treasuries of agents recorded here and unproven), buyer/payment on REST and tRPC (a link's, or pay_to
// directly: only a proven agent's treasury), the MCP pay tool — and nothing moves; discovery does not list its link.

const test = anyTest as TestFn<PaywallWorld>;

test.before(async (t) => {
  const w = await startPaywallApp();
  await fundFeeVault(w);
  t.context = w;
});

/** A buyer-signed x402 v2 payment of a proven link's offer, paying `payTo` instead: what the paywall and facilitator would settle. */
async function paymentInto(w: PaywallWorld, buyer: Keypair, offerUrl: string, payTo: string) {
  const offer = await unpaidOffer(offerUrl);
  const accepted = { ...offer.v2.accepts[0], payTo };
  const requirements: PaymentRequirements = {
    scheme: 'exact',
    network: 'chain-devnet',
    payTo,
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
  const payload = { x402Version: 2, resource: offer.v2.resource, accepted, payload: { transaction } };
  return { header: base64Json(payload), body: { x402Version: 2, paymentPayload: payload, paymentRequirements: accepted } };
}

test.serial('no door settles a payment into the treasury of an unproven agent; the facilitator still settles for anyone else', async (t) => {
  const w = t.context;
  const legacy = await legacyAgentWithLink(w, { overrides: { metadata: { discoverable: true, description: 'proven twin' } } });
  const treasury = treasuryOf(legacy.mint);
  const twin = await createLink(w);
  const buyer = await fundBuyer(w, '1');
  const before = await tokenBalance(w, buyer.publicKey.toBase58());
  const payment = await paymentInto(w, buyer, twin.url, treasury);

  // the public paywall: no offer, and a payment is refused before anything is claimed
  t.is((await unpaidOffer(legacy.url)).status, 409);
  const paid = await fetch(legacy.url, { headers: { 'payment-signature': payment.header } });
  t.is(paid.status, 409);
  t.is(((await paid.json()) as { error: string }).error, 'agent_unproven');

  // the gateway's facilitator, asked directly: verify and settle refuse the unproven agent's treasury
  const verify = await fetch(`${w.app.url}/facilitator/verify`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(payment.body),
  });
  const verdict = (await verify.json()) as { isValid: boolean; invalidReason?: string; invalidMessage?: string };
  t.like(verdict, { isValid: false, invalidReason: 'agent_unproven' });
  t.regex(verdict.invalidMessage ?? '', /not proven/);
  const settle = await fetch(`${w.app.url}/facilitator/settle`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(payment.body),
  });
  t.like(await settle.json(), { success: false, errorReason: 'agent_unproven', transaction: '' });
  // … and settles for any other payTo, as an x402 facilitator does: a wallet nobody recorded here
  const wallet = Keypair.generate().publicKey.toBase58();
  const toWallet = await paymentInto(w, buyer, twin.url, wallet);
  const walletVerdict = await fetch(`${w.app.url}/facilitator/verify`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(toWallet.body),
  });
  t.like(await walletVerdict.json(), { isValid: true });

  // buyer/payment, REST and tRPC: the unproven agent's link, its treasury directly, and an address that is no agent's
  const buyerAgent = await recordAgent(w.app, w.key);
  const executive = Keypair.generate().publicKey.toBase58();
  const bodies = [
    { payment_link: legacy.link.id, buyer_agent: buyerAgent.mint, executive },
    { pay_to: treasury, amount: '0.01', currency: 'USDC', buyer_agent: buyerAgent.mint, executive },
    { pay_to: wallet, amount: '0.01', currency: 'USDC', buyer_agent: buyerAgent.mint, executive },
  ];
  const trpc = createClient({ url: w.app.url, apiKey: w.key });
  for (const body of bodies) {
    const refused = await http(w.app, 'POST', '/v1/buyer/payment/prepare', { key: w.key, body });
    t.is(refused.status, 409, JSON.stringify(refused.body));
    t.is(refused.body.error, 'agent_unproven');
    t.is(errorCode(await trpc.prepare.buyerPayment.mutate(body as never).catch((e: unknown) => e)), 'agent_unproven', `tRPC prepare ${JSON.stringify(body)}`);
    t.is(errorCode(await trpc.buyer.execute.mutate(body as never).catch((e: unknown) => e)), 'agent_unproven', `tRPC execute ${JSON.stringify(body)}`);
  }
  const direct = await http(w.app, 'POST', '/v1/buyer/payment/prepare', { key: w.key, body: bodies[2] });
  t.like(direct.body.details, { pay_to: wallet, found: 'not_recorded' });

  // the agent tool server's pay: the paywall offers it nothing, so nothing is signed
  const ctx = new ToolContext({
    configPath: join(tmpdir(), `svc-money-${buyerAgent.mint}.json`),
    network: 'chain-devnet',
    apiUrl: w.app.url,
    apiKey: w.key,
    rpcUrl: w.rpcUrl,
    explorerUrl: 'https://explorer.solana.com',
    agentMint: buyerAgent.mint,
    executive: Keypair.generate(),
  });
  const mcp = await payPaymentLink.run(ctx, { payment_link: legacy.link.id }).catch((e: unknown) => e);
  t.true(mcp instanceof ToolError, String(mcp));
  t.like(mcp, { code: 'probe_failed', details: { http_status: 409, response: { error: 'agent_unproven' } } });

  // discovery lists the proven agent's discoverable link, never the unproven one's
  const found = await http(w.app, 'GET', '/v1/discover?source=svc&limit=100', { key: w.key });
  t.is(found.status, 200, JSON.stringify(found.body));
  const ids = (found.body.data as { id: string }[]).map((i) => i.id);
  t.false(ids.includes(legacy.link.id), 'the unproven agent’s link is not listed');
  t.true(ids.length > 0 && ids.every((id) => id !== legacy.link.id));

  // nothing moved: the buyer holds its USDC, the treasury nothing; no paid call claimed, no settlement guarded
  t.is(await tokenBalance(w, buyer.publicKey.toBase58()), before);
  t.is(await tokenBalance(w, treasury), 0n);
  const em = w.app.database.orm.em.fork();
  t.is(((await em.execute(`select count(*)::int as n from paid_calls where link_id = ?`, [legacy.link.id])) as { n: number }[])[0]!.n, 0);
  t.is(
    ((await em.execute(`select count(*)::int as n from facilitator_settlements where payer = ?`, [buyer.publicKey.toBase58()])) as { n: number }[])[0]!.n,
    0,
  );
  t.is(
    ((await em.execute(`select count(*)::int as n from events where kind = 'buyer.payment' and agent_asset = ?`, [buyerAgent.mint])) as { n: number }[])[0]!.n,
    0,
    'no buyer payment prepared',
  );
});
