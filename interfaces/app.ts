import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyRequest } from 'fastify';
import { fastifyTRPCPlugin } from '@trpc/server/adapters/fastify';
import pino, { type Logger } from 'pino';
import type { MikroORM } from '@mikro-orm/postgresql';
import { newId } from '../domain/shared/ids.ts';
import { DomainError } from '../domain/shared/errors.ts';
import { limitAnonymous } from './policies/rate-limit.ts';
import { AccessService } from '../domain/access/service.ts';
import type { Clock } from '../domain/ports/clock.ts';
import type { GatewaySettings } from '../domain/shared/settings.ts';
import { startEmbeddedPostgres } from '../adapters/store/embedded-postgres.ts';
import { initOrm, migrate, MikroOrmStore } from '../adapters/store/mikro-orm-store.ts';
import { PgEventFeed } from '../adapters/store/event-feed.ts';
import { systemClock } from '../adapters/clock/system.ts';
import { ensureKeypairFile, ensureSecretKeyFile } from '../adapters/keys/file-keypair.ts';
import { MikroOrmFacilitatorStore } from '../adapters/store/repositories/facilitator.ts';
import { startProcessOwner, type ProcessOwner } from '../adapters/store/process-owner.ts';
import { joinLedgersLazily } from '../adapters/ledger/joined.ts';
import { GuardedOutboundHttp } from '../adapters/http/outbound.ts';
import { effectivePort } from '../domain/ports/outbound-http.ts';
import { HttpFacilitator } from '../adapters/facilitator/http.ts';
import { InProcessFacilitator } from '../adapters/facilitator/in-process.ts';
import { FacilitatorService } from '../domain/facilitator/service.ts';
import { feePayerFromSecretKey } from '../domain/facilitator/ed25519.ts';
import type { Ledger } from '../domain/ports/ledger.ts';
import { registerFacilitatorRoutes } from './facilitator/routes.ts';
import { registerPaywallRoutes } from './paywall/routes.ts';
import { MikroOrmPolicyStore } from '../adapters/store/policy-store.ts';
import { startGraphileRunner } from '../adapters/queue/graphile.ts';
import { resolveLimits } from '../domain/policies/rate-limit.ts';
import type { JobRunner } from '../domain/ports/job-queue.ts';
import type { PolicyStore } from '../domain/ports/policy-store.ts';
import { jobDefinitions } from '../jobs/runner.ts';
import { joinLedgers, openLedgers, runFaucet, type OpenedLedgers } from '../adapters/ledger/index.ts';
import type { FaucetRequest, FaucetResult } from '../domain/ports/faucet.ts';
import type { Network } from '../domain/shared/network.ts';
import type { Config } from './config.ts';
import { buildServices, type Services } from './services.ts';
import type { Context } from './trpc/context.ts';
import { appRouter } from './trpc/router.ts';
import { openApiDocument, registerRest } from './rest/handler.ts';
import { noteRequestId, resolveError, restError, trpcError } from './errors.ts';
import { mountGraphql } from './graphql/yoga.ts';

// The one composition root: config → adapters → services → servers. Tests build the app through here too.

export const BODY_LIMIT = 1024 * 1024;

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
  /** this process's liveness number: the claims it holds are taken over at once when it dies (issue 17) */
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
    const orm = await initOrm(url, options.poolMax ?? config.dbPoolMax);
    let owner: ProcessOwner | undefined;
    try {
      await migrate(orm, url);
      owner = await startProcessOwner(url, options.onWarning);
    } catch (e) {
      await orm.close(true);
      throw e;
    }
    const held = owner;
    return {
      url,
      orm,
      store: new MikroOrmStore(orm, held),
      owner: held,
      reused: embedded?.reused ?? false,
      embedded: embedded !== undefined,
      async close() {
        await held.close();
        await orm.close(true);
        await embedded?.stop();
      },
    };
  } catch (e) {
    await embedded?.stop();
    throw e;
  }
}

/** For out-of-band commands (npm run keys): the access service on the same database, no HTTP. */
export async function openAccess(config: Config): Promise<{ access: AccessService; database: Database; close(): Promise<void> }> {
  const database = await openDatabase(config, { poolMax: 2 });
  return { access: new AccessService({ store: database.store, clock: systemClock }), database, close: () => database.close() };
}

export interface App {
  url: string;
  ledgers: CoreLedgers;
  config: Config;
  services: Services;
  /** the outbound HTTP the services call through (issue 17: tests ask it which listeners it refuses) */
  outbound: GuardedOutboundHttp;
  fastify: FastifyInstance;
  database: Database;
  log: Logger;
  close(): Promise<void>;
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
}

/** npm run faucet: funds a wallet on the embedded ledger of SVC_DATA_DIR, through the running gateway when there is one. */
export function faucetCommand(options: { dataDir: string }, request: FaucetRequest): Promise<FaucetResult & { via: string }> {
  return runFaucet(options, request);
}

export function defaultLogger(config: Config): Logger {
  return pino({ level: config.logLevel, redact: ['req.headers.authorization', 'headers.authorization', '*.authorization', '*.key'] });
}

/** Everything but HTTP: database, event feed, services and their timers. Used by the app and by `npm run jobs`. */
/** Opened ledgers; with `ledgers: false` the records are empty. */
type CoreLedgers = Omit<OpenedLedgers, 'ledgers'> & { ledgers: Partial<OpenedLedgers['ledgers']> };

export interface Core {
  database: Database;
  ledgers: CoreLedgers;
  services: Services;
  settings: GatewaySettings;
  /** the services' outbound HTTP; `refuse` registers a listener learned later (the HTTP port after listen) */
  outbound: GuardedOutboundHttp;
  log: Logger;
  close(): Promise<void>;
}

export async function openCore(config: Config, options: AppOptions = {}): Promise<Core> {
  const log = options.logger ?? defaultLogger(config);
  const clock = options.clock ?? systemClock;
  const database = await openDatabase(config, { pgSettings: options.pgSettings, onWarning: (message, err) => log.warn({ err }, message) });
  const feed = new PgEventFeed(database.url, database.store, log);
  let ledgers: CoreLedgers | undefined;
  try {
    await feed.start();
    ledgers =
      options.ledgers === false
        ? { ledgers: {}, embedded: {}, faucet: undefined, rpcUrls: {}, close: async () => {} }
        : options.ledgers === 'join'
          ? { ...joinLedgersLazily({ dataDir: config.dataDir, devnet: config.ledgers.devnet, mainnet: config.ledgers.mainnet }), embedded: {}, faucet: undefined, rpcUrls: {} }
          : await openLedgers({
            dataDir: config.dataDir,
            devnet: config.ledgers.devnet,
            mainnet: config.ledgers.mainnet,
            devnetRpcPort: config.ledgers.devnetRpcPort,
            mainnetRpcPort: config.ledgers.mainnetRpcPort,
            rpcHost: config.ledgers.rpcHost,
            onWarning: (message) => log.warn({ component: 'ledger' }, message),
          });
    const settings: GatewaySettings = {
      baseUrl: config.baseUrl ?? `http://localhost:${config.port}`,
      facilitatorUrl: config.facilitatorUrl ?? `${config.baseUrl ?? `http://localhost:${config.port}`}/facilitator`,
      version: pkg.version,
      commit: config.commit ?? gitCommit(),
      fee: await feeSettings(config),
    };
    const facilitator =
      options.ledgers === false
        ? undefined
        : await openFacilitator({ config, ledgers: ledgers.ledgers, faucet: ledgers.faucet, fundable: new Set(Object.keys(ledgers.embedded) as Network[]), database, clock, log, fee: settings.fee });
    const paywallFacilitator = config.facilitatorUrl
      ? new HttpFacilitator({ url: config.facilitatorUrl, token: config.facilitator.accountsSecret })
      : facilitator
        ? new InProcessFacilitator(facilitator)
        : undefined;
    const outbound = new GuardedOutboundHttp({ allow: config.outbound.allow });
    refuseOwnListeners(outbound, config, ledgers, database);
    const services = buildServices({
      store: database.store,
      policies: options.policyStore ?? new MikroOrmPolicyStore(database.orm),
      feed,
      clock,
      settings,
      limits: resolveLimits(config.rateLimits),
      ledgers: ledgers.ledgers,
      faucet: ledgers.faucet,
      embeddedNetworks: new Set(Object.keys(ledgers.embedded) as Network[]),
      facilitator,
      paywallFacilitator,
      outbound,
      onRecorderError: (err) => log.warn({ err }, 'request records not written yet; will retry'),
      onWarning: (message, context) => log.warn(context, message),
    });
    const flushTimer = setInterval(() => void services.recorder.flush(), 1000);
    flushTimer.unref();
    const syncTimer = setInterval(
      () => void services.rateLimiter.sync().catch((err) => log.warn({ err }, 'rate-limit exchange failed; will retry')),
      250,
    );
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
        clearInterval(flushTimer);
        clearInterval(syncTimer);
        await services.rateLimiter.sync().catch(() => {});
        await services.recorder.flush();
        await opened.close();
        await feed.close();
        await database.close();
      },
    };
  } catch (e) {
    await ledgers?.close();
    await feed.close();
    await database.close();
    throw e;
  }
}

export async function createApp(config: Config, options: AppOptions = {}): Promise<App> {
  const core = await openCore(config, options);
  const { services, settings, database, log } = core;
  let fastify: FastifyInstance | undefined;
  let runner: JobRunner | undefined;
  try {
    fastify = buildHttp({ services, log, accountsSecret: config.facilitator.accountsSecret });
    await fastify.listen({ port: config.port, host: config.host });
    const address = fastify.server.address();
    const port = typeof address === 'object' && address ? address.port : config.port;
    refuseOwnListener(core.outbound, config.host, port);
    // With PORT=0 the real port is known only now.
    if (!config.baseUrl) settings.baseUrl = `http://localhost:${port}`;
    if (!config.facilitatorUrl) settings.facilitatorUrl = `${settings.baseUrl}/facilitator`;
    runner = config.jobs === 'inline' ? await startJobRunner(database.url, services, log) : undefined;
    return {
      url: `http://127.0.0.1:${port}`,
      ledgers: core.ledgers,
      config,
      services,
      outbound: core.outbound,
      fastify,
      database,
      log,
      async close() {
        // In-flight requests get a short grace period; then lingering sockets (an aborted streaming client's
        // never-used keep-alive connection, say) are cut so shutdown does not wait for the headers timeout.
        const closing = fastify!.close();
        const cut = setTimeout(() => fastify!.server.closeAllConnections(), 2000);
        await closing;
        clearTimeout(cut);
        await runner?.stop();
        await core.close();
      },
    };
  } catch (e) {
    await runner?.stop().catch(() => {});
    await fastify?.close().catch(() => {});
    await core.close();
    throw e;
  }
}

/**
 * Issue 17: outbound calls never reach the gateway's own listeners, even allow-listed. Refused from the start: the
 * configured ports (another process of this installation may hold them: `npm run jobs`, `npm run facilitator`), the
 * embedded ledgers' JSON-RPC and WebSocket ports and the embedded PostgreSQL; createApp adds its HTTP port after
 * listen (port 0 becomes the assigned one).
 */
function refuseOwnListeners(outbound: GuardedOutboundHttp, config: Config, ledgers: CoreLedgers, database: Database): void {
  const ports: [host: string, port: number][] = [[config.host, config.port], [config.facilitator.host, config.facilitator.port]];
  for (const [source, port] of [[config.ledgers.devnet, config.ledgers.devnetRpcPort], [config.ledgers.mainnet, config.ledgers.mainnetRpcPort]] as const) {
    if (source === 'embedded' && port !== 0) ports.push([config.ledgers.rpcHost, port], [config.ledgers.rpcHost, port + 1]);
  }
  const at = (url: string): [string, number] => [new URL(url).hostname, effectivePort(new URL(url))];
  for (const network of Object.keys(ledgers.embedded) as Network[]) {
    const rpc = ledgers.rpcUrls[network];
    if (!rpc) continue;
    // The server takes port + 1 for its WebSocket, or serves it on its own port when that one is taken.
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
    onWarning: (message, context) => log.warn({ component: 'facilitator', ...context }, message),
  });
}

export interface FacilitatorApp {
  url: string;
  service: FacilitatorService;
  rpcUrls: Partial<Record<Network, string>>;
  close(): Promise<void>;
}

/**
 * `npm run facilitator`: the facilitator alone (fee-facilitator-mpp-tools §2.5) on SVC_FACILITATOR_PORT, with the
 * same database (duplicate guard, rent sponsorship) and ledgers as the installation: SVC_FACILITATOR_RPC_URL, or the
 * embedded ledgers under SVC_DATA_DIR (through the gateway's JSON-RPC when it runs).
 */
export async function createFacilitatorApp(config: Config, options: { logger?: Logger; clock?: Clock; pgSettings?: Record<string, string> } = {}): Promise<FacilitatorApp> {
  const log = options.logger ?? defaultLogger(config);
  const clock = options.clock ?? systemClock;
  const networks = config.facilitator.networks;
  const database = await openDatabase(config, { pgSettings: options.pgSettings, poolMax: 5 });
  let ledgers: OpenedLedgers | undefined;
  let fastify: FastifyInstance | undefined;
  try {
    ledgers = await joinLedgers({
      dataDir: config.dataDir,
      networks,
      rpcUrl: config.facilitator.rpcUrl,
      rpcPorts: { 'chain-devnet': config.ledgers.devnetRpcPort, 'chain-mainnet': config.ledgers.mainnetRpcPort },
      rpcHost: config.ledgers.rpcHost,
      onWarning: (message) => log.warn({ component: 'ledger' }, message),
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
    fastify = Fastify({ loggerInstance: log as unknown as FastifyBaseLogger, bodyLimit: BODY_LIMIT, genReqId: () => newId(), requestIdHeader: false });
    fastify.addHook('onRequest', async (req, reply) => {
      reply.raw.setHeader('X-Svc-Request-Id', req.id);
    });
    registerFacilitatorRoutes(fastify, { facilitator: service, prefix: '', accountsToken: config.facilitator.accountsSecret });
    await fastify.listen({ port: config.facilitator.port, host: config.facilitator.host });
    const address = fastify.server.address();
    const port = typeof address === 'object' && address ? address.port : config.facilitator.port;
    const opened = ledgers;
    const server = fastify;
    return {
      url: `http://127.0.0.1:${port}`,
      service,
      rpcUrls: opened.rpcUrls,
      async close() {
        await server.close();
        await opened.close();
        await database.close();
      },
    };
  } catch (e) {
    await fastify?.close().catch(() => {});
    await ledgers?.close();
    await database.close();
    throw e;
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
export function startJobRunner(url: string, services: Services, log: Logger): Promise<JobRunner> {
  const { tasks, recurring } = jobDefinitions({ maintenance: services.maintenance, paidCalls: services.paidCallMaintenance, paywall: services.paywall, log });
  return startGraphileRunner({ connectionString: url, tasks, recurring, log });
}

/**
 * Requests Node's HTTP parser refuses before fastify sees them (request line and headers over 16 KiB, malformed
 * request lines): the envelope and X-Svc-Request-Id like every other answer, then the connection is closed.
 */
function clientErrorHandler(this: FastifyInstance, err: Error & { code?: string }, socket: Duplex): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const requestId = newId();
  const error =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? new DomainError('headers_too_large', 'The request line and headers exceed 16 KiB.')
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? DomainError.invalid([{ path: '', message: 'The request did not arrive in time', code: 'timeout' }], 'The request did not arrive in time.')
        : DomainError.invalid([{ path: '', message: 'Malformed HTTP request', code: 'malformed' }], 'Malformed HTTP request.');
  const { status, body } = restError(error, requestId);
  const json = JSON.stringify(body);
  this.log.debug({ err, request_id: requestId }, 'client error');
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(json)}\r\n` +
        `X-Svc-Request-Id: ${requestId}\r\nConnection: close\r\n\r\n${json}`,
    );
  }
  socket.destroy();
}

/** What fastify refuses itself is answered in the shape of the door asked: tRPC's under /trpc, the REST envelope elsewhere. */
function errorAnswer(url: string, error: DomainError, requestId: string): { status: number; body: unknown } {
  return url.startsWith('/trpc/') || url === '/trpc' ? trpcError(error, requestId) : restError(error, requestId);
}

function buildHttp(deps: { services: Services; log: Logger; accountsSecret?: string | undefined }): FastifyInstance {
  const { services, log } = deps;
  /** /v1 answers given before any procedure runs (unknown route, undecodable URL) count against the client IP. */
  const anonymousLimit = (url: string, ip: string): { values: Record<string, string>; error?: unknown } => {
    const values: Record<string, string> = {};
    if (!url.startsWith('/v1/') && url !== '/v1') return { values };
    try {
      limitAnonymous(services, ip, 'default', values);
      return { values };
    } catch (error) {
      return { values, error };
    }
  };
  const app = Fastify({
    loggerInstance: log as unknown as FastifyBaseLogger,
    bodyLimit: BODY_LIMIT,
    genReqId: () => newId(),
    requestIdHeader: false,
    routerOptions: { maxParamLength: 5000 },
    clientErrorHandler,
    // Errors fastify answers before any hook (bad URL encoding, over-long params): same envelope and header.
    frameworkErrors: (err, req, reply) => {
      const headers = anonymousLimit(req.url, req.ip);
      const { status, body } = errorAnswer(req.url, resolveError(headers.error ?? err, req.id, req.log), req.id);
      // fastify types this reply against the unknown route's schema; it is a plain JSON reply.
      const plain = reply as unknown as { code(n: number): { headers(h: object): { send(b: unknown): void } } };
      plain.code(status).headers({ ...headers.values, 'X-Svc-Request-Id': req.id }).send(body);
    },
  });

  // X-Svc-Request-Id on every response, written to the raw response so Yoga and tRPC replies carry it too.
  app.addHook('onRequest', async (req, reply) => {
    reply.raw.setHeader('X-Svc-Request-Id', req.id);
    const clientId = req.headers['x-request-id'];
    if (typeof clientId === 'string' && clientId) req.log = req.log.child({ client_request_id: clientId.slice(0, 128) });
  });

  app.setErrorHandler((err, req, reply) => {
    const { status, body } = errorAnswer(req.url, resolveError(err, req.id, req.log), req.id);
    void reply.code(status).send(body);
  });
  app.setNotFoundHandler((req, reply) => {
    const headers = anonymousLimit(req.url, req.ip);
    const error: unknown = headers.error ?? new DomainError('not_found', `No route ${req.method} ${req.url.split('?')[0]}.`);
    const { status, body } = restError(resolveError(error, req.id, req.log), req.id);
    void reply.code(status).headers(headers.values).send(body);
  });

  const createContext = (req: FastifyRequest, transport: string): Context => {
    const idem = req.headers['idempotency-key'];
    return {
      services,
      log: req.log,
      requestId: req.id,
      authorization: req.headers.authorization,
      idempotencyKey: req.method === 'POST' && typeof idem === 'string' ? idem : undefined,
      clientIp: req.ip,
      transport,
      responseHeaders: {},
    };
  };

  registerRest(app, { createContext, baseUrl: () => services.settings.baseUrl, version: services.settings.version });

  let openapi: string | undefined;
  app.get('/openapi.json', async (_req, reply) => {
    openapi ??= JSON.stringify(openApiDocument(services.settings.baseUrl, services.settings.version));
    return reply.type('application/json').send(openapi);
  });

  void app.register(fastifyTRPCPlugin, {
    prefix: '/trpc',
    trpcOptions: {
      router: appRouter,
      createContext: ({ req }: { req: FastifyRequest }) => createContext(req, 'trpc'),
      responseMeta: ({ ctx }: { ctx?: Context }) => ({ headers: ctx?.responseHeaders ?? {} }),
      onError: ({ error, req }: { error: object; req: FastifyRequest }) => noteRequestId(error, req.id),
      maxBodySize: BODY_LIMIT,
    },
  });

  mountGraphql(app, { services, log });
  if (services.facilitator) registerFacilitatorRoutes(app, { facilitator: services.facilitator, prefix: '/facilitator', accountsToken: deps.accountsSecret });
  if (services.paywall) registerPaywallRoutes(app, { services, paywall: services.paywall });
  return app;
}
