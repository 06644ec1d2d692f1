import { memoize } from '../shared/memo.ts';
import { associatedTokenAccount } from '../treasury/derive.ts';

// A verify needs three or four program-address searches, mostly for the same few owners (the facilitator, the fee
// authority, repeat sellers): memoised.

const cached = memoize((key) => {
  const [owner, mint, tokenProgram] = key.split(':') as [string, string, string];
  return associatedTokenAccount(owner, mint, tokenProgram);
}, 1024);

/** ATA(owner, mint, tokenProgram), off-curve owners allowed; same result as treasury/derive's associatedTokenAccount. */
export function ataOf(owner: string, mint: string, tokenProgram: string): string {
  return cached(`${owner}:${mint}:${tokenProgram}`);
}
