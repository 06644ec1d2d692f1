import { PublicKey } from '@solana/web3.js';
import { getAssociatedTokenAddressSync } from '@solana/spl-token';
import type { Stable } from '../shared/network.ts';
import { memoize } from '../shared/memo.ts';

export const MPL_CORE_PROGRAM_ID = 'CoREENxT6tW1HoK8ypY1SxRMZTcVPm7R94rH4PZNhX7d';

/** The Metaplex Core asset-signer PDA (seeds ["mpl-core-execute", asset]) that holds an agent's funds. */
export const treasuryOf: (asset: string) => string = memoize((asset) => {
  const [pda] = PublicKey.findProgramAddressSync([Buffer.from('mpl-core-execute'), new PublicKey(asset).toBuffer()], new PublicKey(MPL_CORE_PROGRAM_ID));
  return pda.toBase58();
});

/**
 * Each derivation is a program-address search (an ed25519 on-curve check per bump tried, ~0.2–1 ms); every link read
 * and 402 asks for the same few (agent, mint) pairs again and again (deriving them was a third of a /v1 read's CPU), so they are
 * memoised — the result is a pure function of its inputs.
 */
const ataMemo = memoize((key) => {
  const [owner, mint, tokenProgramId] = key.split(':') as [string, string, string];
  return getAssociatedTokenAddressSync(new PublicKey(mint), new PublicKey(owner), true, new PublicKey(tokenProgramId)).toBase58();
}, 16_384);

/** Associated token account of `owner` for a mint under its token program (off-curve owners allowed: PDAs). */
export function associatedTokenAccount(owner: string, mint: string, tokenProgramId: string): string {
  return ataMemo(`${owner}:${mint}:${tokenProgramId}`);
}

/** The pay_to of an agent for a stable: ATA(treasury PDA, mint, token program). */
export function payToFor(asset: string, stable: Stable): string {
  return associatedTokenAccount(treasuryOf(asset), stable.mint, stable.tokenProgramId);
}
