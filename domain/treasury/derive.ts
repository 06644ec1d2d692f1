import type { Stable } from '../shared/chains.ts';
import { memoize } from '../shared/memo.ts';
import { addressBytes, findProgramAddress } from '../shared/program-address.ts';
import { ASSOCIATED_TOKEN_PROGRAM_ID } from '../shared/program-ids.ts';

export const MPL_CORE_PROGRAM_ID = 'CoREENxT6tW1HoK8ypY1SxRMZTcVPm7R94rH4PZNhX7d';

/** The Metaplex Core asset-signer PDA (seeds ["mpl-core-execute", asset]) that holds an agent's funds. */
export const treasuryOf: (asset: string) => string = memoize((asset) => {
  return findProgramAddress([Buffer.from('mpl-core-execute'), addressBytes(asset)], MPL_CORE_PROGRAM_ID).address;
});

/**
 * Each derivation is a program-address search (an ed25519 on-curve check per bump tried, ~0.2–1 ms); every link read
 * and 402 asks for the same few (agent, mint) pairs again and again (deriving them was a third of a /v1 read's CPU), so they are
 * memoised — the result is a pure function of its inputs.
 */
const ataMemo = memoize((key) => {
  const [owner, mint, tokenProgramId] = key.split(':') as [string, string, string];
  // the associated token program's seeds: [owner, token program, mint]
  return findProgramAddress([addressBytes(owner), addressBytes(tokenProgramId), addressBytes(mint)], ASSOCIATED_TOKEN_PROGRAM_ID).address;
}, 16_384);

/** Associated token account of `owner` for a mint under its token program (off-curve owners allowed: PDAs). */
export function associatedTokenAccount(owner: string, mint: string, tokenProgramId: string): string {
  return ataMemo(`${owner}:${mint}:${tokenProgramId}`);
}

/** The pay_to of an agent for a stable: ATA(treasury PDA, mint, token program). */
export function payToFor(asset: string, stable: Stable): string {
  return associatedTokenAccount(treasuryOf(asset), stable.mint, stable.tokenProgramId);
}
