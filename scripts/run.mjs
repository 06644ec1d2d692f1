// Runs one of the repository's TypeScript entries (`node scripts/run.mjs interfaces/main.ts [arguments]`): the npm
// scripts start the gateway, the jobs and every command through it. The entry, the sources it imports and their
// packages are bundled by esbuild into one ES module (scripts/bundle-source.mjs says why and which packages stay
// with Node), cached under node_modules/.cache and rebuilt when a source, the build's options or the installed
// packages change.

import { createHash } from 'node:crypto';
import { mkdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { build, version } from 'esbuild';
import { SOURCE_BUNDLE } from './bundle-source.mjs';

const ROOT = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const CACHE = path.join(ROOT, 'node_modules', '.cache', 'svc-gateway', 'run');
/** the build's options: an input of every bundle (one built under other options is stale) */
const OPTIONS = fileURLToPath(new URL('./bundle-source.mjs', import.meta.url));
/** npm rewrites it on every install: one stamp stands for the ~3,500 package files a bundle holds */
const INSTALLED = path.join(ROOT, 'node_modules', '.package-lock.json');

/** mtime and size: what makes a cached bundle stale (an edit, a checkout, a restored file) */
const stamp = (file) =>
  stat(file).then(
    (s) => `${s.mtimeMs}:${s.size}`,
    () => null,
  );

async function isFresh(manifestFile, entry) {
  try {
    const manifest = JSON.parse(await readFile(manifestFile, 'utf8'));
    if (manifest.esbuild !== version || manifest.entry !== entry || !(OPTIONS in manifest.inputs)) return false;
    const files = Object.keys(manifest.inputs);
    const stamps = await Promise.all(files.map(stamp));
    return files.every((file, i) => stamps[i] === manifest.inputs[file]);
  } catch {
    return false; // no manifest yet, or one another version wrote
  }
}

/** Builds into a directory of this process's own, then moves the bundle and its map in: a concurrent start never reads half a file. */
async function rebuild(entry, name) {
  const work = path.join(CACHE, `.build-${process.pid}`);
  await mkdir(work, { recursive: true });
  try {
    const result = await build({ ...SOURCE_BUNDLE, absWorkingDir: ROOT, entryPoints: [entry], outfile: path.join(work, `${name}.mjs`), metafile: true });
    // our sources by their own stamps, the packages by the install's; the build's own options count as an input too
    const sources = Object.keys(result.metafile.inputs)
      .map((input) => path.resolve(ROOT, input))
      .filter((file) => !file.split(path.sep).includes('node_modules'));
    const files = [...sources, OPTIONS, INSTALLED];
    const stamps = await Promise.all(files.map(stamp));
    await rename(path.join(work, `${name}.mjs.map`), path.join(CACHE, `${name}.mjs.map`));
    await rename(path.join(work, `${name}.mjs`), path.join(CACHE, `${name}.mjs`));
    const inputs = Object.fromEntries(files.map((file, i) => [file, stamps[i]]));
    await writeFile(path.join(work, 'manifest.json'), JSON.stringify({ esbuild: version, entry, inputs }));
    await rename(path.join(work, 'manifest.json'), path.join(CACHE, `${name}.json`));
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

const [given, ...args] = process.argv.slice(2);
if (!given) {
  console.error('usage: node scripts/run.mjs <entry.ts> [arguments]');
  process.exit(2);
}
const entry = path.resolve(given);
const name = `${path.basename(entry, '.ts')}-${createHash('sha256').update(entry).digest('hex').slice(0, 12)}`;
await mkdir(CACHE, { recursive: true });
if (!(await isFresh(path.join(CACHE, `${name}.json`), entry))) await rebuild(entry, name);
// The entry sees the command line it would see run directly: argv[1] is its own path (an entry checks it to know it is
// the main module), then its arguments.
process.argv = [process.argv[0], entry, ...args];
// Stack traces name TypeScript lines, through the bundle's source map.
process.setSourceMapsEnabled(true);
await import(pathToFileURL(path.join(CACHE, `${name}.mjs`)).href);
