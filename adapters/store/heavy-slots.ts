import pg from 'pg';

// The per-principal cap on heavy requests holds across every process on one database. A principal has
// `cap` slots; a heavy request takes one by a session-level advisory lock (HEAVY_SLOT_LOCK, hashtext(principal#slot))
// with try-lock, on one connection of this process kept for the purpose, and gives it back when it answers. PostgreSQL
// releases a session's locks when its connection ends, so a process that dies (kill -9 included) frees its slots at
// once. Advisory locks are re-entrant within a session, so the process skips the slots it already holds itself.
// One round trip per heavy request (the release is sent without waiting; one connection runs them in order).

/** Advisory lock class of heavy-request slots (the other keys sit with mikro-orm-store.ts and process-owner.ts). */
export const HEAVY_SLOT_LOCK = 7_201_021;

export interface HeavySlots {
  /** Takes a free slot of `principal` (one of `cap`), or answers undefined when all of them are taken. */
  take(principal: string, cap: number): Promise<number | undefined>;
  /** Gives a slot back. */
  give(principal: string, slot: number): void;
  close(): Promise<void>;
}

/**
 * The first slot this process does not hold whose lock is free, in one statement. The CASE keeps the order: a slot
 * held here is never tried (re-entrant: it would succeed), and the scan stops at the first lock taken.
 */
const TAKE = `select s from generate_series(0, $2::int - 1) s
  where case when s = any($3::int[]) then false else pg_try_advisory_lock($1, hashtext($4 || '#' || s)) end
  limit 1`;
const GIVE = `select pg_advisory_unlock($1, hashtext($2 || '#' || $3::int))`;

/**
 * Slots shared through the database at `url`. When the slot connection cannot be had, the cap falls back to this
 * process's own count (the slots it holds), with a warning: a lost connection must not refuse every list.
 */
export function databaseHeavySlots(url: string, onWarning?: (message: string, err: unknown) => void): HeavySlots {
  const held = new Map<string, Set<number>>();
  let client: Promise<pg.Client> | undefined;
  let closed = false;

  const connection = (): Promise<pg.Client> => {
    client ??= (async () => {
      const c = new pg.Client({ connectionString: url, application_name: 'svc-heavy-slots' });
      c.on('error', (err) => {
        // The session's locks are gone with it; the next request connects again. Until the slots held here are given
        // back, other processes may take them: the cap may be exceeded for that long, never more.
        if (!closed) onWarning?.('the heavy-slots connection dropped; reconnecting on the next heavy request', err);
        client = undefined;
        void c.end().catch(() => {});
      });
      await c.connect();
      return c;
    })().catch((err) => {
      client = undefined;
      throw err;
    });
    return client;
  };

  // The statements of the one connection, sent one after the other by us (node-postgres's own queueing of a query on a
  // busy client is deprecated): a give is sent before any take that follows it.
  let line: Promise<unknown> = Promise.resolve();
  const send = <R extends pg.QueryResultRow>(text: string, values: unknown[]): Promise<pg.QueryResult<R>> => {
    const result = line.then(() => connection()).then((c) => c.query<R>(text, values));
    line = result.catch(() => {});
    return result;
  };

  const mine = (principal: string) => {
    let set = held.get(principal);
    if (!set) {
      set = new Set();
      held.set(principal, set);
    }
    return set;
  };

  const takeNow = async (principal: string, cap: number): Promise<number | undefined> => {
    const set = mine(principal);
    if (set.size >= cap) return undefined;
    let slot: number | undefined;
    try {
      const rows = await send<{ s: number }>(TAKE, [HEAVY_SLOT_LOCK, cap, [...set], principal]);
      slot = rows.rows[0]?.s;
    } catch (err) {
      onWarning?.('could not take a heavy slot through the database; counting this process only', err);
      for (let s = 0; s < cap && slot === undefined; s++) if (!set.has(s)) slot = s;
    }
    if (slot === undefined) {
      if (set.size === 0) held.delete(principal);
      return undefined;
    }
    set.add(slot);
    return slot;
  };

  /** takes of one principal run one after the other: two at once would both get the first free slot (re-entrant) */
  const chains = new Map<string, Promise<unknown>>();

  return {
    take(principal, cap) {
      const run = (chains.get(principal) ?? Promise.resolve()).then(() => takeNow(principal, cap));
      const tail = run.catch(() => {});
      chains.set(principal, tail);
      void tail.then(() => {
        if (chains.get(principal) === tail) chains.delete(principal);
      });
      return run;
    },
    give(principal, slot) {
      const set = held.get(principal);
      if (!set?.delete(slot)) return;
      if (set.size === 0) held.delete(principal);
      // Sent in order on the one connection: a later take of this slot runs after the unlock.
      if (client) void send(GIVE, [HEAVY_SLOT_LOCK, principal, slot]).catch(() => {});
    },
    async close() {
      closed = true;
      const c = client;
      client = undefined;
      if (c) await c.then((x) => x.end()).catch(() => {});
    },
  };
}

/** Slots counted in this process only (no database at hand). */
export function localHeavySlots(): HeavySlots {
  const held = new Map<string, Set<number>>();
  return {
    async take(principal, cap) {
      const set = held.get(principal) ?? new Set<number>();
      for (let s = 0; s < cap; s++) {
        if (!set.has(s)) {
          set.add(s);
          held.set(principal, set);
          return s;
        }
      }
      return undefined;
    },
    give(principal, slot) {
      const set = held.get(principal);
      if (set?.delete(slot) && set.size === 0) held.delete(principal);
    },
    async close() {},
  };
}
