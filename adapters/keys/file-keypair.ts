import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { Keypair } from '@solana/web3.js';

/**
 * Loads a keypair kept as a JSON byte array (the Solana CLI format) or creates it on first use, owner-only.
 * Returns the public key; the secret never leaves the file here.
 */
export async function ensureKeypairFile(path: string): Promise<string> {
  try {
    const bytes = JSON.parse(await readFile(path, 'utf8')) as number[];
    return Keypair.fromSecretKey(Uint8Array.from(bytes)).publicKey.toBase58();
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw new Error(`Cannot read keypair ${path}: ${(e as Error).message}`);
  }
  const kp = Keypair.generate();
  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  await writeFile(path, JSON.stringify(Array.from(kp.secretKey)), { mode: 0o600, flag: 'wx' }).catch(async (e) => {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
  });
  const bytes = JSON.parse(await readFile(path, 'utf8')) as number[];
  return Keypair.fromSecretKey(Uint8Array.from(bytes)).publicKey.toBase58();
}

/** Like ensureKeypairFile, but returns the 64-byte secret key (the facilitator's fee payer signs with it). */
export async function ensureSecretKeyFile(path: string): Promise<Uint8Array> {
  await ensureKeypairFile(path);
  return Uint8Array.from(JSON.parse(await readFile(path, 'utf8')) as number[]);
}
