import test, { type ExecutionContext } from 'ava';
import { createHash } from 'node:crypto';
import { createServer } from 'node:net';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Keypair, Transaction } from '@solana/web3.js';
import { AGENT_REGISTRY_IDENTITY_PROGRAM_ID, AGENT_REGISTRY_TOOLS_PROGRAM_ID } from '../../domain/ledger/programs.ts';
import { MPL_CORE_PROGRAM_ID } from '../../domain/treasury/derive.ts';
import type { PreparedEnvelope } from '../../domain/transactions/schema.ts';
import { http, issueKey, makeDataDir, removeDataDir, startTestApp } from '../support/app.ts';
import { sharedDatabaseUrl } from '../support/cluster.ts';
import { metaplexTest } from '../support/programs.ts';
import { until } from '../support/until.ts';
import { spawnChild } from '../support/children.ts';

// `npm run programs` copies the well-known programs from a Solana JSON-RPC into the data directory's program cache;
// a gateway started on that directory afterwards — without SVC_LEDGER_PROGRAMS — runs Metaplex Core on both embedded
// networks. The source is a local embedded ledger that loaded the Core binary (never a public address); it lacks the
// Agent Registry programs, as no binary of them is at hand, so copying everything names them and exits 1.

const REPO = fileURLToPath(new URL('../..', import.meta.url));
const CORE_SHA256 = '0d3ac8cce3d6158924313a697c2c53fdb06b5882f6c07601c8ad7604cb1964d5';

/** `npm run -s programs -- …` in the repository with only PATH and HOME, as a person runs it. */
function programsCli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawnChild('npm', ['run', '-s', 'programs', '--', ...args], {
      cwd: REPO,
      env: { PATH: process.env.PATH, HOME: process.env.HOME },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c));
    child.stderr.on('data', (c: Buffer) => (stderr += c));
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** A loopback port nothing listens on (bound, then released). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

function sign(envelope: PreparedEnvelope, ...signers: Keypair[]): string {
  const tx = Transaction.from(Buffer.from(envelope.transaction!.base64, 'base64'));
  tx.partialSign(...signers);
  return tx.serialize({ requireAllSignatures: true }).toString('base64');
}

metaplexTest(
  test,
  'npm run programs copies Core from a JSON-RPC into the cache; a gateway started on that data directory mints an agent with it',
  async (t: ExecutionContext, dir) => {
    const source = await startTestApp({ env: { SVC_LEDGER_PROGRAMS: dir } });
    t.teardown(async () => {
      await source.close();
      await removeDataDir(source.dataDir);
    });
    const dataDir = await makeDataDir();
    t.teardown(() => removeDataDir(dataDir));
    const origin = source.ledgers.rpcUrls['chain-devnet']!;
    // a provider's key rides in the path or query: never printed
    const from = `${origin}/rpc/SECRETPATH?api-key=SECRETKEY`;
    const cached = join(dataDir, 'ledger', 'programs', `${MPL_CORE_PROGRAM_ID}.so`);

    // Everything: Core is copied, the registry programs the source lacks are named, exit 1.
    const all = await programsCli(['--from', from, '--data-dir', dataDir]);
    t.is(all.code, 1, all.stdout + all.stderr);
    t.true(all.stdout.includes(`From ${origin} into ${join(dataDir, 'ledger', 'programs')}:`), all.stdout);
    t.true(all.stdout.includes(`copied   mpl-core (${MPL_CORE_PROGRAM_ID}), 848,320 bytes → ${cached}`), all.stdout);
    t.true(all.stdout.includes(`missing  mpl-agent-registry-identity (${AGENT_REGISTRY_IDENTITY_PROGRAM_ID}): not on ${origin}`), all.stdout);
    t.true(all.stdout.includes(`missing  mpl-agent-registry-tools (${AGENT_REGISTRY_TOOLS_PROGRAM_ID}): not on ${origin}`), all.stdout);
    t.true(all.stdout.includes(`No gateway is running on ${dataDir}: the next npm start loads them on both embedded networks`), all.stdout);
    t.true(all.stderr.includes('2 of 3 programs were not copied: mpl-agent-registry-identity, mpl-agent-registry-tools.'), all.stderr);
    t.false(/SECRET/.test(all.stdout + all.stderr), 'only the origin of the source is printed');
    t.is(
      createHash('sha256')
        .update(await readFile(cached))
        .digest('hex'),
      CORE_SHA256,
      'the cached ELF is the deployed Core, byte for byte',
    );

    // Core alone: everything asked for was copied, exit 0.
    const core = await programsCli(['--from', from, '--data-dir', dataDir, '--program', 'mpl-core']);
    t.is(core.code, 0, core.stdout + core.stderr);

    // A gateway on that data directory, no SVC_LEDGER_PROGRAMS: both networks load Core from the cache.
    const gateway = await startTestApp({ dataDir, embeddedPostgres: false, databaseUrl: await sharedDatabaseUrl(dataDir), env: { SVC_LEDGER_PROGRAMS: '' } });
    t.teardown(() => gateway.close());
    const key = await issueKey(gateway);
    const health = await http(gateway, 'GET', '/v1/health', { key });
    for (const network of ['chain-devnet', 'chain-mainnet']) {
      t.deepEqual(health.body.ledger[network].programs, [{ id: MPL_CORE_PROGRAM_ID, name: 'mpl-core', source: 'clone' }], network);
    }

    // While it runs, the command says so: the new copies load at its next start.
    const running = await programsCli(['--from', from, '--data-dir', dataDir, '--program', 'mpl-core']);
    t.is(running.code, 0);
    t.regex(
      running.stdout,
      new RegExp(`A gateway is running on ${dataDir} \\(process ${process.pid} holds the chain-devnet and chain-mainnet ledger\\): restart it`),
    );

    // Core runs: an agent is minted through prepare → sign → submit and lands.
    const owner = Keypair.generate();
    await gateway.services.dev.fund('chain-devnet', { address: owner.publicKey.toBase58(), sol: '1' });
    const prepared = await http<PreparedEnvelope>(gateway, 'POST', '/v1/agents/prepare', {
      key,
      body: { owner: owner.publicKey.toBase58(), name: 'Copied Core', uri: 'https://example.com/a.json' },
    });
    t.is(prepared.status, 200, JSON.stringify(prepared.body));
    const submitted = await http(gateway, 'POST', '/v1/submit', {
      key,
      body: { event_id: prepared.body.event_id, transaction_base64: sign(prepared.body, owner) },
    });
    t.is(submitted.status, 202, JSON.stringify(submitted.body));
    const mint = String(prepared.body.echo.asset);
    const asset = await until('the asset on the ledger', async () => (await gateway.services.ledgers['chain-devnet']!.getAccount(mint)) ?? undefined, {
      everyMs: 100,
    });
    t.is(asset.owner, MPL_CORE_PROGRAM_ID, 'the minted agent is a Core asset');
  },
);

test('npm run programs: a source that cannot be reached is a clear error, exit 1, nothing written', async (t) => {
  const dataDir = await makeDataDir();
  t.teardown(() => removeDataDir(dataDir));
  const port = await closedPort();
  const result = await programsCli(['--from', `http://127.0.0.1:${port}/?api-key=SECRETKEY`, '--data-dir', dataDir]);
  t.is(result.code, 1);
  t.regex(
    result.stderr,
    new RegExp(`^Cannot reach a Solana JSON-RPC at http://127\\.0\\.0\\.1:${port}: fetch failed \\(ECONNREFUSED\\)\\. Nothing was copied\\.`),
  );
  t.false(result.stderr.includes('SECRETKEY'));
  t.is(result.stdout, '');
  const bad = await programsCli(['--program', 'nope']);
  t.is(bad.code, 2);
  t.regex(bad.stderr, /unknown program nope: the programs are mpl-core, mpl-agent-registry-identity, mpl-agent-registry-tools/);
});
