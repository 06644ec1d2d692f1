import { associatedTokenAccount } from '../treasury/derive.ts';

// A program-address search costs about a millisecond; a verify needs three or four of them, mostly for the same
// few owners (the facilitator, the fee authority, repeat sellers). Memoising a pure function keeps verify cheap.

const MAX_ENTRIES = 1024;
const cache = new Map<string, string>();

/** ATA(owner, mint, tokenProgram), off-curve owners allowed; same result as treasury/derive's associatedTokenAccount. */
export function ataOf(owner: string, mint: string, tokenProgram: string): string {
  const key = `${owner}:${mint}:${tokenProgram}`;
  const hit = cache.get(key);
  if (hit !== undefined) {
    // Refresh recency: Map iteration order is insertion order, so the oldest entry is the first.
    cache.delete(key);
    cache.set(key, hit);
    return hit;
  }
  const address = associatedTokenAccount(owner, mint, tokenProgram);
  if (cache.size >= MAX_ENTRIES) cache.delete(cache.keys().next().value!);
  cache.set(key, address);
  return address;
}
