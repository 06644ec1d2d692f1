import { execFile } from 'node:child_process';
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import anyTest, { type TestFn } from 'ava';
import { ensureChromium } from '../scripts/ensure-chromium.ts';
import { chromiumOrThrow, findChromium } from './support/chromium.ts';
import { RUN_TS } from './support/commands.ts';

// The pretest step and the browser test's lookup (test/support/chromium.ts): SVC_CHROMIUM first, else `chromium` on
// PATH; missing, it is installed with apt-get as root, else the step stops saying what to do. Each test builds its own
// PATH of temporary directories, so what "is installed" is exactly what the test put there; apt-get is a stand-in
// script on that PATH that records its arguments (nothing is installed on the machine).

const REPO = fileURLToPath(new URL('..', import.meta.url));
const test = anyTest as TestFn<{ dir: string }>;

test.beforeEach(async (t) => {
  t.context.dir = await mkdtemp(join(tmpdir(), 'ensure-chromium-'));
});
test.afterEach.always(async (t) => {
  await rm(t.context.dir, { recursive: true, force: true });
});

async function executable(file: string, body = '#!/bin/sh\nexit 0\n'): Promise<string> {
  await writeFile(file, body);
  await chmod(file, 0o755);
  return file;
}

async function binDir(root: string, name: string): Promise<string> {
  const dir = join(root, name);
  await mkdir(dir);
  return dir;
}

/** an apt-get that appends its arguments to `log` and, on `install`, puts an executable `chromium` in `into` */
async function standInAptGet(dir: string, log: string, into: string): Promise<void> {
  await executable(
    join(dir, 'apt-get'),
    `#!${process.execPath}
const fs = require('node:fs');
const args = process.argv.slice(2);
fs.appendFileSync(${JSON.stringify(log)}, args.join(' ') + ' [' + process.env.DEBIAN_FRONTEND + ']\\n');
if (args.includes('install')) { fs.writeFileSync(${JSON.stringify(join(into, 'chromium'))}, '#!/bin/sh\\n'); fs.chmodSync(${JSON.stringify(join(into, 'chromium'))}, 0o755); }
`,
  );
}

test('chromium on PATH is found; a non-executable file or a directory of that name is not', async (t) => {
  const { dir } = t.context;
  const a = await binDir(dir, 'a');
  const b = await binDir(dir, 'b');
  const c = await binDir(dir, 'c');
  await writeFile(join(a, 'chromium'), '#!/bin/sh\n');
  await mkdir(join(b, 'chromium'));
  const real = await executable(join(c, 'chromium'));
  t.deepEqual(findChromium({ PATH: [a, b, c].join(':') }), { found: true, path: real });
  t.deepEqual(findChromium({ PATH: [a, b].join(':') }), { found: false, overridden: false, problem: 'chromium is not on PATH' });
});

test('SVC_CHROMIUM wins over PATH, and a wrong one is reported, not replaced', async (t) => {
  const { dir } = t.context;
  const bin = await binDir(dir, 'bin');
  await executable(join(bin, 'chromium'));
  const chrome = await executable(join(dir, 'chrome'));
  t.deepEqual(findChromium({ PATH: bin, SVC_CHROMIUM: chrome }), { found: true, path: chrome });
  const wrong = findChromium({ PATH: bin, SVC_CHROMIUM: join(dir, 'nope') });
  t.false(wrong.found);
  t.true(!wrong.found && wrong.overridden);
  // the pretest step does not install anything for a wrong override, even as root with apt-get
  const log = join(dir, 'apt.log');
  await standInAptGet(bin, log, bin);
  await t.throwsAsync(ensureChromium({ env: { PATH: bin, SVC_CHROMIUM: join(dir, 'nope') }, isRoot: true, log: () => {} }), {
    message: /SVC_CHROMIUM=.*nope is not an executable file/,
  });
  await t.throwsAsync(readFile(log));
});

test('found: the step installs nothing and prints nothing', async (t) => {
  const bin = await binDir(t.context.dir, 'bin');
  const chromium = await executable(join(bin, 'chromium'));
  const lines: string[] = [];
  t.is(await ensureChromium({ env: { PATH: bin }, isRoot: true, log: (line) => lines.push(line) }), chromium);
  t.deepEqual(lines, []);
  t.is(chromiumOrThrow({ PATH: bin }), chromium);
});

test('missing, not root: stops with the command to run and the override', async (t) => {
  const bin = await binDir(t.context.dir, 'bin');
  const log = join(t.context.dir, 'apt.log');
  await standInAptGet(bin, log, bin);
  const error = await t.throwsAsync(ensureChromium({ env: { PATH: bin }, isRoot: false, log: () => {} }));
  t.regex(error.message, /not running as root/);
  t.regex(error.message, /sudo apt-get install chromium/);
  t.regex(error.message, /SVC_CHROMIUM=\/path\/to\/chrome/);
  await t.throwsAsync(readFile(log), undefined, 'apt-get was not run');
  t.throws(() => chromiumOrThrow({ PATH: bin }), { message: /sudo apt-get install chromium.*SVC_CHROMIUM/ });
});

test('missing, root without apt-get: stops saying so', async (t) => {
  const bin = await binDir(t.context.dir, 'bin');
  const error = await t.throwsAsync(ensureChromium({ env: { PATH: bin }, isRoot: true, log: () => {} }));
  t.regex(error.message, /apt-get is not available/);
  t.regex(error.message, /sudo apt-get install chromium/);
});

test('missing, root with apt-get: apt-get update, then install -y chromium, non-interactively; the new binary is returned', async (t) => {
  const { dir } = t.context;
  const sbin = await binDir(dir, 'sbin');
  const bin = await binDir(dir, 'bin');
  const log = join(dir, 'apt.log');
  await standInAptGet(sbin, log, bin);
  const lines: string[] = [];
  const path = await ensureChromium({ env: { PATH: [bin, sbin].join(':') }, isRoot: true, log: (line) => lines.push(line) });
  t.is(path, join(bin, 'chromium'));
  t.deepEqual((await readFile(log, 'utf8')).trim().split('\n'), ['-q update [noninteractive]', '-q install -y chromium [noninteractive]']);
  t.is(lines.length, 2);
  t.regex(lines[0] ?? '', /installing Debian's chromium package/);
});

test('apt-get failing stops the step with its exit status and the end of its output', async (t) => {
  const bin = await binDir(t.context.dir, 'bin');
  await executable(join(bin, 'apt-get'), '#!/bin/sh\necho "Hit:1 somewhere"\necho "E: Unable to locate package chromium" >&2\nexit 100\n');
  const error = await t.throwsAsync(ensureChromium({ env: { PATH: bin }, isRoot: true, log: () => {} }));
  t.regex(error.message, /-q update` failed \(exit 100\)/);
  t.regex(error.message, /Hit:1 somewhere\nE: Unable to locate package chromium$/);
});

test('as `npm test` runs it: exit 0 and silent when found, exit 1 with what to do when missing', async (t) => {
  const bin = await binDir(t.context.dir, 'bin');
  const run = (env: NodeJS.ProcessEnv) =>
    promisify(execFile)(process.execPath, [RUN_TS, 'scripts/ensure-chromium.ts'], { cwd: REPO, env: { HOME: process.env.HOME, ...env } }).then(
      ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
      (error: { code: number; stdout: string; stderr: string }) => ({ code: error.code, stdout: error.stdout, stderr: error.stderr }),
    );
  const missing = await run({ PATH: bin });
  t.is(missing.code, 1);
  t.regex(missing.stderr, /chromium is not on PATH/);
  t.regex(missing.stderr, /sudo apt-get install chromium/);
  const chrome = await executable(join(t.context.dir, 'chrome'));
  t.deepEqual(await run({ PATH: bin, SVC_CHROMIUM: chrome }), { code: 0, stdout: '', stderr: '' });
});
