// Event appends do not serialise on one lock, and a cursor reader still never skips a row. Writers commit out
// of order here on purpose (one holds its transaction open while later ones commit); every reader — the cursor query
// (`events.after`) and the feed's catch-up (`eventsSince`) — must deliver every row exactly once, in seq order.
import test from 'ava';
import pg from 'pg';
import { newEvent } from '../../domain/events/kinds.ts';
import type { EventRecord } from '../../domain/events/schema.ts';
import { newId } from '../../domain/shared/ids.ts';
import type { Repositories } from '../../domain/ports/store.ts';
import { PgEventFeed } from '../../adapters/store/event-feed.ts';
import { startTestApp, type TestApp } from '../support/app.ts';

let app: TestApp;
test.before(async () => {
  app = await startTestApp({ env: { SVC_DB_POOL_MAX: '40' } }); // 24 writers hold a connection each
});

const deleted = (linkId: string) =>
  newEvent(
    'payment_link.deleted',
    { id: newId(), network: 'chain-devnet', agentAsset: null, owner: 'test:cursor', phase: 'confirmed', createdAt: new Date() },
    { payment_link_id: linkId },
  );

/** A writer whose transaction stays open after its append until `commit()` is called. */
function openWriter(linkId: string, before?: (tx: Repositories) => Promise<unknown>) {
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  let appended!: (e: EventRecord) => void;
  const row = new Promise<EventRecord>((r) => (appended = r));
  const done = app.database.store.transaction(async (tx) => {
    await before?.(tx);
    appended(await tx.events.append(deleted(linkId)));
    await gate;
  });
  return {
    row,
    commit: async () => {
      release();
      await done;
    },
  };
}

/** Reads with a cursor as a client would: everything after `cursor`, then moves the cursor to the last row read. */
function cursorReader(read: (after: bigint) => Promise<EventRecord[]>, prefix: string) {
  let cursor = 0n;
  const seen: string[] = [];
  return {
    seen,
    async poll() {
      for (const e of await read(cursor)) {
        if (e.seq <= cursor) throw new Error(`seq went backwards: ${e.seq} after ${cursor}`);
        cursor = e.seq;
        const id = e.metadata.payment_link_id as string;
        if (id.startsWith(prefix)) seen.push(id);
      }
    },
  };
}

test.serial('a cursor never skips a row whose transaction commits after a later one (held open, later commits, read, then it commits)', async (t) => {
  const store = app.database.store;
  const readers = [
    cursorReader((after) => store.events.after('chain-devnet', after, { owner: undefined }, 1000), 'held-'),
    cursorReader((after) => store.eventsSince(after, 1000), 'held-'),
  ];
  // Writer A starts first and writes (so its transaction id is the older), B appends and commits, then A appends
  // again — after B's append in time — and stays open while the readers read; then A commits.
  const step = (() => {
    const gates = new Map<string, { promise: Promise<void>; open: () => void }>();
    return (name: string) => {
      if (!gates.has(name)) {
        let open!: () => void;
        const promise = new Promise<void>((r) => (open = r));
        gates.set(name, { promise, open });
      }
      return gates.get(name)!;
    };
  })();
  const rows: Record<string, EventRecord> = {};
  const a = store.transaction(async (tx) => {
    rows.aEarly = await tx.events.append(deleted('held-a-early'));
    step('a-early').open();
    await step('b-committed').promise;
    rows.aLate = await tx.events.append(deleted('held-a-late'));
    step('a-late').open();
    await step('a-commit').promise;
  });
  await step('a-early').promise;
  await store.transaction(async (tx) => {
    rows.b = await tx.events.append(deleted('held-b'));
  });
  step('b-committed').open();
  await step('a-late').promise;
  for (const r of readers) await r.poll();
  for (const r of readers) t.deepEqual(r.seen, [], 'nothing is delivered while the older writer is open');
  step('a-commit').open();
  await a;
  for (const r of readers) await r.poll();
  for (const r of readers) t.deepEqual(r.seen, ['held-a-early', 'held-a-late', 'held-b'], 'every row once, in seq order');
  t.true(rows.aLate!.seq < rows.b!.seq, 'the older transaction’s later append still sorts below the younger one’s');
  t.true((await store.maxEventSeq()) >= rows.b!.seq);
});

test.serial('many writers committing in random order while two cursors read: every row once, in seq order', async (t) => {
  const store = app.database.store;
  const readers = [
    cursorReader((after) => store.events.after('chain-devnet', after, { owner: undefined }, 7), 'many-'),
    cursorReader((after) => store.eventsSince(after, 5), 'many-'),
  ];
  const pollAll = async () => {
    for (const r of readers) {
      // small pages: a reader pages until it has everything currently deliverable
      for (let before = -1; before !== r.seen.length; ) {
        before = r.seen.length;
        await r.poll();
      }
    }
  };
  const writers = Array.from({ length: 24 }, (_, i) =>
    openWriter(`many-${String(i).padStart(2, '0')}`, i % 3 === 0 ? (tx) => tx.events.append(deleted(`early-${i}`)) : undefined),
  );
  await Promise.all(writers.map((w) => w.row));
  // A deterministic shuffle of the commit order.
  const order = writers.map((w, i) => ({ w, k: (i * 7919) % 24 })).sort((a, b) => a.k - b.k);
  for (const { w } of order) {
    await w.commit();
    await pollAll();
  }
  await pollAll();
  const all = writers.map((_, i) => `many-${String(i).padStart(2, '0')}`);
  for (const r of readers) {
    t.is(new Set(r.seen).size, r.seen.length, 'no row twice');
    t.deepEqual([...r.seen].sort(), all, 'no row skipped');
  }
});

test.serial('appends no longer wait for each other: a writer appends and commits while another writer holds its append open', async (t) => {
  const held = openWriter('concurrent-held');
  await held.row;
  // Under one advisory lock held until commit, this append would wait for the held transaction's commit.
  const other = openWriter('concurrent-other');
  await other.row;
  await other.commit();
  await held.commit();
  const ids = (await app.database.store.events.after('chain-devnet', 0n, { owner: undefined }, 1000)).map((e) => e.metadata.payment_link_id);
  t.true(ids.includes('concurrent-held') && ids.includes('concurrent-other'));
});

test.serial('a transition takes a new seq above the horizon rules too: it is delivered after the cursor passed its old seq', async (t) => {
  const store = app.database.store;
  const reader = cursorReader((after) => store.events.after('chain-devnet', after, { owner: undefined }, 1000), 'moved-');
  const created = await store.transaction((tx) =>
    tx.events.append(
      newEvent(
        'payment_link.deleted',
        { id: newId(), network: 'chain-devnet', agentAsset: null, owner: 'test:cursor', phase: 'confirmed', createdAt: new Date() },
        { payment_link_id: 'moved-1' },
      ),
    ),
  );
  await reader.poll();
  t.deepEqual(reader.seen, ['moved-1']);
  // Transition needs a phase in `from`: confirmed → confirmed is allowed by the SQL (phase in from).
  const moved = await store.transaction((tx) => tx.events.transition('chain-devnet', created.id, { phase: 'confirmed', from: ['confirmed'], at: new Date() }));
  t.truthy(moved);
  t.true(moved!.seq > created.seq);
  await reader.poll();
  t.deepEqual(reader.seen, ['moved-1', 'moved-1'], 'the change is delivered again at its new seq');
});

test.serial('a transition wakes the feed in its own statement: a subscriber gets the moved row; one that moves nothing answers null', async (t) => {
  // The update and its NOTIFY are one statement (no second round trip in the confirming transaction): the feed must
  // still be woken by the transition itself — no other write follows here that could wake it instead.
  const store = app.database.store;
  const feed = new PgEventFeed(app.database.url, store, { warn: () => {} });
  const seen: EventRecord[] = [];
  let wake = () => {};
  feed.subscribe((e) => {
    seen.push(e);
    wake();
  });
  const until = (found: (e: EventRecord) => boolean) =>
    new Promise<void>((resolve) => {
      const check = () => {
        if (seen.some(found)) resolve();
        else wake = check;
      };
      check();
    });
  await feed.start();
  try {
    const created = await store.transaction((tx) => tx.events.append(deleted('woken-1')));
    await until((e) => e.id === created.id);
    const moved = await store.transaction((tx) =>
      tx.events.transition('chain-devnet', created.id, { phase: 'confirmed', from: ['confirmed'], at: new Date() }),
    );
    t.truthy(moved);
    await until((e) => e.id === created.id && e.seq === moved!.seq);
    t.deepEqual(
      seen.filter((e) => e.id === created.id).map((e) => e.seq),
      [created.seq, moved!.seq],
    );
    const unmoved = await store.transaction((tx) => tx.events.transition('chain-devnet', created.id, { phase: 'failed', from: ['submitted'], at: new Date() }));
    t.is(unmoved, null);
  } finally {
    await feed.close();
  }
});

test.serial('a transaction open in ANOTHER database of the cluster does not hold this database’s events back (xids are cluster-wide)', async (t) => {
  const store = app.database.store;
  const elsewhere = new URL(app.database.url);
  elsewhere.pathname = '/postgres';
  const other = new pg.Client({ connectionString: elsewhere.toString() });
  await other.connect();
  try {
    await other.query('begin');
    await other.query('select pg_current_xact_id()'); // holds an xid older than the append below
    const reader = cursorReader((after) => store.events.after('chain-devnet', after, { owner: undefined }, 1000), 'elsewhere-');
    const readerFeed = cursorReader((after) => store.eventsSince(after, 1000), 'elsewhere-');
    await store.transaction((tx) => tx.events.append(deleted('elsewhere-1')));
    await reader.poll();
    await readerFeed.poll();
    t.deepEqual(reader.seen, ['elsewhere-1'], 'delivered while the other database’s transaction is still open');
    t.deepEqual(readerFeed.seen, ['elsewhere-1']);
    t.false(await store.eventsHeldBack());
  } finally {
    await other.query('rollback').catch(() => {});
    await other.end();
  }
});

const linkIds = (rows: EventRecord[]) => rows.map((e) => e.metadata.payment_link_id as string);
const firstPage = () => app.database.store.events.list('chain-devnet', { owner: undefined, kinds: undefined, limit: 50 });

test.serial('the newest-first first page is cut at the horizon: a subscription from its top still gets a row that commits later below it', async (t) => {
  const store = app.database.store;
  const older = openWriter('page-older');
  const olderRow = await older.row;
  const younger = openWriter('page-younger');
  const youngerRow = await younger.row;
  await younger.commit();
  t.true(olderRow.seq < youngerRow.seq);
  // The older writer stays open past the list's bounded wait: the page answers without the younger row, because
  // a client taking the page's top as `after` would otherwise never see the older row.
  const page = await firstPage();
  t.false(linkIds(page).includes('page-younger'), 'the row above the horizon is not on the first page yet');
  t.false(linkIds(page).includes('page-older'));
  const top = page[0]?.seq ?? 0n;
  t.true(top < olderRow.seq);
  // Pages below a cursor are stable: the second page of the same list holds nothing above the first page's top.
  if (page.length > 0)
    t.true((await store.events.list('chain-devnet', { owner: undefined, kinds: undefined, beforeSeq: top, limit: 50 })).every((e) => e.seq < top));
  await older.commit();
  const delivered = linkIds(await store.events.after('chain-devnet', top, { owner: undefined }, 1000));
  t.deepEqual(
    delivered.filter((id) => id.startsWith('page-')),
    ['page-older', 'page-younger'],
    'the subscription from the top delivers both, in seq order',
  );
  t.deepEqual(linkIds(await firstPage()).slice(0, 2), ['page-younger', 'page-older'], 'once the older writer ended both are listed');
});

test.serial('read your writes: a row committed before the list is on its first page once the older writer ends within the wait', async (t) => {
  // The list starts while an older transaction is open (the caller's committed row is held above the horizon) and
  // that transaction ends while the list waits: the list waits for the horizon to pass the held row instead of
  // answering without it. The older transaction commits from inside the database as soon as the list is seen
  // polling the horizon (one statement: a loop over pg_stat_activity, then COMMIT), so no client round trip or
  // guessed pause stands between the two. The list's wait is bounded (HELD_WAIT_MS, 100 ms,
  // adapters/store/repositories/events.ts): a process stalled past it gets a page without the row — that page must
  // have waited out the bound, and the round is run again; a list that does not wait fails every round.
  const older = new pg.Client({ connectionString: app.database.url });
  await older.connect();
  try {
    for (let round = 1; ; round++) {
      await older.query('begin');
      await older.query('select pg_current_xact_id()'); // an xid older than the caller's append below
      await app.database.store.transaction(async (tx) => void (await tx.events.append(deleted(`ryw-mine-${round}`))));
      const started = performance.now();
      const listed = firstPage();
      // now() is this transaction's start: only horizon polls begun since then (this round's list) count.
      const endsWhenPolled = older.query(`
        do $$
        declare deadline timestamptz := clock_timestamp() + interval '10 seconds';
        begin
          loop
            perform pg_stat_clear_snapshot();
            exit when clock_timestamp() > deadline or exists (
              select 1 from pg_stat_activity
               where pid <> pg_backend_pid() and datname = current_database()
                 and query like 'select svc_events_horizon() >%' and query_start > now());
            perform pg_sleep(0.001);
          end loop;
        end $$;
        commit;`);
      const ids = linkIds(await listed);
      const waited = performance.now() - started;
      await endsWhenPolled;
      if (ids.includes(`ryw-mine-${round}`)) {
        t.pass(`listed with the caller's row in round ${round}`);
        return;
      }
      t.true(waited >= 100, `round ${round}: the page left out the caller's row after ${waited.toFixed(0)} ms, before its wait was over`);
      if (round === 5) {
        t.fail('five rounds in a row, the list answered without the row its caller had committed');
        return;
      }
    }
  } finally {
    await older.query('rollback').catch(() => {});
    await older.end();
  }
});
