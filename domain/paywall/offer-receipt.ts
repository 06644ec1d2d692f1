import type { ResourceInfo, X402RequirementsV2 } from '../facilitator/wire.ts';
import type { Receipt } from '../receipts/schema.ts';
import type { ReceiptSigner } from '../receipts/signing.ts';
import type { StoredResponse } from './schema.ts';

// x402's `offer-receipt` extension, JWS format (specs/extensions/extension-offer-and-receipt.md v1.0; the shapes of
// @x402/extensions 2.27 `offer-receipt`): the 402 carries a signed offer per accept in
// PaymentRequired.extensions["offer-receipt"].info.offers, and a paid answer a signed receipt in its settlement
// response's extensions["offer-receipt"].info.receipt (PAYMENT-RESPONSE). Beyond the reference, whose receipt names
// only payer, network and resource, ours also names the transaction, the amount and fee paid, the payee and the earn
// receipt's hash: one signed object ties the answer to the ledger and to the seller's hash chain. Pure.

export const OFFER_RECEIPT = 'offer-receipt';

/** Offer and receipt payload schema version (offer-receipt §4.2, §5.2). */
const PAYLOAD_VERSION = 1;

/**
 * How long a signed offer commits to its terms (validUntil, §4.6). A rendered 402 is served again until half of it is
 * left (`renewAt`), so an offer a buyer reads always outlives the accept's maxTimeoutSeconds.
 */
export const OFFER_VALIDITY_SECONDS = 300;

/** §6.3: the JSON Schema of the offers' info, JWS format. */
const OFFER_SCHEMA = {
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  type: 'object',
  properties: {
    offers: {
      type: 'array',
      items: {
        type: 'object',
        properties: { format: { type: 'string', const: 'jws' }, acceptIndex: { type: 'integer' }, signature: { type: 'string' } },
        required: ['format', 'signature'],
      },
    },
  },
  required: ['offers'],
} as const;

/** §6.7: the JSON Schema of the receipt's info, JWS format. */
const RECEIPT_SCHEMA = {
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  type: 'object',
  properties: {
    receipt: {
      type: 'object',
      properties: { format: { type: 'string', const: 'jws' }, signature: { type: 'string' } },
      required: ['format', 'signature'],
    },
  },
  required: ['receipt'],
} as const;

/** §4.2: what an offer commits to, per accept. */
export interface OfferPayload {
  version: number;
  resourceUrl: string;
  scheme: string;
  network: string;
  asset: string;
  payTo: string;
  amount: string;
  validUntil: number;
}

/**
 * §5.2 plus what the reference leaves out: `transaction` always (a paid call is public on the ledger anyway), and
 * `amount`/`fee` (atomic units of `asset`, decimal strings), `payTo`, `agent` and `receiptHash`/`receiptNonce` (the
 * seller's earn receipt, DECISIONS "Receipts"). `issuedAt` is the earn receipt's time, so a replay of the paid call
 * answers the same signed receipt.
 */
export interface ReceiptPayload {
  version: number;
  network: string;
  resourceUrl: string;
  payer: string;
  issuedAt: number;
  transaction: string;
  amount: string;
  fee: string;
  asset: string;
  payTo: string;
  agent: string;
  receiptHash: string;
  receiptNonce: number;
}

/** PaymentRequired.extensions["offer-receipt"]: one signed offer per accept, in accept order (acceptIndex, §4.1.1). */
export function signedOffers(signer: ReceiptSigner, offer: { accepts: readonly X402RequirementsV2[]; resource: ResourceInfo; now: Date }) {
  const validUntil = Math.floor(offer.now.getTime() / 1000) + OFFER_VALIDITY_SECONDS;
  const offers = offer.accepts.map((a, acceptIndex) => {
    const payload: OfferPayload = {
      version: PAYLOAD_VERSION,
      resourceUrl: offer.resource.url,
      scheme: a.scheme,
      network: a.network,
      asset: a.asset,
      payTo: a.payTo,
      amount: a.amount,
      validUntil,
    };
    return { format: 'jws' as const, acceptIndex, signature: signer.sign(payload) };
  });
  return { info: { offers }, schema: OFFER_SCHEMA };
}

/** When a 402 carrying offers signed at `now` is rendered again (ms): half their validity left. */
export function offersRenewAt(now: Date): number {
  return now.getTime() + (OFFER_VALIDITY_SECONDS * 1000) / 2;
}

/** The receipt payload of a paid call from its earn receipt and the accept it paid. */
export function receiptPayload(paid: { accept: X402RequirementsV2; resourceUrl: string; payer: string | null; receipt: Receipt }): ReceiptPayload {
  const { accept, receipt } = paid;
  return {
    version: PAYLOAD_VERSION,
    network: accept.network,
    resourceUrl: paid.resourceUrl,
    // §5.2 requires a payer; a settlement always names it (the wallet rail may not, and carries no PAYMENT-RESPONSE)
    payer: paid.payer ?? '',
    issuedAt: Math.floor(Date.parse(receipt.ts) / 1000),
    transaction: receipt.tx_sig ?? '',
    amount: receipt.price.amount_atomic,
    fee: receipt.price.fee,
    asset: receipt.price.asset,
    payTo: accept.payTo,
    agent: receipt.agent,
    receiptHash: receipt.receipt_hash,
    receiptNonce: receipt.nonce,
  };
}

/**
 * The paid answer with the signed receipt in its settlement response (§5.1: extensions["offer-receipt"].info.receipt),
 * in PAYMENT-RESPONSE and, for an x402 v1 buyer, X-PAYMENT-RESPONSE. An answer without either header is returned as is.
 */
export function withSignedReceipt(response: StoredResponse, signature: string): StoredResponse {
  const extension = { info: { receipt: { format: 'jws' as const, signature } }, schema: RECEIPT_SCHEMA };
  const headers = { ...response.headers };
  let changed = false;
  for (const name of ['payment-response', 'x-payment-response']) {
    const value = headers[name];
    if (value === undefined) continue;
    const settled = JSON.parse(Buffer.from(value, 'base64').toString('utf8')) as { extensions?: Record<string, unknown> };
    headers[name] = Buffer.from(JSON.stringify({ ...settled, extensions: { ...settled.extensions, [OFFER_RECEIPT]: extension } })).toString('base64');
    changed = true;
  }
  return changed ? { ...response, headers } : response;
}
