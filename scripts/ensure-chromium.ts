import { spawn } from 'node:child_process';
import { realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { CHROMIUM_HELP, findChromium, onPath } from '../test/support/chromium.ts';

// `npm test`'s pretest step (and .ci/run's): the explorer's browser test needs Debian's `chromium`, so a fresh Debian
// machine gets it here rather than by hand. Found (SVC_CHROMIUM, else `chromium` on PATH): nothing to do, nothing
// printed. Missing: as root with apt-get, install the package (apt-get update first: a fresh machine has no package
// lists); otherwise stop and say exactly what to do. A set SVC_CHROMIUM that is wrong is reported, never "fixed" by
// installing something else.

export interface EnsureOptions {
  env: NodeJS.ProcessEnv;
  /** apt-get can install packages (the CLI passes `process.getuid() === 0`) */
  isRoot: boolean;
  /** progress lines for the person watching `npm test` */
  log: (line: string) => void;
}

/** the Chromium binary, installing Debian's package when that is possible; rejects with what to do when it is not */
export async function ensureChromium({ env, isRoot, log }: EnsureOptions): Promise<string> {
  const lookup = findChromium(env);
  if (lookup.found) return lookup.path;
  if (lookup.overridden) throw new Error(`${lookup.problem}: point it at a Chromium or Chrome binary, or unset it to use \`chromium\` on PATH.`);
  const aptGet = onPath('apt-get', env);
  if (!isRoot || !aptGet) {
    const why = isRoot ? 'apt-get is not available' : 'not running as root';
    throw new Error(`${lookup.problem} (the explorer's browser test drives it) and ${why}, so it cannot be installed here: ${CHROMIUM_HELP}.`);
  }
  log(`${lookup.problem}: installing Debian's chromium package for the explorer's browser test (apt-get update, apt-get install chromium; a few minutes)…`);
  const aptEnv = { ...env, DEBIAN_FRONTEND: 'noninteractive' };
  await run(aptGet, ['-q', 'update'], aptEnv);
  await run(aptGet, ['-q', 'install', '-y', 'chromium'], aptEnv);
  const after = findChromium(env);
  if (!after.found) throw new Error(`apt-get installed chromium but ${after.problem}: ${CHROMIUM_HELP}.`);
  log(`chromium installed: ${after.path}`);
  return after.path;
}

/** apt-get's output is kept, not shown (hundreds of lines on a fresh machine); a failure shows its end, which says why */
function run(command: string, args: string[], env: NodeJS.ProcessEnv): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    const keep = (chunk: Buffer) => {
      output = (output + chunk.toString('utf8')).slice(-OUTPUT_KEPT);
    };
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    child.once('error', reject);
    child.once('close', (code, signal) => {
      if (code === 0) return resolve();
      const tail = output.trimEnd().split('\n').slice(-OUTPUT_LINES_SHOWN).join('\n');
      reject(new Error(`\`${command} ${args.join(' ')}\` failed (${signal ?? `exit ${code}`}): ${CHROMIUM_HELP}.${tail ? `\n${tail}` : ''}`));
    });
  });
}

const OUTPUT_KEPT = 64 * 1024;
const OUTPUT_LINES_SHOWN = 30;

const invokedAsScript = process.argv[1] !== undefined && realpathSync(process.argv[1]) === fileURLToPath(import.meta.url);
if (invokedAsScript) {
  try {
    await ensureChromium({ env: process.env, isRoot: process.getuid?.() === 0, log: (line) => console.log(line) });
  } catch (error) {
    console.error(error instanceof Error ? error.message : String(error));
    process.exitCode = 1;
  }
}
