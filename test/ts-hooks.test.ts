import test from 'ava';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

// Test workers of named files load TypeScript through test/support/ts-hooks.mjs (ava.config.mjs), not tsx; the whole
// suite runs prebuilt JavaScript with no hooks (test/support/bundle-tests.mjs). These check which one this worker runs,
// that ts-hooks compiles the way tsconfig.json says and that an edited file is never served from the cache in its old form.

const run = promisify(execFile);
const REGISTER = fileURLToPath(new URL('./support/ts-register.mjs', import.meta.url));

test('this worker runs under ts-hooks, or with no hooks when the suite is prebuilt; never tsx', (t) => {
  const bundled = process.env.SVC_TEST_BUNDLED === '1';
  t.is(
    process.execArgv.some((a) => a.includes('ts-register.mjs')),
    !bundled,
  );
  t.false(process.execArgv.some((a) => /(^|=)tsx$/.test(a)));
});

test('ts-hooks strips types as tsconfig says (imports kept as written, class fields defined) and re-reads an edited file', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'svc-ts-hooks-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  await writeFile(
    join(dir, 'side.ts'),
    "(globalThis as { loaded?: string[] }).loaded = ['side'];\nexport interface Shape { n: number }\nexport const unused = 1;\n",
  );
  const main = (n: number) =>
    [
      "import { type Shape, unused } from './side.ts';", // verbatimModuleSyntax: the value import (and its side effect) stays
      // biome-ignore lint/suspicious/noTemplateCurlyInString: this is source text for the compiler; the template literal is in it
      'class Base { set value(v: number) { throw new Error(`setter called with ${v}`); } }',
      `class Derived extends Base { value: number = ${n}; }`, // useDefineForClassFields: defined, the setter not called
      `const shape: Shape = { n: new Derived().value };`,
      'console.log(JSON.stringify({ n: shape.n, loaded: (globalThis as { loaded?: string[] }).loaded }));',
    ].join('\n');
  await writeFile(join(dir, 'main.ts'), main(1));
  const first = await run(process.execPath, ['--import', REGISTER, join(dir, 'main.ts')]);
  t.deepEqual(JSON.parse(first.stdout), { n: 1, loaded: ['side'] });
  await writeFile(join(dir, 'main.ts'), main(2));
  const second = await run(process.execPath, ['--import', REGISTER, join(dir, 'main.ts')]);
  t.deepEqual(JSON.parse(second.stdout), { n: 2, loaded: ['side'] });
});
