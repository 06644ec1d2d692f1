import test from 'ava';
import { chmod, mkdtemp, readFile, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { bundleModule, bundledWorker, ownPrivateDir } from '../../adapters/ledger/embedded/thread-bundle.ts';

// The ledger threads of a gateway run from TypeScript sources start from one esbuild bundle of thread-worker.ts
// (thread-bundle.ts), not through tsx's hooks in each thread: ~0.2 s of CPU per thread instead of ~1.5 s.

test('the ledger thread entry is bundled once: its inputs are listed, and a second look-up reuses it', async (t) => {
  const entry = new URL('../../adapters/ledger/embedded/thread-worker.ts', import.meta.url).href;
  const url = await bundledWorker(entry);
  t.truthy(url, 'esbuild is installed here: the bundle must build');
  t.is(await bundledWorker(entry), url);
  const inputs = JSON.parse(await readFile(join(fileURLToPath(url!), '..', 'inputs.json'), 'utf8')) as { inputs: Record<string, string> };
  const files = Object.keys(inputs.inputs);
  t.true(files.includes(fileURLToPath(entry)));
  t.true(files.some((f) => f.endsWith('/adapters/ledger/embedded/ledger.ts')));
  // litesvm loads its native binding relative to its own files: imported by absolute URL, not bundled
  const code = await readFile(fileURLToPath(url!), 'utf8');
  t.regex(code, /from "file:\/\/[^"]*\/litesvm\/[^"]*"/);
  t.false(files.some((f) => f.includes('/node_modules/litesvm/')));
});

test('a bundle is rebuilt when one of its inputs changes, and reused while none does', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'svc-bundle-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const entry = join(dir, 'entry.ts');
  await writeFile(join(dir, 'value.ts'), 'export const value: number = 1;\n');
  await writeFile(entry, "import { value } from './value.ts';\nexport const doubled: number = value * 2;\n");
  const out = join(dir, 'out');
  const first = await bundleModule(entry, out);
  t.true(first.built);
  t.is(((await import(`${first.url.href}?1`)) as { doubled: number }).doubled, 2);
  t.false((await bundleModule(entry, out)).built);
  await writeFile(join(dir, 'value.ts'), 'export const value: number = 21;\n');
  await utimes(join(dir, 'value.ts'), new Date(), new Date(Date.now() + 5000)); // a different mtime even on a coarse clock
  const second = await bundleModule(entry, out);
  t.true(second.built);
  t.is(((await import(`${second.url.href}?2`)) as { doubled: number }).doubled, 42);
});

test('the cache directory must be private to this user: one others may write to is refused (the thread then starts through tsx)', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'svc-bundle-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const entry = join(dir, 'entry.ts');
  await writeFile(entry, 'export const one: number = 1;\n');
  const out = join(dir, 'out');
  await bundleModule(entry, out);
  t.is((await stat(out)).mode & 0o777, 0o700);
  await chmod(out, 0o777);
  t.throws(() => ownPrivateDir(out), { message: /not a directory private to this user/ });
  await t.throwsAsync(bundleModule(entry, out), { message: /not a directory private to this user/ });
});
