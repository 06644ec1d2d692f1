import type { ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { RUN_TS } from './commands.ts';
import { spawnChild } from './children.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));

export interface JobsProcess {
  child: ChildProcess;
  /** the last 20 kB of its stdout and stderr */
  output(): string;
  exited: Promise<void>;
}

/** `npm run jobs` as its own process (node scripts/run.mjs interfaces/jobs.ts) with `env` over this process's. */
export function startJobsProcess(env: Record<string, string>): JobsProcess {
  const child = spawnChild(process.execPath, [RUN_TS, 'interfaces/jobs.ts'], { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  const keep = (d: Buffer) => {
    out = (out + d.toString()).slice(-20_000);
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  return { child, output: () => out, exited: new Promise((resolve) => child.once('exit', () => resolve())) };
}
