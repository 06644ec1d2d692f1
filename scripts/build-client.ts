import { readFile, rm, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { build } from 'esbuild';

// `npm run build:client`: the client entries built into dist/client/ (`npm run pack:client` packs them: scripts/pack-client.ts). Declarations (.d.ts + maps) come
// from tsc with tsconfig.client.json; the JavaScript from esbuild, one ESM bundle per entry with the npm dependencies
// left as imports and the code two entries share in a common chunk (so `PaymentError` is one class for
// svc-gateway/client/pay and svc-gateway/x402). package.json `exports` name each entry: `types` and `default` point
// here, and the `svc-gateway-source` condition (set by this repository's tsconfig and test runner only) at the source.
// test/interfaces/client-package.test.ts holds package.json to this list.

export interface ClientEntry {
  /** the subpath of package.json `exports` */
  subpath: string;
  /** the source file, relative to the repository root */
  source: string;
  /** must bundle for a browser: no node:* module and no web3.js in its import graph (tested) */
  browser?: boolean;
}

/** The one list of the package's entries. */
export const CLIENT_ENTRIES: readonly ClientEntry[] = [
  { subpath: './client', source: 'interfaces/client/index.ts', browser: true },
  { subpath: './client/pay', source: 'interfaces/client/paying-fetch.ts' },
  { subpath: './client/webhooks', source: 'interfaces/client/webhooks.ts' },
  { subpath: './x402', source: 'interfaces/x402/index.ts' },
  { subpath: './mpp', source: 'interfaces/mpp/index.ts' },
];

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const OUT_DIR = 'dist/client';
export const SOURCE_CONDITION = 'svc-gateway-source';

/** The entries whose source exists in this checkout. */
export function presentEntries(root = ROOT): ClientEntry[] {
  return CLIENT_ENTRIES.filter((e) => existsSync(path.join(root, e.source)));
}

/** What package.json `exports` must say for an entry. */
export function exportFor(entry: ClientEntry): Record<string, string> {
  const base = `./${OUT_DIR}/${entry.source.replace(/\.ts$/, '')}`;
  return { [SOURCE_CONDITION]: `./${entry.source}`, types: `${base}.d.ts`, default: `${base}.js` };
}

/**
 * Emits the declarations the entries reach, one source file at a time from the entries along the declarations'
 * relative imports (the router's after its cut, below), instead of one per file of the program: the router's program
 * holds the whole server, whose declarations no client reads (emitting them all cost about a quarter of the build's
 * CPU time). Returns the number of declaration files.
 */
async function declarations(entries: ClientEntry[], out: string): Promise<number> {
  const configPath = path.join(ROOT, 'tsconfig.client.json');
  const config = ts.getParsedCommandLineOfConfigFile(
    configPath,
    {},
    {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic: (d) => {
        throw new Error(ts.flattenDiagnosticMessageText(d.messageText, '\n'));
      },
    },
  );
  if (!config) throw new Error('tsconfig.client.json could not be read');
  const program = ts.createProgram({
    rootNames: entries.map((e) => path.join(ROOT, e.source)),
    options: config.options,
  });
  // Declaration emit checks what it prints; the whole program's semantic check is `npm run typecheck`'s (CI runs it),
  // so it is not repeated here (it would double the build's time).
  const diagnostics = [...program.getOptionsDiagnostics(), ...program.getSyntacticDiagnostics()];
  const emitted = new Set<string>();
  const queue = entries.map((e) => e.source);
  while (queue.length > 0) {
    const source = queue.pop()!;
    if (emitted.has(source)) continue;
    emitted.add(source);
    const file = program.getSourceFile(path.join(ROOT, source));
    if (!file) throw new Error(`${source} is not in the declarations' program`);
    diagnostics.push(...program.emit(file, undefined, undefined, true).diagnostics);
    const declaration = path.join(out, source.replace(/\.ts$/, '.d.ts'));
    if (source === ROUTER_SOURCE) await cutRouterDeclaration(declaration);
    for (const s of specifiers(await readFile(declaration, 'utf8'))) {
      if (s.startsWith('.')) queue.push(path.join(path.dirname(source), s.replace(/\.(ts|js)$/, '.ts')));
    }
  }
  if (diagnostics.length > 0) {
    const host: ts.FormatDiagnosticsHost = { getCanonicalFileName: (f) => f, getCurrentDirectory: () => ROOT, getNewLine: () => '\n' };
    throw new Error(`declarations failed:\n${ts.formatDiagnostics(diagnostics, host)}`);
  }
  return emitted.size;
}

/**
 * The router's declaration carries the server's request context (`ctx`: every service, adapter and their libraries)
 * and the procedures' REST/OpenAPI meta: a client needs neither, and either would drag the whole server's
 * declarations (and MikroORM's, Fastify's, trpc-to-openapi's …) into a consumer's type-check. Everything else in it
 * is already structural (tsc expands the zod-inferred inputs and outputs), so these two cuts leave a router type
 * that imports @trpc/server only; the build fails if it imports anything else.
 */
const ROUTER_SOURCE = 'interfaces/trpc/router.ts';
const ROUTER_CUTS: ReadonlyArray<readonly [string, string]> = [
  ['import("./context.ts").Context', 'object'],
  ['import("./init.ts").Meta', 'object'],
];

const SPECIFIER = /(?:\bfrom\s*|\bimport\s*\(\s*|^\s*import\s+)['"]([^'"]+)['"]/gm;

/** The module specifiers a JavaScript or declaration file imports. */
export function specifiers(text: string): string[] {
  return [...text.matchAll(SPECIFIER)].map((m) => m[1]!);
}

async function cutRouterDeclaration(file: string): Promise<void> {
  let text = await readFile(file, 'utf8');
  for (const [from, to] of ROUTER_CUTS) text = text.split(from).join(to);
  const left = specifiers(text).filter((s) => s !== '@trpc/server');
  if (left.length > 0)
    throw new Error(`${ROUTER_SOURCE.replace(/\.ts$/, '.d.ts')} still imports ${[...new Set(left)].join(', ')}: cut it in scripts/build-client.ts`);
  await writeFile(file, text);
}

async function javascript(entries: ClientEntry[]): Promise<void> {
  await build({
    absWorkingDir: ROOT,
    entryPoints: entries.map((e) => e.source),
    outdir: OUT_DIR,
    outbase: '.',
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'neutral',
    target: 'es2022',
    packages: 'external',
    // node:* stays an import (the buyer kit draws random bytes from node:crypto); the browser entry has none (tested)
    external: ['node:*'],
    chunkNames: 'chunks/[name]-[hash]',
    sourcemap: 'linked',
    logLevel: 'warning',
  });
}

export async function buildClient(): Promise<{ entries: ClientEntry[]; declarationFiles: number; ms: number }> {
  const started = performance.now();
  const entries = presentEntries();
  await rm(path.join(ROOT, OUT_DIR), { recursive: true, force: true });
  const out = path.join(ROOT, OUT_DIR);
  const declarationFiles = await declarations(entries, out);
  await javascript(entries);
  return { entries, declarationFiles, ms: Math.round(performance.now() - started) };
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const { entries, declarationFiles, ms } = await buildClient();
  console.log(`${OUT_DIR}: ${entries.map((e) => `svc-gateway${e.subpath.slice(1)}`).join(', ')} (${declarationFiles} declaration files) in ${ms} ms`);
}
