// The cache of the TypeScript entries' bundles that scripts/run.mjs runs (`npm start`, the jobs, every command): each
// entry, the sources it imports and their packages bundled by esbuild into one ES module (scripts/bundle-source.mjs
// says why and which packages stay with Node), kept under node_modules/.cache (npm ci starts it afresh) and rebuilt when
// a source, the build's options or the installed packages change.

import { readFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const CACHE = path.join(ROOT, 'node_modules', '.cache', 'svc-gateway', 'run');
/** the build's options and this file: inputs of every bundle (one built under other options is stale) */
const OPTIONS = [fileURLToPath(new URL('./bundle-source.mjs', import.meta.url)), fileURLToPath(import.meta.url)];
/** npm rewrites it on every install: one stamp stands for the ~3,500 package files a bundle holds */
const INSTALLED = path.join(ROOT, 'node_modules', '.package-lock.json');

/**
 * The installed esbuild's version, from its package.json: a fresh bundle runs without loading esbuild (or the build's
 * options and plugins), about 0.2 s of CPU less for every start of a command.
 */
const esbuildVersion = JSON.parse(readFileSync(createRequire(import.meta.url).resolve('esbuild/package.json'), 'utf8')).version;

/** mtime and size: what makes a cached bundle stale (an edit, a checkout, a restored file) */
const stamp = (file) =>
  stat(file).then(
    (s) => `${s.mtimeMs}:${s.size}`,
    () => null,
  );

/** The cache's name for an entry (an absolute path): its file name and a digest of the path, so checkouts apart keep apart. */
const nameOf = (entry) => `${path.basename(entry, '.ts')}-${createHash('sha256').update(entry).digest('hex').slice(0, 12)}`;

async function isFresh(entry) {
  try {
    const manifest = JSON.parse(await readFile(path.join(CACHE, `${nameOf(entry)}.json`), 'utf8'));
    if (manifest.esbuild !== esbuildVersion || manifest.entry !== entry || !OPTIONS.every((file) => file in manifest.inputs)) return false;
    const files = Object.keys(manifest.inputs);
    const stamps = await Promise.all(files.map(stamp));
    return files.every((file, i) => stamps[i] === manifest.inputs[file]);
  } catch {
    return false; // no manifest yet, or one another version wrote
  }
}

/**
 * Builds `entries` in one esbuild run (the packages they share are read and parsed once), into a directory of this
 * process's own, then moves each bundle, its map and its manifest in: a concurrent start never reads half a file.
 */
async function rebuild(entries) {
  const work = path.join(CACHE, `.build-${process.pid}`);
  await mkdir(work, { recursive: true });
  const [{ build }, { SOURCE_BUNDLE }] = await Promise.all([import('esbuild'), import('./bundle-source.mjs')]);
  try {
    const result = await build({
      ...SOURCE_BUNDLE,
      absWorkingDir: ROOT,
      entryPoints: entries.map((entry) => ({ in: entry, out: nameOf(entry) })),
      outdir: work,
      outExtension: { '.js': '.mjs' },
      metafile: true,
    });
    for (const entry of entries) {
      const name = nameOf(entry);
      const output = result.metafile.outputs[path.relative(ROOT, path.join(work, `${name}.mjs`))];
      // our sources by their own stamps, the packages by the install's; the build's own options count as an input too
      const sources = Object.keys(output.inputs)
        .map((input) => path.resolve(ROOT, input))
        .filter((file) => !file.split(path.sep).includes('node_modules') && !file.includes(':'));
      const files = [...new Set([...sources, ...OPTIONS, INSTALLED])];
      const stamps = await Promise.all(files.map(stamp));
      await rename(path.join(work, `${name}.mjs.map`), path.join(CACHE, `${name}.mjs.map`));
      await rename(path.join(work, `${name}.mjs`), path.join(CACHE, `${name}.mjs`));
      await writeFile(
        path.join(work, `${name}.json`),
        JSON.stringify({ esbuild: esbuildVersion, entry, inputs: Object.fromEntries(files.map((file, i) => [file, stamps[i]])) }),
      );
      await rename(path.join(work, `${name}.json`), path.join(CACHE, `${name}.json`));
    }
  } finally {
    await rm(work, { recursive: true, force: true });
  }
  await forgetGone();
}

/** Drops the bundles of entries that no longer exist (a removed checkout or clone), which nothing would read again. */
async function forgetGone() {
  for (const file of await readdir(CACHE)) {
    if (!file.endsWith('.json')) continue;
    try {
      const { entry } = JSON.parse(await readFile(path.join(CACHE, file), 'utf8'));
      if ((await stamp(entry)) !== null) continue;
    } catch {
      continue; // being written by another process
    }
    const name = file.slice(0, -'.json'.length);
    await Promise.all([`${name}.json`, `${name}.mjs`, `${name}.mjs.map`].map((f) => rm(path.join(CACHE, f), { force: true })));
  }
}

/** Builds, in one run, those of `entries` (paths from the repository's root, or absolute) whose bundle is missing or stale. */
export async function prepareBundles(entries) {
  const absolute = [...new Set(entries.map((entry) => path.resolve(ROOT, entry)))];
  await mkdir(CACHE, { recursive: true });
  const fresh = await Promise.all(absolute.map(isFresh));
  const stale = absolute.filter((_, i) => !fresh[i]);
  if (stale.length > 0) await rebuild(stale);
}

/** The path of `entry`'s bundle (an absolute path), built first if missing or stale. */
export async function bundleOf(entry) {
  await prepareBundles([entry]);
  return path.join(CACHE, `${nameOf(entry)}.mjs`);
}

/** Every entry the npm scripts run through scripts/run.mjs, read from package.json, as paths from the repository's root. */
export async function scriptEntries() {
  const { scripts } = JSON.parse(await readFile(path.join(ROOT, 'package.json'), 'utf8'));
  return [...new Set(Object.values(scripts).flatMap((line) => [...line.matchAll(/scripts\/run\.mjs\s+(\S+\.ts)/g)].map((m) => m[1])))];
}
