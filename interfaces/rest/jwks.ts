import type { FastifyInstance } from 'fastify';
import type { ReceiptSigner } from '../../domain/receipts/signing.ts';

// x402 offer-receipt key discovery (extension-offer-and-receipt.md §3.3, §4.5.1): the public keys of the paywall's
// signed offers and receipts, the signing one and the recently retired ones, as a JWKS (RFC 7517) and as the did:web
// document their `kid` resolves to. Public, read by anyone verifying a receipt; a short cache so a rotation shows soon.

const HEADERS = { 'cache-control': 'public, max-age=300', 'access-control-allow-origin': '*' };

export function registerSigningKeyRoutes(app: FastifyInstance, options: { signer: ReceiptSigner; now: () => Date }): void {
  const { signer, now } = options;
  app.get('/.well-known/jwks.json', async (_req, reply) => reply.headers(HEADERS).type('application/jwk-set+json').send(signer.jwks(now())));
  app.get('/.well-known/did.json', async (_req, reply) => reply.headers(HEADERS).type('application/did+json').send(signer.didDocument(now())));
}
