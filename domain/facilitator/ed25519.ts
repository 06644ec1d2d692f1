import { createPublicKey, verify } from 'node:crypto';

// Ed25519 signature checks with node's native implementation: pure computation, no I/O.

/** RFC 8410 SubjectPublicKeyInfo header for an Ed25519 key; the 32 raw key bytes follow it. */
const ED25519_SPKI_PREFIX = Uint8Array.from([0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00]);

/** False for a bad signature and for a key that is not a valid curve point (e.g. a program-derived address). */
export function verifyEd25519(publicKey: Uint8Array, message: Uint8Array, signature: Uint8Array): boolean {
  if (publicKey.length !== 32 || signature.length !== 64) return false;
  try {
    const der = new Uint8Array(ED25519_SPKI_PREFIX.length + 32);
    der.set(ED25519_SPKI_PREFIX, 0);
    der.set(publicKey, ED25519_SPKI_PREFIX.length);
    const key = createPublicKey({ key: Buffer.from(der), format: 'der', type: 'spki' });
    return verify(null, message, key, signature);
  } catch {
    return false;
  }
}

export function isAllZero(bytes: Uint8Array): boolean {
  for (const b of bytes) if (b !== 0) return false;
  return true;
}
