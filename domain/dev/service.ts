import { z } from 'zod';
import { DomainError } from '../shared/errors.ts';
import { Address } from '../shared/address.ts';
import type { Network } from '../shared/network.ts';
import { parseInput } from '../shared/validation.ts';
import type { Faucet } from '../ports/faucet.ts';
import type { Ledger } from '../ports/ledger.ts';

/**
 * Solana's reserved account keys (builtin programs and sysvars): every transaction demotes them to read-only, so
 * no transfer can credit them. Sysvar and program accounts the ledger holds are found by their account instead.
 */
const RESERVED_ACCOUNT_KEYS: ReadonlySet<string> = new Set([
  '11111111111111111111111111111111',
  'AddressLookupTab1e1111111111111111111111111',
  'BPFLoader1111111111111111111111111111111111',
  'BPFLoader2111111111111111111111111111111111',
  'BPFLoaderUpgradeab1e11111111111111111111111',
  'ComputeBudget111111111111111111111111111111',
  'Config1111111111111111111111111111111111111',
  'Ed25519SigVerify111111111111111111111111111',
  'Feature111111111111111111111111111111111111',
  'KeccakSecp256k11111111111111111111111111111',
  'LoaderV411111111111111111111111111111111111',
  'NativeLoader1111111111111111111111111111111',
  'Secp256r1SigVerify1111111111111111111111111',
  'Stake11111111111111111111111111111111111111',
  'StakeConfig11111111111111111111111111111111',
  'Sysvar1111111111111111111111111111111111111',
  'Vote111111111111111111111111111111111111111',
  'ZkE1Gama1Proof11111111111111111111111111111',
  'ZkTokenProof1111111111111111111111111111111',
]);
const SYSVAR_OWNER = 'Sysvar1111111111111111111111111111111111111';

const Decimal = z.string().regex(/^\d{1,20}(\.\d{1,9})?$/, 'a positive decimal such as "1.5"');

export const FaucetInput = z
  .strictObject({
    address: Address.describe('the wallet to fund'),
    sol: Decimal.describe('SOL to airdrop, decimal').optional(),
    token: z.string().min(1).max(44).describe('stable symbol or mint to mint').optional(),
    amount: Decimal.describe('whole units of token to mint').optional(),
  })
  .refine((v) => v.sol !== undefined || v.token !== undefined, { message: 'give sol, or token with amount' })
  .refine((v) => (v.token === undefined) === (v.amount === undefined), { message: 'token and amount go together', path: ['amount'] });
export type FaucetInput = z.input<typeof FaucetInput>;

export const FaucetOutput = z
  .object({
    network: z.string().describe('chain-devnet or chain-mainnet'),
    address: z.string().describe('the funded wallet'),
    airdrop: z
      .object({ signature: z.string().describe('transaction signature'), lamports: z.string().describe('lamports airdropped, decimal string') })
      .nullable()
      .describe('the SOL airdrop; null when none asked'),
    mint: z
      .object({
        signature: z.string().describe('transaction signature'),
        symbol: z.string().nullable().describe('stable symbol; null for another mint'),
        mint: z.string().describe('the token mint'),
        token_account: z.string().describe('the credited token account'),
        amount_atomic: z.string().describe('atomic units minted, decimal string'),
        decimals: z.number().int().describe('the mint’s decimals'),
      })
      .nullable()
      .describe('the token mint; null when none asked'),
  })
  .describe('What the faucet did.');

/** POST /v1/dev/faucet: only where the gateway runs the network's ledger itself (issue "ledger"). */
export class DevService {
  constructor(private readonly deps: { faucet: Faucet | undefined; embedded: ReadonlySet<Network>; ledgers: Partial<Record<Network, Ledger>> }) {}

  async fund(network: Network, input: FaucetInput): Promise<z.infer<typeof FaucetOutput>> {
    if (!this.deps.faucet || !this.deps.embedded.has(network)) {
      throw new DomainError('not_found', `No faucet: the ${network} ledger is not embedded.`);
    }
    const parsed = parseInput(FaucetInput, input);
    await this.refuseUnfundable(network, parsed.address);
    const r = await this.deps.faucet({ network, to: parsed.address, sol: parsed.sol, token: parsed.token, amount: parsed.amount });
    return {
      network,
      address: r.to,
      airdrop: r.airdrop ? { signature: r.airdrop.signature, lamports: r.airdrop.lamports.toString() } : null,
      mint: r.mint
        ? {
            signature: r.mint.signature,
            symbol: r.mint.symbol,
            mint: r.mint.mint,
            token_account: r.mint.tokenAccount,
            amount_atomic: r.mint.amount.toString(),
            decimals: r.mint.decimals,
          }
        : null,
    };
  }

  /** A program or sysvar cannot be credited (the ledger would refuse the transfer): the caller's mistake, said so. */
  private async refuseUnfundable(network: Network, address: string): Promise<void> {
    const account = RESERVED_ACCOUNT_KEYS.has(address) ? null : await this.deps.ledgers[network]?.getAccount(address);
    if (RESERVED_ACCOUNT_KEYS.has(address) || (account && (account.executable || account.owner === SYSVAR_OWNER))) {
      const message = `${address} is a program or sysvar account; the faucet funds wallets and other accounts`;
      throw DomainError.invalid([{ path: 'address', message, code: 'unfundable_account' }], message);
    }
  }
}
