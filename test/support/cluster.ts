import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmod, mkdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { withDatabase } from '../../adapters/store/embedded-postgres.ts';
import { RUN_TS } from './commands.ts';

// ARCHITECTURE "Tests": one PostgreSQL cluster per test run instead of an initdb per test file. The
// first file of a run starts cluster-daemon.ts detached (it outlives no run: it stops when the run's process exits);
// every file gets its own database, copied from a migrated template with CREATE DATABASE … TEMPLATE.

export const TEMPLATE = 'svc_template';
const READY_WAIT_MS = 120_000;

/** AVA runs each test file in a child of its main process: the run is that process. */
function runPid(): number {
  return process.ppid;
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

async function readReady(dir: string): Promise<{ pid: number; adminUrl: string } | null> {
  try {
    return JSON.parse(await readFile(join(dir, 'ready.json'), 'utf8')) as { pid: number; adminUrl: string };
  } catch {
    return null;
  }
}

let cluster: Promise<string> | undefined;

/** The admin URL of this run's cluster, starting it when this file is the first. */
function clusterAdminUrl(): Promise<string> {
  cluster ??= (async () => {
    const owner = runPid();
    const dir = join(tmpdir(), `svc-test-cluster-${owner}`);
    const claim = `${dir}.claim`;
    for (const deadline = Date.now() + READY_WAIT_MS; Date.now() < deadline; ) {
      const ready = await readReady(dir);
      if (ready && alive(ready.pid)) return ready.adminUrl;
      const failed = await readFile(join(dir, 'failed.txt'), 'utf8').catch(() => null);
      if (failed) throw new Error(`The shared test cluster did not start:\n${failed}`);
      const won = await mkdir(claim).then(
        () => true,
        () => false,
      );
      if (won) {
        if (ready) await rm(dir, { recursive: true, force: true }); // a daemon of an earlier run with this pid died
        await mkdir(dir, { recursive: true });
        await chmod(dir, 0o755);
        const daemon = spawn(process.execPath, [RUN_TS, fileURLToPath(new URL('./cluster-daemon.ts', import.meta.url)), String(owner), dir], {
          detached: true,
          stdio: 'ignore',
        });
        daemon.unref();
        // The claim is only a start-up guard: once ready.json exists, it is the record.
        void waitReady(dir).finally(() => rm(claim, { recursive: true, force: true }));
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`The shared test cluster in ${dir} was not ready within ${READY_WAIT_MS / 1000} s`);
  })();
  return cluster;
}

async function waitReady(dir: string): Promise<void> {
  for (const deadline = Date.now() + READY_WAIT_MS; Date.now() < deadline; ) {
    if (await readReady(dir)) return;
    if (await readFile(join(dir, 'failed.txt'), 'utf8').catch(() => null)) return;
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * The URL of a migrated database for `name` on this run's shared cluster, created from the template on first use; the
 * same name gives the same database (so an app restarted on one data directory finds its data).
 */
export async function sharedDatabaseUrl(name: string): Promise<string> {
  const adminUrl = await clusterAdminUrl();
  const database = `svc_${createHash('sha256').update(name).digest('hex').slice(0, 24)}`;
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    for (let attempt = 0; ; attempt++) {
      const found = await client.query('select 1 from pg_database where datname = $1', [database]);
      if (found.rowCount) break;
      try {
        await client.query(`create database ${database} template ${TEMPLATE}`);
        break;
      } catch (e) {
        const code = (e as { code?: string }).code;
        if (code === '42P04') break; // created concurrently under the same name
        // 55006: the template is busy being copied by another file's CREATE DATABASE
        if (code !== '55006' || attempt > 50) throw e;
        await new Promise((r) => setTimeout(r, 50 + Math.random() * 100));
      }
    }
  } finally {
    await client.end();
  }
  return withDatabase(adminUrl, database);
}
