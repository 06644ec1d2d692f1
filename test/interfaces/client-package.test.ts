import test from 'ava';
import { execFile } from 'node:child_process';
import { mkdir, readFile, readdir, symlink, lstat } from 'node:fs/promises';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { build } from 'esbuild';
import { issueKey, removeDataDir, startTestApp } from '../support/app.ts';
import { buildClient, CLIENT_ENTRIES, exportFor, OUT_DIR, presentEntries, ROOT, SOURCE_CONDITION } from '../../scripts/build-client.ts';

// Issue 16: the package a separate TypeScript project installs. One build (npm run build:client's function) per run
// of this file, then a fixture project (test/fixtures/client-consumer, its node_modules/svc-gateway linked to this
// repository as an install would) type-checks against dist/ under two consumers' tsconfigs and bundles for a browser.

const run = promisify(execFile);
const FIXTURE = path.join(ROOT, 'test/fixtures/client-consumer');
const TSC = path.join(ROOT, 'node_modules/typescript/bin/tsc');
/**
 * The browser bundle of svc-gateway/client (minified, with @trpc/client): 21.6 kB measured (7.5 kB gzip) with
 * @trpc/client 11.25; the budget leaves room for tRPC's own growth, and a web3.js or node:* leak (hundreds of kB) fails it.
 */
const BROWSER_BUDGET_BYTES = 40_000;

let built: Awaited<ReturnType<typeof buildClient>>;

test.before(async () => {
  await mkdir(path.join(FIXTURE, 'node_modules'), { recursive: true });
  const link = path.join(FIXTURE, 'node_modules/svc-gateway');
  if (!(await lstat(link).catch(() => null))) await symlink(path.relative(path.dirname(link), ROOT), link, 'dir');
  built = await buildClient();
});

async function typecheck(tsconfig: string): Promise<string> {
  try {
    const { stdout, stderr } = await run(process.execPath, [TSC, '-p', tsconfig, '--pretty', 'false'], { cwd: FIXTURE });
    return stdout + stderr;
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; message: string };
    return `${e.stdout ?? ''}${e.stderr ?? ''}` || e.message;
  }
}

test('package.json exports every entry of the build: the source condition for this repository, then types, then the built JavaScript', async (t) => {
  const pkg = JSON.parse(await readFile(path.join(ROOT, 'package.json'), 'utf8')) as { exports: Record<string, Record<string, string>> };
  for (const entry of presentEntries()) {
    t.deepEqual(pkg.exports[entry.subpath], exportFor(entry), entry.subpath);
    t.deepEqual(Object.keys(pkg.exports[entry.subpath]!), [SOURCE_CONDITION, 'types', 'default'], `${entry.subpath}: condition order`);
  }
  // an export of an entry whose source is not in this checkout would be an import that fails
  const present = new Set(presentEntries().map((e) => e.subpath));
  for (const subpath of Object.keys(pkg.exports)) t.true(present.has(subpath), `${subpath} is built`);
  t.deepEqual(
    built.entries.map((e) => e.subpath),
    CLIENT_ENTRIES.filter((e) => present.has(e.subpath)).map((e) => e.subpath),
  );
});

test('dist/client holds ESM JavaScript, declarations and declaration maps for each entry; the router declaration imports @trpc/server only', async (t) => {
  for (const entry of built.entries) {
    const base = path.join(ROOT, OUT_DIR, entry.source.replace(/\.ts$/, ''));
    for (const ext of ['.js', '.js.map', '.d.ts', '.d.ts.map']) t.truthy(await lstat(base + ext).catch(() => null), `${entry.subpath}: ${ext}`);
  }
  const router = await readFile(path.join(ROOT, OUT_DIR, 'interfaces/trpc/router.d.ts'), 'utf8');
  t.notRegex(router, /context\.ts|init\.ts/);
  t.deepEqual([...new Set([...router.matchAll(/import\("([^"]+)"\)/g)].map((m) => m[1]))], ['@trpc/server']);
  // The server's declarations (services, adapters, MikroORM …) are not shipped: the entries reach a handful of files.
  const declarations = (await readdir(path.join(ROOT, OUT_DIR), { recursive: true })).filter((f) => f.endsWith('.d.ts'));
  t.is(declarations.length, built.declarationFiles);
  t.true(declarations.length <= 15, declarations.join(', '));
  t.false(declarations.some((f) => f.startsWith('adapters') || f.includes('services')), declarations.join(', '));
});

test('the built entries load in Node; the buyer kit and svc-gateway/x402 share one PaymentError class', async (t) => {
  const load = (source: string) => import(pathToFileURL(path.join(ROOT, OUT_DIR, source.replace(/\.ts$/, '.js'))).href) as Promise<Record<string, unknown>>;
  const client = await load('interfaces/client/index.ts');
  const pay = await load('interfaces/client/paying-fetch.ts');
  const x402 = await load('interfaces/x402/index.ts');
  const webhooks = await load('interfaces/client/webhooks.ts');
  t.is(typeof client.createClient, 'function');
  t.is(typeof client.errorCode, 'function');
  t.is(client.createPayingFetch, undefined, 'the browser entry carries no buyer kit');
  t.is(typeof pay.createPayingFetch, 'function');
  t.is(pay.PaymentError, x402.PaymentError);
  t.is(typeof x402.ExactSvmFeeScheme, 'function');
  t.is(typeof webhooks.verifyWebhook, 'function');
});

test('the built svc-gateway/client talks to a real gateway: typed calls answer, errors carry the API code', async (t) => {
  const app = await startTestApp();
  try {
    const key = await issueKey(app);
    const { createClient, errorCode } = (await import(pathToFileURL(path.join(ROOT, OUT_DIR, 'interfaces/client/index.js')).href)) as typeof import('../../interfaces/client/index.ts');
    const svc = createClient({ url: app.url, apiKey: key });
    t.true((await svc.health.query()).ok);
    t.deepEqual((await svc.paymentLinks.list.query({})).data, []);
    const err = await t.throwsAsync(svc.paymentLinks.get.query({ id: 'no-such-link' }));
    t.is(errorCode(err), 'payment_link_not_found');
  } finally {
    await app.close();
    await removeDataDir(app.dataDir);
  }
});

test('a strict NodeNext project (no skipLibCheck) type-checks against the built package, router types included', async (t) => {
  // Before issue 16 the exports pointed at the TypeScript sources: 161 TS5097 errors in 47 of the gateway's files.
  // src/browser.ts holds @ts-expect-error lines that fail this check if the router's types arrived as any.
  t.is(await typecheck('tsconfig.json'), '');
});

test('a Vite (bundler) project with exactOptionalPropertyTypes and no Node types type-checks the client entry', async (t) => {
  t.is(await typecheck('tsconfig.vite.json'), '');
});

test(`svc-gateway/client bundles for the browser (esbuild --platform=browser) under ${BROWSER_BUDGET_BYTES} bytes: no node:*, no web3.js`, async (t) => {
  const result = await build({
    absWorkingDir: FIXTURE,
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
  t.true(inputs.some((i) => i.endsWith(`${OUT_DIR}/interfaces/client/index.js`)), 'bundled from dist, as a consumer does');
  t.false(inputs.some((i) => i.startsWith('node:') || i.includes('@solana/web3.js') || i.includes('/domain/')), inputs.join('\n'));
  const size = result.outputFiles[0]!.contents.length;
  t.log(`browser bundle: ${size} bytes minified`);
  t.true(size < BROWSER_BUDGET_BYTES, `${size} bytes`);
});
