import test from 'ava';
import { RUN_TS, start } from './support/commands.ts';
import { until } from './support/until.ts';

// test/support/children.ts: a test worker's children, and what they started, die with the worker — when AVA's timeout
// ends it with SIGTERM (no teardown runs then) and when it exits on its own.

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

for (const how of ['signal', 'exit'] as const) {
  test(`a worker that ends by ${how === 'signal' ? 'SIGTERM' : 'process.exit'} takes its child and grandchild with it`, async (t) => {
    const worker = start(process.execPath, [RUN_TS, 'test/support/reap-child.ts', how]);
    t.teardown(() => {
      if (worker.child.exitCode === null) worker.child.kill('SIGKILL');
    });
    await worker.printed(/"grandchild":\d+/);
    const pids = JSON.parse(worker.output().stdout) as { child: number; grandchild: number };
    t.true(alive(pids.child) && alive(pids.grandchild), 'both run while the worker does');
    if (how === 'signal') worker.child.kill('SIGTERM');
    const ended = await worker.exited;
    if (how === 'signal') t.is(worker.child.signalCode, 'SIGTERM', 'the worker still dies by the signal it was sent');
    else t.is(ended.code, 0, ended.stderr);
    // SIGKILLed before the worker ended; gone once the system has reaped them
    await until('the child and the grandchild are gone', () => !alive(pids.child) && !alive(pids.grandchild));
    t.pass();
  });
}
