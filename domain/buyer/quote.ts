import type { Caller } from '../access/ownership.ts';
import type { Clock } from '../ports/clock.ts';
import type { Facilitator } from '../ports/facilitator.ts';
import type { OutboundHttp } from '../ports/outbound-http.ts';
import type { Store } from '../ports/store.ts';
import type { IdentityService } from '../identity/service.ts';
import type { PaymentLinkRecord } from '../payment-links/schema.ts';
import { acceptsFor, type OfferTerms } from '../paywall/offer.ts';
import { resourceOf } from '../paywall/call.ts';
import { DomainError } from '../shared/errors.ts';
import { CAIP2, findStable, STABLES, type Network } from '../shared/network.ts';
import type { GatewaySettings } from '../shared/settings.ts';
import { parseInput } from '../shared/validation.ts';
import { chargeRequestFor } from '../facilitator/mpp.ts';
import { mppOptionOf, optionOf, readChallenge, readMppOptions } from './challenge.ts';
import { QuoteInput, type Quote, type QuoteOption } from './schema.ts';

// POST /v1/buyer/quote: what paying a resource costs. A URL is probed once through the guarded outbound
// port (its 402 read: x402 v2 header, else v1 body); a payment link of this gateway — by id, or a URL of this
// gateway's own paywall — is resolved locally with the offer the paywall itself would make, no network round trip.
// Each option carries gross, fee and net; the seller is the agent whose treasury pay_to is, with its identity verdict.

/** A 402 is small; anything bigger is not a challenge worth reading. */
const PROBE_MAX_BYTES = 256 * 1024;
const PROBE_TIMEOUT_MS = 10_000;

export interface QuoteServiceDeps {
  store: Store;
  clock: Clock;
  outbound: OutboundHttp;
  identity: IdentityService;
  settings: GatewaySettings;
  /** the facilitator the paywall settles through: its fee payer goes into a link's offer (absent: none named) */
  facilitator: Facilitator | undefined;
}

export class QuoteService {
  constructor(private readonly deps: QuoteServiceDeps) {}

  async quote(caller: Caller, input: QuoteInput): Promise<Quote> {
    const q = parseInput(QuoteInput, input);
    const method = q.method ?? 'GET';
    if (q.payment_link !== undefined) return this.ofLink(caller, await this.link(caller.network, q.payment_link));
    const url = q.url!;
    const own = this.ownLinkId(url);
    if (own !== null) return { ...(await this.ofLink(caller, await this.link(caller.network, own))), source: 'url', url };
    return this.probe(caller, url, method);
  }

  /** A quote for a direct payment (execute with pay_to, amount, currency): one option, no URL. */
  async direct(caller: Caller, d: { pay_to: string; amount: bigint; currency: string }): Promise<Quote> {
    const stable = findStable(caller.network, d.currency);
    if (!stable) throw DomainError.invalid([{ path: 'currency', message: `${d.currency} is not a stable of ${caller.network}`, code: 'invalid_currency' }]);
    const { fee } = this.deps.settings;
    const option = optionOf(
      {
        scheme: 'exact',
        network: CAIP2[caller.network],
        asset: stable.mint,
        amount: d.amount.toString(),
        payTo: d.pay_to,
        maxTimeoutSeconds: 60,
        extra: fee.bps > 0 ? { 'svc.fee': { v: '1', bps: fee.bps, feeAuthority: fee.authorities[caller.network] } } : {},
      },
      2,
      caller.network,
    );
    return this.finish(caller, {
      source: 'direct',
      url: null,
      method: 'POST',
      domain: null,
      payment_link: null,
      resource: null,
      options: [{ ...option, kind: 'x402' }],
    });
  }

  private async link(network: Network, id: string): Promise<PaymentLinkRecord> {
    const link = await this.deps.store.paymentLinks.get(network, id);
    if (!link) throw new DomainError('payment_link_not_found', `No payment link ${id} on ${network}.`, { id, network });
    if (link.disabled) throw new DomainError('payment_link_disabled', `Payment link ${id} is disabled.`, { id });
    return link;
  }

  /** "{baseUrl}/x/{id}" (any query) → id; null for any other URL. */
  private ownLinkId(url: string): string | null {
    const base = new URL(this.deps.settings.baseUrl);
    const u = new URL(url);
    if (u.origin !== base.origin) return null;
    const prefix = `${base.pathname.replace(/\/$/, '')}/x/`;
    if (!u.pathname.startsWith(prefix)) return null;
    let id: string;
    try {
      id = decodeURIComponent(u.pathname.slice(prefix.length));
    } catch {
      throw new DomainError('invalid_request', 'The url names this gateway’s paywall with a malformed link id.', { path: 'url' });
    }
    return id.length > 0 && !id.includes('/') ? id : null;
  }

  /** The offer the paywall makes for the link: its accepts with the fee terms and the settling facilitator's fee payer. */
  private async ofLink(caller: Caller, link: PaymentLinkRecord): Promise<Quote> {
    const { settings } = this.deps;
    const feePayer = await this.feePayer();
    const terms: OfferTerms = {
      feePayer: feePayer ?? '',
      fee: settings.fee.bps > 0 ? { bps: settings.fee.bps, feeAuthority: settings.fee.authorities[link.network] } : null,
      facilitator: settings.facilitatorUrl,
    };
    const resource = resourceOf(settings.baseUrl, link);
    // The rail the paywall answers this link on: an MPP link's options are kind "mpp" (no challenge issued here).
    const options = acceptsFor(link, terms).map((a): QuoteOption => {
      if (link.protocol !== 'mpp') return { ...optionOf(a, 2, caller.network), fee_payer: feePayer };
      const stable = STABLES[link.network].find((s) => s.mint === a.asset)!;
      const request = chargeRequestFor(a, { decimals: stable.decimals, tokenProgram: stable.tokenProgramId, symbol: stable.symbol, resource: resource.url });
      return { ...mppOptionOf(request, { id: null, realm: new URL(settings.baseUrl).host, expires: null }, caller.network), fee_payer: feePayer };
    });
    return this.finish(caller, {
      source: 'payment_link',
      url: resource.url,
      method: link.method,
      domain: new URL(resource.url).host,
      payment_link: link.id,
      resource: { url: resource.url, description: resource.description ?? null, mime_type: resource.mimeType ?? null },
      options,
    });
  }

  private async feePayer(): Promise<string | null> {
    if (!this.deps.facilitator) return null;
    try {
      return (await this.deps.facilitator.health()).fee_payer;
    } catch {
      return null;
    }
  }

  private async probe(caller: Caller, url: string, method: string): Promise<Quote> {
    const answer = await this.deps.outbound.request({
      url,
      method,
      headers: { accept: 'application/json' },
      timeoutMs: PROBE_TIMEOUT_MS,
      maxResponseBytes: PROBE_MAX_BYTES,
    });
    if (!answer.ok) {
      if (answer.reason === 'url_refused') {
        throw DomainError.invalid([{ path: 'url', message: answer.message, code: 'url_refused' }], `The URL cannot be probed: ${answer.message}`);
      }
      throw new DomainError('quote_unreachable', `The URL did not answer a 402 (${answer.reason}): ${answer.message}`, { reason: answer.reason, url });
    }
    if (answer.status !== 402) {
      throw new DomainError('payment_not_required', `The URL answered ${answer.status}, not 402 Payment Required: there is nothing to pay.`, {
        status: answer.status,
        url,
      });
    }
    // x402 (v2 header, else v1 body) and MPP (WWW-Authenticate: Payment) offers side by side; neither: challenge_invalid.
    const mpp = readMppOptions(answer.headers, caller.network);
    let x402: ReturnType<typeof readChallenge> | null = null;
    try {
      x402 = readChallenge(answer.headers, answer.body);
    } catch (e) {
      if (mpp.options.length === 0) throw e;
    }
    return this.finish(caller, {
      source: 'url',
      url,
      method,
      domain: new URL(url).host,
      payment_link: null,
      resource: x402?.resource ?? mpp.resource,
      options: [...(x402 ? x402.accepts.map((a) => optionOf(a, x402.version, caller.network)) : []), ...mpp.options],
    });
  }

  /** The seller of the payable options (else the first): the agent whose treasury pay_to is, with its verdict. */
  private async finish(caller: Caller, q: Omit<Quote, 'seller' | 'quoted_at'>): Promise<Quote> {
    const main = q.options.find((o) => o.payable) ?? q.options[0];
    const payTo = main?.pay_to ?? null;
    const agent = payTo ? await this.deps.store.agents.findByTreasury(caller.network, payTo) : null;
    let identity: Quote['seller']['identity'] = null;
    if (agent) {
      try {
        const v = await this.deps.identity.verify(caller, { mint: agent.mint, intent: 'pay' });
        identity = { verdict: v.verdict, score: v.score, checks: v.checks };
      } catch {
        // The verdict reads the ledger; when it cannot be formed the quote still answers, with no verdict (a policy
        // asking for one then denies: a seller without a verdict counts as deny).
        identity = null;
      }
    }
    return { ...q, seller: { pay_to: payTo, agent: agent?.mint ?? null, identity }, quoted_at: this.deps.clock.now().toISOString() };
  }
}
