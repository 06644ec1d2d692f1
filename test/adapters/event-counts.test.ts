import anyTest, { type TestFn } from 'ava';
import { newId } from '../../domain/shared/ids.ts';
import type { NewEvent, EventPhase } from '../../domain/events/schema.ts';
import type { Network } from '../../domain/shared/network.ts';
import { startTestApp, type TestApp } from '../support/app.ts';

// GET /v1/metrics/events reads the event_counts rollup (migration 0014), kept by triggers in the
// transaction that writes the event. After a mixed workload (appends, phase transitions, an owner reassigned, a
// delete) the rollup answers exactly what a COUNT over the events table answers, for every scope and window.

const test = anyTest as TestFn<{ app: TestApp }>;

test.before(async (t) => {
  t.context = { app: await startTestApp({ env: { SVC_JOBS: 'off' } }) };
});

/** deterministic pseudo-random numbers (mulberry32) */
function prng(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let x = Math.imul(a ^ (a >>> 15), 1 | a);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

const NETWORKS: Network[] = ['chain-devnet', 'chain-mainnet'];
const OWNERS = ['key:alpha', 'key:beta', 'wallet:Gamma1111', null];
const KINDS = ['payment_link.created', 'payment_link.updated', 'agent.treasury.withdraw', 'receipt.published'];

type Counts = Map<string, number>;
const keyOf = (kind: string, phase: string) => `${kind}/${phase}`;

async function countBySql(app: TestApp, network: string, owner: string | undefined, since: Date | undefined): Promise<Counts> {
  const params: unknown[] = [network];
  let where = 'network = ?';
  if (owner !== undefined) {
    where += ' and owner_principal = ?';
    params.push(owner);
  }
  if (since) {
    where += ' and created_at >= ?';
    params.push(since);
  }
  const rows = (await app.database.orm.em
    .fork()
    .execute(`select kind, phase, count(*)::int as n from events where ${where} group by kind, phase order by kind, phase`, params)) as {
    kind: string;
    phase: string;
    n: number;
  }[];
  return new Map(rows.map((r) => [keyOf(r.kind, r.phase), r.n]));
}

async function countByRollup(app: TestApp, network: Network, owner: string | undefined, since: Date | undefined): Promise<Counts> {
  const rows = await app.database.store.events.countByKind(network, { owner, since });
  return new Map(rows.map((r) => [keyOf(r.kind, r.phase), r.count]));
}

test.serial('the rollup equals a COUNT over events after appends, transitions, an owner change and a delete, per scope and window', async (t) => {
  const { app } = t.context;
  const random = prng(21);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!;
  const now = Date.now();
  const appended: { id: string; network: Network }[] = [];

  // 240 appends over three days (two per transaction half the time), 80 % on devnet
  for (let i = 0; i < 160; i++) {
    const batch = random() < 0.5 ? 1 : 2;
    await app.database.store.transaction(async (tx) => {
      for (let j = 0; j < batch; j++) {
        const network: Network = random() < 0.8 ? NETWORKS[0]! : NETWORKS[1]!;
        const createdAt = new Date(now - Math.floor(random() * 3 * 86_400_000));
        const id = newId(createdAt.getTime());
        const event = {
          id,
          network,
          kind: pick(KINDS),
          phase: 'prepared',
          agentAsset: null,
          owner: pick(OWNERS),
          createdAt,
          metadata: {},
        } as unknown as NewEvent;
        await tx.events.append(event);
        appended.push({ id, network });
      }
    });
  }
  t.true(appended.length >= 200);

  // transitions: prepared → submitted for about half, then submitted → confirmed | failed for half of those
  const moves: [readonly EventPhase[], EventPhase][] = [
    [['prepared'], 'submitted'],
    [['submitted'], 'confirmed'],
    [['submitted'], 'failed'],
  ];
  let moved = 0;
  for (const e of appended) {
    if (random() < 0.5) continue;
    const [from, phase] = moves[0]!;
    await app.database.store.transaction(async (tx) => {
      if (await tx.events.transition(e.network, e.id, { from, phase, at: new Date() })) moved++;
      if (random() < 0.5) {
        const [from2, phase2] = random() < 0.5 ? moves[1]! : moves[2]!;
        await tx.events.transition(e.network, e.id, { from: from2, phase: phase2, at: new Date() });
      }
    });
  }
  t.true(moved > 50);
  // a transition whose `from` does not hold changes nothing (and no counter)
  await app.database.store.transaction((tx) =>
    tx.events.transition(appended[0]!.network, appended[0]!.id, { from: ['failed'], phase: 'confirmed', at: new Date() }),
  );

  // what other writers do to the table: an owner reassigned (the indexer, migration 0005), an event moved in time, a delete
  const em = app.database.orm.em.fork();
  await em.execute(
    `update events set owner_principal = 'key:beta' where id in (select id from events where owner_principal = 'key:alpha' order by seq limit 7)`,
  );
  await em.execute(
    `update events set owner_principal = null where id in (select id from events where owner_principal = 'wallet:Gamma1111' order by seq limit 3)`,
  );
  await em.execute(`update events set created_at = created_at - interval '5 days' where id in (select id from events order by seq desc limit 4)`);
  await em.execute(`delete from events where id in (select id from events order by seq limit 5)`);

  const hour = 3_600_000;
  const windows: (Date | undefined)[] = [
    undefined,
    new Date(Math.floor(now / hour) * hour - 5 * hour),
    new Date(Math.floor(now / hour) * hour - 30 * hour),
    new Date(Math.floor(now / 86_400_000) * 86_400_000 - 86_400_000),
    new Date(Math.floor(now / hour) * hour - 100 * hour),
  ];
  let compared = 0;
  for (const network of NETWORKS) {
    for (const owner of [undefined, 'key:alpha', 'key:beta', 'wallet:Gamma1111', 'key:nobody']) {
      for (const since of windows) {
        const label = `${network} ${owner ?? '(network)'} since ${since?.toISOString() ?? 'ever'}`;
        t.deepEqual(await countByRollup(app, network, owner, since), await countBySql(app, network, owner, since), label);
        compared++;
      }
    }
  }
  t.is(compared, 50);
  // the network scope is not empty, and it counts the events without an owner
  const all = await countByRollup(app, 'chain-devnet', undefined, undefined);
  t.true([...all.values()].reduce((a, b) => a + b, 0) > 150);
});

test.serial('metrics: days and since read whole hours, the same as a COUNT from the start of that hour', async (t) => {
  const { app } = t.context;
  const admin = await app.services.access.issueKey({ network: 'chain-devnet', role: 'admin' });
  const since = new Date(Date.now() - 7 * 3_600_000 - 123_456);
  const hourStart = new Date(Math.floor(since.getTime() / 3_600_000) * 3_600_000);
  const res = await fetch(`${app.url}/v1/metrics/events?since=${encodeURIComponent(since.toISOString())}`, {
    headers: { authorization: `Bearer ${admin.key}` },
  });
  const body = (await res.json()) as { since: string; total: number; kinds: { kind: string; phases: Record<string, number> }[] };
  t.is(res.status, 200, JSON.stringify(body));
  t.is(body.since, hourStart.toISOString());
  const expected = await countBySql(app, 'chain-devnet', undefined, hourStart);
  const answered = new Map(body.kinds.flatMap((k) => Object.entries(k.phases).map(([phase, n]) => [keyOf(k.kind, phase), n] as const)));
  t.deepEqual(answered, expected);
  t.is(
    body.total,
    [...expected.values()].reduce((a, b) => a + b, 0),
  );

  const both = await fetch(`${app.url}/v1/metrics/events?days=1&since=${encodeURIComponent(since.toISOString())}`, {
    headers: { authorization: `Bearer ${admin.key}` },
  });
  t.is(both.status, 400);
  t.is(((await both.json()) as { error: string }).error, 'invalid_request');
});

test.serial(
  'writers never wait on a counter: two open transactions append kinds in opposite orders and both commit; reads are exact before and after the deltas are folded',
  async (t) => {
    const { app } = t.context;
    const store = app.database.store;
    const owner = 'key:crossed';
    const ev = (kind: string) =>
      ({ id: newId(), network: 'chain-devnet', kind, phase: 'confirmed', agentAsset: null, owner, createdAt: new Date(), metadata: {} }) as unknown as NewEvent;
    const step = () => {
      let go!: () => void;
      return { wait: new Promise<void>((r) => (go = r)), go: () => go() };
    };
    const aFirst = step();
    const bFirst = step();
    const aSecond = step();
    // A: X then (after B appended Y) Y; B: Y then (after A appended X) X. A counter row upserted in each transaction
    // would make them wait on each other (and deadlock); deltas make neither wait.
    const a = store.transaction(async (tx) => {
      await tx.events.append(ev(KINDS[0]!));
      aFirst.go();
      await bFirst.wait;
      await tx.events.append(ev(KINDS[1]!));
      aSecond.go();
    });
    const b = store.transaction(async (tx) => {
      await aFirst.wait;
      await tx.events.append(ev(KINDS[1]!));
      bFirst.go();
      await aSecond.wait;
      await tx.events.append(ev(KINDS[0]!));
    });
    await Promise.all([a, b]);

    const em = app.database.orm.em.fork();
    const deltas = async () => Number(((await em.execute('select count(*)::int as n from event_count_deltas')) as { n: number }[])[0]!.n);
    t.true((await deltas()) > 0, 'appends wrote deltas');
    // read without folding first: folded counters and the deltas still waiting, summed
    const { eventCountsSql } = await import('../../adapters/store/repositories/events.ts');
    const unfolded = async () => {
      const { sql, params } = eventCountsSql('chain-devnet', { owner });
      const rows = (await em.execute(sql, params)) as { kind: string; phase: string; count: string }[];
      return new Map(rows.map((r) => [keyOf(r.kind, r.phase), Number(r.count)]));
    };
    const expected = await countBySql(app, 'chain-devnet', owner, undefined);
    t.deepEqual(
      expected,
      new Map([
        [keyOf(KINDS[0]!, 'confirmed'), 2],
        [keyOf(KINDS[1]!, 'confirmed'), 2],
      ]),
    );
    t.deepEqual(await unfolded(), expected);
    t.true((await store.events.compactCounts()) > 0);
    t.is(await deltas(), 0, 'every delta folded');
    t.deepEqual(await unfolded(), expected);
    t.deepEqual(await countByRollup(app, 'chain-devnet', owner, undefined), expected);
    t.is(await store.events.compactCounts(), 0, 'nothing left to fold');
  },
);
