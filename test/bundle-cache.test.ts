import test from 'ava';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { bundleOf, prepareBundles } from '../scripts/bundle-cache.mjs';
import { RUN_TS } from './support/commands.ts';

// scripts/bundle-cache.mjs: every command (`npm start`, the jobs, the CLIs) runs from its entry's cached bundle. A
// cached bundle must be used as long as its sources are unchanged, rebuilt once one changes, and dropped once its entry
// is gone (a deleted clone or worktree); entries prepared together come out as separate, runnable bundles.

const run = promisify(execFile);

const entryText = (word: string) =>
  `import { join } from 'node:path';\nconsole.log(JSON.stringify({ word: ${JSON.stringify(word)}, argv: process.argv.slice(2), joined: join('a', 'b') }));\n`;

test('a command runs from its bundle, reused while its source is unchanged, rebuilt when it changes, dropped when its entry is gone', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'svc-bundle-cache-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const entry = join(dir, 'hello.ts');
  await writeFile(entry, entryText('first'));

  const first = await run(process.execPath, [RUN_TS, entry, '--flag', 'x']);
  t.deepEqual(JSON.parse(first.stdout), { word: 'first', argv: ['--flag', 'x'], joined: 'a/b' });
  const bundle = await bundleOf(entry);
  const built = (await stat(bundle)).mtimeMs;

  // unchanged: the same bundle file, not written again
  const again = await run(process.execPath, [RUN_TS, entry]);
  t.is(JSON.parse(again.stdout).word, 'first');
  t.is((await stat(bundle)).mtimeMs, built);

  // an edit (another size, so the stamp differs even within the file system's time resolution): rebuilt and run
  await writeFile(entry, entryText('second, edited'));
  const edited = await run(process.execPath, [RUN_TS, entry]);
  t.is(JSON.parse(edited.stdout).word, 'second, edited');
  t.not((await stat(bundle)).mtimeMs, built);

  // the entry gone: the next build drops its bundle, map and manifest
  await rm(entry);
  const other = join(dir, 'other.ts');
  await writeFile(other, entryText('other'));
  await prepareBundles([other]);
  for (const file of [bundle, `${bundle}.map`, bundle.replace(/\.mjs$/, '.json')]) t.false(existsSync(file), `${file} is left behind`);
  t.true(existsSync(await bundleOf(other)));
});

test('entries prepared in one build each get their own bundle, which runs alone', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'svc-bundle-cache-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const entries = ['one', 'two'].map((word) => ({ word, path: join(dir, `${word}.ts`) }));
  for (const e of entries) await writeFile(e.path, entryText(e.word));
  await prepareBundles(entries.map((e) => e.path));
  for (const e of entries) {
    const bundle = await bundleOf(e.path);
    const built = (await stat(bundle)).mtimeMs;
    const { stdout } = await run(process.execPath, [RUN_TS, e.path]);
    t.is(JSON.parse(stdout).word, e.word);
    t.is((await stat(bundle)).mtimeMs, built, `${e.word}: the prepared bundle was used, not rebuilt`);
  }
});
