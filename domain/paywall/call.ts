import { DomainError } from '../shared/errors.ts';
import type { Network } from '../shared/network.ts';
import type { FacilitatorRequest, ResourceInfo, X402RequirementsV2 } from '../facilitator/wire.ts';
import type { PaymentLinkRecord } from '../payment-links/schema.ts';
import { shareUrl } from '../payment-links/service.ts';
import type { PaymentHeaders } from './offer.ts';
import type { MppChallenge } from '../facilitator/mpp.ts';
import type { PendingRequest, StoredResponse } from './schema.ts';
import { sha256Hex } from '../receipts/schema.ts';

// What the paywall's layers share: the request as the core reads it, one paid call, and the small pure helpers
// around them (core.ts claims and settles, record.ts records, reconcile.ts finishes calls nobody answered).

export interface PaywallRequest {
  id: string;
  /** ?network= as given; default chain-mainnet (rule 2) */
  network: string | undefined;
  method: string;
  /** the query string without `network`, e.g. "city=Paris" ('' when none); forwarded upstream */
  forwardQuery: string;
  headers: PaymentHeaders & { contentType?: string | undefined; accept?: string | undefined; authorization?: string | undefined };
  /** the request id, for the envelope fields of an MPP 402 */
  requestId?: string | undefined;
  body: Uint8Array | undefined;
}

export type Accept = X402RequirementsV2;

/** One payment of one link, from its request (or from what its claim kept). */
export interface Call {
  link: PaymentLinkRecord;
  request: PaywallRequest;
  resource: ResourceInfo;
  accepts: Accept[];
  accept: Accept;
  version: 1 | 2;
  transaction: string;
  /** lowercase hex SHA-256 of the transaction's message: the paid_calls key */
  paymentKey: string;
  /** set on the MPP rail: the credential's (authenticated) challenge; the settle's slot once known */
  mpp?: { challenge: MppChallenge; slot?: number | null };
  /** the wallet rail (wallet.ts): the buyer's wallet sent it and the ledger confirmed it; the paywall settles nothing */
  landed?: { signature: string; payer: string | null };
}

export function resourceOf(baseUrl: string, link: PaymentLinkRecord): ResourceInfo {
  return { url: shareUrl(baseUrl, link.network, link.id), description: link.label, mimeType: link.response.mimeType };
}

export function upstreamOf(link: PaymentLinkRecord): string | undefined {
  return typeof link.metadata.upstream_url === 'string' ? link.metadata.upstream_url : undefined;
}

export function facilitatorRequest(call: Call): FacilitatorRequest {
  return {
    x402Version: 2,
    paymentPayload: { x402Version: 2, resource: call.resource, accepted: call.accept, payload: { transaction: call.transaction } },
    paymentRequirements: call.accept,
  };
}

/**
 * A buyer/payment of a link as the call the recorder records (DECISIONS buyer/payment): no HTTP request reached the
 * paywall, so the request is the link's method with nothing forwarded; the accept is what the transaction paid (its
 * amount, asset, payTo and fee terms as prepared); the key is its message's hash, as the paywall's paid call would have.
 */
export function saleCall(baseUrl: string, link: PaymentLinkRecord, sale: { transaction: Uint8Array; message: Uint8Array; accept: Accept }): Call {
  return {
    link,
    request: { id: link.id, network: link.network, method: link.method, forwardQuery: '', headers: {}, body: undefined },
    resource: resourceOf(baseUrl, link),
    accepts: [sale.accept],
    accept: sale.accept,
    version: 2,
    transaction: Buffer.from(sale.transaction).toString('base64'),
    paymentKey: sha256Hex(sale.message),
  };
}

/** What the claim keeps so the call can be finished without its buyer. */
export function pendingRequest(call: Call): PendingRequest {
  const { request } = call;
  return {
    version: call.version,
    transaction: call.transaction,
    accept: call.accept,
    forwardQuery: request.forwardQuery,
    contentType: request.headers.contentType ?? null,
    accept_header: request.headers.accept ?? null,
    body: request.body?.length ? Buffer.from(request.body).toString('base64') : null,
    ...(call.mpp ? { mpp: { challenge: call.mpp.challenge } } : {}),
    ...(call.landed ? { landed: call.landed } : {}),
  };
}

/** The call again from what its claim kept (reconciliation: the buyer is not there). */
export function callFromKept(baseUrl: string, link: PaymentLinkRecord, paymentKey: string, kept: PendingRequest): Call {
  return {
    link,
    request: {
      id: link.id,
      network: link.network,
      method: link.method,
      forwardQuery: kept.forwardQuery,
      headers: { contentType: kept.contentType ?? undefined, accept: kept.accept_header ?? undefined },
      body: kept.body === null ? undefined : Uint8Array.from(Buffer.from(kept.body, 'base64')),
    },
    resource: resourceOf(baseUrl, link),
    accepts: [kept.accept],
    accept: kept.accept,
    version: kept.version,
    transaction: kept.transaction,
    paymentKey,
    ...(kept.mpp ? { mpp: { challenge: kept.mpp.challenge } } : {}),
    ...(kept.landed ? { landed: kept.landed } : {}),
  };
}

export function pending(signature: string | null, message: string): DomainError {
  return new DomainError('payment_pending', message, { signature });
}

/** An upstream failure after settlement, as the paid call's answer (standard envelope; request_id added by HTTP). */
export function errorResponse(error: DomainError): StoredResponse {
  const body = { error: error.code, message: error.message, details: error.details };
  return { status: error.status, headers: { 'content-type': 'application/json' }, body: Buffer.from(JSON.stringify(body)).toString('base64') };
}

export type { Network };
