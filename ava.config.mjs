// AVA's configuration (a module, not package.json, for `sortTestFiles` and the build below).

import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { bundlePrograms, bundleTests } from './test/support/bundle-tests.mjs';

/**
 * The slowest files first (longest first, measured on the idle 2-core machine; rough order is enough): AVA runs two
 * files at a time, so a slow file started last leaves one core idle while it finishes. The rest run in name order.
 */
const SLOWEST_FIRST = [
  'test/readme.test.ts',
  'test/demo.test.ts',
  'test/fresh-start.test.ts',
  'test/examples.test.ts',
  'test/interfaces/mcp.test.ts',
  'test/interfaces/pages.test.ts',
  'test/interfaces/explorer.test.ts',
  'test/interfaces/paywall-page.test.ts',
  'test/interfaces/client-package.test.ts',
  'test/interfaces/query-plans.test.ts',
  'test/faults/crash.test.ts',
  'test/adapters/ledger-programs.test.ts',
  'test/interfaces/paywall.test.ts',
  'test/interfaces/identity-cards.test.ts',
  'test/interfaces/rate-limit.test.ts',
  'test/adapters/ledger-embedded.test.ts',
  'test/interfaces/agent-lifecycle.test.ts',
  'test/jobs/maintenance.test.ts',
  'test/interfaces/fanout.test.ts',
  'test/faults/webhooks.test.ts',
  'test/jobs/pull-worker.test.ts',
  'test/faults/indexer.test.ts',
  'test/adapters/ledger-thread.test.ts',
  'test/interfaces/fuzz.test.ts',
];

const rank = (file) => {
  const name = file.replaceAll('\\', '/').replace(/\.mjs$/, '.ts');
  const i = SLOWEST_FIRST.findIndex((slow) => name.endsWith(slow));
  return i === -1 ? SLOWEST_FIRST.length : i;
};

const ROOT = fileURLToPath(new URL('.', import.meta.url));

/** Every test file under test/ (fixtures aside), relative to the repository */
function testFiles(dir = 'test') {
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
    const path = `${dir}/${entry.name}`;
    if (entry.isDirectory()) return entry.name === 'fixtures' ? [] : testFiles(path);
    return entry.name.endsWith('.test.ts') ? [path] : [];
  });
}

/** `npx ava test/x.test.ts` (or any path or glob) names files; `npm test` names none */
const namesFiles = process.argv.slice(2).some((arg) => !arg.startsWith('-') && /[/*]|\.ts$/.test(arg));

const common = {
  workerThreads: false,
  timeout: '2m',
  sortTestFiles: (a, b) => rank(a) - rank(b) || a.localeCompare(b, [], { numeric: true }),
};

export default async () => {
  if (namesFiles) {
    return {
      ...common,
      files: ['test/**/*.test.ts'],
      extensions: { ts: 'module' },
      // TypeScript through test/support/ts-hooks.mjs (esbuild, cached), not tsx: ~1 s less CPU per test file
      // `svc-gateway-source`: the package's own entries (svc-gateway/client, /x402, /mpp) resolve to their TypeScript source
      nodeArguments: ['--import=./test/support/ts-register.mjs', '--conditions=svc-gateway-source'],
    };
  }
  // The whole suite: built once into plain JavaScript (test/support/bundle-tests.mjs says why), run without hooks.
  // Processes the tests start (npm scripts, CLIs) run as a user's do, through scripts/run.mjs, whose bundles are made
  // ready beside it.
  await Promise.all([bundleTests(ROOT, testFiles()), bundlePrograms(ROOT)]);
  return {
    ...common,
    files: ['.test-build/test/**/*.test.mjs'],
    nodeArguments: ['--conditions=svc-gateway-source'],
    environmentVariables: { SVC_TEST_BUNDLED: '1' },
  };
};
