import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { ConfigError, loadConfig, type Config } from '../config.ts';
import { openAccess, rotateSigningKeysCommand } from '../core.ts';
import { dataDirOf, findGateway, type GatewayLookup } from '../announce.ts';
import { DomainError } from '../../domain/shared/errors.ts';
import type { Network } from '../../domain/shared/network.ts';

// npm run keys -- create --network chain-devnet [--admin] [--owner-wallet ADDR] [--label TEXT] [--json]
// Issues an API key out of band and prints it once. Works while the gateway runs (it reuses the running
// embedded PostgreSQL of SVC_DATA_DIR) and while it is stopped (it starts the cluster for the command).

const USAGE = `usage: npm run keys -- create --network chain-devnet|chain-mainnet [--admin] [--owner-wallet ADDR] [--label TEXT] [--json]
       npm run keys -- rotate-signing   (a new offer-receipt signing key; the old one stays published 30 days)`;

const ALIASES: Record<string, string> = { devnet: 'chain-devnet', mainnet: 'chain-mainnet', test: 'chain-devnet', live: 'chain-mainnet' };

export interface IssuedKey {
  id: string;
  key: string;
  network: Network;
  role: 'user' | 'admin';
}

/**
 * Issues a key on the database of `config` (the embedded cluster of its data directory, or DATABASE_URL), running
 * gateway or not. npm run demo issues its key through here too.
 */
export async function issueKeyOutOfBand(
  config: Config,
  input: { network: Network; role: 'user' | 'admin'; owner_wallet?: string | undefined; label?: string | undefined },
): Promise<IssuedKey> {
  const handle = await openAccess(config);
  try {
    const created = await handle.access.issueKey(input);
    return { id: created.id, key: created.key, network: created.network, role: created.role };
  } finally {
    await handle.close();
  }
}

/** Which data directory a command used and whether a gateway serves it: a key issued on one directory is unknown to a gateway on another. */
export async function whereKeysGo(
  env: Record<string, string | undefined> = process.env,
): Promise<{ dataDir: string; source: 'SVC_DATA_DIR' | 'default'; lookup: GatewayLookup; lines: string[] }> {
  const { dir, source } = dataDirOf(env);
  const lookup = await findGateway(dir);
  const lines = [
    `data directory: ${dir} (${source === 'SVC_DATA_DIR' ? 'from SVC_DATA_DIR' : 'the default .data; set SVC_DATA_DIR for another'})${env.DATABASE_URL ? '; database: DATABASE_URL' : ''}`,
    lookup.state === 'running'
      ? `gateway: running on this data directory at ${lookup.gateway.url} (pid ${lookup.gateway.pid})`
      : `gateway: none running on this data directory${lookup.state === 'stale' ? ` (${lookup.file} names pid ${lookup.gateway.pid}, which has exited)` : ''}; ` +
        'a gateway started with another SVC_DATA_DIR does not know keys issued here (it answers invalid_api_key)',
  ];
  return { dataDir: dir, source, lookup, lines };
}

function parseCli(args: string[]) {
  return parseArgs({
    args,
    allowPositionals: true,
    options: {
      network: { type: 'string' },
      admin: { type: 'boolean', default: false },
      'owner-wallet': { type: 'string' },
      label: { type: 'string' },
      json: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
}

async function main(argv: string[]): Promise<number> {
  let parsed: ReturnType<typeof parseCli>;
  try {
    parsed = parseCli(argv);
  } catch (e) {
    console.error(`${(e as Error).message}\n${USAGE}`);
    return 2;
  }
  const { values, positionals } = parsed;
  if (positionals[0] === 'rotate-signing' && positionals.length === 1) {
    const rotated = await rotateSigningKeysCommand(loadConfig(), new Date());
    console.log(`A new signing key ${rotated.id} is in ${rotated.file}; restart the gateway (every instance) to sign with it.`);
    return 0;
  }
  if (values.help || positionals[0] !== 'create' || positionals.length !== 1) {
    console.error(USAGE);
    return values.help ? 0 : 2;
  }
  if (!values.network) {
    console.error(`--network is required\n${USAGE}`);
    return 2;
  }
  const network = ALIASES[values.network] ?? values.network;

  const config = loadConfig();
  const where = await whereKeysGo();
  const created = await issueKeyOutOfBand(config, {
    network: network as Network,
    role: values.admin ? 'admin' : 'user',
    owner_wallet: values['owner-wallet'],
    label: values.label,
  });
  // Where the key went goes to stderr, so --json keeps one JSON line on stdout (which carries the same facts).
  console.error(where.lines.join('\n'));
  if (values.json) {
    const gateway = where.lookup.state === 'running' ? where.lookup.gateway.url : null;
    console.log(JSON.stringify({ ...created, data_dir: where.dataDir, data_dir_source: where.source, gateway_url: gateway }));
  } else {
    console.log(`Created ${created.role} key ${created.id} for ${created.network}.`);
    console.log(`\n  ${created.key}\n`);
    console.log('It is shown only this once: only its SHA-256 is stored.');
  }
  return 0;
}

// Run as a command only: npm run demo imports issueKeyOutOfBand from here.
if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href)
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (e) => {
      if (e instanceof DomainError) {
        const issues = (e.details?.issues as { path: string; message: string }[] | undefined) ?? [];
        console.error(`${e.message}${issues.map((i) => `\n  ${i.path}: ${i.message}`).join('')}`);
      } else if (e instanceof ConfigError) console.error(e.message);
      else console.error('keys failed:', e instanceof Error ? e.message : e);
      process.exit(1);
    },
  );
