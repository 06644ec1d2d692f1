import { createHash, createPrivateKey, generateKeyPairSync, type KeyObject, sign } from 'node:crypto';
import { canonicalJson } from '../shared/canonical-json.ts';

// The gateway's signing keys for x402's `offer-receipt` extension (specs/extensions/extension-offer-and-receipt.md,
// JWS format): Ed25519 keys (JWS alg EdDSA), the newest one signing, the retired ones still published (JWKS and
// did:web document) for a while so what they signed stays verifiable. Signing is synchronous (Node's native Ed25519):
// the unpaid 402 is rendered without a promise. The private halves live only in the key ring's file (the data
// directory, like the other generated secrets); nothing here logs or answers them.

/** How long a retired key stays published: what it signed can be verified from the JWKS alone for that long. */
export const RETIRED_KEY_PUBLISHED_MS = 30 * 24 * 60 * 60 * 1000;

/** An Ed25519 key of the ring as kept in its file: a private JWK (RFC 8037) and when it started and stopped signing. */
export interface SigningKey {
  /** RFC 7638 thumbprint of the public key: the key's fragment in the JWS `kid` */
  id: string;
  created_at: string;
  /** null while it signs (the newest key); set when a newer key replaced it */
  retired_at: string | null;
  jwk: { kty: 'OKP'; crv: 'Ed25519'; x: string; d: string };
}

/** e.g. { keys: [{ id: "NzbL…", created_at: "2026-11-28T16:00:00.000Z", retired_at: null, jwk: {…} }] }, oldest first */
export interface KeyRing {
  keys: SigningKey[];
}

/** A public key as the JWKS route publishes it (RFC 7517 §4, RFC 8037). */
export interface PublicJwk {
  kty: 'OKP';
  crv: 'Ed25519';
  x: string;
  kid: string;
  alg: 'EdDSA';
  use: 'sig';
}

const b64url = (bytes: Uint8Array | string) => Buffer.from(bytes).toString('base64url');

/** RFC 7638: SHA-256 of the required members of the public JWK in lexicographic order, base64url. */
export function jwkThumbprint(jwk: { crv: string; kty: string; x: string }): string {
  return b64url(
    createHash('sha256')
      .update(JSON.stringify({ crv: jwk.crv, kty: jwk.kty, x: jwk.x }))
      .digest(),
  );
}

/** A fresh Ed25519 key, signing from `now`. */
export function newSigningKey(now: Date): SigningKey {
  const { privateKey } = generateKeyPairSync('ed25519');
  const { x, d } = privateKey.export({ format: 'jwk' }) as { x: string; d: string };
  const jwk = { kty: 'OKP' as const, crv: 'Ed25519' as const, x, d };
  return { id: jwkThumbprint(jwk), created_at: now.toISOString(), retired_at: null, jwk };
}

/** The ring after a rotation: a new key signs from `now`; the one that signed until now is retired (still published). */
export function rotateRing(ring: KeyRing, now: Date): KeyRing {
  const at = now.toISOString();
  return { keys: [...ring.keys.map((k) => (k.retired_at === null ? { ...k, retired_at: at } : k)), newSigningKey(now)] };
}

/**
 * The issuer's DID for `baseUrl` (did:web, the method the offer-receipt spec names for key lookup): the host, its port
 * percent-encoded, e.g. did:web:pay.example.com or did:web:127.0.0.1%3A8080. Its document is /.well-known/did.json.
 */
export function didWebOf(baseUrl: string): string {
  return `did:web:${encodeURIComponent(new URL(baseUrl).host)}`;
}

/** The signing half of the ring, for one issuer. */
export class ReceiptSigner {
  private active!: { kid: string; key: KeyObject };
  private ring!: KeyRing;

  private readonly issuer: string;

  /** `persist`: where a rotated ring is kept (the key file) before it signs. */
  constructor(
    ring: KeyRing,
    private readonly options: { issuer: string; persist?: (ring: KeyRing) => Promise<void> },
  ) {
    this.issuer = options.issuer;
    this.use(ring);
  }

  /**
   * A new key signs from `now`; the one signing until now is retired and stays published (RETIRED_KEY_PUBLISHED_MS), so
   * what it signed stays verifiable. Kept (persist) before it is used. Answers the new `kid`.
   */
  async rotate(now: Date): Promise<string> {
    const ring = rotateRing(this.ring, now);
    await this.options.persist?.(ring);
    this.use(ring);
    return this.kid;
  }

  /** Signs with the ring from now on (after a rotation); the newest unretired key signs. */
  use(ring: KeyRing): void {
    const signing = ring.keys.findLast((k) => k.retired_at === null);
    if (!signing) throw new Error('The signing key ring has no active key.');
    this.ring = ring;
    this.active = { kid: this.kidOf(signing), key: createPrivateKey({ key: signing.jwk, format: 'jwk' }) };
  }

  /** The key ring (for the rotation to extend). */
  keys(): KeyRing {
    return this.ring;
  }

  /** The JWS `kid` of a key: a DID URL (offer-receipt §3.3), the issuer's DID and the key's thumbprint. */
  kidOf(key: Pick<SigningKey, 'id'>): string {
    return `${this.issuer}#${key.id}`;
  }

  /** The `kid` signing now. */
  get kid(): string {
    return this.active.kid;
  }

  /**
   * JWS Compact Serialization of `payload` (RFC 7515, alg EdDSA per RFC 8037), its payload the RFC 8785 canonical
   * JSON (offer-receipt §10: JCS for JWS payloads), so any JOSE library verifies it against the published key.
   */
  sign(payload: object): string {
    const header = b64url(JSON.stringify({ alg: 'EdDSA', kid: this.active.kid }));
    const body = b64url(canonicalJson(payload));
    const input = `${header}.${body}`;
    return `${input}.${b64url(sign(null, Buffer.from(input), this.active.key))}`;
  }

  /** The public keys a verifier may meet: the signing one and those retired less than RETIRED_KEY_PUBLISHED_MS ago. */
  publicKeys(now: Date): PublicJwk[] {
    return this.ring.keys
      .filter((k) => k.retired_at === null || Date.parse(k.retired_at) + RETIRED_KEY_PUBLISHED_MS > now.getTime())
      .map((k) => ({ kty: 'OKP', crv: 'Ed25519', x: k.jwk.x, kid: this.kidOf(k), alg: 'EdDSA', use: 'sig' }));
  }

  /** GET /.well-known/jwks.json (RFC 7517 §5). */
  jwks(now: Date): { keys: PublicJwk[] } {
    return { keys: this.publicKeys(now) };
  }

  /**
   * GET /.well-known/did.json: the did:web document naming the same keys as verification methods, so a verifier
   * resolving the `kid` (the x402 reference's `verifyOfferSignatureJWS` without a key) finds them at the issuer's host.
   */
  didDocument(now: Date) {
    const methods = this.publicKeys(now).map(({ kid, ...publicKeyJwk }) => ({ id: kid, type: 'JsonWebKey2020', controller: this.issuer, publicKeyJwk }));
    return {
      '@context': ['https://www.w3.org/ns/did/v1', 'https://w3id.org/security/suites/jws-2020/v1'],
      id: this.issuer,
      verificationMethod: methods,
      assertionMethod: methods.map((m) => m.id),
    };
  }
}
