import { ed25519 } from '@noble/curves/ed25519';
import { sha256 } from '@noble/hashes/sha2';
import { decodeAddress, encodeBase58 } from './base58.ts';

// Solana program-derived addresses (the runtime's `find_program_address`): sha256(seeds ‖ bump ‖ program id ‖
// "ProgramDerivedAddress"), the first bump from 255 down whose hash is NOT an ed25519 point. Written here, on the
// curve and hash library web3.js itself uses, so the embedded ledger's thread (its faucet derives token accounts)
// loads neither web3.js nor spl-token, and the buyer kit (svc-gateway/client/pay) stays free of Node's modules.

const PDA_MARKER = new TextEncoder().encode('ProgramDerivedAddress');
const MAX_SEED_LENGTH = 32;

/** True when the 32 bytes decode to a point of the ed25519 curve (an address a private key may sign for). */
export function isOnCurve(bytes: Uint8Array): boolean {
  try {
    ed25519.ExtendedPoint.fromHex(bytes);
    return true;
  } catch {
    return false;
  }
}

/** The 32 bytes of `address` (base58), throwing for anything else: the derivations below take addresses, not text. */
export function addressBytes(address: string): Uint8Array {
  const bytes = decodeAddress(address);
  if (!bytes) throw new TypeError(`not an address: ${address}`);
  return bytes;
}

/** The program address of `seeds` under `programId` and its bump (throws when no bump gives one, as the runtime does). */
export function findProgramAddress(seeds: readonly Uint8Array[], programId: string): { address: string; bump: number } {
  for (const seed of seeds) if (seed.length > MAX_SEED_LENGTH) throw new TypeError(`a seed is at most ${MAX_SEED_LENGTH} bytes`);
  const program = addressBytes(programId);
  for (let bump = 255; bump >= 0; bump--) {
    const hash = sha256.create();
    for (const seed of seeds) hash.update(seed);
    const digest = hash.update(Uint8Array.of(bump)).update(program).update(PDA_MARKER).digest();
    if (!isOnCurve(digest)) return { address: encodeBase58(digest), bump };
  }
  throw new Error('no program address for these seeds');
}
