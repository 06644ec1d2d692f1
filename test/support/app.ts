import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { loadConfig, type Config } from '../../interfaces/config.ts';
import { createApp, type App, type AppOptions } from '../../interfaces/app.ts';
import { KEY_PREFIX, type Network } from '../../domain/shared/network.ts';
import type { NewEvent, NewEventFields } from '../../domain/events/schema.ts';
import { sharedDatabaseUrl } from './cluster.ts';
import { TestClock } from './clock.ts';
import { programsDir } from './programs.ts';
import { writeCoreAsset } from './core-asset.ts';
import { afterAll, UNDER_AVA } from './teardown.ts';

export interface TestApp extends App {
  dataDir: string;
  /** the app's clock when the test gave it a TestClock */
  testClock?: TestClock;
}

/** Throw-away cluster settings: durability is not what these tests check. */
const FAST_PG = { fsync: 'off', synchronous_commit: 'off', full_page_writes: 'off' };

export async function makeDataDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'svc-test-'));
  await chmod(dir, 0o755); // embedded PostgreSQL runs as the postgres user when we are root
  return dir;
}

export function testConfig(overrides: Record<string, string> = {}): Config {
  return loadConfig({
    PORT: '0',
    HOST: '127.0.0.1',
    SVC_LOG_LEVEL: 'silent',
    SVC_COMMIT: 'test',
    SVC_DEVNET_RPC_PORT: '0',
    SVC_MAINNET_RPC_PORT: '0',
    ...overrides,
  });
}

/**
 * Starts the real app on port 0 in a fresh data directory, on `databaseUrl` (a second instance on the same database),
 * or else on a fresh database of the run's shared cluster. `embeddedPostgres: true` (implied by a given `dataDir`)
 * starts the app's own embedded PostgreSQL under the data directory instead, as `npm start` does; then close second
 * instances before the first, which owns the cluster. The file's teardown (./teardown.ts) closes it, if the test has
 * not, and removes the data directory it made; second instances, started later, close first.
 */
export async function startTestApp(
  options: { dataDir?: string; databaseUrl?: string; embeddedPostgres?: boolean; env?: Record<string, string>; appOptions?: AppOptions } = {},
): Promise<TestApp> {
  const dataDir = options.dataDir ?? (await makeDataDir());
  if (options.dataDir === undefined) afterAll(() => removeDataDir(dataDir));
  // Every test app runs Metaplex Core when the binary is at hand (test/support/programs.ts); env overrides it.
  const programs = programsDir();
  const env: Record<string, string> = { SVC_DATA_DIR: dataDir, ...(programs ? { SVC_LEDGER_PROGRAMS: programs } : {}), ...options.env };
  // Under AVA, files share one cluster per run (test/support/cluster.ts); a script run alone starts its own.
  const embedded = options.embeddedPostgres ?? (options.dataDir !== undefined || !UNDER_AVA);
  const databaseUrl = options.databaseUrl ?? (embedded ? undefined : await sharedDatabaseUrl(dataDir));
  if (databaseUrl) env.DATABASE_URL = databaseUrl;
  const app = await createApp(testConfig(env), {
    logger: pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' }),
    pgSettings: FAST_PG,
    ...options.appOptions,
  });
  const clock = options.appOptions?.clock;
  started.add(app);
  const close = app.close.bind(app);
  app.close = async () => {
    started.delete(app);
    await close();
  };
  afterAll(() => (started.has(app) ? app.close() : undefined));
  return Object.assign(app, { dataDir, testClock: clock instanceof TestClock ? clock : undefined });
}

/** The test apps of this process that are running: an app on the rpc adapter finds the embedded ledger it talks to. */
const started = new Set<App>();

export async function removeDataDir(dir: string): Promise<void> {
  await rm(dir, { recursive: true, force: true });
}

export async function issueKey(app: App, network: Network = 'chain-devnet', role: 'user' | 'admin' = 'user'): Promise<string> {
  const created = await app.services.access.issueKey({ network, role });
  return created.key;
}

/** A valid random Solana address (a fresh keypair's public key). */
export async function randomAddress(): Promise<string> {
  const { Keypair } = await import('@solana/web3.js');
  return Keypair.generate().publicKey.toBase58();
}

export interface HttpResult<T = any> {
  status: number;
  headers: Headers;
  body: T;
}

/** JSON over real HTTP. */
export async function http<T = any>(
  app: App,
  method: string,
  path: string,
  options: { key?: string; body?: unknown; headers?: Record<string, string> } = {},
): Promise<HttpResult<T>> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.key) headers.authorization = `Bearer ${options.key}`;
  if (options.body !== undefined) headers['content-type'] ??= 'application/json';
  const res = await fetch(`${app.url}${path}`, {
    method,
    headers,
    body: options.body === undefined ? undefined : typeof options.body === 'string' ? options.body : JSON.stringify(options.body),
  });
  const text = await res.text();
  let body: unknown = text;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    // not JSON: keep the text
  }
  return { status: res.status, headers: res.headers, body: body as T };
}

/** The network a key answers for, by its prefix (hosted-api §5). */
export function networkOfKey(key: string): Network {
  return (Object.keys(KEY_PREFIX) as Network[]).find((n) => key.startsWith(KEY_PREFIX[n])) ?? 'chain-devnet';
}

/**
 * A Metaplex Core AssetV1 at a fresh address (or `mint`) on the app's embedded ledger of `network`, owned by `owner`
 * (default a fresh address): what POST /v1/agents/record needs to find there (DECISIONS "Agents, submissions and
 * events": an agent exists only on the ledger). Written through the embedded ledger's test path, so it needs no Core
 * program; GET /v1/agents/{mint} then reads its name and uri from it.
 */
export async function writeAgentAsset(
  app: App,
  network: Network,
  fields: { mint?: string; owner?: string; name?: string; uri?: string } = {},
): Promise<{ mint: string; owner: string }> {
  // an app whose ledger is another app's embedded JSON-RPC (the rpc adapter): the asset is written on that one
  const url = app.ledgers.rpcUrls[network];
  const ledger =
    app.ledgers.embedded[network] ??
    [...started].find((other) => other.ledgers.embedded[network] && other.ledgers.rpcUrls[network] === url)?.ledgers.embedded[network];
  if (!ledger) throw new Error(`no embedded ${network} ledger in this app, nor one it reads through JSON-RPC, to write an agent's asset on`);
  const mint = fields.mint ?? (await randomAddress());
  const owner = fields.owner ?? (await randomAddress());
  // no uri unless given: an asset's uri is its registration document, which identity checks would fetch
  await writeCoreAsset(ledger, mint, { owner, ...(fields.name !== undefined ? { name: fields.name } : {}), uri: fields.uri ?? '' });
  return { mint, owner };
}

/** A recorded agent on the key's network (its Core asset written on the ledger first), ready to own payment links. */
export async function recordAgent(
  app: App,
  key: string,
  fields: { name?: string; uri?: string; owner?: string } = {},
): Promise<{ mint: string; owner: string }> {
  const { mint, owner } = await writeAgentAsset(app, networkOfKey(key), fields);
  const { owner: _owner, ...named } = fields;
  // Recording prepares the treasury's token accounts, which polls the ledger on the app's clock.
  const request = http(app, 'POST', '/v1/agents/record', { key, body: { mint, owner, ...named } });
  const res = (app as TestApp).testClock ? await (app as TestApp).testClock!.drive(request) : await request;
  if (res.status !== 200) throw new Error(`record agent failed: ${res.status} ${JSON.stringify(res.body)}`);
  return { mint, owner };
}

/**
 * A proven agent row written straight to the store, owned by `ownerPrincipal` ("key:<id>", "wallet:<address>"): for
 * apps started without ledgers, where there is no ledger to record an agent against.
 */
export async function insertProvenAgent(app: App, ownerPrincipal: string, network: Network = 'chain-devnet'): Promise<{ mint: string; owner: string }> {
  const mint = await randomAddress();
  const owner = await randomAddress();
  const now = new Date();
  const { treasuryOf } = await import('../../domain/treasury/derive.ts');
  await app.database.store.agents.insert({
    mint,
    network,
    owner,
    name: null,
    uri: null,
    treasury: treasuryOf(mint),
    executive: null,
    source: 'recorded',
    ownerPrincipal,
    registeredAt: now,
    provenAt: now,
  });
  return { mint, owner };
}

export function linkBody(ownerAgent: string, overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    label: 'Weather report',
    owner_agent: ownerAgent,
    method: 'GET',
    price: '$0.01',
    response: { body: { forecast: 'sunny' } },
    ...overrides,
  };
}

/**
 * Two instances on one database (the second without its own job runner), as a scaled-out deployment; the file's
 * teardown closes B, then A.
 */
export async function startTwoInstances(): Promise<{ a: TestApp; b: TestApp }> {
  const a = await startTestApp();
  return { a, b: await startTestApp({ databaseUrl: a.database.url, env: { SVC_JOBS: 'off' } }) };
}

/**
 * An event of a kind outside the catalogue (domain/events/kinds.ts), for tests of the event pipeline itself (fan-out,
 * outbox, delivery); the services append catalogued kinds only, which the compiler checks.
 */
export function syntheticEvent(event: Omit<NewEventFields, 'owner'> & { owner: string | null; kind: string; metadata: Record<string, unknown> }): NewEvent {
  return event as unknown as NewEvent;
}
