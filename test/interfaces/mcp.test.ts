import anyTest, { type ExecutionContext, type TestFn } from 'ava';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Keypair } from '@solana/web3.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Ajv } from 'ajv';
import { http, issueKey, randomAddress, recordAgent, startTestApp, writeAgentAsset, type TestApp } from '../support/app.ts';
import { metaplexTest } from '../support/programs.ts';
import { until } from '../support/until.ts';
import { encodeBase58 } from '../../domain/shared/base58.ts';
import { STABLES } from '../../domain/shared/network.ts';
import { feeFor, U64_MAX } from '../../domain/shared/money.ts';
import { RUN_TS } from '../support/commands.ts';
import { spawnChild } from '../support/children.ts';

// the agent tool server as an MCP host runs it — a real subprocess (`npm run mcp`: node scripts/run.mjs interfaces/mcp/main.ts)
// spoken to over stdio by the SDK's own Client — against a gateway on the embedded devnet running Metaplex Core.

const test = anyTest as TestFn<{ app: TestApp; key: string; dir: string; servers: Server[] }>;
const USDC = STABLES['chain-devnet'][0]!;

const SPEC_TOOLS = [
  'svc_register_agent',
  'svc_get_identity',
  'svc_resolve_identity',
  'svc_verify_identity',
  'svc_check_treasury_balance',
  'svc_pay_payment_link',
  'svc_create_payment_link',
  'svc_withdraw_treasury',
  'svc_set_spend_limit',
  'svc_get_spend_limit',
  'svc_receipts',
  'svc_get_receipt',
  'svc_transaction_history',
  'svc_daily_transactions',
  'svc_discover',
  'svc_registry_endpoints',
  'svc_reputation',
];

test.before(async (t) => {
  const app = await startTestApp();
  t.context = { app, key: await issueKey(app), dir: await mkdtemp(join(tmpdir(), 'svc-mcp-')), servers: [] };
});

test.after.always(async (t) => {
  for (const s of t.context.servers ?? []) s.close();
  if (t.context.dir) await rm(t.context.dir, { recursive: true, force: true });
});

interface Tools {
  client: Client;
  configPath: string;
  stderr: () => string;
  /** every text the tool server answered, to check no secret was ever printed */
  outputs: string[];
  call(name: string, args?: Record<string, unknown>): Promise<{ isError: boolean; body: any }>;
}

/** Starts `npm run mcp`'s entry point as a subprocess and connects the SDK client to it over stdio. */
async function startTools(t: ExecutionContext<{ app: TestApp; key: string; dir: string }>, name: string, env: Record<string, string> = {}): Promise<Tools> {
  const { app, key, dir } = t.context;
  const configPath = join(dir, name, 'agent.json');
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [RUN_TS, 'interfaces/mcp/main.ts'],
    env: {
      PATH: process.env.PATH ?? '',
      HOME: dir,
      SVC_AGENT_CONFIG: configPath,
      SVC_API_URL: app.url,
      SVC_API_KEY: key,
      SVC_RPC_URL: app.ledgers.rpcUrls['chain-devnet']!,
      ...env,
    },
    stderr: 'pipe',
  });
  let stderr = '';
  transport.stderr?.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
  const client = new Client({ name: 'ava', version: '1.0.0' });
  await client.connect(transport);
  t.teardown(() => client.close());
  const outputs: string[] = [];
  return {
    client,
    configPath,
    stderr: () => stderr,
    outputs,
    async call(tool, args = {}) {
      const res = await client.callTool({ name: tool, arguments: args }, undefined, { timeout: 120_000 });
      const content = res.content as { type: string; text: string }[];
      t.is(content.length, 1, `${tool}: one content item`);
      t.is(content[0]!.type, 'text');
      outputs.push(content[0]!.text);
      return { isError: res.isError === true, body: JSON.parse(content[0]!.text) };
    },
  };
}

async function ok(tools: Tools, name: string, args: Record<string, unknown> = {}): Promise<any> {
  const res = await tools.call(name, args);
  if (res.isError) throw new Error(`${name} failed: ${JSON.stringify(res.body)}`);
  return res.body;
}

async function faucet(app: TestApp, key: string, body: Record<string, unknown>): Promise<void> {
  const res = await http(app, 'POST', '/v1/dev/faucet', { key, body });
  if (res.status !== 200) throw new Error(`faucet: ${res.status} ${JSON.stringify(res.body)}`);
}

/** A loopback HTTP server answering `handler` (JSON), closed after the run. */
async function serve(
  t: ExecutionContext<{ servers: Server[] }>,
  handler: (url: string) => { status: number; headers?: Record<string, string>; body: unknown },
): Promise<string> {
  const server = createServer((req, res) => {
    const out = handler(req.url ?? '/');
    res.writeHead(out.status, { 'content-type': 'application/json', ...out.headers }).end(JSON.stringify(out.body));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.context.servers.push(server);
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** Step 1 (generate), step 2 before funding, the faucet, step 2: a registered agent. */
async function register(t: ExecutionContext<{ app: TestApp; key: string; dir: string; servers: Server[] }>, tools: Tools, name: string) {
  const step1 = await ok(tools, 'svc_register_agent', { mode: 'generate', name, description: `${name} for the tool-server test` });
  t.like(step1, { kind: 'register_agent', status: 'funding_required', network: 'chain-devnet', required_sol: '0.01', balance_sol: '0' });
  t.true(Array.isArray(step1.instructions) && step1.instructions.length > 0);
  const pending = JSON.parse(await readFile(tools.configPath, 'utf8'));
  t.truthy(pending.pending_register?.executive_keypair, 'step 1 stores the key as pending_register');
  t.is((await stat(tools.configPath)).mode & 0o777, 0o600, 'the configuration file is owner-only');

  // Step 2 before the key holds 0.01 SOL re-checks the balance and answers funding_required again.
  const early = await ok(tools, 'svc_register_agent');
  t.like(early, { status: 'funding_required', executive_pubkey: step1.executive_pubkey });

  await faucet(t.context.app, t.context.key, { address: step1.executive_pubkey, sol: '0.05' });
  const done = await ok(tools, 'svc_register_agent');
  t.like(done, {
    kind: 'register_agent',
    status: 'registered',
    network: 'chain-devnet',
    executive_pubkey: step1.executive_pubkey,
    config_path: tools.configPath,
  });
  t.truthy(done.mint);
  t.truthy(done.treasury_address);
  t.truthy(done.create_signature);
  t.truthy(done.delegation_signature);
  const config = JSON.parse(await readFile(tools.configPath, 'utf8'));
  t.like(config, { version: 1, agent_mint: done.mint, network: 'chain-devnet', pending_register: null });
  t.is((await stat(tools.configPath)).mode & 0o777, 0o600);
  return { ...done, secret: config.executive_keypair as string };
}

/** The paths of the properties of a JSON Schema that carry no description, at any depth. */
function undescribedProperties(schema: unknown, at: string): string[] {
  if (typeof schema !== 'object' || schema === null) return [];
  if (Array.isArray(schema)) return schema.flatMap((item, i) => undescribedProperties(item, `${at}[${i}]`));
  const out: string[] = [];
  for (const [key, value] of Object.entries(schema)) {
    if (key === 'properties' && typeof value === 'object' && value !== null) {
      for (const [name, property] of Object.entries(value as Record<string, { description?: string }>)) {
        if (!property.description) out.push(`${at}.${name}`);
        out.push(...undescribedProperties(property, `${at}.${name}`));
      }
    } else out.push(...undescribedProperties(value, at));
  }
  return out;
}

test.serial('lists exactly the 17 tools of the spec, each with a valid JSON Schema for its input, every property described', async (t) => {
  const tools = await startTools(t, 'list');
  const listed = await tools.client.listTools();
  t.deepEqual(listed.tools.map((x) => x.name).sort(), [...SPEC_TOOLS].sort());
  t.is(listed.tools.length, 17);
  const ajv = new Ajv({ strict: false, validateFormats: false });
  for (const tool of listed.tools) {
    t.is(tool.inputSchema.type, 'object', tool.name);
    t.true(ajv.validateSchema(tool.inputSchema) as boolean, `${tool.name}: ${JSON.stringify(ajv.errors)}`);
    t.truthy(tool.description, tool.name);
    // every input property a host shows the model says what it is (the zod schemas' descriptions, written once)
    t.deepEqual(undescribedProperties(tool.inputSchema, tool.name), [], tool.name);
  }
  const limit = listed.tools.find((x) => x.name === 'svc_set_spend_limit')!.inputSchema as any;
  t.deepEqual(limit.properties.mode.enum, ['unlimited', 'amount', 'revoke']);
  t.deepEqual(limit.required, ['symbol', 'mode']);
});

test.serial('--http PORT serves the same 17 tools over streamable HTTP', async (t) => {
  const { app, key, dir } = t.context;
  const child = spawnChild(process.execPath, [RUN_TS, 'interfaces/mcp/main.ts', '--http', '0'], {
    env: { PATH: process.env.PATH ?? '', HOME: dir, SVC_AGENT_CONFIG: join(dir, 'http', 'agent.json'), SVC_API_URL: app.url, SVC_API_KEY: key },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  t.teardown(() => void child.kill('SIGTERM'));
  const url = await new Promise<string>((resolve, reject) => {
    let err = '';
    child.stderr.on('data', (c: Buffer) => {
      err += c.toString('utf8');
      const m = /(http:\/\/127\.0\.0\.1:\d+\/mcp)/.exec(err);
      if (m) resolve(m[1]!);
    });
    child.on('exit', (code) => reject(new Error(`exited ${code}: ${err}`)));
  });
  const client = new Client({ name: 'ava-http', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  t.teardown(() => client.close());
  const listed = await client.listTools();
  t.deepEqual(listed.tools.map((x) => x.name).sort(), [...SPEC_TOOLS].sort());
  const res = await client.callTool({ name: 'svc_discover', arguments: { source: 'svc' } });
  t.falsy(res.isError);
  t.deepEqual(JSON.parse((res.content as { text: string }[])[0]!.text), { data: [], next_cursor: null, has_more: false });
  const noAgent = await client.callTool({ name: 'svc_get_spend_limit', arguments: {} });
  t.true(noAgent.isError);
  t.is(JSON.parse((noAgent.content as { text: string }[])[0]!.text).error, 'no_agent');
});

test.serial('failures the spec names: no_agent, import without a secret, a bad spend limit, wrong_network, an MPP-only offer', async (t) => {
  const { app } = t.context;
  const tools = await startTools(t, 'failures');
  for (const name of ['svc_check_treasury_balance', 'svc_set_spend_limit', 'svc_receipts', 'svc_pay_payment_link']) {
    const args = name === 'svc_set_spend_limit' ? { symbol: 'USDC', mode: 'unlimited' } : name === 'svc_pay_payment_link' ? { payment_link: 'x' } : {};
    const res = await tools.call(name, args);
    t.true(res.isError, name);
    t.is(res.body.error, 'no_agent', name);
  }
  const identity = await ok(tools, 'svc_get_identity');
  t.like(identity, { agent_mint: null, network: 'chain-devnet' });

  const noSecret = await tools.call('svc_register_agent', { mode: 'import', name: 'Imported' });
  t.true(noSecret.isError);
  t.is(noSecret.body.error, 'invalid_request');
  t.regex(noSecret.body.message, /executive_secret_base58/);
  const bad = await tools.call('svc_register_agent', { mode: 'import', executive_secret_base58: 'not-base58!' });
  t.like(bad.body, { error: 'invalid_request' });

  const imported = Keypair.generate();
  const secret = encodeBase58(imported.secretKey);
  const step1 = await ok(tools, 'svc_register_agent', { mode: 'import', executive_secret_base58: secret, name: 'Imported' });
  t.like(step1, { status: 'funding_required', executive_pubkey: imported.publicKey.toBase58() });
  const again = await tools.call('svc_register_agent', { mode: 'generate', name: 'Another' });
  t.like(again.body, { error: 'registration_pending' });
  t.false(
    tools.outputs.some((o) => o.includes(secret)),
    'no answer carries the secret',
  );
  t.false(tools.stderr().includes(secret), 'nothing logged carries the secret');

  // An agent given by the environment (the pay tool probes before it signs anything).
  const executive = Keypair.generate();
  const configured = await startTools(t, 'configured', { SVC_AGENT_MINT: await randomAddress(), SVC_EXECUTIVE_KEY: encodeBase58(executive.secretKey) });
  for (const [args, why] of [
    [{ symbol: 'USDC', mode: 'amount' }, 'missing'],
    [{ symbol: 'USDC', mode: 'amount', amount: '0' }, 'zero'],
  ] as const) {
    const res = await configured.call('svc_set_spend_limit', { ...args });
    t.true(res.isError, why);
    t.is(res.body.error, 'invalid_request', why);
    t.is(res.body.details?.path, 'amount', why);
  }

  // An executive that is not the agent's owner cannot set its spend limit: forbidden, never internal_error.
  const owned = await recordAgent(app, t.context.key);
  const notOwner = await startTools(t, 'not-owner', { SVC_AGENT_MINT: owned.mint, SVC_EXECUTIVE_KEY: encodeBase58(executive.secretKey) });
  const notOwnerRefused = await notOwner.call('svc_set_spend_limit', { symbol: 'USDC', mode: 'unlimited' });
  t.true(notOwnerRefused.isError);
  t.is(notOwnerRefused.body.error, 'forbidden', JSON.stringify(notOwnerRefused.body));
  t.deepEqual(notOwnerRefused.body.details.missing_signers, [owned.owner]);

  // F§4.3/§5: without SVC_API_KEY the public reads work (svc_discover, svc_get_identity's own facts); a tool that calls
  // the API with a key says to set it.
  const shown = await http(app, 'POST', '/v1/payment-links', {
    key: t.context.key,
    body: {
      label: 'Keyless discovery',
      owner_agent: owned.mint,
      method: 'GET',
      price: '$0.01',
      metadata: { discoverable: true },
      response: { body: { ok: true } },
    },
  });
  t.is(shown.status, 201, JSON.stringify(shown.body));
  const keyless = await startTools(t, 'keyless', {
    SVC_API_KEY: '',
    SVC_NETWORK: 'chain-devnet',
    SVC_AGENT_MINT: owned.mint,
    SVC_EXECUTIVE_KEY: encodeBase58(executive.secretKey),
  });
  const found = await ok(keyless, 'svc_discover', { q: 'keyless', source: 'svc' });
  t.deepEqual(
    found.data.map((i: any) => [i.id, i.network]),
    [[shown.body.id, 'chain-devnet']],
  );
  t.like(await ok(keyless, 'svc_get_identity'), {
    agent_mint: owned.mint,
    network: 'chain-devnet',
    executive_pubkey: executive.publicKey.toBase58(),
    owner: null,
  });
  for (const [name, args] of [
    ['svc_receipts', {}],
    ['svc_create_payment_link', { label: 'x', method: 'GET', price: '$0.01', response: { body: {} } }],
  ] as const) {
    const res = await keyless.call(name, args);
    t.true(res.isError, name);
    t.is(res.body.error, 'api_key_required', name);
    t.regex(res.body.message, /set SVC_API_KEY/, name);
  }

  // wrong_network: a chain-mainnet link, paid by a chain-devnet agent.
  const mainnetKey = await issueKey(app, 'chain-mainnet');
  const seller = await recordAgent(app, mainnetKey);
  const link = await http(app, 'POST', '/v1/payment-links', {
    key: mainnetKey,
    body: { label: 'Mainnet report', owner_agent: seller.mint, method: 'GET', price: '$0.01', response: { body: { ok: true } } },
  });
  t.is(link.status, 201, JSON.stringify(link.body));
  const wrong = await configured.call('svc_pay_payment_link', { url: link.body.share_url });
  t.true(wrong.isError);
  t.is(wrong.body.error, 'wrong_network');
  const wrongById = await configured.call('svc_pay_payment_link', { payment_link: link.body.id });
  t.true(wrongById.isError);
  t.is(wrongById.body.error, 'wrong_network', JSON.stringify(wrongById.body));

  // An MPP offer without a Solana charge challenge (a problem+json 402, no WWW-Authenticate) is refused clearly.
  const mpp = await serve(t, () => ({
    status: 402,
    headers: { 'content-type': 'application/problem+json' },
    body: { type: 'https://paymentauth.org/problems/payment-required', title: 'Payment required', challengeId: 'ch_1' },
  }));
  const refused = await configured.call('svc_pay_payment_link', { url: `${mpp}/paid` });
  t.true(refused.isError);
  t.is(refused.body.error, 'unsupported_offer');
  t.regex(refused.body.message, /no Solana charge challenge/);
});

metaplexTest(test, 'an agent’s day over MCP: register two agents, sell, pay, receipts, history and daily buckets, spend limits, withdraw', async (t) => {
  t.timeout(10 * 60_000);
  const { app, key } = t.context;
  const ledger = app.services.ledgers['chain-devnet']!;
  const seller = await startTools(t, 'seller');
  const buyer = await startTools(t, 'buyer');

  const s = await register(t, seller, 'Weather seller');
  const b = await register(t, buyer, 'Weather buyer');
  t.not(s.mint, b.mint);

  // Later tools work without a restart: the in-memory agent was replaced.
  const me = await ok(buyer, 'svc_get_identity');
  t.like(me, {
    agent_mint: b.mint,
    network: 'chain-devnet',
    treasury_address: b.treasury_address,
    executive_pubkey: b.executive_pubkey,
    owner: b.executive_pubkey,
  });
  const limits0 = await ok(buyer, 'svc_get_spend_limit');
  t.like(limits0.limits[0], {
    symbol: 'USDC',
    delegate: b.executive_pubkey,
    delegate_matches_executive: true,
    unlimited: true,
    remaining_atomic: U64_MAX.toString(),
  });

  // The buyer's treasury gets 5 USDC from the faucet.
  await faucet(app, key, { address: b.treasury_address, token: 'USDC', amount: '5' });
  const funded = await ok(buyer, 'svc_check_treasury_balance');
  t.like(funded, { agent: b.mint, treasury_address: b.treasury_address, USDC: { amount: '5', amount_atomic: '5000000' }, USDT: null, USDG: null });
  t.truthy(funded.native.sol);

  // The seller creates a discoverable link.
  const link = await ok(seller, 'svc_create_payment_link', {
    label: 'Weather forecast',
    method: 'GET',
    price: '$0.25',
    response: { body: { forecast: 'sunny' } },
    metadata: { discoverable: true, description: 'Tomorrow’s weather', capabilities: ['weather.forecast'] },
  });
  t.like(link, { owner_agent: s.mint, price: '$0.25', network: 'chain-devnet' });

  // Discovery: the link (source svc) and both agents' registration documents (source registry).
  const found = await ok(buyer, 'svc_discover', { q: 'weather' });
  const item = found.data.find((x: any) => x.source === 'svc' && x.id === link.id);
  t.like(item, { name: 'Weather forecast', agent: s.mint, url: link.share_url, price_usd: '0.25', capabilities: ['weather.forecast'], protocol: 'x402' });
  // onboarding let the gateway host the seller's registration-v1 document: its URL is in the asset and the record
  const sellerItem = found.data.find((x: any) => x.source === 'registry' && x.id === s.mint);
  t.truthy(sellerItem);
  t.regex(sellerItem.url, new RegExp(`/v1/agents/${s.mint}/registration\\.json\\?network=chain-devnet$`));
  const hosted = await ok(buyer, 'svc_registry_endpoints', { id: s.mint });
  t.like(hosted, { id: s.mint, source: 'registry', registration_url: sellerItem.url });
  t.true(
    hosted.endpoints.some((e: any) => e.name === 'receipts' && e.url.endsWith(`/v1/receipts/${s.mint}`)),
    JSON.stringify(hosted.endpoints),
  );
  const cheap = await ok(buyer, 'svc_discover', { max_price_usd: '0.1', source: 'svc' });
  t.false(
    cheap.data.some((x: any) => x.id === link.id),
    'max_price_usd filters',
  );
  const byCapability = await ok(buyer, 'svc_discover', { capability: 'weather.forecast' });
  t.deepEqual(
    byCapability.data.map((x: any) => x.id),
    [link.id],
  );

  // The buyer pays the link from its treasury (x402, signed in the tool process).
  const paid = await ok(buyer, 'svc_pay_payment_link', { payment_link: link.id });
  t.like(paid, { status: 'paid', http_status: 200, network: 'chain-devnet', response: { forecast: 'sunny' } });
  t.truthy(paid.tx_signature);
  t.regex(paid.receipt_hash, /^[0-9a-f]{64}$/);
  const gross = 250_000n + feeFor(250_000n, app.services.settings.fee.bps);

  // Both see their receipts.
  const spent = await ok(buyer, 'svc_receipts');
  t.is(spent.data.length, 1);
  t.like(spent.data[0], { kind: 'spend', agent: b.mint, tx_sig: paid.tx_signature, receipt_hash: paid.receipt_hash });
  const one = await ok(buyer, 'svc_get_receipt', { receipt_hash: paid.receipt_hash });
  t.like(one, { receipt_hash: paid.receipt_hash, kind: 'spend', source: 'buyer', network: 'chain-devnet' });
  const earned = await ok(seller, 'svc_receipts', { kind: 'earn' });
  t.is(earned.data.length, 1);
  t.like(earned.data[0], { kind: 'earn', agent: s.mint, tx_sig: paid.tx_signature, price: { amount_atomic: '250000' } });

  // History and daily buckets match the receipts (USD strings; spend counts the gross).
  const usd = (atomic: bigint) => (Number(atomic) / 1e6).toString();
  const buyerHistory = await ok(buyer, 'svc_transaction_history');
  t.like(buyerHistory, { days: 7, sent_usd: usd(gross), received_usd: '0', net_usd: `-${usd(gross)}`, sent_count: 1, received_count: 0 });
  t.deepEqual(
    buyerHistory.receipts.map((r: any) => r.receipt_hash),
    [paid.receipt_hash],
  );
  const sellerHistory = await ok(seller, 'svc_transaction_history', { days: 1 });
  t.like(sellerHistory, { days: 1, sent_usd: '0', received_usd: '0.25', net_usd: '0.25', received_count: 1 });
  const buyerDaily = await ok(buyer, 'svc_daily_transactions');
  t.is(buyerDaily.buckets.length, 7);
  const today = new Date().toISOString().slice(0, 10);
  t.like(buyerDaily.buckets.at(-1), { date: today, sent_usd: usd(gross), received_usd: '0', sent_count: 1, received_count: 0 });
  t.true(buyerDaily.buckets.slice(0, -1).every((x: any) => x.sent_count === 0 && x.received_count === 0));
  t.like(buyerDaily.totals, { sent_usd: buyerHistory.sent_usd, received_usd: buyerHistory.received_usd, net_usd: buyerHistory.net_usd });
  const sellerDaily = await ok(seller, 'svc_daily_transactions', { days: 3 });
  t.like(sellerDaily.buckets.at(-1), { date: today, received_usd: '0.25', received_count: 1 });

  // Reputation and identity of the seller, seen by the buyer: the earn receipt counts once the ledger check verified it
  // (checked right after it is published).
  await until(
    'the earn receipt verified',
    async () => {
      const [r] = await app.database.store.receipts.listByAgent('chain-devnet', s.mint, { limit: 1 });
      return r?.verification.status === 'verified' ? r : undefined;
    },
    { everyMs: 100 },
  );
  const rep = await ok(buyer, 'svc_reputation', { mint: s.mint });
  t.like(rep, { agent: s.mint, settled_calls: 1, volume_usd: '0.25', rating: 1, dispute_rate: 0 });
  const resolved = await ok(buyer, 'svc_resolve_identity', { mint: s.mint });
  t.is(resolved.mint, s.mint);
  const verdict = await ok(buyer, 'svc_verify_identity', { mint: s.mint, intent: 'pay' });
  t.true(['allow', 'warn', 'deny'].includes(verdict.verdict));

  // Spend limit: an amount, then revoke.
  const remaining = await ok(buyer, 'svc_get_spend_limit', { symbol: 'USDC' });
  t.is(remaining.limits[0].remaining_atomic, (U64_MAX - gross).toString(), 'the payment spent from the delegation');
  t.true(remaining.limits[0].unlimited);
  t.is(remaining.limits[0].treasury_balance_atomic, (5_000_000n - gross).toString());
  const set = await ok(buyer, 'svc_set_spend_limit', { symbol: 'USDC', mode: 'amount', amount: '1.5' });
  t.like(set, { symbol: 'USDC', mode: 'amount', delegate: b.executive_pubkey, allowance_atomic: '1500000' });
  t.like((await ok(buyer, 'svc_get_spend_limit', { symbol: 'USDC' })).limits[0], { remaining: '1.5', unlimited: false, delegate_matches_executive: true });

  // The buyer pays a link on the MPP rail the same way (a Solana charge credential, signed in the tool
  // process); both agents get v0.2 receipts naming the challenge.
  const mppLink = await ok(seller, 'svc_create_payment_link', {
    label: 'Weather over MPP',
    method: 'GET',
    price: '$0.25',
    protocol: 'mpp',
    response: { body: { forecast: 'rain' } },
  });
  const mppPaid = await ok(buyer, 'svc_pay_payment_link', { payment_link: mppLink.id });
  t.like(mppPaid, { status: 'paid', protocol: 'mpp', http_status: 200, network: 'chain-devnet', response: { forecast: 'rain' } });
  t.regex(mppPaid.receipt_hash, /^[0-9a-f]{64}$/);
  const mppSpend = await ok(buyer, 'svc_get_receipt', { receipt_hash: mppPaid.receipt_hash });
  t.like(mppSpend, { v: '0.2', protocol: 'mpp', kind: 'spend', agent: b.mint, mpp_settlement_tx: mppPaid.tx_signature });
  t.like((await ok(buyer, 'svc_get_spend_limit', { symbol: 'USDC' })).limits[0], { remaining_atomic: (1_500_000n - gross).toString() });
  // A link whose gross is above what the delegation has left: insufficient_allowance (F§2.2.6, F§7) with the numbers,
  // so an agent told to gross up sees the code it was told about; nothing moves.
  const dear = await ok(seller, 'svc_create_payment_link', { label: 'Dear weather', method: 'GET', price: '$1.40', response: { body: { forecast: 'gold' } } });
  const short = await buyer.call('svc_pay_payment_link', { payment_link: dear.id });
  t.true(short.isError, JSON.stringify(short.body));
  t.is(short.body.error, 'insufficient_allowance', JSON.stringify(short.body));
  t.like((await ok(buyer, 'svc_get_spend_limit', { symbol: 'USDC' })).limits[0], { remaining_atomic: (1_500_000n - gross).toString() }, 'nothing moved');
  const revoked = await ok(buyer, 'svc_set_spend_limit', { symbol: 'USDC', mode: 'revoke' });
  t.like(revoked, { symbol: 'USDC', mode: 'revoke', delegate: null });
  t.like((await ok(buyer, 'svc_get_spend_limit', { symbol: 'USDC' })).limits[0], { delegate: null, remaining_atomic: '0', delegate_matches_executive: false });

  // The seller withdraws 0.1 USDC and 0.001 SOL to a wallet.
  const wallet = await randomAddress();
  await faucet(app, key, { address: s.treasury_address, sol: '0.01' });
  const withdrawn = await ok(seller, 'svc_withdraw_treasury', { asset: 'USDC', amount: '0.1', destination: wallet });
  t.like(withdrawn, { status: 'confirmed', asset: 'USDC', destination: wallet });
  t.truthy(withdrawn.tx_signature);
  const sol = await ok(seller, 'svc_withdraw_treasury', { asset: 'SOL', amount: '0.001', destination: wallet });
  t.like(sol, { status: 'confirmed', asset: 'SOL' });
  const tokens = await ledger.getTokenBalances(wallet, { mint: USDC.mint });
  t.is(
    tokens.reduce((sum, x) => sum + x.amount, 0n),
    100_000n,
  );
  t.is(await ledger.getBalance(wallet), 1_000_000n);
  const sellerBalance = await ok(seller, 'svc_check_treasury_balance');
  t.like(sellerBalance, { USDC: { amount: '0.4' } }, 'two sales of 0.25 (x402 and MPP) less the 0.1 withdrawn');

  // svc_registry_endpoints expands a registry item: the registration document of an agent the gateway knows.
  const docs = await serve(t, () => ({
    status: 200,
    body: {
      type: 'https://eips.ethereum.org/EIPS/eip-8004#registration-v1',
      name: 'Docs agent',
      description: 'd',
      image: 'https://example.com/a.png',
      services: [{ name: 'weather', endpoint: link.share_url }],
    },
  }));
  const { mint: documented, owner: documentedOwner } = await writeAgentAsset(app, 'chain-devnet', { name: 'Docs agent', uri: `${docs}/registration.json` });
  const recorded = await http(app, 'POST', '/v1/agents/record', {
    key,
    body: { mint: documented, owner: documentedOwner, name: 'Docs agent', uri: `${docs}/registration.json` },
  });
  t.is(recorded.status, 200, JSON.stringify(recorded.body));
  const expanded = await ok(buyer, 'svc_registry_endpoints', { id: documented });
  t.like(expanded, { id: documented, source: 'registry', registration_url: `${docs}/registration.json`, name: 'Docs agent' });
  t.like(expanded.endpoints[0], {
    name: 'weather',
    method: 'GET',
    url: link.share_url,
    protocol: 'x402',
    supported_usd: true,
    probe_status: 'payment_required',
  });
  t.like(expanded.endpoints[0].pricing[0], { network: 'chain-devnet', currency: 'USDC', amount_atomic: '250000', amount_usd: '0.25' });

  // The secret key was never printed: not in any answer, not on stderr.
  for (const [tools, secret] of [
    [seller, s.secret],
    [buyer, b.secret],
  ] as const) {
    t.false(tools.outputs.some((o) => o.includes(secret)));
    t.false(tools.stderr().includes(secret));
  }
});

metaplexTest(test, 'step 2 resumes from pending_register after a failure: an asset already minted is recorded and delegated, not minted again', async (t) => {
  const { app, key } = t.context;
  const first = await startTools(t, 'resume');
  const step1 = await ok(first, 'svc_register_agent', { name: 'Resumed agent' });
  await faucet(app, key, { address: step1.executive_pubkey, sol: '0.05' });
  await first.client.close();

  // What step 2 leaves when it dies after submitting the mint: the asset exists and pending_register names it.
  const config = JSON.parse(await readFile(first.configPath, 'utf8'));
  const { Transaction } = await import('@solana/web3.js');
  const { parseSecret } = await import('../../interfaces/mcp/config.ts');
  const executive = parseSecret(config.pending_register.executive_keypair)!;
  const prepared = await http(app, 'POST', '/v1/agents/prepare', {
    key,
    body: { owner: step1.executive_pubkey, payer: step1.executive_pubkey, name: 'Resumed agent', uri: 'https://example.com/resumed.json' },
  });
  t.is(prepared.status, 200, JSON.stringify(prepared.body));
  const tx = Transaction.from(Buffer.from(prepared.body.transaction.base64, 'base64'));
  tx.partialSign(executive);
  const submitted = await http(app, 'POST', '/v1/submit', {
    key,
    body: { event_id: prepared.body.event_id, transaction_base64: tx.serialize().toString('base64') },
  });
  t.is(submitted.status, 202, JSON.stringify(submitted.body));
  const mint = String(prepared.body.echo.asset);
  const { writeConfigFile } = await import('../../interfaces/mcp/config.ts');
  await writeConfigFile(first.configPath, { ...config, pending_register: { ...config.pending_register, mint, create_signature: submitted.body.signature } });

  const again = await startTools(t, 'resume');
  const done = await ok(again, 'svc_register_agent');
  t.like(done, { status: 'registered', mint, create_signature: submitted.body.signature, executive_pubkey: step1.executive_pubkey });
  const limits = await ok(again, 'svc_get_spend_limit', { symbol: 'USDC' });
  t.like(limits.limits[0], { delegate: step1.executive_pubkey, unlimited: true, delegate_matches_executive: true });
  const events = await http(app, 'GET', '/v1/events?kind=agent.create&limit=200', { key });
  const mints = events.body.data.filter((e: any) => e.metadata?.echo?.owner === step1.executive_pubkey);
  t.deepEqual(
    mints.map((e: any) => e.agent_asset),
    [mint],
    'one mint only',
  );
});

test.serial('export and import round-trip the configuration file (0600); a malformed file is refused by path, never echoed', async (t) => {
  const { dir } = t.context;
  const { writeConfigFile } = await import('../../interfaces/mcp/config.ts');
  const configPath = join(dir, 'roundtrip', 'agent.json');
  const secret = encodeBase58(Keypair.generate().secretKey);
  await writeConfigFile(configPath, {
    version: 1,
    agent_mint: await randomAddress(),
    executive_keypair: secret,
    network: 'chain-devnet',
    rpc_url: null,
    pending_register: null,
  });
  const run = (args: string[], path = configPath) =>
    new Promise<{ code: number | null; out: string; err: string }>((resolve) => {
      const child = spawnChild(process.execPath, [RUN_TS, 'interfaces/mcp/main.ts', ...args], {
        env: { PATH: process.env.PATH ?? '', HOME: dir, SVC_AGENT_CONFIG: path },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      let err = '';
      child.stdout.on('data', (c: Buffer) => (out += c.toString('utf8')));
      child.stderr.on('data', (c: Buffer) => (err += c.toString('utf8')));
      child.on('exit', (code) => resolve({ code, out, err }));
    });
  const exported = join(dir, 'roundtrip', 'exported.json');
  const ex = await run(['export', exported]);
  t.is(ex.code, 0, ex.err);
  t.is((await stat(exported)).mode & 0o777, 0o600);
  t.deepEqual(JSON.parse(await readFile(exported, 'utf8')), JSON.parse(await readFile(configPath, 'utf8')));
  const elsewhere = join(dir, 'roundtrip2', 'agent.json');
  const im = await run(['import', exported], elsewhere);
  t.is(im.code, 0, im.err);
  t.is((await stat(elsewhere)).mode & 0o777, 0o600);
  t.deepEqual(JSON.parse(await readFile(elsewhere, 'utf8')), JSON.parse(await readFile(configPath, 'utf8')));
  for (const r of [ex, im]) t.false(r.out.includes(secret) || r.err.includes(secret), 'the secret is never printed');

  const { writeFile } = await import('node:fs/promises');
  const broken = join(dir, 'roundtrip', 'broken.json');
  await writeFile(broken, JSON.stringify({ version: 1, network: 'chain-devnet', executive_keypair: secret, extra: true }));
  const bad = await run(['import', broken], join(dir, 'roundtrip3', 'agent.json'));
  t.is(bad.code, 1);
  t.regex(bad.err, /broken\.json is not an agent configuration/);
  t.false(bad.err.includes(secret));
});

metaplexTest(test, 'step 2 after a mint that failed on the ledger mints again instead of waiting for an asset that never comes', async (t) => {
  const { app, key } = t.context;
  const tools = await startTools(t, 'refail');
  const step1 = await ok(tools, 'svc_register_agent', { name: 'Second try' });
  await faucet(app, key, { address: step1.executive_pubkey, sol: '0.05' });
  await tools.client.close();

  // What a first step 2 leaves when its mint failed: pending_register names the asset and its event, now failed.
  const prepared = await http(app, 'POST', '/v1/agents/prepare', {
    key,
    body: { owner: step1.executive_pubkey, payer: step1.executive_pubkey, name: 'Second try', uri: 'https://example.com/a.json' },
  });
  t.is(prepared.status, 200, JSON.stringify(prepared.body));
  const failedMint = String(prepared.body.echo.asset);
  const pg = (await import('pg')).default;
  const db = new pg.Client({ connectionString: app.database.url });
  await db.connect();
  try {
    await db.query(`update events set phase = 'failed', error_code = 'instruction_error' where id = $1`, [prepared.body.event_id]);
  } finally {
    await db.end();
  }
  const { writeConfigFile } = await import('../../interfaces/mcp/config.ts');
  const config = JSON.parse(await readFile(tools.configPath, 'utf8'));
  await writeConfigFile(tools.configPath, {
    ...config,
    pending_register: { ...config.pending_register, mint: failedMint, create_event_id: prepared.body.event_id },
  });

  const again = await startTools(t, 'refail');
  const done = await ok(again, 'svc_register_agent');
  t.is(done.status, 'registered');
  t.not(done.mint, failedMint, 'a new asset was minted');
  t.like(await ok(again, 'svc_get_identity'), { agent_mint: done.mint });
});
