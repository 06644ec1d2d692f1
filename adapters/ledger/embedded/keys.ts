import { createPrivateKey, createPublicKey, generateKeyPairSync, randomBytes, sign, type KeyObject } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { encodeBase58 } from '../../../domain/shared/base58.ts';

// Local keys of the embedded ledger (mint authority, faucet), kept as Solana CLI keypair files (a JSON array of the
// 64-byte secret key), owner-only. Signing uses node's native ed25519: web3.js's JavaScript ed25519 costs milliseconds.

const PKCS8_ED25519_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');

export interface LocalSigner {
  address: string;
  publicKey: Uint8Array;
  sign(message: Uint8Array): Uint8Array;
}

export function signerFromSecret(secretKey: Uint8Array): LocalSigner {
  if (secretKey.length !== 64) throw new Error('a Solana secret key has 64 bytes');
  const key: KeyObject = createPrivateKey({ key: Buffer.concat([PKCS8_ED25519_PREFIX, secretKey.subarray(0, 32)]), format: 'der', type: 'pkcs8' });
  const publicKey = new Uint8Array(createPublicKey(key).export({ format: 'der', type: 'spki' }).subarray(-32));
  if (!Buffer.from(publicKey).equals(Buffer.from(secretKey.subarray(32)))) throw new Error('secret key and public key do not match');
  return { address: encodeBase58(publicKey), publicKey, sign: (message) => new Uint8Array(sign(null, message, key)) };
}

export function generateSecretKey(): Uint8Array {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  const seed = privateKey.export({ format: 'der', type: 'pkcs8' }).subarray(-32);
  const pub = publicKey.export({ format: 'der', type: 'spki' }).subarray(-32);
  return new Uint8Array(Buffer.concat([seed, pub]));
}

/** Loads the keypair file, creating it (0600, directory 0700) on first use. */
export function loadOrCreateKeypair(path: string): LocalSigner {
  try {
    return signerFromSecret(Uint8Array.from(JSON.parse(readFileSync(path, 'utf8')) as number[]));
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw new Error(`cannot read keypair ${path}: ${(e as Error).message}`);
  }
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  try {
    writeFileSync(path, JSON.stringify(Array.from(generateSecretKey())), { mode: 0o600, flag: 'wx' });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
  }
  return signerFromSecret(Uint8Array.from(JSON.parse(readFileSync(path, 'utf8')) as number[]));
}

/** the HTTP header a ledger-admin JSON-RPC call carries the secret in */
export const ADMIN_HEADER = 'x-svc-ledger-admin';

/** `SVC_DATA_DIR/keys/ledger-admin.secret`: the secret the ledger-admin JSON-RPC methods (minting, faucet) ask for. */
export function adminSecretPath(dataDir: string): string {
  return join(dataDir, 'keys', 'ledger-admin.secret');
}

/** The installation's ledger-admin secret, created (0600, 32 random bytes as hex) on first use. */
export function loadOrCreateAdminSecret(dataDir: string): string {
  const path = adminSecretPath(dataDir);
  const existing = readAdminSecret(dataDir);
  if (existing) return existing;
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  try {
    writeFileSync(path, randomBytes(32).toString('hex'), { mode: 0o600, flag: 'wx' });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
  }
  return readFileSync(path, 'utf8').trim();
}

/** The secret for a client of a running ledger (the faucet CLI, a joining facilitator); null when none was made. */
export function readAdminSecret(dataDir: string): string | null {
  try {
    return readFileSync(adminSecretPath(dataDir), 'utf8').trim() || null;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw e;
  }
}
