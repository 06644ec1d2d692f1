import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { transformSync, version } from 'esbuild';

// Module hooks the test workers load TypeScript with (registered by ts-register.mjs, AVA's nodeArguments): each
// `.ts` file is stripped of its types by esbuild, cached on disk by content; every other module is left to Node. tsx
// (npm scripts, spawned processes) does the same and more — path mapping, `.js`→`.ts` resolution, CommonJS hooks —
// at ~1 s of CPU per test process for its hooks on the ~3,000 modules a test app loads; the sources here import
// with explicit `.ts` extensions and are all ES modules, so none of that is needed.

const OPTIONS = {
  loader: 'ts',
  format: 'esm',
  target: 'node20',
  sourcemap: 'inline',
  // tsconfig.json: verbatimModuleSyntax (imports kept as written), target ES2022 (define semantics for class fields)
  tsconfigRaw: { compilerOptions: { verbatimModuleSyntax: true, useDefineForClassFields: true } },
};
const CACHE = join(tmpdir(), `svc-gateway-ts-cache-${process.getuid?.() ?? 'user'}`);
const KEY = `${version}:${JSON.stringify(OPTIONS)}`;
// the cache holds code the tests run: only a directory of this user's that nobody else may write to is trusted
mkdirSync(CACHE, { recursive: true, mode: 0o700 });
const owned = statSync(CACHE);
const TRUSTED = owned.isDirectory() && (!process.getuid || owned.uid === process.getuid()) && (owned.mode & 0o022) === 0;

export async function load(url, context, nextLoad) {
  if (!url.startsWith('file:') || !/\.[cm]?ts$/.test(new URL(url).pathname)) return nextLoad(url, context);
  const path = fileURLToPath(url);
  const source = readFileSync(path, 'utf8');
  const cached = join(CACHE, `${createHash('sha256').update(KEY).update('\0').update(path).update('\0').update(source).digest('hex')}.mjs`);
  let code;
  try {
    if (!TRUSTED) throw new Error('untrusted cache');
    code = readFileSync(cached, 'utf8');
  } catch {
    code = transformSync(source, { ...OPTIONS, sourcefile: path }).code;
    if (!TRUSTED) return { format: 'module', source: code, shortCircuit: true };
    const temporary = `${cached}.${process.pid}.${Math.random().toString(36).slice(2)}`;
    writeFileSync(temporary, code);
    renameSync(temporary, cached);
  }
  return { format: 'module', source: code, shortCircuit: true };
}
