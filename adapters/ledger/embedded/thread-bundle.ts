import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { isAbsolute, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

// Start-up cost of a ledger thread run from TypeScript sources (npm start, the tests). Through tsx, each thread
// registers tsx's hooks of its own and loads ~370 modules through them (web3.js, spl-token, zod and ours): ~1.5 s of
// CPU per thread, two threads per gateway — the largest part of starting a test app. Bundled into one ES module by
// esbuild (a dev dependency: present wherever the sources run with tsx from a full install), the thread loads in
// ~0.2 s. The bundle is cached in the temporary directory per source checkout and rebuilt when any of its input files
// changed (size or mtime); without esbuild, or when the build fails, the thread starts through tsx as before.

/** packages loaded from node_modules, not bundled: native bindings found relative to their own files */
const EXTERNAL = new Set(['litesvm', 'bigint-buffer']);

interface Manifest {
  /** input file → `${size}:${mtimeMs}` when the bundle was built */
  inputs: Record<string, string>;
}

const signature = (path: string): string | null => {
  try {
    const s = statSync(path);
    return `${s.size}:${s.mtimeMs}`;
  } catch {
    return null;
  }
};

function fresh(bundle: string, manifestPath: string): boolean {
  if (signature(bundle) === null) return false;
  let manifest: Manifest;
  try {
    manifest = JSON.parse(readFileSync(manifestPath, 'utf8')) as Manifest;
  } catch {
    return false;
  }
  const inputs = Object.entries(manifest.inputs ?? {});
  return inputs.length > 0 && inputs.every(([path, sig]) => signature(path) === sig);
}

/**
 * The cache holds code this process runs: a directory in the shared temporary directory is used only when this user
 * owns it and nobody else may write to it (another user could otherwise plant a bundle there).
 */
export function ownPrivateDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const s = statSync(dir);
  if (!s.isDirectory() || (process.getuid && s.uid !== process.getuid()) || (s.mode & 0o022) !== 0) {
    throw new Error(`${dir} is not a directory private to this user`);
  }
}

const packageName = (specifier: string): string => {
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]!;
};

async function build(entry: string, bundle: string, manifestPath: string): Promise<void> {
  const esbuild = await import('esbuild');
  const require = createRequire(entry);
  const result = await esbuild.build({
    entryPoints: [entry],
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    write: false,
    metafile: true,
    logLevel: 'silent',
    sourcemap: 'inline',
    sourcesContent: false,
    // CommonJS packages in an ES module bundle: their require() of builtins goes through a real require
    banner: { js: "import { createRequire as __svcCreateRequire } from 'node:module'; const require = __svcCreateRequire(import.meta.url);" },
    plugins: [
      {
        name: 'external-by-absolute-path',
        setup(b) {
          b.onResolve({ filter: /^[^./]/ }, (args) => {
            if (args.path.startsWith('node:') || !EXTERNAL.has(packageName(args.path))) return undefined;
            // the bundle lives outside the checkout: its external imports name their files, resolved from the importing
            // file (a package may sit in another package's own node_modules, e.g. an override nested there)
            const from = args.importer ? createRequire(args.importer) : require;
            return { path: pathToFileURL(from.resolve(args.path)).href, external: true };
          });
        },
      },
    ],
  });
  const code = result.outputFiles[0]!.contents;
  const inputs: Record<string, string> = {};
  const cwd = process.cwd();
  for (const input of Object.keys(result.metafile.inputs)) {
    const path = isAbsolute(input) ? input : join(cwd, input);
    const sig = signature(path);
    if (sig) inputs[path] = sig;
  }
  // concurrent builders write the same thing: each renames its own temporary file into place
  const suffix = `${process.pid}.${Math.random().toString(36).slice(2)}`;
  writeFileSync(`${bundle}.${suffix}`, code);
  writeFileSync(`${manifestPath}.${suffix}`, JSON.stringify({ inputs } satisfies Manifest));
  renameSync(`${bundle}.${suffix}`, bundle);
  renameSync(`${manifestPath}.${suffix}`, manifestPath);
}

/**
 * The bundle of the TypeScript module `entry` in `dir`: reused while every input file is as it was when built, else
 * (re)built. Throws when esbuild is missing or the build fails. Returns whether it was built now.
 */
export async function bundleModule(entry: string, dir: string): Promise<{ url: URL; built: boolean }> {
  ownPrivateDir(dir);
  const bundle = join(dir, 'bundle.mjs');
  const manifestPath = join(dir, 'inputs.json');
  if (fresh(bundle, manifestPath)) return { url: pathToFileURL(bundle), built: false };
  await build(entry, bundle, manifestPath);
  return { url: pathToFileURL(bundle), built: true };
}

const cached = new Map<string, Promise<URL | null>>();

/**
 * The URL of a bundled JavaScript module of the TypeScript worker entry `entryUrl` (looked up once per process, reused
 * across processes while its inputs are unchanged), or null when it cannot be built here.
 */
export function bundledWorker(entryUrl: string): Promise<URL | null> {
  let found = cached.get(entryUrl);
  if (!found) {
    const entry = fileURLToPath(entryUrl);
    const user = process.getuid?.() ?? 'user';
    const dir = join(tmpdir(), `svc-gateway-thread-${user}-${createHash('sha256').update(entry).digest('hex').slice(0, 16)}`);
    found = bundleModule(entry, dir).then(
      ({ url }) => url,
      () => null,
    );
    cached.set(entryUrl, found);
  }
  return found;
}
