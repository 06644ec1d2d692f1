import { rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import pg from 'pg';
import { startEmbeddedPostgres, withDatabase } from '../../adapters/store/embedded-postgres.ts';
import { initOrm, migrate } from '../../adapters/store/mikro-orm-store.ts';
import { migrateQueue } from '../../adapters/queue/graphile.ts';
import { TEMPLATE } from './cluster.ts';

// One PostgreSQL cluster for a whole test run (see cluster.ts): started detached by the first test file, it builds the
// migrated template database, announces itself in ready.json, and removes itself once the run's process is gone.
// Usage: node scripts/run.mjs test/support/cluster-daemon.ts OWNER_PID DIR

const [ownerPid, dir] = [Number(process.argv[2]), process.argv[3]!];
const FAST_PG = { fsync: 'off', synchronous_commit: 'off', full_page_writes: 'off', max_connections: '1000' };

const cluster = await startEmbeddedPostgres({ dataDir: dir, database: TEMPLATE, settings: FAST_PG });
try {
  const orm = await initOrm(cluster.url, 2);
  await migrate(orm, cluster.url);
  await orm.close(true);
  await migrateQueue(cluster.url);
  // A template must have no open connections while databases are copied from it.
  const admin = new pg.Client({ connectionString: withDatabase(cluster.url, 'postgres') });
  await admin.connect();
  await admin.query(`update pg_database set datistemplate = true where datname = $1`, [TEMPLATE]);
  await admin.end();
  await writeFile(join(dir, 'ready.json.tmp'), JSON.stringify({ pid: process.pid, adminUrl: withDatabase(cluster.url, 'postgres') }));
  await rename(join(dir, 'ready.json.tmp'), join(dir, 'ready.json'));
} catch (e) {
  await writeFile(join(dir, 'failed.txt'), String((e as Error).stack ?? e));
  await cluster.stop();
  process.exit(1);
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

const timer = setInterval(async () => {
  if (alive(ownerPid)) return;
  clearInterval(timer);
  await cluster.stop().catch(() => {});
  await rm(dir, { recursive: true, force: true });
  process.exit(0);
}, 500);
