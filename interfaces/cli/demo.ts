import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { commandArgs } from './command-args.ts';
import { VersionedTransaction, type Keypair } from '@solana/web3.js';
import { createClient as createWsClient } from 'graphql-ws';
import WebSocket from 'ws';
import { errorCode, type Client } from '../client/index.ts';
import { createPayingFetch, decodePaymentResponse } from '../client/paying-fetch.ts';
import {
  CliError,
  client,
  describeError,
  faucet,
  locateGateway,
  readJsonFile,
  rpcUrlOf,
  walletBalances,
  walletFile,
  writeJsonFile,
  type LocalGateway,
} from './local.ts';
import { feeFor } from '../../domain/shared/money.ts';
import { MPL_CORE_PROGRAM_ID } from '../../domain/treasury/derive.ts';

// npm run demo [-- --url http://host:port]: a first sale on the running gateway, through its public doors only.
// An owner wallet mints a real agent (prepare → sign → submit → track, hosted-api §1 and §4.3–4.6), the agent sells a
// payment link (§2.1), a buyer wallet pays it once with the buyer kit (§4.2), and the command prints what a person
// needs to do it again by hand. Re-running reuses the agent and its link (<data>/demo/state.json).

const USAGE =
  'usage: npm run demo [-- --url http://127.0.0.1:8080]   (SVC_DATA_DIR: the gateway’s data directory; SVC_API_KEY: use this chain-devnet key instead of issuing one)';
const NETWORK = 'chain-devnet' as const;
/** what the owner needs for the mint: fees and the asset's rent (a Core asset is a few hundred bytes) */
const OWNER_MIN_LAMPORTS = 50_000_000n;

interface DemoState {
  network: typeof NETWORK;
  agent: string;
  owner: string;
  link?: string | undefined;
}

interface SeenEvent {
  kind: string;
  phase: string;
  signature: string | null;
}

function parseCli(args: string[]) {
  return parseArgs({ args, options: { url: { type: 'string' }, help: { type: 'boolean', short: 'h', default: false } } });
}

async function main(argv: string[]): Promise<number> {
  const parsed = commandArgs(() => parseCli(argv), USAGE);
  if (typeof parsed === 'number') return parsed;
  const { values } = parsed;
  const gateway = await locateGateway({ url: values.url });
  const say = (line = '') => console.log(line);
  say(`Gateway      ${gateway.url} (data directory ${gateway.dir}, ${gateway.source === 'SVC_DATA_DIR' ? 'from SVC_DATA_DIR' : 'the default .data'})`);

  const demoDir = join(gateway.dir, 'demo');
  const owner = await walletFile(join(demoDir, 'owner.json'));
  const ownerAddress = owner.keypair.publicKey.toBase58();
  say(`Owner        ${ownerAddress} (${owner.created ? 'new wallet' : 'wallet'} ${join(demoDir, 'owner.json')})`);

  // A key whose owner_wallet is the demo owner: every key issued on a later run is the same principal, so it sees the
  // agent and the link of the earlier runs (docs/architecture.md "Ownership").
  const given = process.env.SVC_API_KEY?.trim();
  let issued: string | undefined;
  if (!given) {
    // Imported here: issuing opens the database (the core's code), which a run with SVC_API_KEY never needs.
    const [{ issueKeyOutOfBand }, { loadConfig }] = await Promise.all([import('./keys.ts'), import('../config.ts')]);
    const created = await issueKeyOutOfBand(loadConfig(), { network: NETWORK, role: 'user', owner_wallet: ownerAddress, label: 'npm run demo' });
    issued = created.key;
    say(`API key      ${created.key}  (new ${NETWORK} key; shown only this once, only its SHA-256 is stored)`);
  } else say('API key      SVC_API_KEY');
  const apiKey = (given || issued)!;
  const svc = client(gateway, apiKey);

  // Metaplex Core must run on the ledger before an agent can be minted (GET /v1/health lists what it loaded).
  const health = await svc.health.query();
  const ledger = health.ledger[NETWORK];
  if (!ledger)
    throw new CliError(
      `The gateway’s ${NETWORK} is not an embedded ledger: the demo needs its faucet. Run it against \`npm start\` with the default SVC_DEVNET_LEDGER.`,
    );
  if (ledger.missing.some((p) => p.id === MPL_CORE_PROGRAM_ID)) {
    throw new CliError(
      `The gateway’s ${NETWORK} ledger does not run Metaplex Core (${MPL_CORE_PROGRAM_ID}), which minting an agent needs.\n` +
        'Fetch the program, then restart the gateway:\n\n  npm run programs\n',
    );
  }
  const rpcUrl = rpcUrlOf(gateway, NETWORK);

  const events = await watchEvents(gateway, apiKey);
  try {
    const statePath = join(demoDir, 'state.json');
    let state = await reuseState(svc, await readJsonFile<DemoState>(statePath), ownerAddress);
    if (state) say(`Agent        ${state.agent} (reused from ${statePath})`);
    else {
      const mint = await mintAgent(svc, owner.keypair, rpcUrl, say);
      state = { network: NETWORK, agent: mint, owner: ownerAddress };
      await writeJsonFile(statePath, state);
    }

    const link = await reuseOrCreateLink(svc, state);
    if (link.id !== state.link) {
      state = { ...state, link: link.id };
      await writeJsonFile(statePath, state);
      say(`Link         created "${link.label}" (${link.id}), ${link.price} per call`);
    } else say(`Link         "${link.label}" (${link.id}, reused), ${link.price} per call`);

    // The buyer: a plain wallet with USDC (the facilitator pays the transaction fee and any account rent).
    const buyer = await walletFile(join(gateway.dir, 'wallets', 'buyer.json'));
    const buyerAddress = buyer.keypair.publicKey.toBase58();
    const { usdcAtomic } = await walletBalances(rpcUrl, NETWORK, buyer.keypair.publicKey);
    const price = BigInt(link.accepts[0]?.amount ?? '0');
    if (usdcAtomic < price + feeFor(price, health.protocol_fee.bps)) {
      await faucet(svc, { address: buyerAddress, token: 'USDC', amount: '1' });
      say(`Buyer        ${buyerAddress}, funded with 1 USDC from the faucet (POST /v1/dev/faucet)`);
    } else say(`Buyer        ${buyerAddress}`);

    const settledBefore = link.counters.settled_count;
    const pay = createPayingFetch({ signer: buyer.keypair, rpcUrl, network: NETWORK });
    const paid = await pay(link.share_url);
    const body = await paid.text();
    const header = paid.headers.get('PAYMENT-RESPONSE');
    if (paid.status !== 200 || !header) throw new CliError(`The paid call answered ${paid.status}: ${body}`);
    const settlement = decodePaymentResponse(header);
    say(`Paid         ${paid.status} ${body}`);
    say(`             settled in transaction ${settlement.transaction}`);

    // The paid call recorded its events (payment_link.settled, receipt.published, …) in the transaction that answered;
    // wait until the subscription delivered the settlement so the list below is complete.
    await events.until((e) => e.kind === 'payment_link.settled' && e.signature === settlement.transaction);
    const after = await svc.paymentLinks.get.query({ id: link.id });

    say();
    say('Try it yourself');
    say(`  Explorer   ${gateway.url}/explorer  (paste the API key: live events, the link, the agent’s treasury and receipts)`);
    say(`  Share URL  ${link.share_url}`);
    say(`  See a 402  curl -i '${link.share_url}'`);
    say(`  Pay it     npm run pay -- '${link.share_url}'`);
    say(
      `  The link   curl -H "Authorization: Bearer $SVC_API_KEY" ${gateway.url}/v1/payment-links/${link.id}${issued ? '   (export SVC_API_KEY=<the key above>)' : ''}`,
    );
    say(
      `             (${after.counters.settled_count} paid call${after.counters.settled_count === 1 ? '' : 's'} so far, ${after.counters.settled_count - settledBefore} by this run)`,
    );
    say();
    say('Events seen');
    for (const e of events.seen) say(`  ${e.kind.padEnd(26)} ${e.phase.padEnd(10)} ${e.signature ?? ''}`.trimEnd());
    return 0;
  } finally {
    await events.close();
  }
}

/** The agent of an earlier run, when the gateway still knows it as this owner's (GET /v1/agents/{mint}). */
async function reuseState(svc: Client, state: DemoState | undefined, owner: string): Promise<DemoState | undefined> {
  if (!state || state.network !== NETWORK || state.owner !== owner) return undefined;
  try {
    const agent = await svc.agents.get.query({ mint: state.agent });
    return agent.owner === owner ? state : undefined;
  } catch (e) {
    if (errorCode(e) === 'agent_not_found' || errorCode(e) === 'not_found') return undefined;
    throw e;
  }
}

/** prepare → sign → submit → track (hosted-api §1): the gateway never holds the owner's key. */
async function mintAgent(svc: Client, owner: Keypair, rpcUrl: string, say: (line?: string) => void): Promise<string> {
  const ownerAddress = owner.publicKey.toBase58();
  const { lamports } = await walletBalances(rpcUrl, NETWORK, owner.publicKey);
  if (lamports < OWNER_MIN_LAMPORTS) {
    await faucet(svc, { address: ownerAddress, sol: '1' });
    say('             funded with 1 SOL from the faucet (POST /v1/dev/faucet) for the mint’s fee and rent');
  }
  const envelope = await svc.prepare.agentCreate.mutate({ owner: ownerAddress, name: 'Demo agent', description: 'Minted by npm run demo' });
  const mint = String(envelope.echo.asset);
  say(`Agent        prepared ${mint} (POST /v1/agents/prepare, event ${envelope.event_id})`);
  // The gateway already signed the new asset's slot (a fresh key only it held); the owner adds its own signature and
  // keeps that one: VersionedTransaction.sign fills only the signer's slot.
  const tx = VersionedTransaction.deserialize(Buffer.from(envelope.transaction!.base64, 'base64'));
  tx.sign([owner]);
  const submitted = await svc.transactions.submit.mutate({ event_id: envelope.event_id!, transaction_base64: Buffer.from(tx.serialize()).toString('base64') });
  say(`             signed by the owner, submitted (POST /v1/submit): ${submitted.signature}`);
  const event = await trackEvent(svc, envelope.event_id!);
  if (event.phase !== 'confirmed')
    throw new CliError(`Minting failed on the ledger (${event.error_code ?? 'unknown error'}):\n  ${(event.error_logs ?? []).join('\n  ')}`);
  say(`             confirmed in slot ${event.slot} (GET /v1/events/${envelope.event_id})`);
  say(`             on the ledger: https://explorer.solana.com/tx/${submitted.signature}?cluster=custom&customUrl=${encodeURIComponent(rpcUrl)}`);
  return mint;
}

/** Polls GET /v1/events/{id} (hosted-api §4.6) until the confirmations job moved it to confirmed or failed. */
async function trackEvent(svc: Client, id: string) {
  const deadline = Date.now() + 120_000;
  for (;;) {
    const event = await svc.events.get.query({ id });
    if (event.phase === 'confirmed' || event.phase === 'failed') return event;
    if (Date.now() > deadline)
      throw new CliError(`The transaction of event ${id} is still ${event.phase} after two minutes; follow it with GET /v1/events/${id}.`);
    await new Promise((r) => setTimeout(r, 500));
  }
}

async function reuseOrCreateLink(svc: Client, state: DemoState) {
  if (state.link) {
    try {
      const link = await svc.paymentLinks.get.query({ id: state.link });
      if (link.owner_agent === state.agent && !link.disabled) return link;
    } catch (e) {
      if (errorCode(e) !== 'payment_link_not_found' && errorCode(e) !== 'not_found') throw e;
    }
  }
  // hosted-api §2.1: label, owner_agent, method, price and response.body are required.
  return svc.paymentLinks.create.mutate({
    label: 'Demo fortune cookie',
    owner_agent: state.agent,
    method: 'GET',
    price: '$0.01',
    response: { status: 200, mimeType: 'application/json', body: { fortune: 'A paid call a day keeps the free tier away.', sold_by: state.agent } },
  });
}

/** Every event the key may read, live over graphql-ws (hosted-api §6), collected for the closing summary. */
async function watchEvents(gateway: LocalGateway, apiKey: string) {
  const ws = createWsClient({
    url: `${gateway.url.replace(/^http/, 'ws')}/graphql`,
    webSocketImpl: WebSocket,
    connectionParams: { authorization: apiKey },
    retryAttempts: 0,
  });
  const seen: SeenEvent[] = [];
  const waiters: { match: (e: SeenEvent) => boolean; resolve: () => void }[] = [];
  const connected = new Promise<void>((resolve, reject) => {
    ws.on('connected', () => resolve());
    ws.on('error', reject);
  });
  const stop = ws.subscribe<{ events: SeenEvent }>(
    { query: 'subscription { events { kind phase signature } }' },
    {
      next: (r) => {
        const e = r.data?.events;
        if (!e) return;
        const event = { ...e, phase: e.phase.toLowerCase() };
        seen.push(event);
        for (const w of waiters.splice(0)) w.match(event) ? w.resolve() : waiters.push(w);
      },
      error: () => {},
      complete: () => {},
    },
  );
  await connected;
  return {
    seen,
    /** resolves once an event matching `match` arrived, or after 10 s: the summary is informative, the sale already happened */
    until(match: (e: SeenEvent) => boolean): Promise<void> {
      if (seen.some(match)) return Promise.resolve();
      return new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 10_000);
        waiters.push({
          match,
          resolve: () => {
            clearTimeout(timer);
            resolve();
          },
        });
      });
    },
    async close() {
      stop();
      await ws.dispose();
    },
  };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (e) => {
      console.error(e instanceof CliError ? e.message : `demo failed: ${describeError(e)}`);
      process.exit(1);
    },
  );
}
