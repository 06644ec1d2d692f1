import type { ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { spawnChild } from './children.ts';

// Runs the repository's commands (npm scripts, examples) as a person does: a child process in the repository root,
// its output collected. Every wait is on the child's own events (its exit, a line it printed).

export const REPO = fileURLToPath(new URL('../..', import.meta.url));

/** What the npm scripts run a TypeScript entry with (`node RUN_TS entry.ts args`): scripts/run.mjs */
export const RUN_TS = fileURLToPath(new URL('../../scripts/run.mjs', import.meta.url));

export interface Finished {
  code: number | null;
  stdout: string;
  stderr: string;
}

export interface Running {
  child: ChildProcess;
  /** what it printed so far */
  output(): { stdout: string; stderr: string };
  /** resolves when stdout holds a line matching `pattern`; rejects if the child exits first */
  printed(pattern: RegExp): Promise<void>;
  exited: Promise<Finished>;
}

/** Starts `command args` in the repository with `env` over the test's environment. */
export function start(command: string, args: string[], env: Record<string, string | undefined> = {}): Running {
  const child = spawnChild(command, args, { cwd: REPO, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  const watchers: { pattern: RegExp; resolve: () => void }[] = [];
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
    stdout += chunk;
    for (const w of watchers.splice(0)) w.pattern.test(stdout) ? w.resolve() : watchers.push(w);
  });
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
  });
  const exited = new Promise<Finished>((resolve) => child.once('close', (code) => resolve({ code, stdout, stderr })));
  return {
    child,
    output: () => ({ stdout, stderr }),
    printed: (pattern) =>
      pattern.test(stdout)
        ? Promise.resolve()
        : Promise.race([
            new Promise<void>((resolve) => watchers.push({ pattern, resolve })),
            exited.then((f) => Promise.reject(new Error(`exited (${f.code}) before printing ${pattern}:\n${f.stdout}\n${f.stderr}`))),
          ]),
    exited,
  };
}

/** Runs a command to its end. */
export function run(command: string, args: string[], env: Record<string, string | undefined> = {}): Promise<Finished> {
  return start(command, args, env).exited;
}

/** `npm run <script> -- args` (npm's own banner silenced, so stdout is the command's). */
export function npmRun(script: string, args: string[], env: Record<string, string | undefined> = {}): Promise<Finished> {
  return run('npm', ['run', '--silent', script, ...(args.length ? ['--', ...args] : [])], env);
}

/** A port free at the time of asking, for a child that must listen where the gateway was told to call it. */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}
