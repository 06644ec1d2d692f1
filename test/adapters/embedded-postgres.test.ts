import test from 'ava';
import { join } from 'node:path';
import pg from 'pg';
import { socketDirFor, startEmbeddedPostgres, withDatabase } from '../../adapters/store/embedded-postgres.ts';
import { initOrm } from '../../adapters/store/mikro-orm-store.ts';
import { makeDataDir, removeDataDir } from '../support/app.ts';

// The embedded cluster is reached through a Unix socket in its own directory (embedded-postgres.ts says why), with
// TCP on 127.0.0.1 kept for other tools; every client of the URL (node-postgres, MikroORM) takes the socket.

/** How the connection `query` runs on reached the server: null is a Unix socket, else the client's TCP address. */
async function clientAddr(connectionString: string): Promise<string | null> {
  const client = new pg.Client({ connectionString });
  await client.connect();
  try {
    const { rows } = await client.query<{ addr: string | null }>('select host(client_addr) as addr from pg_stat_activity where pid = pg_backend_pid()');
    return rows[0]!.addr;
  } finally {
    await client.end();
  }
}

test('the embedded cluster is reached through a socket in its own directory; TCP stays; a second process reuses both', async (t) => {
  const dir = await makeDataDir();
  const cluster = await startEmbeddedPostgres({ dataDir: dir });
  try {
    const url = new URL(cluster.url);
    t.is(url.searchParams.get('host'), join(dir, 'pg'), 'the socket directory is the cluster directory');
    t.is(url.hostname, '127.0.0.1');
    t.is(await clientAddr(cluster.url), null, 'node-postgres connects through the socket');

    const orm = await initOrm(cluster.url, 1);
    try {
      const rows = (await orm.em.fork().execute('select host(client_addr) as addr from pg_stat_activity where pid = pg_backend_pid()')) as {
        addr: string | null;
      }[];
      t.is(rows[0]!.addr, null, 'MikroORM connects through the socket too');
    } finally {
      await orm.close(true);
    }

    const tcp = new URL(cluster.url);
    tcp.search = '';
    t.is(await clientAddr(tcp.href), '127.0.0.1', 'TCP on 127.0.0.1 still answers');

    const again = await startEmbeddedPostgres({ dataDir: dir, database: 'other' });
    t.true(again.reused);
    t.is(again.url, withDatabase(cluster.url, 'other'), 'a reused cluster answers the same socket');
    t.is(await clientAddr(again.url), null);
  } finally {
    await cluster.stop();
    await removeDataDir(dir);
  }
});

test('no socket where its path would be too long or hold a character PostgreSQL would read apart: TCP only', (t) => {
  t.is(socketDirFor('/tmp/svc-test-abc/pg', 54321), '/tmp/svc-test-abc/pg');
  t.is(socketDirFor(`/tmp/${'d'.repeat(90)}/pg`, 54321), null, 'a socket path over 107 bytes does not fit');
  t.is(socketDirFor('/tmp/my data/pg', 54321), null);
  t.is(socketDirFor('/tmp/a,b/pg', 54321), null);
});
