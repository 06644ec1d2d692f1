import test, { type ExecutionContext } from 'ava';
import pino from 'pino';
import { createServer, type Server } from 'node:net';
import { ConfigError, loadConfig } from '../../interfaces/config.ts';
import { createFacilitatorApp } from '../../interfaces/app.ts';
import { makeDataDir, removeDataDir, startTestApp, testConfig } from '../support/app.ts';
import { sharedDatabaseUrl } from '../support/cluster.ts';

// Default ports that start (no two listeners on one port), and a listener that cannot bind stops start-up naming the
// variable to change: PORT, SVC_DEVNET_RPC_PORT / SVC_MAINNET_RPC_PORT (JSON-RPC and its WebSocket on port + 1),
// SVC_FACILITATOR_PORT. Each port is occupied by the test first, then the listener is started on it.

/** Listens on `port` (0: any) on 127.0.0.1 and returns the server and its port; null when that port is taken. */
async function occupy(port = 0): Promise<{ server: Server; port: number } | null> {
  const server = createServer();
  return new Promise((resolve) => {
    server.once('error', () => resolve(null));
    server.listen(port, '127.0.0.1', () => resolve({ server, port: (server.address() as { port: number }).port }));
  });
}

const release = (s: { server: Server } | null) => new Promise<void>((resolve) => (s ? s.server.close(() => resolve()) : resolve()));

/** A free port whose next port is free too: the pair an embedded ledger's JSON-RPC needs. */
async function freePair(): Promise<number> {
  for (;;) {
    const first = await occupy();
    const second = first ? await occupy(first.port + 1) : null;
    await release(first);
    await release(second);
    if (first && second) return first.port;
  }
}

/** startTestApp in a data directory of its own (removed afterwards) on the run's shared cluster: it must fail. */
async function failedStart(t: ExecutionContext, env: Record<string, string>): Promise<string> {
  const dataDir = await makeDataDir();
  t.teardown(() => removeDataDir(dataDir));
  const error = await t.throwsAsync(startTestApp({ dataDir, embeddedPostgres: false, databaseUrl: await sharedDatabaseUrl(dataDir), env }), {
    instanceOf: ConfigError,
  });
  return error?.message ?? '';
}

test('the default ports are all distinct: devnet 8899 (+8900 WebSocket), mainnet 8901 (+8902), gateway 8080, facilitator 8787', (t) => {
  const config = loadConfig({});
  t.is(config.port, 8080);
  t.is(config.ledgers.devnetRpcPort, 8899);
  t.is(config.ledgers.mainnetRpcPort, 8901);
  t.is(config.facilitator.port, 8787);
});

test('two configured listeners on one port are a ConfigError naming both variables', (t) => {
  const refused = (env: Record<string, string>) => t.throws(() => loadConfig(env), { instanceOf: ConfigError })?.message ?? '';
  t.regex(
    refused({ SVC_MAINNET_RPC_PORT: '8900' }),
    /SVC_DEVNET_RPC_PORT=8899 \(its WebSocket on 8900\) and SVC_MAINNET_RPC_PORT=8900 both listen on port 8900/,
  );
  t.regex(refused({ PORT: '8902' }), /PORT=8902 and SVC_MAINNET_RPC_PORT=8901 \(its WebSocket on 8902\) both listen on port 8902/);
  t.regex(
    refused({ SVC_FACILITATOR_PORT: '8080' }),
    /PORT=8080 and SVC_FACILITATOR_PORT=8080 both listen on port 8080: give each its own port \(or 0 for any\)/,
  );
  // a network on a remote node binds no JSON-RPC here; 0 is any free port and never collides
  t.notThrows(() => loadConfig({ SVC_MAINNET_LEDGER: 'https://rpc.example.com', SVC_MAINNET_RPC_PORT: '8900' }));
  t.notThrows(() => loadConfig({ PORT: '0', SVC_DEVNET_RPC_PORT: '0', SVC_MAINNET_RPC_PORT: '0', SVC_FACILITATOR_PORT: '0' }));
});

test('PORT in use: start-up names PORT and says what to do', async (t) => {
  const taken = (await occupy())!;
  t.teardown(() => release(taken));
  t.is(
    await failedStart(t, { PORT: String(taken.port) }),
    `PORT=${taken.port}: 127.0.0.1:${taken.port} is already in use (is another gateway running?). Set PORT to a free port, or 0 for any.`,
  );
});

test("an embedded ledger's JSON-RPC port in use: start-up names SVC_DEVNET_RPC_PORT / SVC_MAINNET_RPC_PORT", async (t) => {
  const taken = (await occupy())!;
  t.teardown(() => release(taken));
  t.is(
    await failedStart(t, { SVC_DEVNET_RPC_PORT: String(taken.port) }),
    `SVC_DEVNET_RPC_PORT=${taken.port}: 127.0.0.1:${taken.port} (the chain-devnet ledger's JSON-RPC) is already in use (is another gateway or a solana-test-validator running?). Set SVC_DEVNET_RPC_PORT to a free port whose next port is free too (its WebSocket), or 0 for any.`,
  );
  t.regex(
    await failedStart(t, { SVC_MAINNET_RPC_PORT: String(taken.port) }),
    new RegExp(`^SVC_MAINNET_RPC_PORT=${taken.port}: 127\\.0\\.0\\.1:${taken.port} \\(the chain-mainnet ledger's JSON-RPC\\) is already in use`),
  );
});

test('the WebSocket port (JSON-RPC port + 1) in use: start-up names SVC_DEVNET_RPC_PORT, never serves the WebSocket elsewhere', async (t) => {
  const port = await freePair();
  const taken = await occupy(port + 1);
  if (!taken) return t.fail(`port ${port + 1} was taken meanwhile by another program`);
  t.teardown(() => release(taken));
  t.is(
    await failedStart(t, { SVC_DEVNET_RPC_PORT: String(port) }),
    `SVC_DEVNET_RPC_PORT=${port}: 127.0.0.1:${port + 1} (the chain-devnet ledger's WebSocket, SVC_DEVNET_RPC_PORT + 1) is already in use (is another gateway or a solana-test-validator running?). Set SVC_DEVNET_RPC_PORT to a free port whose next port is free too (its WebSocket), or 0 for any.`,
  );
  // the JSON-RPC port it had bound is free again
  const again = await occupy(port);
  t.truthy(again, 'the JSON-RPC port was released');
  await release(again);
});

test('SVC_FACILITATOR_PORT in use: `npm run facilitator` names it', async (t) => {
  const taken = (await occupy())!;
  t.teardown(() => release(taken));
  const dataDir = await makeDataDir();
  t.teardown(() => removeDataDir(dataDir));
  const config = testConfig({
    SVC_DATA_DIR: dataDir,
    DATABASE_URL: await sharedDatabaseUrl(dataDir),
    SVC_FACILITATOR_PORT: String(taken.port),
    SVC_FACILITATOR_HOST: '127.0.0.1',
    SVC_FACILITATOR_NETWORKS: 'devnet',
  });
  const error = await t.throwsAsync(createFacilitatorApp(config, { logger: pino({ level: 'silent' }) }), { instanceOf: ConfigError });
  t.is(
    error?.message,
    `SVC_FACILITATOR_PORT=${taken.port}: 127.0.0.1:${taken.port} is already in use (is another facilitator running?). Set SVC_FACILITATOR_PORT to a free port, or 0 for any.`,
  );
});
