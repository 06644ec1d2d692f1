import { createPrivateKey, createPublicKey, sign, verify, type KeyObject } from 'node:crypto';
import { PublicKey } from '@solana/web3.js';
import { memoize } from '../shared/memo.ts';

// Ed25519 signature checks with node's native implementation: pure computation, no I/O.

/** RFC 8410 SubjectPublicKeyInfo header for an Ed25519 key; the 32 raw key bytes follow it. */
const ED25519_SPKI_PREFIX = Uint8Array.from([0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00]);

let keysParsed = 0;

/** How many public keys verifyEd25519 has parsed in this process (tests: a key seen again is not parsed again). */
export function ed25519KeysParsed(): number {
  return keysParsed;
}

/**
 * The public keys parsed lately (buyers pay again and again; parsing a key was about a third of a
 * verification), by their 32 bytes (latin1); null: not a valid curve point.
 */
const publicKeyObject = memoize((id: string): KeyObject | null => {
  keysParsed++;
  try {
    const der = new Uint8Array(ED25519_SPKI_PREFIX.length + 32);
    der.set(ED25519_SPKI_PREFIX, 0);
    der.set(Buffer.from(id, 'latin1'), ED25519_SPKI_PREFIX.length);
    return createPublicKey({ key: Buffer.from(der), format: 'der', type: 'spki' });
  } catch {
    return null;
  }
}, 4096);

/** False for a bad signature and for a key that is not a valid curve point (e.g. a program-derived address). */
export function verifyEd25519(publicKey: Uint8Array, message: Uint8Array, signature: Uint8Array): boolean {
  if (publicKey.length !== 32 || signature.length !== 64) return false;
  const key = publicKeyObject(Buffer.from(publicKey.buffer, publicKey.byteOffset, publicKey.byteLength).toString('latin1'));
  if (!key) return false;
  try {
    return verify(null, message, key, signature);
  } catch {
    return false;
  }
}

export function isAllZero(bytes: Uint8Array): boolean {
  for (const b of bytes) if (b !== 0) return false;
  return true;
}

/** RFC 8410 PKCS#8 header for an Ed25519 private key; the 32-byte seed follows it. */
const ED25519_PKCS8_PREFIX = Uint8Array.from([0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20]);

/** The facilitator's fee payer: signs message bytes with node's native Ed25519 (the settle hot path). */
export interface FeePayerSigner {
  /** base58 public key */
  address: string;
  sign(message: Uint8Array): Uint8Array;
}

/**
 * From a Solana 64-byte secret key (seed ‖ public key). Throws when the public half does not belong to the seed —
 * a mismatched key file would otherwise sign as someone else.
 */
export function feePayerFromSecretKey(secretKey: Uint8Array): FeePayerSigner {
  if (secretKey.length !== 64) throw new Error(`a secret key has 64 bytes, got ${secretKey.length}`);
  const der = new Uint8Array(ED25519_PKCS8_PREFIX.length + 32);
  der.set(ED25519_PKCS8_PREFIX, 0);
  der.set(secretKey.subarray(0, 32), ED25519_PKCS8_PREFIX.length);
  const key = createPrivateKey({ key: Buffer.from(der), format: 'der', type: 'pkcs8' });
  const spki = createPublicKey(key).export({ format: 'der', type: 'spki' });
  const publicKey = Uint8Array.from(spki.subarray(spki.length - 32));
  if (!publicKey.every((b, i) => b === secretKey[32 + i])) throw new Error('the secret key’s public half does not match its seed');
  return {
    address: new PublicKey(publicKey).toBase58(),
    sign: (message) => new Uint8Array(sign(null, message, key)),
  };
}
