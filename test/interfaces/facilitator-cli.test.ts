import test from 'ava';
import { fileURLToPath } from 'node:url';
import { Keypair } from '@solana/web3.js';
import { encodeBase58 } from '../../domain/shared/base58.ts';
import { loadConfig, ConfigError } from '../../interfaces/config.ts';
import { startTestApp, type TestApp } from '../support/app.ts';
import { afterAll } from '../support/teardown.ts';
import { RUN_TS } from '../support/commands.ts';
import { spawnChild } from '../support/children.ts';

// fee-facilitator-mpp-tools §2.5: `npm run facilitator` with its environment. The gateway (test app) holds the
// embedded ledgers, so the facilitator process joins them through the gateway's JSON-RPC and its database.

const root = fileURLToPath(new URL('../..', import.meta.url));
let app: TestApp;

test.before(async () => {
  app = await startTestApp();
});

function start(env: Record<string, string>) {
  const child = spawnChild(process.execPath, [RUN_TS, 'interfaces/cli/facilitator.ts'], {
    cwd: root,
    env: {
      ...process.env,
      DATABASE_URL: app.database.url,
      SVC_DATA_DIR: app.dataDir,
      SVC_LOG_LEVEL: 'silent',
      SVC_FACILITATOR_HOST: '127.0.0.1',
      SVC_FACILITATOR_PORT: '0',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (out += d));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  // A child still running when the file's tests end (a test that failed before stopping it) is killed then.
  afterAll(() => (child.exitCode === null && child.signalCode === null ? void child.kill('SIGKILL') : undefined));
  // No deadlines here (test/support/until.ts says why): a start or a stop that never comes is AVA's timeout to report.
  return {
    output: () => out,
    exited,
    /** the URL the process announces once it listens; rejects if it exits first */
    ready: () =>
      new Promise<string>((resolve, reject) => {
        const check = () => {
          const m = /ready at (http:\/\/\S+)/.exec(out);
          if (m) resolve(m[1]!);
        };
        // registered after the listeners that append to `out`, so each check sees the chunk that woke it
        child.stdout.on('data', check);
        child.stderr.on('data', check);
        check();
        void exited.then((code) => reject(new Error(`exited ${code}: ${out}`)));
      }),
    /** SIGTERM, then its exit code once it has shut down */
    stop(): Promise<number | null> {
      if (child.exitCode === null) child.kill('SIGTERM');
      return exited;
    },
  };
}

test('npm run facilitator serves /health and /supported with the fee payer of SVC_FACILITATOR_SECRET_KEY (base58), funded through the gateway’s ledger', async (t) => {
  const kp = Keypair.generate();
  const child = start({ SVC_FACILITATOR_SECRET_KEY: encodeBase58(kp.secretKey), SVC_FACILITATOR_NETWORKS: 'devnet,mainnet', SVC_FEE_BPS: '250' });
  try {
    const url = await child.ready();
    const health = (await (await fetch(`${url}/health`)).json()) as {
      ok: boolean;
      fee_payer: string;
      networks: string[];
      protocol_fee: { bps: number; enforcement: string };
    };
    t.like(health, {
      ok: true,
      fee_payer: kp.publicKey.toBase58(),
      networks: ['chain-devnet', 'chain-mainnet'],
      protocol_fee: { bps: 250, enforcement: 'enforce' },
    });
    const supported = (await (await fetch(`${url}/supported`)).json()) as { kinds: { network: string; x402Version: number }[] };
    t.is(supported.kinds.length, 4);
    for (const network of ['chain-devnet', 'chain-mainnet'] as const) {
      t.true((await app.services.ledgers[network]!.getBalance(kp.publicKey.toBase58())) >= 1_000_000_000n, `fee payer funded on ${network}`);
    }
    t.is((await fetch(`${url}/verify`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })).status, 400);
  } finally {
    t.is(await child.stop(), 0, child.output());
  }
});

test('a bad facilitator setting stops start-up with a message naming it (exit 1)', async (t) => {
  const child = start({ SVC_FACILITATOR_SECRET_KEY: '[1,2,3,250]' });
  t.is(await child.exited, 1);
  t.regex(child.output(), /SVC_FACILITATOR_SECRET_KEY=\(hidden\)/);
  t.false(child.output().includes('250'), 'the secret value is not echoed');
});

test('config: the secret key as a JSON byte array or base58, networks as a list, testnet refused', (t) => {
  const kp = Keypair.generate();
  const json = loadConfig({ SVC_FACILITATOR_SECRET_KEY: JSON.stringify(Array.from(kp.secretKey)) }).facilitator;
  const b58 = loadConfig({ SVC_FACILITATOR_SECRET_KEY: encodeBase58(kp.secretKey) }).facilitator;
  t.deepEqual(json.secretKey, kp.secretKey);
  t.deepEqual(b58.secretKey, kp.secretKey);
  t.deepEqual(json.networks, ['chain-devnet'], 'default devnet');
  t.deepEqual(loadConfig({ SVC_FACILITATOR_NETWORKS: 'mainnet, devnet' }).facilitator.networks, ['chain-mainnet', 'chain-devnet']);
  t.is(loadConfig({}).facilitator.port, 8787);
  t.is(loadConfig({}).facilitator.host, '0.0.0.0');
  t.throws(() => loadConfig({ SVC_FACILITATOR_NETWORKS: 'testnet' }), { instanceOf: ConfigError, message: /SVC_FACILITATOR_NETWORKS/ });
  t.throws(() => loadConfig({ SVC_FACILITATOR_SECRET_KEY: 'not-base58-0OIl' }), { instanceOf: ConfigError });
  t.throws(() => loadConfig({ SVC_FACILITATOR_RENT_BUDGET_LAMPORTS: '-1' }), { instanceOf: ConfigError });
  t.deepEqual(loadConfig({}).outbound.allow, [], 'no outbound opening by default, embedded ledgers or not');
});
