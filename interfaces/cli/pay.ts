import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { commandArgs } from './command-args.ts';
import { loadConfig } from '../config.ts';
import { dataDirOf, findGateway } from '../announce.ts';
import { createPayingFetch, decodePaymentResponse } from '../client/paying-fetch.ts';
import { CliError, describeError, walletBalances, walletFile } from './local.ts';
import { FEE_EXTENSION_KEY } from '../../domain/facilitator/schema.ts';
import { networkFromX402 } from '../../domain/facilitator/wire.ts';
import { atomicToDecimal, feeFor } from '../../domain/shared/money.ts';
import { Network, STABLES } from '../../domain/shared/network.ts';

// npm run pay -- <share_url> [--method POST --data '{"q":1}']: pays a payment link once with the buyer kit
// (svc-gateway/client/pay) from the buyer wallet under the data directory (<data>/wallets/buyer.json, made on first
// use) and prints the response and its settlement. On chain-devnet a wallet short of the price is funded from the
// faucet first, as `npm run faucet` does (through the running gateway's ledger).

const USAGE =
  "usage: npm run pay -- <share_url> [--method GET|POST|PUT|PATCH|DELETE] [--data '<request body>']   (SVC_DATA_DIR: the gateway’s data directory; SVC_RPC_URL: the ledger's JSON-RPC)";
/** what the faucet adds when the wallet is short: enough for many calls of a typical price */
const TOP_UP = '1';

function parseCli(args: string[]) {
  return parseArgs({
    args,
    allowPositionals: true,
    options: { method: { type: 'string', short: 'X' }, data: { type: 'string', short: 'd' }, help: { type: 'boolean', short: 'h', default: false } },
  });
}

async function main(argv: string[]): Promise<number> {
  const parsed = commandArgs(() => parseCli(argv), USAGE);
  if (typeof parsed === 'number') return parsed;
  const { values, positionals } = parsed;
  const [shareUrl] = positionals;
  if (!shareUrl || positionals.length !== 1 || !URL.canParse(shareUrl)) {
    console.error(USAGE);
    return 2;
  }
  // hosted-api §4.2 rule 2: the paywall's network comes from ?network=, chain-mainnet when absent.
  const network = Network.safeParse(new URL(shareUrl).searchParams.get('network') ?? 'chain-mainnet');
  if (!network.success) throw new CliError(`The share URL names an unknown network: ${new URL(shareUrl).searchParams.get('network')}.`);

  const { dir, source } = dataDirOf();
  const lookup = await findGateway(dir);
  const rpcUrl = process.env.SVC_RPC_URL?.trim() || (lookup.state === 'running' ? lookup.gateway.rpc_urls[network.data] : undefined);
  if (!rpcUrl) {
    throw new CliError(
      `No gateway is running on the data directory ${dir} (${source === 'SVC_DATA_DIR' ? 'from SVC_DATA_DIR' : 'the default .data'}), so there is no ${network.data} JSON-RPC to sign against.\n` +
        'Start it first with `npm start` (with the same SVC_DATA_DIR), or set SVC_RPC_URL.',
    );
  }
  const buyer = await walletFile(join(dir, 'wallets', 'buyer.json'));
  const address = buyer.keypair.publicKey.toBase58();
  console.log(`Buyer     ${address} (${buyer.created ? 'new wallet' : 'wallet'} ${join(dir, 'wallets', 'buyer.json')})`);

  const init: RequestInit = {
    method: values.method?.toUpperCase() ?? 'GET',
    ...(values.data !== undefined ? { body: values.data, headers: { 'content-type': 'application/json' } } : {}),
  };
  const price = await offeredPrice(shareUrl, init, network.data);
  if (price) {
    console.log(`Price     ${atomicToDecimal(price.gross, 6)} ${price.symbol ?? price.asset} (with the protocol fee)`);
    const { usdcAtomic } = await walletBalances(rpcUrl, network.data, buyer.keypair.publicKey);
    if (price.symbol === 'USDC' && usdcAtomic < price.gross) {
      if (network.data !== 'chain-devnet')
        throw new CliError(`The buyer holds ${atomicToDecimal(usdcAtomic, 6)} USDC, less than the price; fund ${address} on ${network.data}.`);
      const { ledgers } = loadConfig();
      const { faucetCommand } = await import('../core.ts'); // the ledger's code, only when funding
      await faucetCommand(
        { dataDir: dir, programsDir: ledgers.programsDir, cloneUrl: ledgers.cloneUrl },
        { network: network.data, to: address, token: 'USDC', amount: TOP_UP },
      );
      console.log(`Funded    ${TOP_UP} USDC from the ${network.data} faucet`);
    }
  }

  const pay = createPayingFetch({ signer: buyer.keypair, rpcUrl, network: network.data });
  const res = await pay(shareUrl, init);
  const body = await res.text();
  console.log(`Status    ${res.status}`);
  console.log(`Body      ${body}`);
  const x402 = res.headers.get('PAYMENT-RESPONSE');
  const mpp = res.headers.get('Payment-Receipt');
  if (x402) {
    const settled = decodePaymentResponse(x402);
    console.log(`Paid      transaction ${settled.transaction} on ${network.data} (payer ${settled.payer})`);
  } else if (mpp) {
    console.log(`Receipt   ${Buffer.from(mpp, 'base64url').toString('utf8')}`);
  }
  if (res.headers.get('X-Svc-Replayed') === 'true') console.log('(a replay: this payment had already been used; nothing was charged again)');
  return res.ok ? 0 : 1;
}

/** The gross (amount + protocol fee) of the x402 offer on `network`, from an unpaid request's PAYMENT-REQUIRED. */
async function offeredPrice(
  url: string,
  init: RequestInit,
  network: Network,
): Promise<{ gross: bigint; asset: string; symbol: string | undefined } | undefined> {
  const res = await fetch(url, init);
  await res.body?.cancel();
  const header = res.headers.get('PAYMENT-REQUIRED');
  if (res.status !== 402 || !header) return undefined;
  const offer = JSON.parse(Buffer.from(header, 'base64').toString('utf8')) as {
    accepts?: { network: string; amount: string; asset: string; extra?: Record<string, unknown> }[];
  };
  const accept = offer.accepts?.find((a) => networkFromX402(a.network) === network);
  if (!accept) return undefined;
  const bps = (accept.extra?.[FEE_EXTENSION_KEY] as { bps?: number } | undefined)?.bps ?? 0;
  const amount = BigInt(accept.amount);
  return { gross: amount + feeFor(amount, bps), asset: accept.asset, symbol: STABLES[network].find((s) => s.mint === accept.asset)?.symbol };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (e) => {
      console.error(e instanceof CliError ? e.message : `pay failed: ${describeError(e)}`);
      process.exit(1);
    },
  );
}
