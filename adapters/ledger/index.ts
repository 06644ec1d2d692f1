import { join } from 'node:path';
import type { Ledger } from '../../domain/ports/ledger.ts';
import type { RequestBounds } from '../../domain/shared/request-bounds.ts';
import { NETWORKS, type Network } from '../../domain/shared/network.ts';
import { createFaucet, createRemoteFaucet, type Faucet, type FaucetRequest, type FaucetResult } from './embedded/faucet.ts';
import { announcedRpc, LedgerLockedError, lockHolder } from './embedded/files.ts';
import { EmbeddedLedger } from './embedded/ledger.ts';
import { loadOrCreateAdminSecret, readAdminSecret } from './embedded/keys.ts';
import { LedgerThread } from './embedded/ledger-thread.ts';
import { RpcLedger } from './rpc/rpc-ledger.ts';
import { cloneIntoCache, origin, resolvePrograms, type MissingProgram, type ResolvedPrograms } from './embedded/programs.ts';
import { WELL_KNOWN_PROGRAMS, type LoadedProgram } from '../../domain/ledger/programs.ts';

export type { Faucet, FaucetRequest, FaucetResult } from './embedded/faucet.ts';
export { EmbeddedLedger } from './embedded/ledger.ts';
export { LedgerLockedError } from './embedded/files.ts';
export { RpcListenError, startLedgerRpcServer } from './embedded/rpc-server.ts';
export { LedgerThread } from './embedded/ledger-thread.ts';
export { ProgramsError } from './embedded/programs.ts';

/** what an embedded ledger loaded at start (GET /v1/health lists it): programs, and well-known ones it lacks */
export interface LedgerPrograms {
  programs: LoadedProgram[];
  missing: { id: string; name: string | null }[];
}

/** 'embedded' (LiteSVM under dataDir) or the http(s) URL of a Solana JSON-RPC node */
export type LedgerSource = 'embedded' | (string & {});

export interface OpenLedgersOptions {
  /** SVC_DATA_DIR: embedded ledgers live in `${dataDir}/ledger/<network>/` */
  dataDir: string;
  devnet: LedgerSource;
  mainnet: LedgerSource;
  /**
   * serve the embedded devnet's JSON-RPC on this port and its PubSub WebSocket on port + 1, as agave does (0 = any
   * free pair); omit/null = no server. Keep the two networks' ports two apart, e.g. 8899 and 8901. A port (or its
   * neighbour) that cannot be bound rejects with RpcListenError.
   */
  devnetRpcPort?: number | null | undefined;
  mainnetRpcPort?: number | null | undefined;
  /** bind address of those servers, default 127.0.0.1 */
  rpcHost?: string | undefined;
  /** those servers' bounds on slow clients (rpc-server.ts; default 10 s for the headers, 30 s for the request) */
  rpcBounds?: RequestBounds | undefined;
  /** embedded slot length, default 400 ms; 0 = slots move only by advance() */
  slotMs?: number | undefined;
  /** deadlines of the rpc adapter: reads default 10 s, sendTransaction default 15 s */
  rpcReadTimeoutMs?: number | undefined;
  rpcSendTimeoutMs?: number | undefined;
  /** SVC_LEDGER_PROGRAMS: a directory of `<program-id>.so(.gz)` files every embedded ledger loads */
  programsDir?: string | undefined;
  /** SVC_LEDGER_CLONE_URL: a Solana JSON-RPC the missing well-known programs are copied from (cached under dataDir) */
  cloneUrl?: string | undefined;
  onWarning?: ((message: string) => void) | undefined;
  /** start-up facts (which programs each embedded ledger loaded) */
  onInfo?: ((message: string, context: Record<string, unknown>) => void) | undefined;
}

export interface OpenedLedgers {
  ledgers: Record<Network, Ledger>;
  /** the embedded ones, each in its own worker thread with its JSON-RPC server (for tests and dev tooling) */
  embedded: Partial<Record<Network, LedgerThread>>;
  /** present when at least one network is embedded; refuses the others */
  faucet: Faucet | undefined;
  /** per network: the JSON-RPC URL clients can use (the remote URL, or the embedded ledger's local server) */
  rpcUrls: Partial<Record<Network, string>>;
  /** per embedded network: the programs its ledger loaded at start */
  programs?: Partial<Record<Network, LedgerPrograms>>;
  /** stops the servers, snapshots and closes the embedded ledgers and their threads */
  close(): Promise<void>;
}

/** the cache of cloned programs every start of every embedded ledger of `dataDir` reads: `<dataDir>/ledger/programs` */
export const programsCacheDir = (dataDir: string): string => join(dataDir, 'ledger', 'programs');

/** The programs of the embedded ledgers, resolved once for all networks (programs.ts); throws ProgramsError. */
async function programsFor(options: {
  dataDir: string;
  programsDir?: string | undefined;
  cloneUrl?: string | undefined;
  onWarning?: ((message: string) => void) | undefined;
}): Promise<ResolvedPrograms> {
  return resolvePrograms({ dir: options.programsDir, cloneUrl: options.cloneUrl, cacheDir: programsCacheDir(options.dataDir), onWarning: options.onWarning });
}

export interface CopiedPrograms {
  /** the source as it may be shown: its origin only (a provider's key may ride in the path or query) */
  from: string;
  cacheDir: string;
  copied: { id: string; name: string; bytes: number; path: string }[];
  missing: MissingProgram[];
  /** why no request reached a Solana JSON-RPC at the source (refused, timed out, not JSON-RPC); null when one did */
  unreachable: string | null;
  /** per network, the process holding its embedded ledger open (a running gateway), else absent */
  holders: Partial<Record<Network, number>>;
}

/**
 * `npm run programs`: copies the well-known programs (or those of `only`, by id or name) from a Solana JSON-RPC into
 * the cache of `dataDir`, replacing older copies — the cache every later start of both embedded networks loads.
 */
export async function copyWellKnownPrograms(options: {
  dataDir: string;
  from: string;
  only?: string[] | undefined;
  timeoutMs?: number;
}): Promise<CopiedPrograms> {
  const cacheDir = programsCacheDir(options.dataDir);
  const wanted = WELL_KNOWN_PROGRAMS.filter((p) => !options.only?.length || options.only.includes(p.id) || options.only.includes(p.name));
  const results = await Promise.all(wanted.map((p) => cloneIntoCache(options.from, p, cacheDir, options.timeoutMs)));
  const copied: CopiedPrograms['copied'] = [];
  const missing: MissingProgram[] = [];
  let reached = wanted.length === 0;
  let failure: string | undefined;
  results.forEach((r, i) => {
    if ('elf' in r) copied.push({ id: r.id, name: wanted[i]!.name, bytes: r.elf.length, path: r.path });
    else {
      missing.push({ id: r.id, name: r.name, reason: r.reason });
      failure ??= r.failure;
    }
    reached ||= 'elf' in r || r.reachable;
  });
  const holders: CopiedPrograms['holders'] = {};
  for (const network of NETWORKS) {
    const pid = lockHolder(join(options.dataDir, 'ledger', network));
    if (pid !== null) holders[network] = pid;
  }
  return { from: origin(options.from), cacheDir, copied, missing, unreachable: reached ? null : (failure ?? 'no answer'), holders };
}

/**
 * What `ledger` runs: the programs loaded at this start, plus each missing well-known program its saved state still
 * holds as an executable account (a snapshot keeps the programs of earlier starts, and LiteSVM runs them).
 */
async function describePrograms(resolved: ResolvedPrograms, ledger: Ledger): Promise<LedgerPrograms> {
  const programs: LoadedProgram[] = resolved.images.map(({ id, name, source }) => ({ id, name, source }));
  const missing: LedgerPrograms['missing'] = [];
  const kept = await ledger.getMultipleAccounts(resolved.missing.map((p) => p.id));
  resolved.missing.forEach(({ id, name }, i) => {
    if (kept[i]?.executable) programs.push({ id, name, source: 'state' });
    else missing.push({ id, name });
  });
  return { programs, missing };
}

function logPrograms(network: Network, loaded: LedgerPrograms, onInfo: OpenLedgersOptions['onInfo']): void {
  const names = loaded.programs.map((p) => `${p.name ?? p.id} (${p.source})`).join(', ') || 'none';
  const missing = loaded.missing.map((p) => p.name ?? p.id).join(', ');
  onInfo?.(`${network} ledger programs: ${names}${missing ? `; missing: ${missing}` : ''}`, {
    component: 'ledger',
    network,
    programs: loaded.programs,
    missing: loaded.missing,
  });
}

function checkUrl(network: Network, source: string): string {
  let url: URL;
  try {
    url = new URL(source);
  } catch {
    throw new Error(`the ${network} ledger must be "embedded" or an http(s) URL, not ${JSON.stringify(source)}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error(`the ${network} ledger URL must be http(s): ${source}`);
  return source;
}

/** Builds both networks' ledgers from config: the one place that knows the adapters. */
export async function openLedgers(options: OpenLedgersOptions): Promise<OpenedLedgers> {
  const ledgers = {} as Record<Network, Ledger>;
  const embedded: Partial<Record<Network, LedgerThread>> = {};
  const rpcUrls: Partial<Record<Network, string>> = {};
  const programs: Partial<Record<Network, LedgerPrograms>> = {};
  const remote: RpcLedger[] = [];
  const closeAll = async () => {
    for (const l of remote) l.close(); // their PubSub sockets
    await Promise.allSettled(Object.values(embedded).map((l) => l.close()));
  };
  for (const network of NETWORKS) {
    const source = network === 'chain-devnet' ? options.devnet : options.mainnet;
    if (source !== 'embedded') checkUrl(network, source);
  }
  const resolved = options.devnet === 'embedded' || options.mainnet === 'embedded' ? await programsFor(options) : undefined;
  try {
    for (const network of NETWORKS) {
      const source = network === 'chain-devnet' ? options.devnet : options.mainnet;
      const rpcPort = network === 'chain-devnet' ? options.devnetRpcPort : options.mainnetRpcPort;
      if (source === 'embedded') {
        const ledger = await LedgerThread.open({
          network,
          dir: join(options.dataDir, 'ledger', network),
          slotMs: options.slotMs,
          rpc:
            rpcPort !== undefined && rpcPort !== null
              ? { port: rpcPort, host: options.rpcHost, adminSecret: loadOrCreateAdminSecret(options.dataDir), bounds: options.rpcBounds }
              : undefined,
          onWarning: options.onWarning,
          programs: resolved!.images,
        });
        embedded[network] = ledger;
        ledgers[network] = ledger;
        if (ledger.rpcUrl) rpcUrls[network] = ledger.rpcUrl;
        programs[network] = await describePrograms(resolved!, ledger);
        logPrograms(network, programs[network], options.onInfo);
      } else {
        const url = checkUrl(network, source);
        const ledger = new RpcLedger({ url, readTimeoutMs: options.rpcReadTimeoutMs, sendTimeoutMs: options.rpcSendTimeoutMs });
        remote.push(ledger);
        ledgers[network] = ledger;
        rpcUrls[network] = url;
      }
    }
  } catch (e) {
    await closeAll();
    throw e;
  }
  return {
    ledgers,
    embedded,
    faucet: Object.keys(embedded).length ? createFaucet(embedded) : undefined,
    rpcUrls,
    programs,
    close: closeAll,
  };
}

/**
 * The faucet for out-of-band use (the CLI) on the embedded ledger under `dataDir`. When a live process holds the
 * ledger (its LOCK), the request goes through that process's JSON-RPC (announced in rpc.json) so its in-memory
 * state stays the only writer; otherwise the ledger is opened here under the same lock, used and closed.
 */
export async function runFaucet(
  options: { dataDir: string; programsDir?: string | undefined; cloneUrl?: string | undefined },
  request: FaucetRequest,
): Promise<FaucetResult & { via: string }> {
  const dir = join(options.dataDir, 'ledger', request.network);
  for (let attempt = 0; attempt < 2; attempt++) {
    const holder = lockHolder(dir);
    if (holder !== null) {
      const announced = announcedRpc(dir);
      if (!announced || announced.pid !== holder) {
        throw new Error(
          `the ${request.network} ledger is open in process ${holder}, which serves no JSON-RPC for it: stop that process or give it an RPC port`,
        );
      }
      return { ...(await createRemoteFaucet({ [request.network]: announced.url }, readAdminSecret(options.dataDir))(request)), via: announced.url };
    }
    let ledger: EmbeddedLedger;
    try {
      ledger = await EmbeddedLedger.open({ network: request.network, dir, programs: (await programsFor(options)).images });
    } catch (e) {
      if (e instanceof LedgerLockedError) continue; // someone opened it meanwhile: go through them
      throw e;
    }
    try {
      return { ...(await createFaucet({ [request.network]: ledger })(request)), via: dir };
    } finally {
      await ledger.close();
    }
  }
  throw new Error(`the ${request.network} ledger in ${dir} is busy`);
}

/**
 * Ledgers for a process that joins an installation (`npm run facilitator`): an explicit RPC URL for every network;
 * otherwise each network's embedded ledger under `dataDir` — through the JSON-RPC of the process holding it (the
 * gateway), or opened here (with its RPC server on `rpcPorts`) when nobody does.
 */
export async function joinLedgers(options: {
  dataDir: string;
  networks: Network[];
  rpcUrl?: string | undefined;
  rpcPorts: Record<Network, number>;
  rpcHost?: string | undefined;
  rpcBounds?: RequestBounds | undefined;
  /** the programs a ledger opened here loads (as openLedgers) */
  programsDir?: string | undefined;
  cloneUrl?: string | undefined;
  onWarning?: ((message: string) => void) | undefined;
  onInfo?: OpenLedgersOptions['onInfo'];
}): Promise<OpenedLedgers> {
  const ledgers = {} as Record<Network, Ledger>;
  const embedded: Partial<Record<Network, LedgerThread>> = {};
  const rpcUrls: Partial<Record<Network, string>> = {};
  const remote: Partial<Record<Network, string>> = {};
  const programs: Partial<Record<Network, LedgerPrograms>> = {};
  let resolved: ResolvedPrograms | undefined;
  const closeAll = async () => {
    await Promise.allSettled(Object.values(embedded).map((l) => l.close()));
  };
  try {
    for (const network of options.networks) {
      if (options.rpcUrl) {
        ledgers[network] = new RpcLedger({ url: checkUrl(network, options.rpcUrl) });
        rpcUrls[network] = options.rpcUrl;
        continue;
      }
      const dir = join(options.dataDir, 'ledger', network);
      const holder = lockHolder(dir);
      const announced = holder !== null ? announcedRpc(dir) : null;
      if (holder !== null) {
        if (!announced || announced.pid !== holder) throw new Error(`the ${network} ledger is open in process ${holder}, which serves no JSON-RPC for it`);
        ledgers[network] = new RpcLedger({ url: announced.url });
        rpcUrls[network] = remote[network] = announced.url;
        continue;
      }
      resolved ??= await programsFor(options);
      const ledger = await LedgerThread.open({
        network,
        dir,
        rpc: { port: options.rpcPorts[network], host: options.rpcHost, adminSecret: loadOrCreateAdminSecret(options.dataDir), bounds: options.rpcBounds },
        onWarning: options.onWarning,
        programs: resolved.images,
      });
      embedded[network] = ledger;
      ledgers[network] = ledger;
      rpcUrls[network] = ledger.rpcUrl!;
      programs[network] = await describePrograms(resolved, ledger);
      logPrograms(network, programs[network], options.onInfo);
    }
  } catch (e) {
    await closeAll();
    throw e;
  }
  const local = Object.keys(embedded).length ? createFaucet(embedded) : undefined;
  const viaRpc = Object.keys(remote).length ? createRemoteFaucet(remote, readAdminSecret(options.dataDir)) : undefined;
  const faucet: Faucet | undefined = local || viaRpc ? (request) => (embedded[request.network] ? local!(request) : viaRpc!(request)) : undefined;
  return { ledgers, embedded, faucet, rpcUrls, programs, close: closeAll };
}
