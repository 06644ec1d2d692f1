import type { TestApp } from './app.ts';

// What a test counts to prove a path's cost without timing it: every statement the app's main pool sends while a
// function runs, noted on the pooled node-postgres connections themselves, so a statement counts once whichever way it
// went (MikroORM and knex, or a raw query on a pooled connection). Statements matching `background` (the process's
// timers and feeds) are left out.

type Conn = { query: (...args: unknown[]) => unknown };

/** the statements being noted now (while a `statementsOf` runs) and what they leave out */
let noting: { seen: string[]; background: RegExp[] } | undefined;
const spied = new WeakSet<object>();

export async function statementsOf(app: TestApp, background: RegExp[], fn: () => Promise<unknown>): Promise<string[]> {
  const client = app.database.orm.em.getConnection().getKnex().client as unknown as { acquireConnection: () => Promise<Conn> };
  const acquire = client.acquireConnection;
  client.acquireConnection = async function (this: unknown) {
    const connection = await acquire.call(this);
    if (!spied.has(connection)) {
      spied.add(connection);
      const query = connection.query;
      connection.query = function (this: unknown, ...args: unknown[]) {
        const first = args[0] as string | { text: string };
        const sql = (typeof first === 'string' ? first : first.text).replace(/^\/\* svc:[^*]*\*\/ /, '');
        if (noting && !noting.background.some((re) => re.test(sql))) noting.seen.push(sql.replace(/\s+/g, ' ').trim());
        return query.apply(this, args);
      };
    }
    return connection;
  };
  const seen: string[] = [];
  noting = { seen, background };
  try {
    await fn();
  } finally {
    noting = undefined;
    client.acquireConnection = acquire;
  }
  return seen;
}
