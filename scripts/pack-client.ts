import { execFile } from 'node:child_process';
import { cp, mkdir, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs, promisify } from 'node:util';
import { commandArgs } from '../interfaces/cli/command-args.ts';
import { buildClient, exportFor, OUT_DIR, presentEntries, ROOT, SOURCE_CONDITION, specifiers, type ClientEntry } from './build-client.ts';

// `npm run pack:client`: the client entries as an installable package, svc-gateway-<version>.tgz.
//
// The root package.json is the server's (private, every server dependency, `files` unset so `npm pack` falls back to
// .gitignore and leaves dist/ out). Rather than bend it into two things, the client package is generated: dist/package/
// holds the built JavaScript and declarations (dist/client, `npm run build:client`), a README and its own package.json
// whose `exports` are the root's minus the repository-only source condition, and whose dependencies are derived from
// what the built files import — each one classified below, with the range the root package resolves and tests today.
// `npm pack` of that directory is the tarball; `npm install ./svc-gateway-<version>.tgz` installs it.
// test/interfaces/client-package.test.ts packs it, installs it without a lock file and uses it against a gateway.

const run = promisify(execFile);

export const PACKAGE_DIR = 'dist/package';

type Role =
  /** installed with the package: what the entries need whatever the buyer brings */
  | 'dependency'
  /**
   * an optional peer: the library the user brings to use the entry (their wallet's Solana library, the x402 or MPP
   * client the entry plugs into), so one copy is shared with their code and a user of svc-gateway/client alone
   * (a browser, a seller's tRPC calls) installs none of it
   */
  | 'peer';

/** Every package the built client imports (JavaScript or declarations), and how the package declares it. */
export const CLIENT_IMPORTS: Readonly<Record<string, Role>> = {
  // svc-gateway/client's runtime; @trpc/server for the router's types (AppRouter) and as @trpc/client's peer
  '@trpc/client': 'dependency',
  '@trpc/server': 'dependency',
  // the wire schemas the buyer kit parses with, and the webhook payload's types
  zod: 'dependency',
  // the buyer kit's RFC 8785 canonical JSON (small, and not something a buyer brings)
  canonicalize: 'dependency',
  // the buyer kit derives the treasury and token accounts it pays (program addresses: sha256 and the ed25519 curve)
  '@noble/curves': 'dependency',
  '@noble/hashes': 'dependency',
  // the buyer kit's signer is a web3.js Keypair or a @solana/kit signer; spl-token builds the transfer
  '@solana/web3.js': 'peer',
  '@solana/spl-token': 'peer',
  '@solana/kit': 'peer',
  // svc-gateway/x402 is a scheme for @x402/core's client, svc-gateway/mpp a method for mppx's
  '@x402/core': 'peer',
  mppx: 'peer',
};

/** The npm package a bare import specifier names (`@solana/kit` for `@solana/kit/x`, `mppx` for `mppx/client`). */
export function packageOf(specifier: string): string {
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]!;
}

/** The packages the built files import, each with the files importing it (node:* are Node's). */
export async function importedPackages(out = path.join(ROOT, OUT_DIR)): Promise<Map<string, string[]>> {
  const found = new Map<string, string[]>();
  for (const file of await readdir(out, { recursive: true })) {
    if (!/\.(js|d\.ts)$/.test(file)) continue;
    for (const s of specifiers(await readFile(path.join(out, file), 'utf8'))) {
      if (s.startsWith('.') || s.startsWith('node:')) continue;
      const name = packageOf(s);
      // a self-reference (a doc comment's `import … from 'svc-gateway/mpp'`) is no dependency
      if (name === 'svc-gateway') continue;
      found.set(name, [...new Set([...(found.get(name) ?? []), file])]);
    }
  }
  return found;
}

interface RootManifest {
  version: string;
  description?: string;
  engines?: Record<string, string>;
  dependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
}

export interface ClientManifest {
  name: 'svc-gateway';
  version: string;
  description: string;
  type: 'module';
  engines?: Record<string, string>;
  exports: Record<string, Record<string, string> | string>;
  files: string[];
  dependencies: Record<string, string>;
  peerDependencies: Record<string, string>;
  peerDependenciesMeta: Record<string, { optional: true }>;
}

/**
 * A peer's range: the root's, except that an exact pin becomes a caret (the root pins @x402/core to the release its
 * interop tests ran; as a peer, an exact version would make npm refuse a user's next patch release).
 */
function peerRange(range: string): string {
  return /^\d+\.\d+\.\d+$/.test(range) ? `^${range}` : range;
}

/** The client package's package.json: built from the root's (version, engines, ranges) and what dist/client imports. */
export function clientManifest(root: RootManifest, imported: ReadonlyMap<string, readonly string[]>, entries: readonly ClientEntry[]): ClientManifest {
  const unknown = [...imported.keys()].filter((name) => !(name in CLIENT_IMPORTS));
  if (unknown.length > 0) throw new Error(`dist/client imports ${unknown.join(', ')}: classify each in CLIENT_IMPORTS (scripts/pack-client.ts)`);
  const manifest: ClientManifest = {
    name: 'svc-gateway',
    version: root.version,
    description: 'Client of the svc-gateway payment gateway: typed tRPC client, buyer kit, webhook verification, x402 and MPP payment methods',
    type: 'module',
    ...(root.engines ? { engines: root.engines } : {}),
    exports: {},
    files: ['dist'],
    dependencies: {},
    peerDependencies: {},
    peerDependenciesMeta: {},
  };
  for (const entry of entries) {
    const { [SOURCE_CONDITION]: _source, ...built } = exportFor(entry);
    manifest.exports[entry.subpath] = built;
  }
  manifest.exports['./package.json'] = './package.json';
  for (const name of [...imported.keys()].sort()) {
    const range = root.dependencies?.[name] ?? root.devDependencies?.[name];
    if (!range) throw new Error(`dist/client imports ${name}, which the root package.json does not list: its range is the one the repository tests`);
    if (CLIENT_IMPORTS[name] === 'dependency') manifest.dependencies[name] = range;
    else {
      manifest.peerDependencies[name] = peerRange(range);
      manifest.peerDependenciesMeta[name] = { optional: true };
    }
  }
  return manifest;
}

/** Which peers an entry needs at run time or for its types, for the package README. */
async function peersOf(entry: ClientEntry, imported: ReadonlyMap<string, readonly string[]>): Promise<string[]> {
  const out = path.join(ROOT, OUT_DIR);
  const reached = new Set<string>();
  const queue = [entry.source.replace(/\.ts$/, '.js'), entry.source.replace(/\.ts$/, '.d.ts')];
  while (queue.length > 0) {
    const file = queue.pop()!;
    if (reached.has(file)) continue;
    reached.add(file);
    for (const s of specifiers(await readFile(path.join(out, file), 'utf8'))) {
      if (s.startsWith('.')) queue.push(path.join(path.dirname(file), file.endsWith('.d.ts') ? s.replace(/\.(ts|js)$/, '.d.ts') : s));
    }
  }
  return [...imported]
    .filter(([name, files]) => CLIENT_IMPORTS[name] === 'peer' && files.some((f) => reached.has(f)))
    .map(([name]) => name)
    .sort();
}

async function packageReadme(manifest: ClientManifest, imported: ReadonlyMap<string, readonly string[]>, entries: readonly ClientEntry[]): Promise<string> {
  const rows: string[] = [];
  for (const entry of entries) {
    const peers = await peersOf(entry, imported);
    rows.push(`| \`svc-gateway${entry.subpath.slice(1)}\` | ${peers.length > 0 ? peers.map((p) => `\`${p}\``).join(', ') : 'nothing more'} |`);
  }
  return [
    '# svc-gateway (client)',
    '',
    `${manifest.description}. ESM with TypeScript declarations; Node ${manifest.engines?.node ?? ''} or a browser bundler (svc-gateway/client).`,
    '',
    'Each entry is importable alone. The Solana libraries and the x402/MPP clients are optional peers: install the ones',
    'the entries you import need, so your code and the package share one copy.',
    '',
    '| entry | also install |',
    '|---|---|',
    ...rows,
    '',
    `Peer ranges: ${Object.entries(manifest.peerDependencies)
      .map(([name, range]) => `\`${name}@${range}\``)
      .join(', ')}.`,
    '',
  ].join('\n');
}

/** Writes dist/package/ from dist/client/ (build it first). */
export async function stageClientPackage(): Promise<{ dir: string; manifest: ClientManifest }> {
  const entries = presentEntries();
  const root = JSON.parse(await readFile(path.join(ROOT, 'package.json'), 'utf8')) as RootManifest;
  const imported = await importedPackages();
  const manifest = clientManifest(root, imported, entries);
  const dir = path.join(ROOT, PACKAGE_DIR);
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir, { recursive: true });
  // Declaration maps point at the TypeScript sources, which the package does not ship; the JavaScript maps embed theirs.
  await cp(path.join(ROOT, OUT_DIR), path.join(dir, OUT_DIR), { recursive: true, filter: (src) => !src.endsWith('.d.ts.map') });
  await writeFile(path.join(dir, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  await writeFile(path.join(dir, 'README.md'), await packageReadme(manifest, imported, entries));
  return { dir, manifest };
}

export interface PackedClient {
  /** absolute path of svc-gateway-<version>.tgz */
  tarball: string;
  manifest: ClientManifest;
  /** bytes of the tarball, and unpacked */
  size: number;
  unpackedSize: number;
  files: string[];
}

/** Builds the client, stages dist/package/ and packs it into `destination` (default: the repository root). */
export async function packClient(options: { destination?: string } = {}): Promise<PackedClient> {
  await buildClient();
  const { dir, manifest } = await stageClientPackage();
  const destination = path.resolve(options.destination ?? ROOT);
  await mkdir(destination, { recursive: true });
  // cwd is the staged package, so npm runs its (absent) scripts, never the root's
  const { stdout } = await run('npm', ['pack', '--json', '--pack-destination', destination], { cwd: dir });
  const [packed] = JSON.parse(stdout) as Array<{ filename: string; size: number; unpackedSize: number; files: Array<{ path: string }> }>;
  if (!packed) throw new Error(`npm pack printed no result: ${stdout}`);
  return {
    tarball: path.join(destination, packed.filename),
    manifest,
    size: packed.size,
    unpackedSize: packed.unpackedSize,
    files: packed.files.map((f) => f.path),
  };
}

const USAGE = 'usage: npm run pack:client [-- --pack-destination DIR]   (default: the repository root)';

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = commandArgs(
    () =>
      parseArgs({ args: process.argv.slice(2), options: { 'pack-destination': { type: 'string' }, help: { type: 'boolean', short: 'h', default: false } } }),
    USAGE,
  );
  if (typeof args === 'number') process.exit(args);
  const packed = await packClient({ destination: args.values['pack-destination'] });
  console.log(
    `${path.relative(process.cwd(), packed.tarball) || packed.tarball}: ${packed.files.length} files, ${packed.size} bytes (${packed.unpackedSize} unpacked)\n` +
      `install it in your project: npm install ${packed.tarball}`,
  );
}
