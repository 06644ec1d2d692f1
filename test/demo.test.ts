import anyTest, { type TestFn } from 'ava';
import { existsSync } from 'node:fs';
import { readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { http, issueKey, makeDataDir, removeDataDir, startTestApp, type TestApp } from './support/app.ts';
import { npmRun, run, start, type Running, RUN_TS } from './support/commands.ts';
import { coreProgramsDir, metaplexTest } from './support/programs.ts';
import { announceGateway, findGateway, type GatewayAnnouncement } from '../interfaces/announce.ts';

// The way to a first sale, run as a person runs it: `npm start`'s gateway (interfaces/main.ts in a child, its own
// embedded PostgreSQL under a fresh data directory, Metaplex Core loaded) announces itself in gateway.json; then
// `npm run keys`, `npm run demo` (twice: the second run reuses the agent and the link) and `npm run pay` find it through
// the data directory alone. Everything is checked through the public API.

interface Context {
  dataDir: string;
  gateway?: Running;
  announced?: GatewayAnnouncement;
}
/** the key the later steps read with (AVA gives each test its own copy of t.context) */
let key: string | undefined;
const test = anyTest as TestFn<Context>;
/** The gateway's story runs in order (keys, demo twice, pay, stop); metaplexTest registers through this. */
const inOrder = test.serial as unknown as TestFn<Context>;

test.before(async (t) => {
  t.context.dataDir = await makeDataDir();
  const programs = coreProgramsDir();
  if (!programs) return; // the Metaplex tests below are skipped (or failed under SVC_REQUIRE_PROGRAMS=1)
  // npm start's command without its explorer build; ports 0 so parallel test files never collide.
  const gateway = start(process.execPath, [RUN_TS, 'interfaces/main.ts'], {
    SVC_DATA_DIR: t.context.dataDir,
    PORT: '0',
    HOST: '127.0.0.1',
    SVC_DEVNET_RPC_PORT: '0',
    SVC_MAINNET_RPC_PORT: '0',
    SVC_LOG_LEVEL: 'warn',
    SVC_LEDGER_PROGRAMS: programs,
  });
  t.context.gateway = gateway;
  // The banner is printed just before gateway.json is written; wait for the file after it.
  await gateway.printed(/API key/);
  const lookup = await until(async () => {
    const found = await findGateway(t.context.dataDir);
    return found.state === 'running' ? found : undefined;
  }, gateway);
  t.context.announced = lookup.gateway;
});

test.after.always(async (t) => {
  const { gateway } = t.context;
  if (gateway && gateway.child.exitCode === null) {
    gateway.child.kill('SIGTERM');
    await gateway.exited;
  }
  await removeDataDir(t.context.dataDir);
});

/** Polls `check` while the gateway child lives (the condition, not a clock, bounds the wait). */
async function until<T>(check: () => Promise<T | undefined>, gateway: Running): Promise<T> {
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (gateway.child.exitCode !== null) throw new Error(`the gateway exited (${gateway.child.exitCode}):\n${gateway.output().stderr}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function api<T = any>(t: { context: Context }, method: string, path: string, body?: unknown): Promise<{ status: number; body: T }> {
  return http<T>({ url: t.context.announced!.url } as TestApp, method, path, { key: key!, ...(body !== undefined ? { body } : {}) });
}

metaplexTest(inOrder, 'npm start announces itself in <data>/gateway.json: pid, a local URL, start time, the ledgers’ JSON-RPC', async (t) => {
  const announced = t.context.announced!;
  t.is(announced.pid, t.context.gateway!.child.pid!);
  t.regex(announced.url, /^http:\/\/127\.0\.0\.1:\d+$/);
  t.false(Number.isNaN(Date.parse(announced.started_at)));
  t.regex(announced.rpc_urls['chain-devnet'] ?? '', /^http:\/\/127\.0\.0\.1:\d+$/);
  const health = await fetch(`${announced.url}/v1/health`);
  t.is(health.status, 401, 'the URL reaches the gateway (which wants a key)');
});

metaplexTest(inOrder, 'npm run keys says which data directory it used and that a gateway runs on it; --json stays one line', async (t) => {
  const out = await npmRun('keys', ['create', '--network', 'devnet', '--json'], { SVC_DATA_DIR: t.context.dataDir });
  t.is(out.code, 0, out.stderr);
  const lines = out.stdout.trim().split('\n');
  t.is(lines.length, 1, out.stdout);
  const created = JSON.parse(lines[0]!);
  t.like(created, {
    network: 'chain-devnet',
    role: 'user',
    data_dir: t.context.dataDir,
    data_dir_source: 'SVC_DATA_DIR',
    gateway_url: t.context.announced!.url,
  });
  t.regex(out.stderr, new RegExp(`data directory: ${t.context.dataDir} \\(from SVC_DATA_DIR\\)`));
  t.regex(out.stderr, /gateway: running on this data directory at http:\/\/127\.0\.0\.1:\d+/);
  key = created.key;
  t.is((await api(t, 'GET', '/v1/health')).status, 200, 'the running gateway knows the key');
});

metaplexTest(inOrder, 'npm run demo mints a real agent, sells a link, pays it once; a second run reuses both', async (t) => {
  const first = await npmRun('demo', [], { SVC_DATA_DIR: t.context.dataDir, SVC_API_KEY: '' });
  t.is(first.code, 0, `${first.stdout}\n${first.stderr}`);
  const state = JSON.parse(await readFile(join(t.context.dataDir, 'demo', 'state.json'), 'utf8')) as { agent: string; link: string; owner: string };
  t.is((await stat(join(t.context.dataDir, 'demo', 'owner.json'))).mode & 0o777, 0o600, 'the owner key is readable by its owner only');

  // What it printed, in plain words.
  const made = /API key\s+(svc_test_\w+)/.exec(first.stdout)?.[1];
  t.truthy(made, first.stdout);
  t.is(first.stdout.split(made!).length - 1, 1, 'the key is printed once');
  t.regex(first.stdout, new RegExp(`Agent\\s+prepared ${state.agent}`));
  t.regex(first.stdout, /confirmed in slot \d+/);
  t.regex(first.stdout, new RegExp(`Explorer\\s+${t.context.announced!.url}/explorer`));
  t.regex(first.stdout, new RegExp(`Share URL\\s+http://localhost:\\d+/x/${state.link}\\?network=chain-devnet`));
  t.regex(first.stdout, new RegExp(`curl -i 'http://localhost:\\d+/x/${state.link}\\?network=chain-devnet'`));
  t.regex(first.stdout, /Paid\s+200 \{"fortune"/);
  for (const seen of ['agent.create\\s+prepared', 'agent.create\\s+confirmed', 'payment_link.created', 'payment_link.settled'])
    t.regex(first.stdout, new RegExp(seen));

  // Through the API with the key the demo made: the agent exists, owned by the demo's wallet; the link was paid once.
  key = made;
  const agent = await api(t, 'GET', `/v1/agents/${state.agent}`);
  t.is(agent.status, 200, JSON.stringify(agent.body));
  t.like(agent.body, { mint: state.agent, owner: state.owner, source: 'prepared' });
  const link = await api(t, 'GET', `/v1/payment-links/${state.link}`);
  t.like(link.body, { owner_agent: state.agent, label: 'Demo fortune cookie', counters: { settled_count: 1 } });
  // The 402 a person sees with the printed curl line.
  const unpaid = await fetch(link.body.share_url);
  t.is(unpaid.status, 402);

  const second = await npmRun('demo', [], { SVC_DATA_DIR: t.context.dataDir, SVC_API_KEY: '' });
  t.is(second.code, 0, `${second.stdout}\n${second.stderr}`);
  t.regex(second.stdout, new RegExp(`Agent\\s+${state.agent} \\(reused`));
  t.regex(second.stdout, new RegExp(`\\(${state.link}, reused\\)`));
  t.notRegex(second.stdout, /prepared/);
  t.regex(second.stdout, /2 paid calls so far, 1 by this run/);
  t.deepEqual(JSON.parse(await readFile(join(t.context.dataDir, 'demo', 'state.json'), 'utf8')), state);
  t.like((await api(t, 'GET', `/v1/payment-links/${state.link}`)).body, { counters: { settled_count: 2 } });
});

metaplexTest(inOrder, 'npm run pay pays a share URL once from the buyer wallet of the data directory and prints the settlement', async (t) => {
  const state = JSON.parse(await readFile(join(t.context.dataDir, 'demo', 'state.json'), 'utf8')) as { link: string };
  const link = await api(t, 'GET', `/v1/payment-links/${state.link}`);
  const before = link.body.counters.settled_count as number;
  const out = await npmRun('pay', [link.body.share_url], { SVC_DATA_DIR: t.context.dataDir });
  t.is(out.code, 0, `${out.stdout}\n${out.stderr}`);
  t.regex(out.stdout, /Status\s+200/);
  t.regex(out.stdout, /Body\s+\{"fortune"/);
  const signature = /Paid\s+transaction (\w+) on chain-devnet/.exec(out.stdout)?.[1];
  t.truthy(signature, out.stdout);
  const after = await api(t, 'GET', `/v1/payment-links/${state.link}`);
  t.like(after.body.counters, { settled_count: before + 1, last_tx_sig: signature });
});

metaplexTest(inOrder, 'the gateway removes gateway.json when it stops', async (t) => {
  const gateway = t.context.gateway!;
  gateway.child.kill('SIGTERM');
  const done = await gateway.exited;
  t.is(done.code, 0, done.stderr);
  t.false(existsSync(join(t.context.dataDir, 'gateway.json')));
  t.like(await findGateway(t.context.dataDir), { state: 'absent' });
});

test('npm run demo without a running gateway exits non-zero and says to run npm start first; a stale gateway.json counts as not running', async (t) => {
  const dir = await makeDataDir();
  t.teardown(() => removeDataDir(dir));
  const none = await npmRun('demo', [], { SVC_DATA_DIR: dir });
  t.not(none.code, 0);
  t.regex(none.stderr, /No gateway is running on the data directory/);
  t.regex(none.stderr, /`npm start`/);

  // A gateway that died without removing its file: its pid is gone.
  const exited = await run(process.execPath, ['-e', 'console.log(process.pid)']);
  await writeFile(
    join(dir, 'gateway.json'),
    JSON.stringify({ pid: Number(exited.stdout.trim()), url: 'http://127.0.0.1:9', started_at: new Date().toISOString() }),
  );
  t.like(await findGateway(dir), { state: 'stale' });
  const stale = await npmRun('demo', [], { SVC_DATA_DIR: dir });
  t.not(stale.code, 0);
  t.regex(stale.stderr, /has exited/);
  t.regex(stale.stderr, /`npm start`/);
});

test('npm run demo against a gateway without Metaplex Core exits non-zero and prints npm run programs', async (t) => {
  // SVC_LEDGER_PROGRAMS empty: the embedded ledgers load no program, GET /v1/health lists Core as missing.
  const app = await startTestApp({ env: { SVC_LEDGER_PROGRAMS: '' } });
  // The test app announces itself as npm start does (interfaces/main.ts calls the same function).
  const announced = await announceGateway(app.dataDir, { url: app.url, rpcUrls: app.ledgers.rpcUrls });
  t.teardown(async () => {
    await announced.remove();
    await app.close();
    await removeDataDir(app.dataDir);
  });
  const out = await npmRun('demo', [], { SVC_DATA_DIR: app.dataDir, SVC_API_KEY: await issueKey(app) });
  t.not(out.code, 0, out.stdout);
  t.regex(out.stderr, /does not run Metaplex Core/);
  t.regex(out.stderr, /npm run programs/);
  t.false(existsSync(join(app.dataDir, 'demo', 'state.json')), 'nothing was minted');

  // npm run keys on a directory no gateway serves (the database given apart) says so, so a key that the gateway
  // will answer invalid_api_key for is no surprise.
  const elsewhere = await makeDataDir();
  t.teardown(() => removeDataDir(elsewhere));
  const keys = await npmRun('keys', ['create', '--network', 'devnet', '--json'], { SVC_DATA_DIR: elsewhere, DATABASE_URL: app.database.url });
  t.is(keys.code, 0, keys.stderr);
  t.like(JSON.parse(keys.stdout), { data_dir: elsewhere, data_dir_source: 'SVC_DATA_DIR', gateway_url: null });
  t.regex(keys.stderr, /gateway: none running on this data directory; a gateway started with another SVC_DATA_DIR does not know keys issued here/);
});
