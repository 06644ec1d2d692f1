import { DomainError } from '../shared/errors.ts';
import { newId } from '../shared/ids.ts';
import { atomicToDecimal, feeFor } from '../shared/money.ts';
import { Network, NETWORKS, STABLES, type Stable } from '../shared/network.ts';
import type { GatewaySettings } from '../shared/settings.ts';
import type { Clock } from '../ports/clock.ts';
import type { Facilitator } from '../ports/facilitator.ts';
import type { Ledger } from '../ports/ledger.ts';
import type { OutboundHttp } from '../ports/outbound-http.ts';
import type { Repositories, Store } from '../ports/store.ts';
import { decodeTransaction } from '../facilitator/decode.ts';
import { FEE_EXTENSION_KEY, FeeExtension } from '../facilitator/schema.ts';
import type { FacilitatorHealth, FacilitatorRequest, ResourceInfo, SettleResponse, X402RequirementsV2 } from '../facilitator/wire.ts';
import type { PaymentLinkRecord } from '../payment-links/schema.ts';
import { shareUrl } from '../payment-links/service.ts';
import { chainReceipt, sha256Hex, type ReceiptV1 } from '../receipts/schema.ts';
import { enqueueLinkDelivery } from '../webhooks/service.ts';
import { acceptsFor, chooseAccept, paymentRequired, parsePayment, refusalMessage, toV1, type OfferTerms, type PaymentHeaders } from './offer.ts';
import type { PaidCallRecord, PendingRequest, StoredResponse } from './schema.ts';
import type { LinkCache } from './link-cache.ts';

// hosted-api §4.2 (rules 1–9) with DECISIONS "Payment links" and "x402 on the paywall": the public /x/{id}.
//
// A paid call: parse the payment → claim it in paid_calls (exactly once across instances) → settle (or, under
// settle_policy on_success, verify → forward → settle) → one transaction of side effects (counters, earn receipt,
// events, the stored response) → best-effort webhook. A replay of a done payment gets the stored response; a settle
// whose outcome is unknown leaves the claim pending (504 payment_pending) for the replay to resolve.

/** How long one request may hold a payment before another may take it over (settle + forward fit well inside). */
const LEASE_MS = 120_000;
const REPLAY_WINDOW_MS = 24 * 60 * 60 * 1000;
/** A concurrent replay waits this long for the first request to finish. */
const WAIT_FOR_OWNER_MS = 10_000;
const HEALTH_TTL_MS = 60_000;

export interface PaywallRequest {
  id: string;
  /** ?network= as given; default chain-mainnet (rule 2) */
  network: string | undefined;
  method: string;
  /** the query string without `network`, e.g. "city=Paris" ('' when none); forwarded upstream */
  forwardQuery: string;
  headers: PaymentHeaders & { contentType?: string | undefined; accept?: string | undefined };
  body: Uint8Array | undefined;
}

export interface PaywallResponse {
  status: number;
  headers: Record<string, string>;
  body: Uint8Array;
}

export interface PaywallDeps {
  store: Store;
  /** the links as the paywall reads them (process-local, invalidated on every write) */
  links: LinkCache;
  facilitator: Facilitator;
  outbound: OutboundHttp;
  ledgers: Partial<Record<Network, Ledger>>;
  clock: Clock;
  settings: GatewaySettings;
  /** failures nobody is waiting for (webhooks), for the operator's log */
  onWarning?: (message: string, context: Record<string, unknown>) => void;
}

type Accept = X402RequirementsV2;
type Produced = { ok: true; value: StoredResponse } | { ok: false; error: DomainError };

interface Call {
  link: PaymentLinkRecord;
  request: PaywallRequest;
  resource: ResourceInfo;
  accepts: Accept[];
  accept: Accept;
  version: 1 | 2;
  transaction: string;
  paymentKey: string;
}

const json = (value: unknown) => new TextEncoder().encode(JSON.stringify(value));
const b64json = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64');

export class PaywallService {
  private health: { at: number; value: Promise<FacilitatorHealth> } | undefined;
  /** the unpaid 402 of a cached link record under given terms: rendered once (a record is replaced on any write) */
  private readonly challenges = new WeakMap<PaymentLinkRecord, { terms: OfferTerms; response: PaywallResponse }>();

  constructor(private readonly deps: PaywallDeps) {}

  async handle(request: PaywallRequest): Promise<PaywallResponse> {
    const link = await this.resolveLink(request);
    if (link.protocol !== 'x402') {
      throw new DomainError('service_unavailable', 'This link uses the MPP rail, which this gateway does not serve yet.', { protocol: link.protocol });
    }
    const terms = await this.offerTerms(link.network);
    const payment = parsePayment(request.headers);
    if (!payment) {
      const cached = this.challenges.get(link);
      if (cached && cached.terms === terms) return cached.response;
    }
    const resource = resourceOf(this.deps.settings.baseUrl, link);
    const accepts = acceptsFor(link, terms);
    if (!payment) {
      const response = this.challenge(link, accepts, resource, 'payment_required', 'Payment required: pay one of the accepts and send it in PAYMENT-SIGNATURE (x402 v2) or X-PAYMENT (v1).');
      this.challenges.set(link, { terms, response });
      return response;
    }
    if (!payment.ok) return this.challenge(link, accepts, resource, payment.reason, payment.message);
    const accept = chooseAccept(accepts, payment);
    if (!accept) return this.challenge(link, accepts, resource, 'requirements_mismatch', 'The payment answers an offer this link does not make (amount, asset, payTo or network differ).');

    let messageBytes: Uint8Array;
    try {
      messageBytes = decodeTransaction(payment.transactionBytes).messageBytes;
    } catch (e) {
      return this.challenge(link, accepts, resource, 'invalid_transaction', `The payment transaction does not parse: ${(e as Error).message}`);
    }
    const call: Call = {
      link,
      request,
      resource,
      accepts,
      accept,
      version: payment.version,
      transaction: payment.transaction,
      paymentKey: sha256Hex(messageBytes),
    };
    return this.pay(call, WAIT_FOR_OWNER_MS);
  }

  /**
   * Reconciliation (job resolve_paid_calls): paid calls nobody answered — a settle outcome that was unknown, or a
   * process that died with the claim (issue 17) — and whose buyer has not come back within `olderThanMs` are settled
   * again from their kept request: recorded (receipt, counters, events, webhook, the response a replay will get) when
   * they landed, forgotten when they were refused, left pending when the outcome is still unknown. A claim that never
   * reached settlement (nothing moved) is forgotten.
   */
  async resolvePending(options: { olderThanMs?: number; limit?: number } = {}): Promise<{ resolved: number; refused: number; pending: number; forgotten: number }> {
    const now = this.deps.clock.now();
    const before = new Date(now.getTime() - (options.olderThanMs ?? 60_000));
    const tally = { resolved: 0, refused: 0, pending: 0, forgotten: 0 };
    for (const row of await this.deps.store.paidCalls.listUnresolved({ before, now, limit: options.limit ?? 20 })) {
      if (!row.attempted || !row.request) {
        if (await this.deps.store.paidCalls.forgetUnattempted(row.network, row.paymentKey, now)) tally.forgotten++;
        else if (row.status === 'pending') {
          this.deps.onWarning?.('a pending paid call cannot be resolved: its request was not kept', { network: row.network, payment_key: row.paymentKey });
          tally.pending++;
        }
        continue;
      }
      const link = await this.deps.store.paymentLinks.get(row.network, row.linkId);
      if (!link || link.pk !== row.linkPk) {
        this.deps.onWarning?.('a pending paid call cannot be resolved: its link is gone', { network: row.network, payment_key: row.paymentKey, signature: row.signature });
        tally.pending++;
        continue;
      }
      const kept = row.request;
      const call: Call = {
        link,
        request: {
          id: link.id,
          network: link.network,
          method: link.method,
          forwardQuery: kept.forwardQuery,
          headers: { contentType: kept.contentType ?? undefined, accept: kept.accept_header ?? undefined },
          body: kept.body === null ? undefined : Uint8Array.from(Buffer.from(kept.body, 'base64')),
        },
        resource: resourceOf(this.deps.settings.baseUrl, link),
        accepts: [kept.accept],
        accept: kept.accept,
        version: kept.version,
        transaction: kept.transaction,
        paymentKey: row.paymentKey,
      };
      try {
        const answer = await this.pay(call, 0);
        if (answer.status === 402) tally.refused++;
        else tally.resolved++;
      } catch (e) {
        if (!(e instanceof DomainError && e.code === 'payment_pending')) {
          this.deps.onWarning?.('resolving a pending paid call failed; will retry', { payment_key: row.paymentKey, error: (e as Error).message });
        }
        tally.pending++;
      }
    }
    return tally;
  }

  /** Rules 1–3 and the DECISIONS error bodies: 404, 403 wrong_network naming the right one, 410, 405 + Allow. */
  private async resolveLink(request: PaywallRequest): Promise<PaymentLinkRecord> {
    const parsed = Network.safeParse(request.network ?? 'chain-mainnet');
    if (!parsed.success) {
      throw DomainError.invalid([{ path: 'network', message: `network must be one of ${NETWORKS.join(', ')}`, code: 'invalid_enum_value' }], 'Unknown network.');
    }
    const network = parsed.data;
    const link = await this.deps.links.get(network, request.id);
    if (!link) {
      for (const other of NETWORKS.filter((n) => n !== network)) {
        const elsewhere = await this.deps.links.get(other, request.id);
        if (elsewhere) {
          throw new DomainError('wrong_network', `Payment link ${request.id} is on ${other}, not ${network}.`, {
            network: other,
            url: `${this.deps.settings.baseUrl}/x/${encodeURIComponent(request.id)}?network=${other}`,
          });
        }
      }
      throw new DomainError('payment_link_not_found', `No payment link ${request.id} on ${network}.`, { id: request.id });
    }
    if (link.disabled) throw new DomainError('payment_link_disabled', `Payment link ${request.id} is disabled.`, { id: request.id });
    if (request.method.toUpperCase() !== link.method) {
      throw new DomainError('method_not_allowed', `Payment link ${request.id} answers ${link.method} only.`, { allow: link.method });
    }
    return link;
  }

  /** extra.feePayer and extra["svc.fee"] come from the facilitator that will settle: its /health, cached. */
  private async offerTerms(network: Network): Promise<OfferTerms> {
    const health = await this.facilitatorHealth();
    const known = this.terms.get(network);
    if (known && known.health === health) return known.terms;
    const fee = health.protocol_fee;
    const authority = fee.authorities[network] ?? fee.authority;
    const terms: OfferTerms = { feePayer: health.fee_payer, fee: fee.bps > 0 ? { bps: fee.bps, feeAuthority: authority } : null };
    // One object per health answer, so a rendered challenge can tell whether its terms still hold by identity.
    this.terms.set(network, { health, terms });
    return terms;
  }

  private readonly terms = new Map<Network, { health: FacilitatorHealth; terms: OfferTerms }>();

  private async facilitatorHealth(): Promise<FacilitatorHealth> {
    const now = this.deps.clock.now().getTime();
    if (!this.health || now - this.health.at > HEALTH_TTL_MS) {
      const value = this.deps.facilitator.health();
      this.health = { at: now, value };
      value.catch(() => {
        if (this.health?.value === value) this.health = undefined;
      });
    }
    return this.health.value;
  }

  private challenge(link: PaymentLinkRecord, accepts: Accept[], resource: ResourceInfo, error: string, message: string): PaywallResponse {
    const offer = paymentRequired(link.network, accepts, resource, error);
    return {
      status: 402,
      headers: { 'content-type': 'application/json', 'payment-required': offer.header, 'cache-control': 'no-store' },
      body: json({ ...offer.body, message: refusalMessage(error, message) }),
    };
  }

  private facilitatorRequest(call: Call): FacilitatorRequest {
    return {
      x402Version: 2,
      paymentPayload: { x402Version: 2, resource: call.resource, accepted: call.accept, payload: { transaction: call.transaction } },
      paymentRequirements: call.accept,
    };
  }

  /** Exactly once: claim the payment, or answer from its record. */
  private async pay(call: Call, waitMs: number): Promise<PaywallResponse> {
    const { network } = call.link;
    const deadline = Date.now() + waitMs;
    for (;;) {
      const now = this.deps.clock.now();
      const claim = await this.deps.store.paidCalls.claim({
        network,
        paymentKey: call.paymentKey,
        linkPk: call.link.pk,
        linkId: call.link.id,
        lockedUntil: new Date(now.getTime() + LEASE_MS),
        at: now,
        expiresAt: new Date(now.getTime() + REPLAY_WINDOW_MS),
      });
      const record = claim.record;
      if (claim.claimed) return this.run(call, record);
      if (record.linkPk !== call.link.pk) {
        return this.challenge(call.link, call.accepts, call.resource, 'payment_already_used', 'This payment transaction was already used for another payment link.');
      }
      if (record.status === 'done' && record.response) {
        if (record.expiresAt.getTime() <= now.getTime()) {
          return this.challenge(call.link, call.accepts, call.resource, 'payment_already_used', 'This payment was used more than 24 hours ago; its response is no longer kept.');
        }
        return replayed(record.response);
      }
      if (Date.now() >= deadline) throw pending(record.signature, 'The first request with this payment is still settling; retry the same request to get its outcome.');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  /**
   * We hold the claim: settle (resuming an earlier attempt), respond, record. The request is kept in the claim before
   * the facilitator is asked to settle (issue 17), so whatever happens after — an unknown outcome, a crash — a replay
   * or the reconciliation job can finish the payment.
   */
  private async run(call: Call, record: PaidCallRecord): Promise<PaywallResponse> {
    const { network } = call.link;
    const request = this.facilitatorRequest(call);
    const resuming = record.attempted;
    let attempted = resuming;
    let settledAs: string | null = record.signature;
    try {
      // An upstream that cannot be called at all (refused address, no DNS) would charge the buyer for nothing: checked
      // before any money can move, in every mode and when resuming.
      const upstream = upstreamOf(call.link);
      if (upstream) {
        const refused = await this.deps.outbound.check(upstream);
        if (refused) {
          throw new DomainError(
            'upstream_failed',
            resuming
              ? `The upstream cannot be called (${refused.message}); the payment is kept pending until it can be.`
              : `The upstream cannot be called (${refused.message}); the payment was not settled.`,
            { reason: refused.reason },
          );
        }
      }
      let served: Produced | undefined;
      if (call.link.settlePolicy === 'on_success' && !resuming) {
        const verdict = await this.deps.facilitator.verify(request);
        if (!verdict.isValid) {
          await this.deps.store.paidCalls.release(network, call.paymentKey);
          return this.challenge(call.link, call.accepts, call.resource, verdict.invalidReason ?? 'invalid_payment', verdict.invalidMessage ?? 'The payment was refused.');
        }
        served = await this.produce(call);
        if (!served.ok) {
          // DECISIONS settle_policy on_success: the buyer is not charged and gets the upstream status as upstream_failed
          // (the catch below forgets the payment).
          await this.deps.store.paymentLinks.countCall(network, call.link.pk, { at: this.deps.clock.now(), settledTxSig: null });
          throw served.error;
        }
      }
      if (!attempted) {
        // Durable before the transaction can land: committed before the facilitator sees it.
        if (!(await this.deps.store.paidCalls.markAttempted(network, call.paymentKey, { request: pendingRequest(call), at: this.deps.clock.now() }))) {
          throw pending(null, 'Another request took this payment over; retry the same request to get its outcome.');
        }
        attempted = true;
      }
      const settled = await this.settle(call, request);
      if (!settled.ok) return settled.response;
      settledAs = settled.signature;
      // before_forward (or an on_success call resumed after its answer was lost): the payment landed; an upstream
      // failure is what this paid call served (and what replays get).
      served ??= await this.produce(call);
      const value = served.ok ? served.value : errorResponse(served.error);
      return await this.finish(call, settled.signature, settled.payer, value);
    } catch (e) {
      // Once money may have moved the claim is kept (pending, with what we know) for the replay or the job to finish;
      // before that, nothing happened and the payment is forgotten.
      const signature = e instanceof DomainError && e.code === 'payment_pending' ? ((e.details?.signature as string | null) ?? settledAs) : settledAs;
      if (attempted) {
        await this.deps.store.paidCalls
          .markPending(network, call.paymentKey, { signature, request: pendingRequest(call), at: this.deps.clock.now() })
          .catch(() => {});
      } else {
        await this.deps.store.paidCalls.release(network, call.paymentKey).catch(() => {});
      }
      throw e;
    }
  }

  private async settle(call: Call, request: FacilitatorRequest): Promise<{ ok: true; signature: string; payer: string | null } | { ok: false; response: PaywallResponse }> {
    const { network } = call.link;
    let result: SettleResponse;
    try {
      result = await this.deps.facilitator.settle(request);
    } catch (e) {
      if (e instanceof DomainError && e.code === 'payment_pending') throw pending(null, e.message);
      throw e;
    }
    if (result.success) return { ok: true, signature: result.transaction, payer: result.payer ?? null };
    if (result.errorReason === 'settlement_pending') {
      throw pending(result.transaction || null, 'The payment was broadcast but its outcome is not known yet; retry the same request to get the response.');
    }
    // The facilitator's guard already settled this transaction (an earlier attempt of ours, by whichever process):
    // the ledger says whether it landed. Landed is a success to resume, never a 402 (issue 17).
    if (result.errorReason === 'duplicate_settlement' && result.transaction) {
      const outcome = await this.outcome(network, result.transaction);
      if (outcome === 'landed') return { ok: true, signature: result.transaction, payer: result.payer ?? null };
      if (outcome === 'processing') throw pending(result.transaction, 'The payment landed and awaits confirmation; retry the same request to get the response.');
    }
    await this.deps.store.paidCalls.release(network, call.paymentKey);
    return {
      ok: false,
      response: this.challenge(call.link, call.accepts, call.resource, result.errorReason ?? 'settlement_failed', result.errorMessage ?? 'The payment did not settle.'),
    };
  }

  /** A signature on the ledger: landed (confirmed, no error), processing (not confirmed yet), or absent/failed. */
  private async outcome(network: Network, signature: string): Promise<'landed' | 'processing' | 'absent'> {
    const ledger = this.deps.ledgers[network];
    if (!ledger) throw pending(signature, `No ledger for ${network} to learn the payment's outcome; retry the same request later.`);
    const [status] = await ledger.getSignatureStatuses([signature]);
    if (!status || status.err !== null) return 'absent';
    return status.confirmationStatus === 'processed' ? 'processing' : 'landed';
  }

  /** Rule 7: the upstream response when metadata.upstream_url is set, else the link's response template. */
  private async produce(call: Call): Promise<Produced> {
    const { link, request } = call;
    const upstream = upstreamOf(link);
    if (!upstream) {
      const body = link.response.body;
      const bytes = typeof body === 'string' ? new TextEncoder().encode(body) : json(body);
      return { ok: true, value: { status: link.response.status, headers: { 'content-type': link.response.mimeType }, body: Buffer.from(bytes).toString('base64') } };
    }
    const url = new URL(upstream);
    if (request.forwardQuery) {
      for (const [k, v] of new URLSearchParams(request.forwardQuery)) url.searchParams.append(k, v);
    }
    const headers: Record<string, string> = {};
    if (request.headers.contentType) headers['content-type'] = request.headers.contentType;
    if (request.headers.accept) headers.accept = request.headers.accept;
    const answer = await this.deps.outbound.request({
      url: url.toString(),
      method: link.method,
      headers,
      body: link.method === 'GET' || link.method === 'DELETE' ? undefined : request.body,
    });
    if (!answer.ok) {
      return { ok: false, error: new DomainError('upstream_failed', `The upstream call failed: ${answer.message}`, { reason: answer.reason }) };
    }
    if (link.settlePolicy === 'on_success' && (answer.status < 200 || answer.status > 299)) {
      return { ok: false, error: new DomainError('upstream_failed', `The upstream answered ${answer.status}; the payment was not settled.`, { upstream_status: answer.status }) };
    }
    const contentType = answer.headers['content-type'] ?? 'application/octet-stream';
    return { ok: true, value: { status: answer.status, headers: { 'content-type': contentType }, body: Buffer.from(answer.body).toString('base64') } };
  }

  /** Rule 9 in one transaction: counters, earn receipt, events, the stored response. Then the webhook. */
  private async finish(call: Call, signature: string, payer: string | null, served: StoredResponse): Promise<PaywallResponse> {
    const { link } = call;
    const network = link.network;
    const now = this.deps.clock.now();
    const stable = STABLES[network].find((s) => s.mint === call.accept.asset)!;
    const feeTerms = FeeExtension.safeParse(call.accept.extra[FEE_EXTENSION_KEY]);
    const bps = feeTerms.success ? feeTerms.data.bps : 0;
    const fee = feeTerms.success ? feeFor(link.amountAtomic, bps) : 0n;
    const paymentResponse = { success: true, transaction: signature, network: call.accept.network, payer };

    const final = await this.deps.store.transaction(async (tx): Promise<{ response: StoredResponse; receipt: ReceiptV1 | null } | null> => {
      // Under the paid call's row lock: whoever records a payment first records it; a second finisher (a takeover
      // racing a process thought dead) serves what was stored.
      const current = await tx.paidCalls.get(network, call.paymentKey);
      if (current?.status === 'done' && current.response) return { response: current.response, receipt: null };
      // Its row was pruned after the 24 h replay window and the payment came back: it was recorded then.
      if (await tx.receipts.hasPaywallTxSig(network, signature)) return null;
      await tx.paymentLinks.countCall(network, link.pk, { at: now, settledTxSig: signature });
      const head = await tx.receipts.lockHead(network, link.ownerAgent);
      const receipt = chainReceipt(
        {
          v: '0.1',
          kind: 'earn',
          agent: link.ownerAgent,
          ts: now.toISOString(),
          request: {
            method: link.method,
            url: call.resource.url,
            ...(call.request.body?.length ? { body_hash: sha256Hex(call.request.body) } : {}),
          },
          decision: 'allow',
          price: {
            amount: atomicToDecimal(link.amountAtomic, stable.decimals),
            currency: stable.symbol,
            asset: stable.mint,
            network: call.accept.network,
            amount_atomic: link.amountAtomic.toString(),
            fee: fee.toString(),
            gross: (link.amountAtomic + fee).toString(),
            feeBps: bps,
            feeAuthority: feeTerms.success ? feeTerms.data.feeAuthority : null,
          },
          facilitator: this.deps.settings.facilitatorUrl,
          response: { status: served.status, body_hash: sha256Hex(Buffer.from(served.body, 'base64')) },
          tx_sig: signature,
        },
        head,
      );
      await tx.receipts.insert({ network, receipt, source: 'paywall', createdAt: now });

      const body = link.wrapReceipt ? wrapped(served, receipt) : served;
      const headers: Record<string, string> = { ...body.headers, 'payment-response': b64json(paymentResponse) };
      if (call.version === 1) headers['x-payment-response'] = b64json({ ...paymentResponse, network: toV1(call.accept, network, call.resource).network });
      const response: StoredResponse = { ...body, headers };
      await tx.paidCalls.complete(network, call.paymentKey, { signature, payer, response, at: now });
      await this.emit(tx, call, now, signature, payer, receipt, fee, stable, served.status);
      await this.webhook(tx, call, paymentResponse, response, receipt, now);
      return { response, receipt };
    });

    if (!final) {
      await this.deps.store.paidCalls.release(network, call.paymentKey);
      return this.challenge(call.link, call.accepts, call.resource, 'payment_already_used', 'This payment was used more than 24 hours ago; its response is no longer kept.');
    }
    return fromStored(final.response);
  }

  private async emit(tx: Repositories, call: Call, now: Date, signature: string, payer: string | null, receipt: ReceiptV1, fee: bigint, stable: Stable, status: number) {
    const { link } = call;
    const base = { network: link.network, agentAsset: link.ownerAgent, owner: link.ownerPrincipal, phase: 'confirmed' as const, createdAt: now, confirmedAt: now };
    const append = (kind: string, metadata: Record<string, unknown>, withSignature = true) =>
      tx.events.append({ ...base, id: newId(now.getTime()), kind, metadata, signature: withSignature ? signature : null });
    await append('payment_link.settled', {
      payment_link_id: link.id,
      agent: link.ownerAgent,
      tx_sig: signature,
      payer,
      currency: stable.symbol,
      asset: stable.mint,
      amount_atomic: link.amountAtomic.toString(),
      fee_atomic: fee.toString(),
      gross_atomic: (link.amountAtomic + fee).toString(),
    });
    await append('payment_link.served', { payment_link_id: link.id, status, tx_sig: signature, method: link.method });
    await append('receipt.published', { payment_link_id: link.id, source: 'paywall', receipt_hash: receipt.receipt_hash, nonce: receipt.nonce, receipt });
    if (fee > 0n) {
      // fee-facilitator-mpp-tools §6 path 1: once per receipt with a fee.
      await append('protocol.fee.collected', {
        source: 'receipt',
        receipt_hash: receipt.receipt_hash,
        tx_sig: signature,
        mint: stable.mint,
        currency: stable.symbol,
        fee_atomic: fee.toString(),
        fee_authority: receipt.price.feeAuthority,
        payment_link_id: link.id,
      });
    }
  }

  /**
   * hosted-api §2.1 webhook_url: `{ payment_link_id, payment, receipt, response }` to the link's URL, signed with its
   * secret — a delivery like a subscription's (DECISIONS "Webhooks": same rows, retries, signature), made in the
   * record transaction so a recorded payment's webhook is never lost.
   */
  private async webhook(tx: Repositories, call: Call, payment: Record<string, unknown>, response: StoredResponse, receipt: ReceiptV1, now: Date): Promise<void> {
    const { link } = call;
    if (!link.webhookUrl || !link.webhookSecret) return;
    const data = { payment_link_id: link.id, payment, receipt, response: { status: response.status, headers: response.headers, body: response.body } };
    await enqueueLinkDelivery(tx, { network: link.network, linkPk: link.pk, kind: 'payment_link.settled', data, now });
  }
}

function resourceOf(baseUrl: string, link: PaymentLinkRecord): ResourceInfo {
  return { url: shareUrl(baseUrl, link.network, link.id), description: link.label, mimeType: link.response.mimeType };
}

function pendingRequest(call: Call): PendingRequest {
  const { request } = call;
  return {
    version: call.version,
    transaction: call.transaction,
    accept: call.accept,
    forwardQuery: request.forwardQuery,
    contentType: request.headers.contentType ?? null,
    accept_header: request.headers.accept ?? null,
    body: request.body?.length ? Buffer.from(request.body).toString('base64') : null,
  };
}

function upstreamOf(link: PaymentLinkRecord): string | undefined {
  return typeof link.metadata.upstream_url === 'string' ? link.metadata.upstream_url : undefined;
}

function pending(signature: string | null, message: string): DomainError {
  return new DomainError('payment_pending', message, { signature });
}

function replayed(stored: StoredResponse): PaywallResponse {
  const response = fromStored(stored);
  response.headers['x-svc-replayed'] = 'true';
  return response;
}

function fromStored(stored: StoredResponse): PaywallResponse {
  return { status: stored.status, headers: { ...stored.headers }, body: Uint8Array.from(Buffer.from(stored.body, 'base64')) };
}

/** DECISIONS wrap_receipt: { data: <template body or upstream JSON>, receipt }. */
function wrapped(served: StoredResponse, receipt: ReceiptV1): StoredResponse {
  const text = Buffer.from(served.body, 'base64').toString('utf8');
  let data: unknown = text;
  if (/json/i.test(served.headers['content-type'] ?? '')) {
    try {
      data = JSON.parse(text) as unknown;
    } catch {
      data = text;
    }
  }
  return { status: served.status, headers: { 'content-type': 'application/json' }, body: Buffer.from(JSON.stringify({ data, receipt })).toString('base64') };
}

/** An upstream failure after settlement, as the paid call's answer (standard envelope; request_id added by HTTP). */
function errorResponse(error: DomainError): StoredResponse {
  const body = { error: error.code, message: error.message, details: error.details };
  return { status: error.status, headers: { 'content-type': 'application/json' }, body: Buffer.from(JSON.stringify(body)).toString('base64') };
}
