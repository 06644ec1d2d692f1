// Runs one of the repository's TypeScript entries (`node scripts/run.mjs interfaces/main.ts [arguments]`): the npm
// scripts start the gateway, the jobs and every command through it, from the entry's bundle (scripts/bundle-cache.mjs:
// the entry with the sources and packages it imports, cached and rebuilt when one of them changes).

import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { bundleOf } from './bundle-cache.mjs';

const [given, ...args] = process.argv.slice(2);
if (!given) {
  console.error('usage: node scripts/run.mjs <entry.ts> [arguments]');
  process.exit(2);
}
const entry = path.resolve(given);
const bundle = await bundleOf(entry);
// The entry sees the command line it would see run directly: argv[1] is its own path (an entry checks it to know it is
// the main module), then its arguments.
process.argv = [process.argv[0], entry, ...args];
// Stack traces name TypeScript lines, through the bundle's source map.
process.setSourceMapsEnabled(true);
await import(pathToFileURL(bundle).href);
