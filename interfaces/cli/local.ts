import { existsSync } from 'node:fs';
import { chmod, mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { Connection, Keypair, PublicKey } from '@solana/web3.js';
import { dataDirOf, findGateway, type DataDirChoice } from '../announce.ts';
import { createClient, errorCode, type Client } from '../client/index.ts';
import { STABLES, type Network } from '../../domain/shared/network.ts';
import { associatedTokenAccount } from '../../domain/treasury/derive.ts';

// What npm run demo and npm run pay share: finding the gateway of the data directory, wallets kept as files under
// it, and the devnet faucet. Both talk to the gateway only through its public doors (REST /v1 and the typed tRPC
// client), as any user program would.

/** A refusal a command explains in plain words and exits non-zero on. */
export class CliError extends Error {
  override readonly name = 'CliError';
}

export interface LocalGateway extends DataDirChoice {
  url: string;
  /** JSON-RPC of the gateway's embedded ledgers, when it announced them */
  rpcUrls: Partial<Record<Network, string>>;
}

/**
 * The gateway to talk to: `--url` when given, else the one gateway.json of the data directory announces. No running
 * gateway is an error that says to run `npm start` first.
 */
export async function locateGateway(options: { url?: string | undefined; env?: Record<string, string | undefined> } = {}): Promise<LocalGateway> {
  const env = options.env ?? process.env;
  const choice = dataDirOf(env);
  const lookup = await findGateway(choice.dir);
  const announced = lookup.state === 'running' ? lookup.gateway : undefined;
  const url = (options.url ?? announced?.url)?.replace(/\/+$/, '');
  if (!url) {
    const why =
      lookup.state === 'stale'
        ? `the gateway that wrote ${lookup.file} (pid ${lookup.gateway.pid}) has exited`
        : `no gateway announced itself in ${lookup.file}`;
    throw new CliError(
      `No gateway is running on the data directory ${choice.dir} (${choice.source === 'SVC_DATA_DIR' ? 'from SVC_DATA_DIR' : 'the default .data'}): ${why}.\n` +
        'Start it first in another terminal with `npm start` (with the same SVC_DATA_DIR), or pass --url http://host:port.',
    );
  }
  const rpcUrls = (announced && (!options.url || sameOrigin(options.url, announced.url)) ? announced.rpc_urls : {}) as Partial<Record<Network, string>>;
  return { ...choice, url, rpcUrls };
}

function sameOrigin(a: string, b: string): boolean {
  try {
    return new URL(a).origin === new URL(b).origin;
  } catch {
    return false;
  }
}

/** The devnet JSON-RPC the wallets sign against: SVC_RPC_URL, else what the gateway announced. */
export function rpcUrlOf(gateway: LocalGateway, network: Network, env: Record<string, string | undefined> = process.env): string {
  const url = env.SVC_RPC_URL?.trim() || gateway.rpcUrls[network];
  if (!url) throw new CliError(`No JSON-RPC URL for ${network}: the gateway did not announce an embedded ledger for it. Set SVC_RPC_URL.`);
  return url;
}

export function client(gateway: LocalGateway, apiKey: string): Client {
  return createClient({ url: gateway.url, apiKey });
}

/** A keypair kept as a file (the Solana CLI's format: a JSON array of the 64 secret bytes), readable by its owner only. */
export async function walletFile(path: string): Promise<{ keypair: Keypair; created: boolean }> {
  if (existsSync(path)) {
    const bytes = JSON.parse(await readFile(path, 'utf8')) as number[];
    return { keypair: Keypair.fromSecretKey(Uint8Array.from(bytes)), created: false };
  }
  const keypair = Keypair.generate();
  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  await writeJsonFile(path, Array.from(keypair.secretKey), 0o600);
  return { keypair, created: true };
}

/** Temporary file + rename: a reader never sees half a file. */
export async function writeJsonFile(path: string, value: unknown, mode = 0o600): Promise<void> {
  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  const temporary = `${path}.${process.pid}.tmp`;
  await writeFile(temporary, `${JSON.stringify(value, null, 2)}\n`, { mode });
  await chmod(temporary, mode);
  await rename(temporary, path);
}

export async function readJsonFile<T>(path: string): Promise<T | undefined> {
  try {
    return JSON.parse(await readFile(path, 'utf8')) as T;
  } catch {
    return undefined;
  }
}

/** Native and USDC balance of a wallet, read from the ledger's JSON-RPC. */
export async function walletBalances(rpcUrl: string, network: Network, owner: PublicKey): Promise<{ lamports: bigint; usdcAtomic: bigint }> {
  const connection = new Connection(rpcUrl, 'confirmed');
  const usdc = STABLES[network].find((s) => s.symbol === 'USDC')!;
  const account = associatedTokenAccount(owner.toBase58(), usdc.mint, usdc.tokenProgramId);
  const [lamports, token] = await Promise.all([
    connection.getBalance(owner, 'confirmed'),
    connection.getTokenAccountBalance(new PublicKey(account), 'confirmed').catch(() => null),
  ]);
  return { lamports: BigInt(lamports), usdcAtomic: BigInt(token?.value.amount ?? '0') };
}

/** POST /v1/dev/faucet (only where the gateway runs the ledger itself: chain-devnet on npm start). */
export async function faucet(svc: Client, input: { address: string; sol?: string; token?: string; amount?: string }): Promise<void> {
  try {
    await svc.dev.faucet.mutate(input);
  } catch (e) {
    if (errorCode(e) === 'not_found')
      throw new CliError('This gateway has no faucet for the key’s network (its ledger is not embedded): fund the wallet yourself.');
    throw e;
  }
}

/** A failed call as one line: the API's code and message (hosted-api §7), or the error's message. */
export function describeError(e: unknown): string {
  const code = errorCode(e);
  const message = e instanceof Error ? e.message : String(e);
  return code ? `${code}: ${message}` : message;
}
