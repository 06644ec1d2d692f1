import type { PaymentLinkRecord } from '../payment-links/schema.ts';
import { paymentRequired, refusalMessage, type OfferTerms } from './offer.ts';
import type { StoredResponse } from './schema.ts';
import type { PaywallResult } from './core.ts';
import type { ServerTimings } from './call.ts';
import { problemBody, wwwAuthenticate } from './mpp.ts';
import { withDiscovery } from '../discovery/bazaar.ts';

// The paywall's HTTP layer (x402's x402HTTPResourceServer): status, headers and body from the core's result, nothing
// else — no I/O, no framework. interfaces/paywall/routes.ts writes what this returns.

export interface PaywallResponse {
  status: number;
  headers: Record<string, string>;
  body: Uint8Array;
}

/** A request's headers as Node and fastify hold them: lower-case names. */
export type RequestHeaders = Readonly<Record<string, string | string[] | undefined>>;

const json = (value: unknown) => new TextEncoder().encode(JSON.stringify(value));

/**
 * Whether a request carries a payment on either rail: PAYMENT-SIGNATURE or X-PAYMENT (x402, hosted-api §4.2 rule 5) or
 * an Authorization (MPP's credential, DECISIONS "MPP rail"). One that carries none is unpaid: a person's browser gets
 * the paywall page, any other client the link's 402.
 */
export function carriesPayment(headers: RequestHeaders): boolean {
  return (
    headers['payment-signature'] !== undefined ||
    headers['x-payment'] !== undefined ||
    headers.authorization !== undefined ||
    // a returning payer signing in (sign-in-with-x) is answered like a payment, never with the page
    headers['sign-in-with-x'] !== undefined
  );
}

/** ?network= for the paywall (rule 2), the rest for the upstream; the common `?network=…` alone costs no parsing. */
export function splitQuery(url: string): { network: string | undefined; forwardQuery: string } {
  const at = url.indexOf('?');
  if (at < 0) return { network: undefined, forwardQuery: '' };
  const raw = url.slice(at + 1);
  if (/^network=[A-Za-z0-9-]*$/.test(raw)) return { network: raw.slice('network='.length), forwardQuery: '' };
  const params = new URLSearchParams(raw);
  const network = params.get('network') ?? undefined;
  params.delete('network');
  return { network, forwardQuery: params.toString() };
}

export class PaywallHttp {
  /**
   * the unpaid 402 of a cached link record under given terms: rendered once (a record is replaced on any write), again
   * from `renewAt` (ms) when it carries signed offers (offer-receipt.ts: their validUntil)
   */
  private readonly challenges = new WeakMap<PaymentLinkRecord, { terms: OfferTerms; response: PaywallResponse; renewAt: number }>();

  /** the unpaid 402 already rendered for this link record under these terms and still fresh at `now` (ms); undefined: render it */
  renderedChallenge(link: PaymentLinkRecord, terms: OfferTerms, now: number): PaywallResponse | undefined {
    const cached = this.challenges.get(link);
    return cached && cached.terms === terms && cached.renewAt > now ? cached.response : undefined;
  }

  /** `now` (ms): whether a rendered unpaid 402 is still fresh. */
  render(result: PaywallResult, now: number): PaywallResponse {
    if (result.kind === 'served') {
      const response = fromStored(result.response, result.replayed);
      const timing = result.timings && serverTiming(result.timings);
      if (timing) response.headers['server-timing'] = timing;
      return response;
    }
    if (result.kind === 'mpp_required') {
      // DECISIONS "MPP rail": the standard challenge header and the problem+json body (with the envelope's fields).
      return {
        status: 402,
        headers: { 'content-type': 'application/problem+json', 'www-authenticate': wwwAuthenticate(result.challenges), 'cache-control': 'no-store' },
        body: json(problemBody(result.challenges, result.refusal, result.requestId)),
      };
    }
    const { link, terms } = result;
    if (terms) {
      const cached = this.renderedChallenge(link, terms, now);
      if (cached) return cached;
    }
    // a discoverable link's 402 also declares the bazaar extension and its service metadata (domain/discovery/bazaar.ts)
    const built = withDiscovery(link, result.offer());
    const offer = paymentRequired(link.network, built, result.reason);
    const response: PaywallResponse = {
      status: 402,
      headers: { 'content-type': 'application/json', 'payment-required': offer.header, 'cache-control': 'no-store' },
      body: json({ ...offer.body, message: refusalMessage(result.reason, result.message), ...(result.details ? { details: result.details } : {}) }),
    };
    if (terms) this.challenges.set(link, { terms, response, renewAt: built.renewAt ?? Number.POSITIVE_INFINITY });
    return response;
  }
}

/**
 * The one writer of a paid answer's `Server-Timing` (W3C Server Timing): each step this request ran, in milliseconds,
 * e.g. "verify;dur=3.1, settle;dur=412.7, upstream;dur=25.0, record;dur=4.2". A replay ran none: it has none.
 */
export function serverTiming(timings: ServerTimings): string | undefined {
  const steps = (['verify', 'settle', 'upstream', 'record'] as const).filter((step) => timings[step] !== undefined);
  return steps.length ? steps.map((step) => `${step};dur=${timings[step]!.toFixed(1)}`).join(', ') : undefined;
}

/** A stored response as sent; a replay says so (X-Svc-Replayed). */
export function fromStored(stored: StoredResponse, replayed = false): PaywallResponse {
  const headers = { ...stored.headers };
  if (replayed) headers['x-svc-replayed'] = 'true';
  return { status: stored.status, headers, body: Uint8Array.from(Buffer.from(stored.body, 'base64')) };
}
