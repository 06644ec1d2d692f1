import { readFile, rm } from 'node:fs/promises';
import { dirname, join, relative } from 'node:path';
import { pathToFileURL } from 'node:url';
import { build } from 'esbuild';

// The whole suite's test files as one esbuild build (ava.config.mjs, when no file is named on the command line): every
// test file an ES module entry, the TypeScript they import split into shared chunks, packages left to Node. The
// workers then load plain JavaScript with no module hooks: under hooks (ts-hooks.mjs) every one of the ~3,000 modules
// a test app imports, node_modules included, is resolved and loaded through the hooks thread, ~1.5 s of CPU per test
// process of the ~110 the suite starts. One build of the suite takes ~2 s.

/** Where the build goes: inside the repository, so packages resolve from its node_modules as from the sources. */
export const BUILD_DIR = '.test-build';

/**
 * `import.meta.url` in a bundled file would name the chunk, not the source: tests and sources find their fixtures,
 * scripts and workers next to themselves. Each source file gets its own URL as a module-scoped constant, and `define`
 * points `import.meta.url` at it (esbuild renames each module's constant apart; strings and comments are untouched).
 */
const sourceUrl = {
  name: 'source-import-meta-url',
  setup(b) {
    b.onLoad({ filter: /\.ts$/ }, async (args) => {
      const source = await readFile(args.path, 'utf8');
      return { contents: `const __svcSourceUrl = ${JSON.stringify(pathToFileURL(args.path).href)};\n${source}`, loader: 'ts' };
    });
  },
};

/** Builds `files` (paths relative to `root`) into root/BUILD_DIR; answers the built path of each, relative to `root`. */
export async function bundleTests(root, files) {
  const outdir = join(root, BUILD_DIR);
  await rm(outdir, { recursive: true, force: true });
  await build({
    absWorkingDir: root,
    entryPoints: files,
    outbase: root,
    outdir,
    outExtension: { '.js': '.mjs' },
    chunkNames: 'chunks/[name]-[hash]',
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    packages: 'external',
    // the package's own entries (svc-gateway/client, /x402, /mpp) from their TypeScript source, as AVA's hooks resolve them
    conditions: ['svc-gateway-source'],
    // stack traces of a failing test name the TypeScript line (AVA runs workers with --enable-source-maps)
    sourcemap: 'linked',
    define: { 'import.meta.url': '__svcSourceUrl' },
    plugins: [sourceUrl],
    // tsconfig.json's emit rules, as ts-hooks.mjs applies them
    tsconfigRaw: { compilerOptions: { verbatimModuleSyntax: true, useDefineForClassFields: true } },
    logLevel: 'warning',
  });
  return files.map((file) => relative(root, join(outdir, dirname(file), `${file.split('/').pop().replace(/\.ts$/, '')}.mjs`)));
}
