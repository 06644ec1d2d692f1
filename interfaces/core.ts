import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { createLogger } from './log.ts';
import type { MikroORM } from '@mikro-orm/postgresql';
import { AccessService } from '../domain/access/service.ts';
import type { Clock } from '../domain/ports/clock.ts';
import type { GatewaySettings } from '../domain/shared/settings.ts';
import { startEmbeddedPostgres } from '../adapters/store/embedded-postgres.ts';
import { initOrm, migrate, MikroOrmStore } from '../adapters/store/mikro-orm-store.ts';
import { PgEventFeed } from '../adapters/store/event-feed.ts';
import { systemClock } from '../adapters/clock/system.ts';
import { ensureKeypairFile, ensureSecretKeyFile } from '../adapters/keys/file-keypair.ts';
import { ensureSigningKeyRing, saveSigningKeyRing } from '../adapters/keys/signing-keys.ts';
import { didWebOf, ReceiptSigner, rotateRing } from '../domain/receipts/signing.ts';
import { MikroOrmFacilitatorStore } from '../adapters/store/repositories/facilitator.ts';
import { startProcessOwner, type ProcessOwner } from '../adapters/store/process-owner.ts';
import { databaseHeavySlots } from '../adapters/store/heavy-slots.ts';
import { joinLedgersLazily } from '../adapters/ledger/joined.ts';
import { GuardedOutboundHttp } from '../adapters/http/outbound.ts';
import { effectivePort } from '../domain/ports/outbound-http.ts';
import { HttpFacilitator } from '../adapters/facilitator/http.ts';
import { InProcessFacilitator } from '../adapters/facilitator/in-process.ts';
import { FacilitatorService } from '../domain/facilitator/service.ts';
import { AgentProof } from '../domain/agents/proof.ts';
import { feePayerFromSecretKey } from '../domain/facilitator/ed25519.ts';
import type { Ledger } from '../domain/ports/ledger.ts';
import { MikroOrmPolicyStore } from '../adapters/store/policy-store.ts';
import { graphileQueue, migrateQueue, startGraphileRunner } from '../adapters/queue/graphile.ts';
import { resolveLimits } from '../domain/policies/rate-limit.ts';
import type { JobRunner } from '../domain/ports/job-queue.ts';
import type { PolicyStore } from '../domain/ports/policy-store.ts';
import { jobDefinitions } from '../jobs/runner.ts';
import {
  copyWellKnownPrograms,
  joinLedgers,
  openLedgers,
  RpcListenError,
  runFaucet,
  type CopiedPrograms,
  type OpenedLedgers,
} from '../adapters/ledger/index.ts';
import type { FaucetRequest, FaucetResult } from '../domain/ports/faucet.ts';
import type { Network } from '../domain/shared/network.ts';
import { programsCommand, type Config } from './config.ts';
import { ledgerListenFailure } from './listeners.ts';
import { buildServices, type Services } from './services.ts';

// Core wiring, the one place that builds adapters: config → adapters → services, and the job runner. No HTTP: the
// gateway's server (app.ts + http.ts), `npm run jobs`, `npm run keys` and `npm run facilitator` all start from here.

const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string };

function gitCommit(): string {
  try {
    return execFileSync('git', ['rev-parse', '--short', 'HEAD'], { stdio: ['ignore', 'pipe', 'ignore'], cwd: new URL('..', import.meta.url) })
      .toString()
      .trim();
  } catch {
    return 'unknown';
  }
}

export interface Database {
  url: string;
  orm: MikroORM;
  store: MikroOrmStore;
  /** this process's liveness number: the claims it holds are taken over at once when it dies */
  owner: ProcessOwner;
  /** true when the embedded server was already running (another process serves the data directory) */
  reused: boolean;
  embedded: boolean;
  close(): Promise<void>;
}

/** PostgreSQL (DATABASE_URL, or embedded under SVC_DATA_DIR) with migrations applied. Used by the app and the CLI. */
export async function openDatabase(
  config: Config,
  options: { pgSettings?: Record<string, string>; poolMax?: number; onWarning?: (message: string, err: unknown) => void } = {},
): Promise<Database> {
  const embedded = config.databaseUrl ? undefined : await startEmbeddedPostgres({ dataDir: config.dataDir, settings: options.pgSettings });
  const url = config.databaseUrl ?? embedded!.url;
  try {
    // Heavy requests (lists, aggregates) run on a pool of their own beside the main one; a command has none.
    const heavyPool = options.poolMax === undefined ? config.db.heavyPool : 0;
    const orm = await initOrm(url, options.poolMax ?? config.dbPoolMax);
    let owner: ProcessOwner | undefined;
    let heavyOrm: MikroORM | undefined;
    try {
      await migrate(orm, url);
      // The job queue's schema too: events enqueue their webhook deliveries in their own transaction.
      await migrateQueue(url);
      owner = await startProcessOwner(url, options.onWarning);
      if (heavyPool > 0) heavyOrm = await initOrm(url, heavyPool, { statementTimeoutMs: config.db.heavyTimeoutMs, acquireTimeoutMs: config.db.heavyTimeoutMs });
    } catch (e) {
      await owner?.close();
      await orm.close(true);
      throw e;
    }
    const held = owner;
    // the per-principal cap on heavy requests, counted across every process on this database
    const slots = databaseHeavySlots(url, options.onWarning);
    return {
      url,
      orm,
      store: new MikroOrmStore(orm, held, { ...config.db, heavyOrm, slots }),
      owner: held,
      reused: embedded?.reused ?? false,
      embedded: embedded !== undefined,
      async close() {
        await held.close();
        await slots.close();
        await heavyOrm?.close(true);
        await orm.close(true);
        await embedded?.stop();
      },
    };
  } catch (e) {
    await embedded?.stop();
    throw e;
  }
}

/**
 * npm run keys -- rotate-signing: a new offer-receipt signing key in SVC_SIGNING_KEYS_FILE; the one that signed until
 * now stays published (domain/receipts/signing.ts). Gateways sign with it from their next start. Answers the new key id.
 */
export async function rotateSigningKeysCommand(config: Config, now: Date): Promise<{ id: string; file: string }> {
  const file = config.signingKeysFile;
  const ring = rotateRing(await ensureSigningKeyRing(file, now), now);
  await saveSigningKeyRing(file, ring);
  return { id: ring.keys.at(-1)!.id, file };
}

/** For out-of-band commands (npm run keys): the access service on the same database, no HTTP. */
export async function openAccess(config: Config): Promise<{ access: AccessService; database: Database; close(): Promise<void> }> {
  const database = await openDatabase(config, { poolMax: 2 });
  return { access: new AccessService({ store: database.store, clock: systemClock }), database, close: () => database.close() };
}

export interface AppOptions {
  clock?: Clock;
  logger?: Logger;
  /** extra PostgreSQL settings for a cluster this process starts (tests turn fsync off) */
  pgSettings?: Record<string, string>;
  /** replaces the policy tables' adapter (the policies benchmark measures against one that stores nothing) */
  policyStore?: PolicyStore;
  /**
   * false: open no ledgers. 'join': open none but reach them — remote nodes as configured, embedded ones through
   * the JSON-RPC of the process holding them — so the job runner run apart (`npm run jobs`) can settle and record
   * paid calls without ever holding the gateway's files.
   */
  ledgers?: boolean | 'join';
  /** the port the gateway's HTTP server is bound to (createApp binds it first); default: PORT */
  listenPort?: number;
}

/** npm run faucet: funds a wallet on the embedded ledger of SVC_DATA_DIR, through the running gateway when there is one. */
export function faucetCommand(
  options: { dataDir: string; programsDir?: string | undefined; cloneUrl?: string | undefined },
  request: FaucetRequest,
): Promise<FaucetResult & { via: string }> {
  return runFaucet(options, request);
}

/** npm run programs: the well-known programs copied from a Solana JSON-RPC into the program cache of `dataDir`. */
export function programsCopyCommand(options: { dataDir: string; from: string; only?: string[] | undefined; timeoutMs?: number }): Promise<CopiedPrograms> {
  return copyWellKnownPrograms(options);
}
export type { CopiedPrograms };

export function defaultLogger(config: Config): Logger {
  return createLogger({ level: config.logLevel, format: config.logFormat });
}

/** Everything but HTTP: database, event feed, services and their timers. Used by the app and by `npm run jobs`. */
/** Opened ledgers; with `ledgers: false` the records are empty. */
export type CoreLedgers = Omit<OpenedLedgers, 'ledgers'> & { ledgers: Partial<OpenedLedgers['ledgers']> };

export interface Core {
  database: Database;
  ledgers: CoreLedgers;
  services: Services;
  settings: GatewaySettings;
  /** the services' outbound HTTP, refusing the installation's own listeners */
  outbound: GuardedOutboundHttp;
  log: Logger;
  close(): Promise<void>;
}

export async function openCore(config: Config, options: AppOptions = {}): Promise<Core> {
  const log = options.logger ?? defaultLogger(config);
  const clock = options.clock ?? systemClock;
  // The HTTP port as the server bound it (PORT=0 becomes the assigned one): the settings are final once built.
  const port = options.listenPort ?? config.port;
  const database = await openDatabase(config, { pgSettings: options.pgSettings, onWarning: (message, err) => log.warn({ err }, message) });
  const feed = new PgEventFeed(database.url, database.store, log);
  let ledgers: CoreLedgers | undefined;
  try {
    await feed.start();
    ledgers =
      options.ledgers === false
        ? { ledgers: {}, embedded: {}, faucet: undefined, rpcUrls: {}, close: async () => {} }
        : options.ledgers === 'join'
          ? {
              ...joinLedgersLazily({ dataDir: config.dataDir, devnet: config.ledgers.devnet, mainnet: config.ledgers.mainnet }),
              embedded: {},
              faucet: undefined,
              rpcUrls: {},
            }
          : await openLedgers({
              dataDir: config.dataDir,
              devnet: config.ledgers.devnet,
              mainnet: config.ledgers.mainnet,
              devnetRpcPort: config.ledgers.devnetRpcPort,
              mainnetRpcPort: config.ledgers.mainnetRpcPort,
              rpcHost: config.ledgers.rpcHost,
              rpcBounds: config.http,
              programsDir: config.ledgers.programsDir,
              cloneUrl: config.ledgers.cloneUrl,
              onWarning: (message) => log.warn({ component: 'ledger' }, message),
              onInfo: (message, context) => log.info(context, message),
            });
    // Final once built (frozen): nothing patches them later, the HTTP port included.
    const settings: GatewaySettings = {
      baseUrl: config.baseUrl ?? `http://localhost:${port}`,
      facilitatorUrl: config.facilitatorUrl ?? `${config.baseUrl ?? `http://localhost:${port}`}/facilitator`,
      version: pkg.version,
      commit: config.commit ?? gitCommit(),
      fee: await feeSettings(config),
      // the ledgers this process runs can take the well-known programs it lacks through `npm run programs`
      programsCommand: Object.fromEntries(Object.keys(ledgers.embedded).map((network) => [network, programsCommand(config)])),
    };
    Object.freeze(settings.programsCommand);
    Object.freeze(settings.fee.authorities);
    Object.freeze(settings.fee);
    Object.freeze(settings);
    // one view of which agents are proven for the services and the facilitator: a treasury the paywall knows payable
    // costs the facilitator's check of its settlement nothing
    const agentProof = new AgentProof({ store: database.store, clock, ledgers: ledgers.ledgers });
    const facilitator =
      options.ledgers === false
        ? undefined
        : await openFacilitator({
            config,
            ledgers: ledgers.ledgers,
            faucet: ledgers.faucet,
            fundable: new Set(Object.keys(ledgers.embedded) as Network[]),
            database,
            clock,
            log,
            fee: settings.fee,
            proof: agentProof,
          });
    const paywallFacilitator = config.facilitatorUrl
      ? new HttpFacilitator({ url: config.facilitatorUrl, token: config.facilitator.accountsSecret })
      : facilitator
        ? new InProcessFacilitator(facilitator)
        : undefined;
    const outbound = new GuardedOutboundHttp({ allow: config.outbound.allow, ca: config.outbound.ca });
    refuseOwnListeners(outbound, { config, httpPort: port, ledgers, database });
    const mppSecret = config.mppSecret ?? (await ensureSecretKeyFile(join(config.dataDir, 'keys', 'mpp-challenge.json')));
    const signingKeys = config.signingKeysFile;
    const signer = new ReceiptSigner(await ensureSigningKeyRing(signingKeys, clock.now()), {
      issuer: didWebOf(settings.baseUrl),
      persist: (ring) => saveSigningKeyRing(signingKeys, ring),
    });
    const services = buildServices({
      mppSecret,
      signer,
      store: database.store,
      policies: options.policyStore ?? new MikroOrmPolicyStore(database.orm),
      feed,
      clock,
      settings,
      limits: resolveLimits(config.rateLimits),
      ledgers: ledgers.ledgers,
      faucet: ledgers.faucet,
      embeddedNetworks: new Set(Object.keys(ledgers.embedded) as Network[]),
      ledgerPrograms: ledgers.programs,
      facilitator,
      agentProof,
      paywallFacilitator,
      ownPaywallFacilitator: !config.facilitatorUrl && facilitator !== undefined,
      outbound,
      queue: graphileQueue(database.url, log),
      onRecorderError: (err) => log.warn({ err }, 'request records not written yet; will retry'),
      onWarning: (message, context) => log.warn(context, message),
      // the console's submit line (interfaces/log.ts): every first submit, from any door
      onSubmitted: (s) => log.info({ evt: 'submit', ...s }, s.outcome === 'submitted' ? 'transaction submitted' : 'transaction refused by the ledger'),
      // the console's confirmation line for the events decided on the ledger's notification (the job logs its own)
      onDecided: (d) => log.info({ evt: 'confirmation', ...d }, d.phase === 'confirmed' ? 'transaction confirmed' : 'transaction failed'),
    });
    const unwatchReceipts = services.receipts.watchPublished(feed);
    const flushTimer = setInterval(() => void services.recorder.flush(), 1000);
    flushTimer.unref();
    const syncTimer = setInterval(() => void services.rateLimiter.sync().catch((err) => log.warn({ err }, 'rate-limit exchange failed; will retry')), 250);
    syncTimer.unref();
    const opened = ledgers;
    return {
      database,
      ledgers: opened,
      services,
      settings,
      outbound,
      log,
      async close() {
        unwatchReceipts();
        clearInterval(flushTimer);
        clearInterval(syncTimer);
        await services.rateLimiter.sync().catch(() => {});
        await services.recorder.flush();
        await opened.close();
        await services.transactions.drain(); // the ledgers closed: the waits ended; decisions in flight finish
        await feed.close();
        await database.close();
      },
    };
  } catch (e) {
    await ledgers?.close();
    await feed.close();
    await database.close();
    throw e instanceof RpcListenError ? ledgerListenFailure(e, config) : e;
  }
}

/**
 * Outbound calls never reach the gateway's own listeners, even allow-listed. Refused from the start: the
 * configured ports (another process of this installation may hold them: `npm run jobs`, `npm run facilitator`), the
 * gateway's HTTP port as bound (PORT=0: the assigned one), the embedded ledgers' JSON-RPC and WebSocket ports and the
 * embedded PostgreSQL.
 */
function refuseOwnListeners(outbound: GuardedOutboundHttp, own: { config: Config; httpPort: number; ledgers: CoreLedgers; database: Database }): void {
  const { config, httpPort, ledgers, database } = own;
  const ports: [host: string, port: number][] = [
    [config.host, httpPort],
    [config.facilitator.host, config.facilitator.port],
  ];
  for (const [source, port] of [
    [config.ledgers.devnet, config.ledgers.devnetRpcPort],
    [config.ledgers.mainnet, config.ledgers.mainnetRpcPort],
  ] as const) {
    if (source === 'embedded' && port !== 0) ports.push([config.ledgers.rpcHost, port], [config.ledgers.rpcHost, port + 1]);
  }
  const at = (url: string): [string, number] => [new URL(url).hostname, effectivePort(new URL(url))];
  for (const network of Object.keys(ledgers.embedded) as Network[]) {
    const rpc = ledgers.rpcUrls[network];
    if (!rpc) continue;
    // The server takes port + 1 for its WebSocket (a fixed port whose neighbour is taken does not start).
    const [host, port] = at(rpc);
    ports.push([host, port], [host, port + 1]);
  }
  if (config.facilitatorUrl) ports.push(at(config.facilitatorUrl));
  // The database too, embedded or DATABASE_URL: no upstream may speak to PostgreSQL on the gateway's behalf.
  const db = new URL(database.url);
  ports.push([db.hostname || '127.0.0.1', db.port ? Number(db.port) : 5432]);
  for (const [host, port] of ports) refuseOwnListener(outbound, host, port);
}

function refuseOwnListener(outbound: GuardedOutboundHttp, host: string, port: number): void {
  if (!Number.isInteger(port) || port < 1 || port > 65_535) return;
  try {
    outbound.refuse(`${host.includes(':') && !host.startsWith('[') ? `[${host}]` : host}:${port}`);
  } catch {
    outbound.refuse(`0.0.0.0:${port}`); // an odd bind host: the port is refused on every local address all the same
  }
}

/**
 * The facilitator of this process: fee payer from SVC_FACILITATOR_SECRET_KEY, or generated under the data directory
 * (DECISIONS "Facilitator"); on an embedded ledger it is funded from the faucet so settlements can pay their fees.
 */
async function openFacilitator(deps: {
  config: Config;
  ledgers: Partial<Record<Network, Ledger>>;
  /** networks whose faucet can top up the fee payer (embedded ledgers) */
  fundable: ReadonlySet<Network>;
  faucet: OpenedLedgers['faucet'];
  database: Database;
  clock: Clock;
  log: Logger;
  fee: GatewaySettings['fee'];
  networks?: Network[];
  /** the process's proof of agents (default: one of the facilitator's own on the same database) */
  proof?: AgentProof;
}): Promise<FacilitatorService> {
  const { config, ledgers, log } = deps;
  const secret = config.facilitator.secretKey ?? (await ensureSecretKeyFile(join(config.dataDir, 'keys', 'facilitator.json')));
  const signer = feePayerFromSecretKey(secret);
  const networks = deps.networks ?? (Object.keys(ledgers) as Network[]);
  for (const network of networks) {
    if (!deps.fundable.has(network) || !deps.faucet) continue;
    const balance = await ledgers[network]!.getBalance(signer.address);
    if (balance < FEE_PAYER_FLOOR) {
      await deps.faucet({ network, to: signer.address, sol: '100' });
      log.info({ network, fee_payer: signer.address }, 'funded the facilitator fee payer from the embedded faucet');
    }
  }
  return new FacilitatorService({
    ledgers,
    store: new MikroOrmFacilitatorStore(deps.database.orm, deps.database.owner),
    signer,
    clock: deps.clock,
    settings: {
      networks,
      fee: deps.fee,
      rentBudgetLamports: config.facilitator.rentBudgetLamports,
      confirmTimeoutMs: config.facilitator.confirmTimeoutMs,
    },
    // DECISIONS "Agents, submissions and events": nothing settles into the treasury of an agent recorded and unproven
    payees: deps.proof ?? new AgentProof({ store: deps.database.store, clock: deps.clock, ledgers }),
    onWarning: (message, context) => log.warn({ component: 'facilitator', ...context }, message),
  });
}

export interface FacilitatorCore {
  service: FacilitatorService;
  rpcUrls: Partial<Record<Network, string>>;
  close(): Promise<void>;
}

/**
 * The facilitator alone, without HTTP (interfaces/facilitator/app.ts serves it): the same database (duplicate guard,
 * rent sponsorship) and ledgers as the installation: SVC_FACILITATOR_RPC_URL, or the embedded ledgers under
 * SVC_DATA_DIR (through the gateway's JSON-RPC when it runs).
 */
export async function openFacilitatorCore(
  config: Config,
  options: { logger?: Logger; clock?: Clock; pgSettings?: Record<string, string> } = {},
): Promise<FacilitatorCore & { log: Logger }> {
  const log = options.logger ?? defaultLogger(config);
  const clock = options.clock ?? systemClock;
  const networks = config.facilitator.networks;
  const database = await openDatabase(config, { pgSettings: options.pgSettings, poolMax: 5 });
  let ledgers: OpenedLedgers | undefined;
  try {
    ledgers = await joinLedgers({
      dataDir: config.dataDir,
      networks,
      rpcUrl: config.facilitator.rpcUrl,
      rpcPorts: { 'chain-devnet': config.ledgers.devnetRpcPort, 'chain-mainnet': config.ledgers.mainnetRpcPort },
      rpcHost: config.ledgers.rpcHost,
      rpcBounds: config.http,
      programsDir: config.ledgers.programsDir,
      cloneUrl: config.ledgers.cloneUrl,
      onWarning: (message) => log.warn({ component: 'ledger' }, message),
      onInfo: (message, context) => log.info(context, message),
    });
    const fee = await feeSettings(config);
    const service = await openFacilitator({
      config,
      ledgers: ledgers.ledgers,
      faucet: ledgers.faucet,
      fundable: new Set(config.facilitator.rpcUrl ? [] : networks),
      database,
      clock,
      log,
      fee,
      networks,
    });
    const opened = ledgers;
    return {
      service,
      rpcUrls: opened.rpcUrls,
      log,
      async close() {
        await opened.close();
        await database.close();
      },
    };
  } catch (e) {
    await ledgers?.close();
    await database.close();
    throw e instanceof RpcListenError ? ledgerListenFailure(e, config) : e;
  }
}

/** The protocol fee of §2.5; fee authorities from env, or generated under the data directory (DECISIONS). */
async function feeSettings(config: Config): Promise<GatewaySettings['fee']> {
  const keysDir = join(config.dataDir, 'keys');
  return {
    bps: config.feeBps,
    enforcement: config.feeEnforce,
    authorities: {
      'chain-mainnet': config.feeAuthorityMainnet ?? (await ensureKeypairFile(join(keysDir, 'fee-authority-mainnet.json'))),
      'chain-devnet': config.feeAuthorityDevnet ?? (await ensureKeypairFile(join(keysDir, 'fee-authority-devnet.json'))),
    },
  };
}

/** 1 SOL: below it the embedded fee payer is topped up at start. */
const FEE_PAYER_FLOOR = 1_000_000_000n;

/** graphile-worker on the same database: each task once across processes (hosted-api §8 clean-up jobs). */
export async function startJobRunner(url: string, services: Services, log: Logger): Promise<JobRunner> {
  const { tasks, recurring, live } = jobDefinitions({
    maintenance: services.maintenance,
    metrics: services.metrics,
    paidCalls: services.paidCallMaintenance,
    paywall: services.paywall,
    webhooks: services.webhooks,
    log,
    receipts: { receipts: services.receipts, pull: services.pull, queue: graphileQueue(url, log), now: () => new Date() },
    transactions: Object.keys(services.ledgers).length
      ? { transactions: services.transactions, queue: graphileQueue(url, log), now: () => services.clock.now() }
      : undefined,
    // Graphile's run_at is wall time, whatever clock the services run on
    indexer: Object.keys(services.ledgers).length ? { indexer: services.indexer, queue: graphileQueue(url, log), now: () => new Date() } : undefined,
    agentProof: Object.keys(services.ledgers).length ? { proof: services.agents.proof, now: () => services.clock.now() } : undefined,
  });
  // Webhook deliveries are jobs too (one per attempt): more than two at a time, so one slow receiver holds up little.
  const queueRunner = await startGraphileRunner({ connectionString: url, tasks, recurring, concurrency: JOB_CONCURRENCY, log });
  // the indexer's followers of the ledgers' notifications run while the runner does
  live.start();
  const runner: JobRunner = {
    async stop() {
      await live.stop();
      await queueRunner.stop();
    },
  };
  // fee-facilitator-mpp-tools §6: the fee authorities' token accounts are watched from start-up (adding starts the job)
  for (const network of services.indexer.networks()) {
    const authority = services.settings.fee.authorities[network];
    if (authority)
      await services.watchlist.watchFeeAccounts(network, authority).catch((err: unknown) => log.warn({ err, network }, 'fee accounts not watched yet'));
  }
  // A runner starting (again) takes over at once what a killed one left mid-delivery, not at the next minute.
  await services.webhooks.sweep().catch((err: unknown) => log.warn({ err }, 'webhook sweep at start failed; the recurring one will retry'));
  return runner;
}

const JOB_CONCURRENCY = 8;
