import pg from 'pg';

// A claim held by a dead process must be recognisable at once, not after its lease. Each process takes a
// number from the process_epochs sequence and holds the session-level advisory lock (PROCESS_LOCK, number) on a
// connection of its own for as long as it lives; claims carry the number. PostgreSQL releases a session lock when its
// connection ends — a kill -9 closes the socket — so "no session holds (PROCESS_LOCK, owner)" means the owner is gone.

/** Advisory lock class of process liveness (the other keys sit with mikro-orm-store.ts's migrate and the repositories that take them). */
export const PROCESS_LOCK = 7_201_010;

/**
 * SQL: true when the process that wrote `column` still holds its liveness lock. A null owner (a row written before
 * owners existed, or by a process without one) counts as alive: its lease decides.
 */
export function ownerAlive(column: string): string {
  return `(${column} is null or exists (select 1 from pg_locks l where l.locktype = 'advisory' and l.granted
    and l.database = (select oid from pg_database where datname = current_database())
    and l.classid = ${PROCESS_LOCK} and l.objid = ${column}::oid and l.objsubid = 2))`;
}

export interface ProcessOwner {
  /** this process's number while it holds its liveness lock; changes if the lock had to be taken again */
  readonly epoch: number | null;
  close(): Promise<void>;
}

/** Takes a process number and holds its lock; reconnects (with a new number) if the liveness connection drops. */
export async function startProcessOwner(url: string, onWarning?: (message: string, err: unknown) => void): Promise<ProcessOwner> {
  let client: pg.Client | undefined;
  let epoch: number | null = null;
  let closed = false;
  let retry: NodeJS.Timeout | undefined;

  const connect = async (): Promise<void> => {
    const c = new pg.Client({ connectionString: url, application_name: 'svc-process-owner' });
    c.on('error', (err) => {
      if (closed) return;
      // Our claims may now be taken over by others (their outcome is still decided once: the facilitator's guard and
      // the paid call's row lock); new claims carry a new number.
      epoch = null;
      onWarning?.('the process liveness connection dropped; taking a new process number', err);
      void c.end().catch(() => {});
      schedule();
    });
    await c.connect();
    const rows = await c.query<{ epoch: number }>(`select nextval('process_epochs')::int as epoch`);
    const next = rows.rows[0]!.epoch;
    await c.query('select pg_advisory_lock($1, $2)', [PROCESS_LOCK, next]);
    client = c;
    epoch = next;
  };
  const schedule = () => {
    if (closed || retry) return;
    retry = setTimeout(() => {
      retry = undefined;
      connect().catch((err) => {
        onWarning?.('could not take a process number yet; will retry', err);
        schedule();
      });
    }, 1000);
    retry.unref();
  };

  await connect();
  return {
    get epoch() {
      return epoch;
    },
    async close() {
      closed = true;
      if (retry) clearTimeout(retry);
      epoch = null;
      await client?.end().catch(() => {});
    },
  };
}
