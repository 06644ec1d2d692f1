import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Keypair } from '@solana/web3.js';
import { createPayingFetch, type PayingFetchOptions } from '../../interfaces/client/paying-fetch.ts';
import { buildPaymentTransaction, feeLayoutFor } from '../../domain/facilitator/build.ts';
import { FEE_EXTENSION_KEY, FeeExtension, type PaymentRequirements } from '../../domain/facilitator/schema.ts';
import type { X402RequirementsV2 } from '../../domain/facilitator/wire.ts';
import { findStable, STABLES } from '../../domain/shared/network.ts';
import type { ReceiptV1 } from '../../domain/receipts/schema.ts';
import { treasuryOf } from '../../domain/treasury/derive.ts';
import type { PaymentLinkRecord } from '../../domain/payment-links/schema.ts';
import { http, issueKey, linkBody, randomAddress, recordAgent, startTestApp, type TestApp } from './app.ts';
import { afterAll } from './teardown.ts';

// Helpers for tests of the public paywall /x/{id} (hosted-api §4.2, DECISIONS "x402 on the paywall"): one real app
// on the embedded devnet, funded buyers, links, payments built by the buyer kit or by hand, and the read-backs
// (token balances, counters, events, receipts) that show what a paid call did — or that nothing moved.

export const USDC = findStable('chain-devnet', 'USDC')!;

export interface PaywallWorld {
  app: TestApp;
  /** svc_test_… (chain-devnet) */
  key: string;
  /** the embedded devnet JSON-RPC (the kit reads blockhashes there) */
  rpcUrl: string;
}

/**
 * Outbound calls reach only the targets SVC_OUTBOUND_ALLOW names, fixed when the app starts. So the local
 * servers tests use as upstreams and webhook receivers are opened first, allow-listed, and handed out by
 * startLocalServer (each test file runs in its own process, so this pool is the file's own).
 */
const LOCAL_SERVER_POOL = 12;
const pooledServers: Server[] = [];

async function listenLocal(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/**
 * Creates the fee authority's token account before the payments (answers that authority): every first-ever payment
 * would otherwise ask the facilitator to sponsor that one account, and only one sponsorship per owner and mint is given.
 */
export async function fundFeeVault(w: PaywallWorld): Promise<string> {
  const feeAuthority = w.app.services.settings.fee.authorities['chain-devnet'];
  await w.app.services.dev.fund('chain-devnet', { address: feeAuthority, token: 'USDC', amount: '1' });
  return feeAuthority;
}

/**
 * The real app with its embedded devnet, and a devnet key; with pooled local servers its outbound calls may reach. The
 * file's teardown (./teardown.ts) stops the app and the pool.
 */
export async function startPaywallApp(env: Record<string, string> = {}): Promise<PaywallWorld> {
  const allow = env.SVC_OUTBOUND_ALLOW ? [env.SVC_OUTBOUND_ALLOW] : [];
  for (let i = 0; i < LOCAL_SERVER_POOL; i++) {
    const server = createServer();
    pooledServers.push(server);
    afterAll(() => server.close());
    allow.push(await listenLocal(server));
  }
  const app = await startTestApp({ env: { ...env, SVC_OUTBOUND_ALLOW: allow.join(',') } });
  const rpcUrl = app.ledgers.rpcUrls['chain-devnet'];
  if (!rpcUrl) throw new Error('the test app runs no devnet JSON-RPC server');
  return { app, key: await issueKey(app), rpcUrl };
}

/** A buyer wallet holding `usdc` USDC on the embedded devnet and no SOL (the facilitator pays fees and rent). */
export async function fundBuyer(w: PaywallWorld, usdc = '1'): Promise<Keypair> {
  const kp = Keypair.generate();
  await w.app.services.dev.fund('chain-devnet', { address: kp.publicKey.toBase58(), token: 'USDC', amount: usdc });
  return kp;
}

/** Atomic USDC held by `owner` across its token accounts of the mint (0n when it has none). */
export async function tokenBalance(w: PaywallWorld, owner: string): Promise<bigint> {
  const balances = await w.app.services.ledgers['chain-devnet']!.getTokenBalances(owner, { mint: USDC.mint });
  return balances.reduce((sum, b) => sum + b.amount, 0n);
}

export interface PaywallLink {
  id: string;
  network: string;
  owner_agent: string;
  pay_to: string;
  method: string;
  share_url: string;
  webhook_secret?: string | null;
  accepts: { amount: string; asset: string; pay_to: string; pay_to_token_account: string; pay_to_ready: boolean | null; network: string; currency: string }[];
  counters: { call_count: number; settled_count: number; last_called_at: string | null; last_settled_at: string | null; last_tx_sig: string | null };
  [k: string]: unknown;
}

export interface CreatedLink {
  link: PaywallLink;
  /** the owner agent (asset address) */
  agent: string;
  /** treasuryOf(agent): the payTo of every accept */
  treasury: string;
  /** link.share_url, which already carries ?network=chain-devnet */
  url: string;
}

/** A recorded agent (or `agent`) owning a new devnet link made of linkBody(agent, overrides); throws unless 201. */
export async function createLink(w: PaywallWorld, overrides: Record<string, unknown> = {}, agent?: string): Promise<CreatedLink> {
  const owner = agent ?? (await recordAgent(w.app, w.key)).mint;
  const res = await http(w.app, 'POST', '/v1/payment-links', { key: w.key, body: linkBody(owner, overrides) });
  if (res.status !== 201) throw new Error(`create link failed: ${res.status} ${JSON.stringify(res.body)}`);
  const link = res.body as PaywallLink;
  return { link, agent: owner, treasury: treasuryOf(owner), url: link.share_url };
}

/**
 * A legacy agent (a row from before records were checked: no Core asset at its address, DECISIONS "Agents, submissions
 * and events") of the key's principal and a link of it (a copy of a new proven link made of `overrides`), both written
 * straight to the store.
 */
export async function legacyAgentWithLink(
  w: PaywallWorld,
  options: { protocol?: 'x402' | 'mpp'; overrides?: Record<string, unknown> } = {},
): Promise<{ mint: string; owner: string; link: PaymentLinkRecord; url: string }> {
  const protocol = options.protocol ?? 'x402';
  const mint = await randomAddress();
  const owner = await randomAddress();
  const store = w.app.database.store;
  // the key's principal, read from a link it made: it owns the legacy rows too
  const probe = await createLink(w, options.overrides);
  const made = (await store.paymentLinks.get('chain-devnet', probe.link.id))!;
  const now = new Date();
  await store.agents.insert({
    mint,
    network: 'chain-devnet',
    owner,
    name: 'legacy',
    uri: null,
    treasury: treasuryOf(mint),
    executive: null,
    source: 'recorded',
    ownerPrincipal: made.ownerPrincipal,
    registeredAt: now,
    provenAt: null,
  });
  const link: PaymentLinkRecord = {
    ...made,
    pk: `legacy-${mint.slice(0, 12)}-${protocol}`,
    id: `legacy-${mint.slice(0, 8)}-${protocol}`,
    ownerAgent: mint,
    protocol,
    createdAt: now,
    updatedAt: now,
    ownerAgentProven: false,
  };
  await store.paymentLinks.insert(link);
  return { mint, owner, link, url: `${w.app.url}/x/${link.id}?network=chain-devnet` };
}

/** GET /v1/payment-links/{id}: the link with live counters. */
export async function getLink(w: PaywallWorld, id: string): Promise<PaywallLink> {
  const res = await http(w.app, 'GET', `/v1/payment-links/${encodeURIComponent(id)}`, { key: w.key });
  if (res.status !== 200) throw new Error(`get link failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body as PaywallLink;
}

/** The buyer kit for `buyer` on the embedded devnet; extra options (fetch, maxAmountAtomic…) pass through. */
export function payingFetch(w: PaywallWorld, buyer: Keypair, options: Partial<PayingFetchOptions> = {}) {
  return createPayingFetch({ signer: buyer, rpcUrl: w.rpcUrl, network: 'chain-devnet', ...options });
}

/**
 * The kit, with a record of the headers of every request it sends: the paid retry's PAYMENT-SIGNATURE can be
 * replayed by hand afterwards.
 */
export function recordingPayingFetch(w: PaywallWorld, buyer: Keypair) {
  const sent: Headers[] = [];
  const pay = payingFetch(w, buyer, {
    fetch: (async (input: RequestInfo | URL, init?: RequestInit) => {
      const request = new Request(input, init);
      sent.push(new Headers(request.headers));
      return fetch(request);
    }) as typeof fetch,
  });
  return { pay, sent };
}

export function decodeBase64Json(value: string | null | undefined): any {
  return value ? JSON.parse(Buffer.from(value, 'base64').toString('utf8')) : null;
}

export function base64Json(value: unknown): string {
  return Buffer.from(JSON.stringify(value), 'utf8').toString('base64');
}

export interface Offer {
  status: number;
  /** PAYMENT-REQUIRED, decoded (x402 v2) */
  v2: any;
  /** the JSON body (x402 v1) */
  v1: any;
  headers: Headers;
}

/** The unpaid answer of a paywall URL. */
export async function unpaidOffer(url: string, init: RequestInit = {}): Promise<Offer> {
  const res = await fetch(url, init);
  const text = await res.text();
  return { status: res.status, v2: decodeBase64Json(res.headers.get('PAYMENT-REQUIRED')), v1: text ? JSON.parse(text) : null, headers: res.headers };
}

export interface BuiltPayment {
  /** the x402 v2 payload for PAYMENT-SIGNATURE */
  paymentSignature: string;
  /** the bare base64 signed (or unsigned) wire transaction */
  transaction: string;
  /** the accept answered */
  accepted: X402RequirementsV2;
  /** amount + fee the transaction moves */
  gross: bigint;
}

/**
 * A payment for the first accept of `url`'s offer built by hand with buildPaymentTransaction, as the kit would:
 * `amount` overrides what the seller leg moves (the payload still names the real accept), `sign: false` leaves the
 * buyer's signature slot empty.
 */
export async function buildPayment(
  w: PaywallWorld,
  url: string,
  buyer: Keypair,
  options: { amount?: bigint; sign?: boolean; method?: string } = {},
): Promise<BuiltPayment> {
  const offer = await unpaidOffer(url, { method: options.method ?? 'GET' });
  if (offer.status !== 402 || !offer.v2) throw new Error(`expected a 402 offer from ${url}, got ${offer.status}`);
  const accepted = offer.v2.accepts[0] as X402RequirementsV2;
  const stable = STABLES['chain-devnet'].find((s) => s.mint === accepted.asset)!;
  const ext = FeeExtension.safeParse(accepted.extra[FEE_EXTENSION_KEY]);
  const requirements: PaymentRequirements = {
    scheme: 'exact',
    network: 'chain-devnet',
    payTo: accepted.payTo,
    asset: accepted.asset,
    amount: options.amount ?? BigInt(accepted.amount),
    tokenProgram: stable.tokenProgramId as PaymentRequirements['tokenProgram'],
    decimals: stable.decimals,
    ...(ext.success ? { fee: { bps: ext.data.bps, feeAuthority: ext.data.feeAuthority } } : {}),
  };
  const { blockhash } = await w.app.services.ledgers['chain-devnet']!.getLatestBlockhash();
  const tx = buildPaymentTransaction({ feePayer: accepted.extra.feePayer as string, payer: buyer.publicKey.toBase58(), requirements, blockhash });
  if (options.sign ?? true) tx.sign([buyer]);
  const transaction = Buffer.from(tx.serialize()).toString('base64');
  return {
    paymentSignature: base64Json({ x402Version: 2, resource: offer.v2.resource, accepted, payload: { transaction } }),
    transaction,
    accepted,
    gross: feeLayoutFor(requirements).gross,
  };
}

export interface EventRow {
  id: string;
  kind: string;
  phase: string;
  agent_asset: string | null;
  signature: string | null;
  metadata: Record<string, any>;
  created_at: string;
}

/** GET /v1/events?kind=…&agent=…, newest first (one page of up to 200). */
export async function eventsOf(w: PaywallWorld, kind: string, agent?: string): Promise<EventRow[]> {
  const q = new URLSearchParams({ kind, limit: '200' });
  if (agent) q.set('agent', agent);
  let res = await http(w.app, 'GET', `/v1/events?${q}`, { key: w.key });
  // The paywall tests share one key and run at once: a list refused by the key's concurrent-list cap (class heavy) is
  // asked again once one has answered, after the wait the refusal names.
  while (res.status === 429 && res.body?.details?.class === 'heavy') {
    await new Promise((r) => setTimeout(r, res.body.details.retry_after_ms));
    res = await http(w.app, 'GET', `/v1/events?${q}`, { key: w.key });
  }
  if (res.status !== 200) throw new Error(`list events failed: ${res.status} ${JSON.stringify(res.body)}`);
  return (res.body as { data: EventRow[] }).data;
}

/** The stored receipts of `agent` on devnet, by nonce (straight from the receipts table). */
export async function receiptsOf(w: PaywallWorld, agent: string): Promise<ReceiptV1[]> {
  const rows = (await w.app.database.orm.em
    .fork()
    .execute(`select body from receipts where network = 'chain-devnet' and agent = ? order by nonce`, [agent])) as { body: unknown }[];
  return rows.map((r) => (typeof r.body === 'string' ? JSON.parse(r.body) : r.body) as ReceiptV1);
}

/** Paid-call rows naming `linkId` (exactly-once bookkeeping). */
export async function paidCallsOf(w: PaywallWorld, linkId: string): Promise<{ status: string; signature: string | null }[]> {
  return (await w.app.database.orm.em.fork().execute(`select status, signature from paid_calls where network = 'chain-devnet' and link_id = ?`, [linkId])) as {
    status: string;
    signature: string | null;
  }[];
}

export interface Received {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  /** the raw body as received */
  body: Buffer;
}

export interface LocalServer {
  /** http://127.0.0.1:<port> */
  url: string;
  received: Received[];
  /** resolves with the n-th (1-based) request once it arrived */
  waitFor(n: number): Promise<Received>;
  close(): Promise<void>;
}

/**
 * A loopback HTTP server (upstream or webhook receiver) answering with `answer(request)`: one of the servers
 * startPaywallApp allow-listed while any is left (a fresh one after that, which the app refuses to call).
 */
export async function startLocalServer(
  answer: (r: Received) => { status: number; headers?: Record<string, string>; body?: string } = () => ({ status: 200 }),
): Promise<LocalServer> {
  const received: Received[] = [];
  const waiters: (() => void)[] = [];
  const pooled = pooledServers.shift();
  const server: Server = pooled ?? createServer();
  server.on('request', (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const r: Received = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks) };
      received.push(r);
      for (const wake of waiters.splice(0)) wake();
      const out = answer(r);
      res.writeHead(out.status, out.headers ?? {}).end(out.body ?? '');
    });
  });
  const hostPort = pooled ? `127.0.0.1:${(server.address() as AddressInfo).port}` : await listenLocal(server);
  const url = `http://${hostPort}`;
  return {
    url,
    received,
    // no deadline of its own: a request that never comes is AVA's timeout to report (./until.ts says why)
    waitFor: (n) =>
      new Promise<Received>((resolve) => {
        const check = () => {
          const r = received[n - 1];
          if (r) resolve(r);
          else waiters.push(check);
        };
        check();
      }),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
