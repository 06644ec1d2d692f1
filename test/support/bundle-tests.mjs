import { readdir, readFile, rm } from 'node:fs/promises';
import { dirname, join, relative } from 'node:path';
import { build } from 'esbuild';
import { prepareBundles, scriptEntries } from '../../scripts/bundle-cache.mjs';
import { SOURCE_BUNDLE } from '../../scripts/bundle-source.mjs';

// The whole suite's test files as one esbuild build (ava.config.mjs, when no file is named on the command line): every
// test file an ES module entry, the TypeScript and packages they import split into shared chunks (scripts/bundle-source.mjs
// says which packages stay with Node, and why bundling the rest halves a process's start). The workers then load plain
// JavaScript with no module hooks: under hooks (ts-hooks.mjs) every one of the ~3,500 modules a test app imports,
// node_modules included, is resolved and loaded through the hooks thread.

/** Where the build goes: inside the repository, so packages resolve from its node_modules as from the sources. */
export const BUILD_DIR = '.test-build';

/** Builds `files` (paths relative to `root`) into root/BUILD_DIR; answers the built path of each, relative to `root`. */
export async function bundleTests(root, files) {
  const outdir = join(root, BUILD_DIR);
  await rm(outdir, { recursive: true, force: true });
  await build({
    ...SOURCE_BUNDLE,
    absWorkingDir: root,
    entryPoints: files,
    outbase: root,
    outdir,
    outExtension: { '.js': '.mjs' },
    chunkNames: 'chunks/[name]-[hash]',
    splitting: true,
    // the test files' `ava` must be the instance the runner loaded (one per process), not a bundled copy
    external: ['ava'],
    // No source maps: AVA runs its workers with --enable-source-maps, and a worker then reads and parses the maps of
    // every chunk it loads (11 MB in all, the packages' lines included) plus, on the first stack trace it formats, the
    // whole mapping of that chunk: 0.3–0.7 s of CPU per test file, measured. A failure's stack names
    // lines of the built chunks (readable, unminified JavaScript that says which source each part came from); name the
    // file (`npx ava test/x.test.ts`) to run it from TypeScript with source lines.
    sourcemap: false,
  });
  return files.map((file) => relative(root, join(outdir, dirname(file), `${file.split('/').pop().replace(/\.ts$/, '')}.mjs`)));
}

/**
 * The programs the tests start through scripts/run.mjs, bundled in one esbuild run before any test starts: the npm
 * scripts' entries (package.json) and test/support's own programs (each says `Usage: node scripts/run.mjs <itself>`).
 * Left to the tests, a cold cache (every CI run, every fresh clone) builds each entry on first use, once per test that
 * starts it meanwhile, with the packages read and parsed again each time.
 */
export async function bundlePrograms(root) {
  const support = join(root, 'test', 'support');
  const programs = [];
  for (const file of await readdir(support)) {
    if (!file.endsWith('.ts')) continue;
    const usage = (await readFile(join(support, file), 'utf8')).match(/Usage: node scripts\/run\.mjs (test\/support\/[\w.-]+\.ts)/);
    if (usage?.[1] === `test/support/${file}`) programs.push(usage[1]);
  }
  await prepareBundles([...(await scriptEntries()), ...programs]);
}
