import test from 'ava';
import { AsyncLocalStorage } from 'node:async_hooks';
import { Coalescer } from '../../adapters/store/repositories/coalesce.ts';

// The grouping of hot single-row statements (paid-call claims, the facilitator guard's claims and
// finishes). Pure: the write is a function here; the repositories' grouped statements are counted in
// test/interfaces/paywall-paid-path.test.ts.

test('the first item goes alone at once; what arrives while it runs goes together next; each gets its own answer', async (t) => {
  const groups: number[][] = [];
  const c = new Coalescer<number, number>(async (items) => {
    groups.push(items);
    await new Promise((r) => setImmediate(r));
    return items.map((n) => n * 10);
  });
  const answers = await Promise.all([1, 2, 3, 4].map((n) => c.add(n)));
  t.deepEqual(answers, [10, 20, 30, 40]);
  t.deepEqual(groups, [[1], [2, 3, 4]]);
  t.is(await c.add(5), 50, 'idle again: alone at once');
  t.deepEqual(groups.at(-1), [5]);
});

test('a failing group is written again item by item: only the faulty item fails', async (t) => {
  const groups: string[][] = [];
  const c = new Coalescer<string, string>(async (items) => {
    groups.push(items);
    await new Promise((r) => setImmediate(r));
    if (items.includes('bad')) throw new Error(`refused: ${items.join(',')}`);
    return items.map((s) => s.toUpperCase());
  });
  const answers = await Promise.allSettled(['a', 'b', 'bad', 'c'].map((s) => c.add(s)));
  t.deepEqual(
    answers.map((a) => (a.status === 'fulfilled' ? a.value : (a.reason as Error).message)),
    ['A', 'B', 'refused: bad', 'C'],
  );
  t.deepEqual(groups, [['a'], ['b', 'bad', 'c'], ['b'], ['bad'], ['c']]);
});

test("a group runs in the coalescer's own async context, never in the request that happened to start it", async (t) => {
  const scope = new AsyncLocalStorage<string>();
  const seen: (string | undefined)[] = [];
  const c = new Coalescer<number, void>(async (items) => {
    seen.push(scope.getStore());
    return items.map(() => undefined);
  });
  await scope.run('request-1', () => c.add(1));
  t.deepEqual(seen, [undefined]);
});
