import anyTest, { type ExecutionContext, type TestFn } from 'ava';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Keypair, PublicKey, SystemProgram, Transaction } from '@solana/web3.js';
import {
  ACCOUNT_SIZE,
  AccountLayout,
  MINT_SIZE,
  createAssociatedTokenAccountIdempotentInstruction,
  createInitializeMint2Instruction,
  createMintToInstruction,
} from '@solana/spl-token';
import type { LedgerThread } from '../../adapters/ledger/embedded/ledger-thread.ts';
import { createClient, errorCode } from '../../interfaces/client/index.ts';
import { associatedTokenAccount, payToFor, treasuryOf } from '../../domain/treasury/derive.ts';
import { spendableLamports, TREASURY_RESERVE_LAMPORTS } from '../../domain/treasury/balances.ts';
import { findStable, STABLES, TOKEN_2022_PROGRAM_ID, TOKEN_PROGRAM_ID, type Network } from '../../domain/shared/network.ts';
import { coreAssetData, createRealCoreAsset, writeCoreAsset } from '../support/core-asset.ts';
import { http, networkOfKey, randomAddress, removeDataDir, startTestApp, writeAgentAsset, type HttpResult, type TestApp } from '../support/app.ts';
import { asGraphqlEnums } from '../support/graphql.ts';

// hosted-api §4.4 and DECISIONS "Prepare / submit / events": GET /v1/agents/{mint}, …/treasury/balances and …/pay-to on
// REST, tRPC and GraphQL — the same answers on the three doors, read from the embedded ledgers; another principal's
// agent is 404 agent_not_found, an admin sees its network; a ledger that fails is 502 rpc_unavailable.

interface Ctx {
  app: TestApp;
  /** a devnet key with an owner_wallet (principal wallet:<wallet>) */
  user: { key: string; wallet: string };
  /** another principal on devnet */
  other: string;
  admin: string;
  mainnet: { key: string; wallet: string };
  mainnetAdmin: string;
}

const test = anyTest as TestFn<Ctx>;

const DEVNET_USDC = findStable('chain-devnet', 'USDC')!;
const MAINNET_USDC = findStable('chain-mainnet', 'USDC')!;
const MAINNET_USDG = findStable('chain-mainnet', 'USDG')!;

async function issue(app: TestApp, network: Network, options: { role?: 'user' | 'admin'; wallet?: string } = {}): Promise<string> {
  return (await app.services.access.issueKey({ network, role: options.role ?? 'user', owner_wallet: options.wallet ?? null })).key;
}

test.before(async (t) => {
  const app = await startTestApp();
  const wallet = await randomAddress();
  const mainnetWallet = await randomAddress();
  t.context = {
    app,
    user: { key: await issue(app, 'chain-devnet', { wallet }), wallet },
    other: await issue(app, 'chain-devnet'),
    admin: await issue(app, 'chain-devnet', { role: 'admin' }),
    mainnet: { key: await issue(app, 'chain-mainnet', { wallet: mainnetWallet }), wallet: mainnetWallet },
    mainnetAdmin: await issue(app, 'chain-mainnet', { role: 'admin' }),
  };
});

// ── helpers ──────────────────────────────────────────────────────────────────────────────────────────────────────────

const AGENT_FIELDS = 'mint network owner name uri treasury executive delegations { stableSymbol delegate allowanceAtomic } source registeredAt provenAt';
const BALANCES_FIELDS =
  'agent treasury network lamports reserveLamports spendableLamports tokens { symbol mint tokenProgram tokenAccount amountAtomic decimals } slot';
const PAY_TO_FIELDS = 'agent network treasury payTo { currency asset tokenProgram payTo tokenAccount ready }';

function camel(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(camel);
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [k.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase()), camel(v)]));
}

function gql(app: TestApp, key: string, query: string, variables?: Record<string, unknown>): Promise<HttpResult> {
  return http(app, 'POST', '/graphql', { key, body: { query, variables } });
}

type Read = 'agent' | 'balances' | 'payTo';
const REST_PATH: Record<Read, (mint: string) => string> = {
  agent: (mint) => `/v1/agents/${mint}`,
  balances: (mint) => `/v1/agents/${mint}/treasury/balances`,
  payTo: (mint) => `/v1/agents/${mint}/pay-to`,
};
const GQL: Record<Read, string> = {
  agent: `query ($mint: String!) { agent(mint: $mint) { ${AGENT_FIELDS} } }`,
  balances: `query ($mint: String!) { agent(mint: $mint) { treasuryBalances { ${BALANCES_FIELDS} } } }`,
  payTo: `query ($mint: String!) { agent(mint: $mint) { payTo { ${PAY_TO_FIELDS} } } }`,
};

function trpcCall(app: TestApp, key: string, read: Read, mint: string): Promise<unknown> {
  const client = createClient({ url: app.url, apiKey: key });
  return read === 'agent'
    ? client.agents.get.query({ mint })
    : read === 'balances'
      ? client.agents.balances.query({ mint })
      : client.agents.payTo.query({ mint });
}

/** The answer of one read on the three doors, checked equal (GraphQL in camelCase); the REST body is returned. */
async function readAll(t: ExecutionContext<Ctx>, read: Read, of: { key: string; mint: string; app?: TestApp }): Promise<any> {
  const { key, mint, app = t.context.app } = of;
  const rest = await http(app, 'GET', REST_PATH[read](mint), { key });
  t.is(rest.status, 200, `${read}: ${JSON.stringify(rest.body)}`);
  const trpc = await trpcCall(app, key, read, mint);
  const graph = await gql(app, key, GQL[read], { mint });
  t.is(graph.status, 200, JSON.stringify(graph.body));
  t.is(graph.body.errors, undefined, JSON.stringify(graph.body.errors));
  const graphValue = read === 'agent' ? graph.body.data.agent : read === 'balances' ? graph.body.data.agent.treasuryBalances : graph.body.data.agent.payTo;
  // The slot is read per call and moves on between them: compared apart.
  const steady = (v: any) => (read === 'balances' ? { ...v, slot: 0 } : v);
  t.deepEqual(steady(trpc), steady(rest.body), `${read}: tRPC = REST`);
  // GraphQL answers the enums' UPPER_CASE values (the GraphQL enum convention)
  t.deepEqual(
    steady(graphValue),
    steady(asGraphqlEnums(camel(rest.body), ['network', 'source', 'tokens.tokenProgram', 'payTo.tokenProgram'])),
    `${read}: GraphQL = REST`,
  );
  if (read === 'balances') {
    t.true(Number.isInteger(rest.body.slot) && rest.body.slot > 0);
    t.true((trpc as { slot: number }).slot >= rest.body.slot && graphValue.slot >= (trpc as { slot: number }).slot, 'slots read later are not earlier');
  }
  return rest.body;
}

/** The error of one read on the three doors: REST status + envelope, tRPC data.code, GraphQL extensions.code. */
async function refusedAll(
  t: ExecutionContext<Ctx>,
  read: Read,
  of: { key: string; mint: string; app?: TestApp },
  expected: { code: string; status: number },
): Promise<void> {
  const { key, mint, app = t.context.app } = of;
  const { code, status } = expected;
  const rest = await http(app, 'GET', REST_PATH[read](mint), { key });
  t.is(rest.status, status, `${read}: ${JSON.stringify(rest.body)}`);
  t.is(rest.body.error, code);
  t.is(typeof rest.body.request_id, 'string');
  t.true('details' in rest.body && typeof rest.body.message === 'string');
  const err = await trpcCall(app, key, read, mint).then(
    () => null,
    (e: unknown) => e,
  );
  t.is(errorCode(err), code, `${read}: tRPC`);
  const graph = await gql(app, key, GQL[read], { mint });
  t.is(graph.body.errors?.[0]?.extensions?.code, code, `${read}: GraphQL ${JSON.stringify(graph.body)}`);
  t.is(graph.body.data?.agent ?? null, null);
}

/** Records `body` (its Core asset written first unless `mint` names one already on the ledger). */
async function record(app: TestApp, key: string, body: { mint?: string; owner: string; name?: string; uri?: string }): Promise<any> {
  const mint =
    body.mint ??
    (await writeAgentAsset(app, networkOfKey(key), { owner: body.owner, ...(body.name ? { name: body.name } : {}), ...(body.uri ? { uri: body.uri } : {}) }))
      .mint;
  const res = await http(app, 'POST', '/v1/agents/record', { key, body: { ...body, mint } });
  if (res.status !== 200) throw new Error(`record failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

function ledger(app: TestApp, network: Network): LedgerThread {
  return app.ledgers.embedded[network] as LedgerThread;
}

async function faucet(app: TestApp, key: string, body: Record<string, string>): Promise<void> {
  const res = await http(app, 'POST', '/v1/dev/faucet', { key, body });
  if (res.status !== 200) throw new Error(`faucet failed: ${res.status} ${JSON.stringify(res.body)}`);
}

/** Sets an SPL delegate on an existing token account, as an Approve leaves it (spl-token's AccountLayout). */
async function approveOnLedger(app: TestApp, network: Network, approval: { tokenAccount: string; delegate: string; allowance: bigint }): Promise<void> {
  const { tokenAccount, delegate, allowance } = approval;
  const account = await app.services.ledgers[network]!.getAccount(tokenAccount);
  if (!account) throw new Error(`no token account ${tokenAccount}`);
  const state = AccountLayout.decode(Buffer.from(account.data).subarray(0, ACCOUNT_SIZE));
  const data = Buffer.from(account.data);
  AccountLayout.encode({ ...state, delegateOption: 1, delegate: new PublicKey(delegate), delegatedAmount: allowance }, data);
  await ledger(app, network).setAccount(tokenAccount, { lamports: account.lamports, data, owner: account.owner });
}

/** A fresh mint (of `payer`) under `program`, and `amount` of it minted to the treasury's ATA: real transactions. */
async function mintOtherToken(app: TestApp, network: Network, key: string, token: { treasury: string; program: string; amount: bigint; decimals: number }) {
  const { treasury, program, amount, decimals } = token;
  const payer = Keypair.generate();
  await faucet(app, key, { address: payer.publicKey.toBase58(), sol: '1' });
  const mint = Keypair.generate();
  const ata = associatedTokenAccount(treasury, mint.publicKey.toBase58(), program);
  const programId = new PublicKey(program);
  const l = app.services.ledgers[network]!;
  const { blockhash } = await l.getLatestBlockhash();
  const tx = new Transaction({ feePayer: payer.publicKey, recentBlockhash: blockhash }).add(
    SystemProgram.createAccount({ fromPubkey: payer.publicKey, newAccountPubkey: mint.publicKey, lamports: 10_000_000, space: MINT_SIZE, programId }),
    createInitializeMint2Instruction(mint.publicKey, decimals, payer.publicKey, null, programId),
    createAssociatedTokenAccountIdempotentInstruction(payer.publicKey, new PublicKey(ata), new PublicKey(treasury), mint.publicKey, programId),
    createMintToInstruction(mint.publicKey, new PublicKey(ata), payer.publicKey, amount, [], programId),
  );
  tx.sign(payer, mint);
  const sent = await l.sendTransaction(tx.serialize());
  if (!sent.ok) throw new Error(`mint failed: ${JSON.stringify(sent.err)} ${sent.logs.join(' | ')}`);
  return { mint: mint.publicKey.toBase58(), ata };
}

// ── GET /v1/agents/{mint} ───────────────────────────────────────────────────────────────────────────────────────────

test('a legacy agent row without an asset on the ledger answers its record, unproven, on REST, tRPC and GraphQL', async (t) => {
  const { app, user } = t.context;
  // rows recorded before records were checked against the ledger (DECISIONS "Agents, submissions and events")
  const mint = await randomAddress();
  const registeredAt = new Date('2026-11-01T10:00:00.000Z');
  await app.database.store.agents.insert({
    mint,
    network: 'chain-devnet',
    owner: user.wallet,
    name: 'Weather',
    uri: 'https://example.com/weather.json',
    treasury: treasuryOf(mint),
    executive: null,
    source: 'recorded',
    ownerPrincipal: `wallet:${user.wallet}`,
    registeredAt,
    provenAt: null,
  });
  t.is(await app.services.ledgers['chain-devnet']!.getAccount(mint), null, 'no asset account');
  const agent = await readAll(t, 'agent', { key: user.key, mint });
  t.deepEqual(agent, {
    mint,
    network: 'chain-devnet',
    owner: user.wallet,
    name: 'Weather',
    uri: 'https://example.com/weather.json',
    treasury: treasuryOf(mint),
    executive: null,
    delegations: [],
    source: 'recorded',
    registered_at: registeredAt.toISOString(),
    proven_at: null,
  });
});

test('a recorded agent answers the record it was recorded with, proven when recorded', async (t) => {
  const { app, user } = t.context;
  const recorded = await record(app, user.key, { owner: user.wallet, name: 'Weather', uri: 'https://example.com/weather.json' });
  t.is(recorded.proven_at, recorded.registered_at);
  t.like(await readAll(t, 'agent', { key: user.key, mint: recorded.mint }), {
    owner: user.wallet,
    name: 'Weather',
    uri: 'https://example.com/weather.json',
    source: 'recorded',
    proven_at: recorded.registered_at,
  });
});

test('the Core asset on the ledger wins over the record for owner, name and uri; another Core account does not', async (t) => {
  const { app, user } = t.context;
  const recorded = await record(app, user.key, { owner: user.wallet, name: 'Recorded name', uri: 'https://example.com/recorded.json' });
  const ledgerOwner = await randomAddress();
  await writeCoreAsset(ledger(app, 'chain-devnet'), recorded.mint, { owner: ledgerOwner, name: 'On-chain name', uri: 'https://example.com/onchain.json' });
  const agent = await readAll(t, 'agent', { key: user.key, mint: recorded.mint });
  t.like(agent, {
    owner: ledgerOwner,
    name: 'On-chain name',
    uri: 'https://example.com/onchain.json',
    source: 'recorded',
    treasury: treasuryOf(recorded.mint),
  });

  // A Core account that is not an AssetV1 (key 5 = CollectionV1): the record stands.
  const collection = await record(app, user.key, { owner: user.wallet, name: 'Plain', uri: 'https://example.com/plain.json' });
  const data = coreAssetData({ owner: ledgerOwner, name: 'Collection' });
  data[0] = 5;
  await ledger(app, 'chain-devnet').setAccount(collection.mint, { lamports: 10_000_000n, data, owner: 'CoREENxT6tW1HoK8ypY1SxRMZTcVPm7R94rH4PZNhX7d' });
  t.like(await readAll(t, 'agent', { key: user.key, mint: collection.mint }), { owner: user.wallet, name: 'Plain', uri: 'https://example.com/plain.json' });
});

test('an asset written by the real Metaplex Core program (CreateV1 with a plugin) is decoded by the official deserializer', async (t) => {
  const { app, user } = t.context;
  const ledgerOwner = await randomAddress();
  const real = createRealCoreAsset({ owner: ledgerOwner, name: 'Real agent', uri: 'https://example.com/real.json' });
  t.true(real.data.length > 100, 'plugin header and registry after the asset fields');
  await writeAgentAsset(app, 'chain-devnet', { mint: real.mint, owner: user.wallet });
  await record(app, user.key, { mint: real.mint, owner: user.wallet, name: 'Recorded', uri: 'https://example.com/recorded.json' });
  await ledger(app, 'chain-devnet').setAccount(real.mint, { lamports: real.lamports, data: real.data, owner: real.owner });
  t.like(await readAll(t, 'agent', { key: user.key, mint: real.mint }), { owner: ledgerOwner, name: 'Real agent', uri: 'https://example.com/real.json' });
});

test('an agent recorded by the prepare flow (source prepared) reads the same way', async (t) => {
  const { app, user } = t.context;
  const mint = await randomAddress();
  const registeredAt = new Date('2026-11-20T10:00:00.000Z');
  await app.database.store.agents.insert({
    mint,
    network: 'chain-devnet',
    owner: user.wallet,
    name: 'Minted',
    uri: null,
    treasury: treasuryOf(mint),
    executive: null,
    source: 'prepared',
    ownerPrincipal: `wallet:${user.wallet}`,
    registeredAt,
    provenAt: registeredAt,
  });
  t.like(await readAll(t, 'agent', { key: user.key, mint }), { source: 'prepared', name: 'Minted', uri: null, registered_at: registeredAt.toISOString() });
  // Nothing prepared its token accounts: pay-to says so.
  const payTo = await readAll(t, 'payTo', { key: user.key, mint });
  t.deepEqual(
    payTo.pay_to.map((p: { ready: boolean }) => p.ready),
    [false],
  );
});

test('delegations are read from the treasury token accounts after an SPL Approve', async (t) => {
  const { app, user } = t.context;
  const recorded = await record(app, user.key, { owner: user.wallet });
  const treasury = treasuryOf(recorded.mint);
  await faucet(app, user.key, { address: treasury, token: 'USDC', amount: '3' });
  const executive = await randomAddress();
  await approveOnLedger(app, 'chain-devnet', { tokenAccount: payToFor(recorded.mint, DEVNET_USDC), delegate: executive, allowance: 1_500_000n });
  const agent = await readAll(t, 'agent', { key: user.key, mint: recorded.mint });
  t.deepEqual(agent.delegations, [{ stable_symbol: 'USDC', delegate: executive, allowance_atomic: '1500000' }]);
  // The balance is untouched by the approval.
  const balances = await readAll(t, 'balances', { key: user.key, mint: recorded.mint });
  t.like(balances.tokens[0], { symbol: 'USDC', amount_atomic: '3000000' });

  // Revoked (delegate cleared): no delegation.
  const account = await app.services.ledgers['chain-devnet']!.getAccount(payToFor(recorded.mint, DEVNET_USDC));
  const data = Buffer.from(account!.data);
  AccountLayout.encode({ ...AccountLayout.decode(data.subarray(0, ACCOUNT_SIZE)), delegateOption: 0, delegate: PublicKey.default, delegatedAmount: 0n }, data);
  await ledger(app, 'chain-devnet').setAccount(account!.address, { lamports: account!.lamports, data, owner: account!.owner });
  t.deepEqual((await readAll(t, 'agent', { key: user.key, mint: recorded.mint })).delegations, []);
});

test('an SPL Token account at the treasury ATA whose owner was reassigned is neither a delegation nor a ready pay-to', async (t) => {
  const { app, user } = t.context;
  const recorded = await record(app, user.key, { owner: user.wallet });
  const ata = payToFor(recorded.mint, DEVNET_USDC);
  await faucet(app, user.key, { address: treasuryOf(recorded.mint), token: 'USDC', amount: '1' });
  t.true((await readAll(t, 'payTo', { key: user.key, mint: recorded.mint })).pay_to[0].ready);
  // SetAuthority(AccountOwner) moved it to someone else, who then approved a delegate.
  const account = (await app.services.ledgers['chain-devnet']!.getAccount(ata))!;
  const data = Buffer.from(account.data);
  const stranger = await randomAddress();
  AccountLayout.encode(
    {
      ...AccountLayout.decode(data.subarray(0, ACCOUNT_SIZE)),
      owner: new PublicKey(stranger),
      delegateOption: 1,
      delegate: new PublicKey(stranger),
      delegatedAmount: 5n,
    },
    data,
  );
  await ledger(app, 'chain-devnet').setAccount(ata, { lamports: account.lamports, data, owner: account.owner });
  t.deepEqual((await readAll(t, 'agent', { key: user.key, mint: recorded.mint })).delegations, []);
  t.false((await readAll(t, 'payTo', { key: user.key, mint: recorded.mint })).pay_to[0].ready);
  t.deepEqual((await readAll(t, 'balances', { key: user.key, mint: recorded.mint })).tokens, [], "no longer the treasury's");
});

test('the three reads are limited by the agents.read bucket (hosted-api §8: 300 per 60 s)', async (t) => {
  const { app, user } = t.context;
  const recorded = await record(app, user.key, { owner: user.wallet });
  for (const read of ['agent', 'balances', 'payTo'] as const) {
    const res = await http(app, 'GET', REST_PATH[read](recorded.mint), { key: user.key });
    t.is(res.status, 200);
    t.is(res.headers.get('ratelimit-limit'), '300', read);
  }
});

// ── GET /v1/agents/{mint}/treasury/balances ─────────────────────────────────────────────────────────────────────────

test('balances after funding the treasury: lamports, reserve, spendable and every token account (Token-2022 and non-curated mints included)', async (t) => {
  const { app, user } = t.context;
  const recorded = await record(app, user.key, { owner: user.wallet });
  const treasury = treasuryOf(recorded.mint);

  const empty = await readAll(t, 'balances', { key: user.key, mint: recorded.mint });
  t.like(empty, { agent: recorded.mint, treasury, network: 'chain-devnet', lamports: '0', reserve_lamports: '1000000', spendable_lamports: '0' });

  await faucet(app, user.key, { address: treasury, sol: '0.5', token: 'USDC', amount: '2.5' });
  const other = await mintOtherToken(app, 'chain-devnet', user.key, { treasury, program: TOKEN_2022_PROGRAM_ID, amount: 42_000n, decimals: 3 });
  const balances = await readAll(t, 'balances', { key: user.key, mint: recorded.mint });
  t.deepEqual(
    { ...balances, slot: 0 },
    {
      agent: recorded.mint,
      treasury,
      network: 'chain-devnet',
      lamports: '500000000',
      reserve_lamports: '1000000',
      spendable_lamports: '499000000',
      tokens: [
        {
          symbol: 'USDC',
          mint: DEVNET_USDC.mint,
          token_program: 'spl',
          token_account: payToFor(recorded.mint, DEVNET_USDC),
          amount_atomic: '2500000',
          decimals: 6,
        },
        { symbol: null, mint: other.mint, token_program: 'token-2022', token_account: other.ata, amount_atomic: '42000', decimals: 3 },
      ],
      slot: 0,
    },
  );
  t.true(balances.slot >= empty.slot);
});

test('balances on chain-mainnet list the Token-2022 stable (USDG) beside the SPL ones', async (t) => {
  const { app, mainnet } = t.context;
  const recorded = await record(app, mainnet.key, { owner: mainnet.wallet });
  t.is(recorded.network, 'chain-mainnet');
  const treasury = treasuryOf(recorded.mint);
  await faucet(app, mainnet.key, { address: treasury, sol: '2', token: 'USDG', amount: '7' });
  await faucet(app, mainnet.key, { address: treasury, token: 'USDC', amount: '1.25' });
  const balances = await readAll(t, 'balances', { key: mainnet.key, mint: recorded.mint });
  t.like(balances, { network: 'chain-mainnet', lamports: '2000000000', spendable_lamports: '1999000000' });
  // The funded accounts, curated first in STABLES order (empty accounts the facilitator prepared at record are left out here).
  const held = balances.tokens.map((x: { symbol: string; token_program: string; amount_atomic: string }) => [x.symbol, x.token_program, x.amount_atomic]);
  t.deepEqual(
    held.filter((h: string[]) => h[2] !== '0'),
    [
      ['USDC', 'spl', '1250000'],
      ['USDG', 'token-2022', '7000000'],
    ],
  );
  const usdg = balances.tokens.find((x: { symbol: string }) => x.symbol === 'USDG');
  t.like(usdg, { mint: MAINNET_USDG.mint, token_account: associatedTokenAccount(treasury, MAINNET_USDG.mint, TOKEN_2022_PROGRAM_ID), decimals: 6 });
  t.is(
    balances.tokens.find((x: { symbol: string }) => x.symbol === 'USDC').token_account,
    associatedTokenAccount(treasury, MAINNET_USDC.mint, TOKEN_PROGRAM_ID),
  );
});

test('spendable lamports are max(0, lamports − reserve)', (t) => {
  t.is(TREASURY_RESERVE_LAMPORTS, 1_000_000n);
  t.is(spendableLamports(0n), 0n);
  t.is(spendableLamports(890_880n), 0n);
  t.is(spendableLamports(1_000_000n), 0n);
  t.is(spendableLamports(1_000_001n), 1n);
  t.is(spendableLamports(18_446_744_073_709_551_615n), 18_446_744_073_708_551_615n);
});

// ── GET /v1/agents/{mint}/pay-to ────────────────────────────────────────────────────────────────────────────────────

test('pay-to names the treasury and each stable token account as a payment link offers it, and whether it exists', async (t) => {
  const { app, user, mainnet } = t.context;
  const recorded = await record(app, user.key, { owner: user.wallet });
  const treasury = treasuryOf(recorded.mint);
  const payTo = await readAll(t, 'payTo', { key: user.key, mint: recorded.mint });
  t.deepEqual(payTo, {
    agent: recorded.mint,
    network: 'chain-devnet',
    treasury,
    pay_to: [
      { currency: 'USDC', asset: DEVNET_USDC.mint, token_program: 'spl', pay_to: treasury, token_account: payToFor(recorded.mint, DEVNET_USDC), ready: true },
    ],
  });
  // The same destination a payment link of this agent offers (one derivation).
  const link = await http(app, 'POST', '/v1/payment-links/preview', {
    key: user.key,
    body: { owner_agent: recorded.mint, method: 'GET', price: '$0.01' },
  });
  t.is(link.status, 200, JSON.stringify(link.body));
  t.like(link.body.accepts[0], { pay_to: payTo.pay_to[0].pay_to, pay_to_token_account: payTo.pay_to[0].token_account, asset: payTo.pay_to[0].asset });

  const live = await record(app, mainnet.key, { owner: mainnet.wallet });
  const livePayTo = await readAll(t, 'payTo', { key: mainnet.key, mint: live.mint });
  t.deepEqual(
    livePayTo.pay_to.map((p: { currency: string; token_program: string; token_account: string }) => [p.currency, p.token_program, p.token_account]),
    STABLES['chain-mainnet'].map((s) => [s.symbol, s.tokenProgram, payToFor(live.mint, s)]),
  );
});

// ── ownership ───────────────────────────────────────────────────────────────────────────────────────────────────────

test('another principal gets 404 agent_not_found on every read and door; an admin of the network reads it; the other network does not', async (t) => {
  const { app, user, other, admin, mainnetAdmin } = t.context;
  const recorded = await record(app, user.key, { owner: user.wallet });
  for (const read of ['agent', 'balances', 'payTo'] as const) {
    await refusedAll(t, read, { key: other, mint: recorded.mint }, { code: 'agent_not_found', status: 404 });
    await refusedAll(t, read, { key: mainnetAdmin, mint: recorded.mint }, { code: 'agent_not_found', status: 404 });
    await refusedAll(t, read, { key: user.key, mint: await randomAddress() }, { code: 'agent_not_found', status: 404 });
    await readAll(t, read, { key: admin, mint: recorded.mint });
  }
  const bad = await http(app, 'GET', '/v1/agents/not-an-address/treasury/balances', { key: user.key });
  t.is(bad.status, 400);
  t.is(bad.body.error, 'invalid_request');
});

// ── a failing ledger ────────────────────────────────────────────────────────────────────────────────────────────────

/** A JSON-RPC proxy in front of the embedded devnet that answers 503 while `broken` (the fault-injecting node). */
async function faultyNode(upstream: string): Promise<{ url: string; broken: boolean; server: Server }> {
  const node = { url: '', broken: false, server: undefined as unknown as Server };
  node.server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (node.broken) {
        res.writeHead(503, { 'content-type': 'text/plain' }).end('node down');
        return;
      }
      fetch(upstream, { method: 'POST', headers: { 'content-type': 'application/json' }, body: Buffer.concat(chunks) })
        .then(async (r) => res.writeHead(r.status, { 'content-type': 'application/json' }).end(Buffer.from(await r.arrayBuffer())))
        .catch(() => res.writeHead(502).end());
    });
  });
  await new Promise<void>((resolve) => node.server.listen(0, '127.0.0.1', resolve));
  node.url = `http://127.0.0.1:${(node.server.address() as AddressInfo).port}`;
  return node;
}

test('a ledger that fails answers 502 rpc_unavailable in the envelope on every read and door, and reads again once it is back', async (t) => {
  const { app, user } = t.context;
  const recorded = await record(app, user.key, { owner: user.wallet });
  const node = await faultyNode(app.ledgers.rpcUrls['chain-devnet']!);
  // A second gateway on the same database whose devnet is the rpc adapter over that node.
  const remote = await startTestApp({ databaseUrl: app.database.url, env: { SVC_DEVNET_LEDGER: node.url, SVC_JOBS: 'off' } });
  t.teardown(async () => {
    await remote.close();
    await removeDataDir(remote.dataDir);
    await new Promise((resolve) => node.server.close(resolve));
  });
  t.like(await readAll(t, 'agent', { key: user.key, mint: recorded.mint, app: remote }), { mint: recorded.mint, owner: user.wallet });
  node.broken = true;
  for (const read of ['agent', 'balances', 'payTo'] as const)
    await refusedAll(t, read, { key: user.key, mint: recorded.mint, app: remote }, { code: 'rpc_unavailable', status: 502 });
  // ownership is decided before the ledger is read: another principal still gets 404
  await refusedAll(t, 'balances', { key: t.context.other, mint: recorded.mint, app: remote }, { code: 'agent_not_found', status: 404 });
  node.broken = false;
  t.like(await readAll(t, 'balances', { key: user.key, mint: recorded.mint, app: remote }), { agent: recorded.mint });
});
