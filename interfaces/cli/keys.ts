import { parseArgs } from 'node:util';
import { ConfigError, loadConfig } from '../config.ts';
import { openAccess } from '../app.ts';
import { DomainError } from '../../domain/shared/errors.ts';

// npm run keys -- create --network chain-devnet [--admin] [--owner-wallet ADDR] [--label TEXT] [--json]
// Issues an API key out of band and prints it once. Works while the gateway runs (it reuses the running
// embedded PostgreSQL of SVC_DATA_DIR) and while it is stopped (it starts the cluster for the command).

const USAGE = `usage: npm run keys -- create --network chain-devnet|chain-mainnet [--admin] [--owner-wallet ADDR] [--label TEXT] [--json]`;

const ALIASES: Record<string, string> = { devnet: 'chain-devnet', mainnet: 'chain-mainnet', test: 'chain-devnet', live: 'chain-mainnet' };

async function main(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
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
  } catch (e) {
    console.error(`${(e as Error).message}\n${USAGE}`);
    return 2;
  }
  const { values, positionals } = parsed;
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
  const handle = await openAccess(config);
  try {
    const created = await handle.access.issueKey({
      network: network as 'chain-devnet',
      role: values.admin ? 'admin' : 'user',
      owner_wallet: values['owner-wallet'],
      label: values.label,
    });
    if (values.json) {
      console.log(JSON.stringify({ id: created.id, key: created.key, network: created.network, role: created.role }));
    } else {
      console.log(`Created ${created.role} key ${created.id} for ${created.network}.`);
      console.log(`\n  ${created.key}\n`);
      console.log('It is shown only this once: only its SHA-256 is stored.');
    }
    return 0;
  } finally {
    await handle.close();
  }
}

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
