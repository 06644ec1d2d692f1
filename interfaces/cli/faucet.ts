import { parseArgs } from 'node:util';
import { commandArgs } from './command-args.ts';
import { ConfigError, loadConfig } from '../config.ts';
import { faucetCommand as runFaucet } from '../core.ts';
import { DomainError } from '../../domain/shared/errors.ts';
import { atomicToDecimal, SOL_DECIMALS } from '../../domain/shared/money.ts';
import { NETWORKS, type Network } from '../../domain/shared/network.ts';

// npm run faucet -- --network chain-devnet --to ADDR [--sol 1] [--token USDC --amount 10] [--json]
// Funds a wallet on the embedded ledger of SVC_DATA_DIR. While the gateway runs, the request goes through its
// ledger's JSON-RPC (the running process stays the only writer); while it is stopped, the ledger files are opened
// here under the same lock.

const USAGE = 'usage: npm run faucet -- --network chain-devnet|chain-mainnet --to ADDRESS [--sol 1] [--token USDC --amount 10] [--json]';
const ALIASES: Record<string, Network> = { devnet: 'chain-devnet', mainnet: 'chain-mainnet' };

function parseCli(args: string[]) {
  return parseArgs({
    args,
    options: {
      network: { type: 'string' },
      to: { type: 'string' },
      sol: { type: 'string' },
      token: { type: 'string' },
      amount: { type: 'string' },
      json: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
}

async function main(argv: string[]): Promise<number> {
  const parsed = commandArgs(() => parseCli(argv), USAGE);
  if (typeof parsed === 'number') return parsed;
  const { values } = parsed;
  const network = (values.network && (ALIASES[values.network] ?? values.network)) as Network | undefined;
  if (!network || !(NETWORKS as readonly string[]).includes(network) || !values.to) {
    console.error(USAGE);
    return 2;
  }
  const { dataDir, ledgers } = loadConfig();
  const result = await runFaucet(
    { dataDir, programsDir: ledgers.programsDir, cloneUrl: ledgers.cloneUrl },
    { network, to: values.to, sol: values.sol, token: values.token, amount: values.amount },
  );
  if (values.json) {
    console.log(JSON.stringify(result, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v)));
    return 0;
  }
  if (result.airdrop)
    console.log(`Airdropped ${atomicToDecimal(result.airdrop.lamports, SOL_DECIMALS)} SOL to ${result.to} on ${network}: ${result.airdrop.signature}`);
  if (result.mint) {
    console.log(
      `Minted ${atomicToDecimal(result.mint.amount, result.mint.decimals)} ${result.mint.symbol ?? result.mint.mint} to ${result.to} (token account ${result.mint.tokenAccount}): ${result.mint.signature}`,
    );
  }
  console.log(`(via ${result.via})`);
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (e) => {
    if (e instanceof DomainError) {
      const issues = (e.details?.issues as { path: string; message: string }[] | undefined) ?? [];
      console.error(`${e.message}${issues.length > 1 ? issues.map((i) => `\n  ${i.path}: ${i.message}`).join('') : ''}`);
    } else if (e instanceof ConfigError) console.error(e.message);
    else console.error('faucet failed:', e instanceof Error ? e.message : e);
    process.exit(1);
  },
);
