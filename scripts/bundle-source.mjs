import { readFile } from 'node:fs/promises';
import { pathToFileURL } from 'node:url';

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
  plugins: [sourceUrl],
  // tsconfig.json's emit rules: imports kept as written (verbatimModuleSyntax), class fields defined (target ES2022)
  tsconfigRaw: { compilerOptions: { verbatimModuleSyntax: true, useDefineForClassFields: true } },
  logLevel: 'warning',
};
