import { createRequire } from 'node:module';

// One teardown per test file (STYLE habit 13: tests tear down what they start): whatever a helper or a test starts for
// the whole file (apps, receivers, browsers, servers) is registered here once, and one `test.after.always` of the file
// stops it all when its tests are done, so no file copies the same teardown. AVA runs each test file in its own
// process, so this stack is the file's own.

/** Under AVA, files run in AVA's worker processes; a script (test/bench) imports the helpers without AVA. */
export const UNDER_AVA = /[\\/]ava[\\/]/.test(process.argv[1] ?? '');

const stack: (() => unknown)[] = [];

/**
 * Runs `stop` after the file's tests (passed or failed), the last registered first: what was started after an app
 * (a receiver it calls, a browser on its pages, a second instance on its database) stops before the app does.
 */
export function afterAll(stop: () => unknown): void {
  stack.push(stop);
}

/** Runs every registered stop, each even when an earlier one failed; throws the failures together. */
export async function runAfterAll(): Promise<void> {
  const failures: unknown[] = [];
  while (stack.length > 0) {
    const stop = stack.pop()!;
    try {
      await stop();
    } catch (e) {
      failures.push(e);
    }
  }
  if (failures.length === 1) throw failures[0];
  if (failures.length > 1) throw new AggregateError(failures, `${failures.length} teardown steps failed`);
}

if (UNDER_AVA) {
  // Loaded while the test file loads (it imports the helpers), which is when AVA accepts hooks; a require, not an
  // import, so scripts outside AVA never load AVA (it refuses to load outside its workers).
  // AVA accepts declarations only in the tick of the first one: a test file must not import a module with a
  // module-level `await` (faremeter's packages) statically, or its own tests would come a tick later; load such a
  // module where it is used.
  const test = createRequire(import.meta.url)('ava') as typeof import('ava').default;
  test.after.always('stop what the file started', runAfterAll);
}
