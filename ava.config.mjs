// AVA's configuration (a module, not package.json, for `sortTestFiles`).

/**
 * The slowest files first (longest first, measured on the idle 2-core machine; rough order is enough): AVA runs two
 * files at a time, so a slow file started last leaves one core idle while it finishes. The rest run in name order.
 */
const SLOWEST_FIRST = [
  'test/fresh-start.test.ts',
  'test/interfaces/mcp.test.ts',
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
  const i = SLOWEST_FIRST.findIndex((slow) => file.replaceAll('\\', '/').endsWith(slow));
  return i === -1 ? SLOWEST_FIRST.length : i;
};

export default {
  files: ['test/**/*.test.ts'],
  extensions: { ts: 'module' },
  // TypeScript through test/support/ts-hooks.mjs (esbuild, cached), not tsx: ~1 s less CPU per test file
  // `svc-gateway-source`: the package's own entries (svc-gateway/client, /x402, /mpp) resolve to their TypeScript source
  nodeArguments: ['--import=./test/support/ts-register.mjs', '--conditions=svc-gateway-source'],
  workerThreads: false,
  timeout: '2m',
  sortTestFiles: (a, b) => rank(a) - rank(b) || a.localeCompare(b, [], { numeric: true }),
};
