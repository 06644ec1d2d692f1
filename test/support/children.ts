import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';

// Processes a test starts (gateways, `npm run …` and their own children, CLIs) die with the test process. A file's
// teardown stops them when its tests end, but when AVA's per-file timeout fires it ends the worker with SIGTERM and no
// teardown runs: without this, a hung gateway and its embedded PostgreSQL would keep a core and its ports for the rest
// of the run. Each child leads a process group of its own, so `npm` and `bash` children go with everything they started.

const live = new Set<ChildProcess>();

/** Kills every live child's process group, at once (a process 'exit' listener can only do synchronous work). */
function killAll(): void {
  for (const child of live) {
    try {
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  live.clear();
}

const SIGNALS = ['SIGTERM', 'SIGINT', 'SIGHUP'] as const;

function onSignal(signal: NodeJS.Signals): void {
  killAll();
  // Another listener (embedded PostgreSQL's exit hook) ends the process after its own cleanup; with none left, the
  // signal's default action does, so the worker still dies by the signal AVA sent.
  if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
}

let armed = false;
function arm(): void {
  if (armed) return;
  armed = true;
  process.once('exit', killAll);
  for (const signal of SIGNALS) process.once(signal, onSignal);
}

/** `spawn` (every overload), with the child and whatever it starts killed when this process exits or is told to */
export const spawnChild = ((command: string, args: readonly string[], options: SpawnOptions = {}): ChildProcess => {
  const child = spawn(command, args, { ...options, detached: true });
  if (child.pid !== undefined) {
    arm();
    live.add(child);
    child.once('exit', () => live.delete(child));
  }
  return child;
}) as typeof spawn;

/** the children started through spawnChild that are still running (for the test of this helper) */
export function liveChildren(): number {
  return live.size;
}
