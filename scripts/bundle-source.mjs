import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { fileURLToPath, pathToFileURL } from 'node:url';

// How this repository's TypeScript becomes one runnable ES module (scripts/run.mjs for the npm scripts, and
// test/support/bundle-tests.mjs for the suite): esbuild bundles our sources, packages stay with Node.

/**
 * `import.meta.url` in a bundled file would name the bundle, not the source: the sources find their migrations, web
 * assets, workers and scripts next to themselves. Each source file gets its own URL as a module-scoped constant, and
 * `define` points `import.meta.url` at it (esbuild keeps each module's constant apart; strings and comments untouched).
 */
const sourceUrl = {
  name: 'source-import-meta-url',
  setup(build) {
    build.onLoad({ filter: /\.ts$/ }, async (args) => {
      const source = await readFile(args.path, 'utf8');
      return { contents: `const __svcSourceUrl = ${JSON.stringify(pathToFileURL(args.path).href)};\n${source}`, loader: 'ts' };
    });
  },
};

/**
 * The package's own entries (`svc-gateway/client`, `/x402`, …) are imported by name, as a user's project would:
 * `packages: 'external'` would leave them to Node, which has no TypeScript loader here, so they are bundled from the
 * source their `svc-gateway-source` export condition names.
 */
const selfReference = {
  name: 'svc-gateway-self-reference',
  setup(build) {
    const root = new URL('..', import.meta.url);
    const pkg = JSON.parse(readFileSync(new URL('package.json', root), 'utf8'));
    build.onResolve({ filter: new RegExp(`^${pkg.name}(/|$)`) }, (args) => {
      const target = pkg.exports?.[`.${args.path.slice(pkg.name.length)}`]?.['svc-gateway-source'];
      if (!target) return { errors: [{ text: `${args.path} is not an export of ${pkg.name} with a source condition (package.json exports)` }] };
      return { path: fileURLToPath(new URL(target, root)) };
    });
  },
};

/** esbuild options shared by every bundle of the sources (add entryPoints, outdir or outfile, and what differs). */
export const SOURCE_BUNDLE = {
  bundle: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  packages: 'external',
  // the package's own entries (svc-gateway/client, /x402, /mpp) from their TypeScript source, as the repository's tsc does
  conditions: ['svc-gateway-source'],
  // a stack trace names the TypeScript line
  sourcemap: 'linked',
  define: { 'import.meta.url': '__svcSourceUrl' },
  plugins: [selfReference, sourceUrl],
  // tsconfig.json's emit rules: imports kept as written (verbatimModuleSyntax), class fields defined (target ES2022)
  tsconfigRaw: { compilerOptions: { verbatimModuleSyntax: true, useDefineForClassFields: true } },
  logLevel: 'warning',
};
