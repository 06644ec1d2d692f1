import test from 'ava';
import { execFile } from 'node:child_process';
import { chmod, copyFile, mkdir, mkdtemp, rm, stat, symlink } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { spawnChild } from './support/children.ts';

// STYLE "Traps" 6: the defaults a person runs, tested. The working tree as a fresh clone has it (tracked and
// untracked-but-not-ignored files: uncommitted work is tested too; no .data, no built explorer) with this checkout's
// installed dependencies, then `npm start` runs with no environment but PATH and HOME — default ports, default data
// directory — and a key made by `npm run keys` reads GET /v1/health on http://127.0.0.1:8080.
// The install itself is not repeated here (a minute or more of the suite for what CI already does): `.ci/run` starts
// with `npm ci` from the lockfile on a fresh checkout and fails when it prints any `npm warn` line (DEPENDENCIES.md).

const REPO = fileURLToPath(new URL('..', import.meta.url));
const run = promisify(execFile);
/** every listener of a default start: the gateway, devnet JSON-RPC + WebSocket, mainnet JSON-RPC + WebSocket */
const DEFAULT_PORTS = [8080, 8899, 8900, 8901, 8902];
const ENV = { PATH: process.env.PATH, HOME: process.env.HOME };

async function portFree(port: number): Promise<boolean> {
  const server = createServer();
  return new Promise((resolve) => {
    server.once('error', () => resolve(false));
    server.listen(port, '0.0.0.0', () => server.close(() => resolve(true)));
  });
}

/** true once `check` holds, polled every 100 ms for at most a minute (a bound, not a wait: it returns as soon as it holds) */
async function eventually(check: () => Promise<boolean>): Promise<boolean> {
  for (let i = 0; i < 600; i++) {
    if (await check()) return true;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return false;
}

test('fresh clone: npm start on the default ports and data directory; a key from npm run keys reads /v1/health', async (t) => {
  // start-up (the explorer build, embedded PostgreSQL initdb, two ledgers) takes up to a minute on a loaded machine
  t.timeout(5 * 60_000);
  const taken = [];
  for (const port of DEFAULT_PORTS) if (!(await portFree(port))) taken.push(port);
  if (taken.length)
    return t.fail(`the default ports ${taken.join(', ')} are in use by another program: a default start needs ${DEFAULT_PORTS.join(', ')} free`);

  const clone = await mkdtemp(join(tmpdir(), 'svc-fresh-'));
  await chmod(clone, 0o755); // embedded PostgreSQL runs as the postgres user when we are root: it must reach .data
  t.teardown(() => rm(clone, { recursive: true, force: true }));
  const { stdout: listed } = await run('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: REPO, maxBuffer: 64 * 1024 * 1024 });
  let copied = 0;
  for (const file of listed.split('\0').filter(Boolean)) {
    const from = join(REPO, file);
    if (!(await stat(from).catch(() => null))?.isFile()) continue; // deleted in the working tree, or the node_modules link
    await mkdir(dirname(join(clone, file)), { recursive: true });
    await copyFile(from, join(clone, file));
    copied++;
  }
  t.log(`copied ${copied} files into ${clone}`);

  // The dependencies as `npm install` left them in this checkout (a link: npm start writes nothing under node_modules).
  await symlink(join(REPO, 'node_modules'), join(clone, 'node_modules'), 'dir');

  // npm start with no settings at all; ready when the banner names the REST door (not after a sleep).
  const gateway = spawnChild('npm', ['start'], { cwd: clone, env: ENV, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    gateway.once('exit', (code, signal) => resolve({ code, signal })),
  );
  t.teardown(async () => {
    if (gateway.exitCode === null && gateway.signalCode === null) {
      process.kill(-gateway.pid!, 'SIGKILL');
      await exited;
    }
  });
  gateway.stderr.on('data', (c: Buffer) => (err += c));
  const ready = await new Promise<boolean>((resolve) => {
    gateway.stdout.on('data', (c: Buffer) => {
      out += c;
      if (/^ {2}REST {8}http:\/\/localhost:8080\/v1/m.test(out)) resolve(true);
    });
    void exited.then(() => resolve(false));
  });
  t.true(ready, `npm start did not become ready:\n${out}\n${err}`);
  if (!ready) return;
  t.regex(out, /ledger {6}chain-devnet: embedded, JSON-RPC at http:\/\/127\.0\.0\.1:8899/);
  t.regex(out, /ledger {6}chain-mainnet: embedded, JSON-RPC at http:\/\/127\.0\.0\.1:8901/);
  t.regex(out, /to add the missing programs: npm run programs/, 'a default start has no Core: the banner says how to get it');

  const { stdout: keyJson } = await run('npm', ['run', '-s', 'keys', '--', 'create', '--network', 'chain-devnet', '--json'], { cwd: clone, env: ENV });
  const { key } = JSON.parse(keyJson) as { key: string };
  const health = await fetch('http://127.0.0.1:8080/v1/health', { headers: { authorization: `Bearer ${key}` } });
  t.is(health.status, 200, await health.clone().text());
  t.true(((await health.json()) as { ok: boolean }).ok);

  // Ctrl-C (SIGINT to the whole group, as a terminal sends it): the gateway drains and exits 0; npm itself then ends by
  // the same signal. Clean means: no error printed, the port released, the embedded PostgreSQL stopped.
  process.kill(-gateway.pid!, 'SIGINT');
  const { code, signal } = await exited;
  t.true(code === 0 || signal === 'SIGINT', `npm start ended with code ${code}, signal ${signal}:\n${err}`);
  t.false(/shutdown failed|npm error|ERR!/.test(err), err);
  // npm may end by the signal before the gateway has finished draining: wait for the conditions themselves
  t.true(await eventually(() => portFree(8080)), 'port 8080 is free again');
  t.true(
    await eventually(async () => (await stat(join(clone, '.data', 'pg', 'postmaster.pid')).catch(() => null)) === null),
    'the embedded PostgreSQL stopped',
  );
});
