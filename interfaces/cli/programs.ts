import { parseArgs } from 'node:util';
import { commandArgs } from './command-args.ts';
import { loadConfigOrExit } from '../config.ts';
import { programsCopyCommand } from '../core.ts';
import { WELL_KNOWN_PROGRAMS } from '../../domain/ledger/programs.ts';
import { NETWORKS } from '../../domain/shared/network.ts';

// npm run programs [-- --from URL] [--data-dir DIR] [--program NAME ...]
// Copies the programs the gateway's transactions call (Metaplex Core and the two Agent Registry programs) from a Solana
// JSON-RPC — Solana's public devnet by default — into the data directory's program cache, which every start of both
// embedded networks loads (SVC_LEDGER_CLONE_URL does the same at start, once). A default start has no Metaplex Core:
// agents/prepare answers program_unavailable naming this command.

/** Solana's public devnet JSON-RPC: the deployed Core and Agent Registry programs are there */
const DEFAULT_SOURCE = 'https://api.devnet.solana.com';
const NAMES = WELL_KNOWN_PROGRAMS.map((p) => p.name);
const USAGE = `usage: npm run programs [-- --from URL] [--data-dir DIR] [--program ${NAMES.join('|')} ...]
  --from URL      a Solana JSON-RPC to copy from (default ${DEFAULT_SOURCE})
  --data-dir DIR  the gateway's data directory (default SVC_DATA_DIR, else .data)
  --program NAME  only this program (name or id; repeatable); default all three`;

function parseCli(args: string[]) {
  return parseArgs({
    args,
    options: {
      from: { type: 'string', default: DEFAULT_SOURCE },
      'data-dir': { type: 'string' },
      program: { type: 'string', multiple: true },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
}

async function main(argv: string[]): Promise<number> {
  const parsed = commandArgs(() => parseCli(argv), USAGE);
  if (typeof parsed === 'number') return parsed;
  const { values } = parsed;
  let source: URL;
  try {
    source = new URL(values.from);
    if (source.protocol !== 'http:' && source.protocol !== 'https:') throw new Error('not http(s)');
  } catch {
    console.error(`--from must be the http(s) URL of a Solana JSON-RPC\n${USAGE}`); // never echoed: it may hold a key
    return 2;
  }
  const unknown = (values.program ?? []).filter((p) => !WELL_KNOWN_PROGRAMS.some((w) => w.id === p || w.name === p));
  if (unknown.length) {
    console.error(`unknown program ${unknown.join(', ')}: the programs are ${NAMES.join(', ')}\n${USAGE}`);
    return 2;
  }
  const dataDir = values['data-dir'] ?? loadConfigOrExit().dataDir;
  const result = await programsCopyCommand({ dataDir, from: source.href, only: values.program });

  if (result.unreachable !== null) {
    console.error(`Cannot reach a Solana JSON-RPC at ${result.from}: ${result.unreachable}. Nothing was copied.`);
    console.error('Check the address and the network connection, or name another Solana JSON-RPC with --from URL.');
    return 1;
  }
  console.log(`From ${result.from} into ${result.cacheDir}:`);
  for (const p of result.copied) console.log(`  copied   ${p.name} (${p.id}), ${p.bytes.toLocaleString('en-US')} bytes → ${p.path}`);
  for (const p of result.missing) console.log(`  missing  ${p.name ?? p.id} (${p.id}): ${p.reason}`);
  if (result.copied.length) {
    const running = NETWORKS.filter((n) => result.holders[n] !== undefined);
    console.log(
      running.length
        ? `A gateway is running on ${dataDir} (process ${[...new Set(running.map((n) => result.holders[n]))].join(', ')} holds the ${running.join(' and ')} ledger): restart it (stop it, then npm start) to load them.`
        : `No gateway is running on ${dataDir}: the next npm start loads them on both embedded networks (chain-devnet and chain-mainnet), and every start after.`,
    );
  }
  if (result.missing.length) {
    console.error(
      `${result.missing.length} of ${result.copied.length + result.missing.length} programs were not copied: ${result.missing.map((p) => p.name ?? p.id).join(', ')}.`,
    );
    return 1;
  }
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (e: unknown) => {
    console.error(`npm run programs failed: ${e instanceof Error ? e.message : String(e)}`);
    process.exit(1);
  },
);
