import { z } from 'zod';
import { PublicKey } from '@solana/web3.js';

/** A base58 Solana address of 32 bytes. */
export const Address = z
  .string()
  .min(32)
  .max(44)
  .refine((s) => isAddress(s), { message: 'Expected a base58 Solana address (32 bytes)' });

export function isAddress(s: string): boolean {
  if (!/^[1-9A-HJ-NP-Za-km-z]{32,44}$/.test(s)) return false;
  try {
    return new PublicKey(s).toBytes().length === 32;
  } catch {
    return false;
  }
}
