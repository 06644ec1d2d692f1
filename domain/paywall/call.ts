import { DomainError } from '../shared/errors.ts';
import { atomicToDecimal } from '../shared/money.ts';
import { type Network, STABLES } from '../shared/network.ts';
import type { Clock } from '../ports/clock.ts';
import type { Facilitator } from '../ports/facilitator.ts';
import type { Ledger } from '../ports/ledger.ts';
import type { OutboundHttp } from '../ports/outbound-http.ts';
import type { Store } from '../ports/store.ts';
import type { FacilitatorRequest, ResourceInfo, SettleResponse, X402RequirementsV2 } from '../facilitator/wire.ts';
import type { MppChallenge, MppSettleResponse } from '../facilitator/mpp.ts';
import type { PaymentLinkRecord } from '../payment-links/schema.ts';
import { shareUrl } from '../payment-links/service.ts';
import { sha256Hex } from '../receipts/schema.ts';
import type { PaymentHeaders } from './offer.ts';
import type { PaidCallRecord, PendingRequest, StoredResponse } from './schema.ts';

// One paid call of a payment link, top to bottom (hosted-api §4.2 rules 6–9, DECISIONS "x402 on the paywall"): claim
// it in paid_calls (exactly once across instances) → keep its request in the claim (durable before any money can
// move) → settle (or, under settle_policy on_success, verify → forward → settle) → produce the response → record
// (record.ts: counters, earn receipt, events, the stored response, webhook). A replay of a done payment gets the
// stored response; a settle whose outcome is unknown — or a process that died holding the claim — leaves it for the
// replay or the reconciliation job (reconcile.ts) to finish.
//
// core.ts builds a Call from a request (x402 header, MPP credential, a wallet's landed payment) and turns a refusal into
// its rail's 402; reconcile.ts builds one from what a claim kept. Nothing here calls back into either: the steps' pure
// helpers follow the class, in the order it uses them.

/** How long one request may hold a payment before another may take it over (settle + forward fit well inside). */
const LEASE_MS = 120_000;
const REPLAY_WINDOW_MS = 24 * 60 * 60 * 1000;
const USED_BEFORE = 'This payment was used more than 24 hours ago; its response is no longer kept.';

export interface PaywallRequest {
  id: string;
  /** ?network= as given; default chain-mainnet (rule 2) */
  network: string | undefined;
  method: string;
  /** the query string without `network`, e.g. "city=Paris" ('' when none); forwarded upstream */
  forwardQuery: string;
  headers: PaymentHeaders & {
    contentType?: string | undefined;
    accept?: string | undefined;
    authorization?: string | undefined;
    /** SIGN-IN-WITH-X: a returning payer's signed sign-in (access.ts) */
    signInWithX?: string | undefined;
  };
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

/**
 * A paid call just settled and served, for the operator's log line: public facts only (the link, what was paid in
 * human units, the buyer's wallet, the settlement's transaction signature), never a payment header.
 */
export interface PaidCallSummary {
  link_id: string;
  label: string;
  network: Network;
  protocol: string;
  /** decimal string in the paid currency's units, e.g. "0.01" */
  amount: string;
  currency: string;
  buyer: string | null;
  signature: string;
  status: number;
}

/**
 * What a paid call came to: the response it bought — fresh, or replayed from its record — or why it was refused (the
 * caller answers the refusal in its rail's form: x402's 402 offer, MPP's fresh challenges, the page's status).
 */
export type CallOutcome =
  | { kind: 'served'; response: StoredResponse; replayed: boolean; paid?: PaidCallSummary; timings?: ServerTimings }
  | { kind: 'refused'; reason: string; message: string; details?: Record<string, unknown> | undefined };

/**
 * Milliseconds each step of this request's paid call took, measured where it happens (the answer's `Server-Timing`,
 * http.ts): verify (settle_policy on_success), settle, upstream (the response produced), record.
 */
export type ServerTimings = Partial<Record<'verify' | 'settle' | 'upstream' | 'record', number>>;

/** Runs `step`, adding its wall time to `timings[name]`. */
async function timed<T>(timings: ServerTimings, name: keyof ServerTimings, step: () => Promise<T>): Promise<T> {
  const start = performance.now();
  try {
    return await step();
  } finally {
    timings[name] = (timings[name] ?? 0) + (performance.now() - start);
  }
}

/** The recorder's step (record.ts PaidCallRecorder): a settled call written once; already_used when another path did. */
export interface CallRecorder {
  record(call: Call, settled: Settled, served: StoredResponse): Promise<{ kind: 'recorded'; response: StoredResponse } | { kind: 'already_used' }>;
}

/**
 * A payment that landed: its settlement's signature and payer, and whether the facilitator that settled it answered a
 * success — it saw the transaction confirmed on the ledger (a resumed or wallet payment was only read there).
 */
export interface Settled {
  signature: string;
  payer: string | null;
  confirmed: boolean;
}

export interface PaidCallDeps {
  store: Store;
  facilitator: Facilitator;
  outbound: OutboundHttp;
  ledgers: Partial<Record<Network, Ledger>>;
  clock: Clock;
  recorder: CallRecorder;
  /** the fee payer of the facilitator that settles here (its /health, cached by core.ts) */
  feePayer: () => Promise<string>;
}

export type Produced = { ok: true; value: StoredResponse } | { ok: false; error: DomainError };

const json = (value: unknown) => new TextEncoder().encode(JSON.stringify(value));

function refusedAs(reason: string, message: string, details?: Record<string, unknown>): CallOutcome {
  return { kind: 'refused', reason, message, ...(details ? { details } : {}) };
}

export class PaidCalls {
  constructor(private readonly deps: PaidCallDeps) {}

  /**
   * Exactly once: claim the payment, or answer from its record. `waitMs`: how long to wait for a request working on
   * it (0 for reconciliation, which retries on its next run).
   */
  async pay(call: Call, waitMs: number): Promise<CallOutcome> {
    const { network } = call.link;
    const deadline = this.deps.clock.now().getTime() + waitMs;
    // A call that goes straight from its claim to settlement (no upstream to check, no verify before it) is
    // claimed already attempted, its request kept: one statement instead of claim + markAttempted.
    const attempt = call.link.settlePolicy !== 'on_success' && !upstreamOf(call.link) ? { request: pendingRequest(call) } : undefined;
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
        attempt,
      });
      const record = claim.record;
      if (claim.claimed) return this.run(call, record, claim.marked);
      if (record.linkPk !== call.link.pk) {
        return refusedAs('payment_already_used', 'This payment transaction was already used for another payment link.');
      }
      if (record.status === 'done' && record.response) {
        if (record.expiresAt.getTime() <= now.getTime()) {
          return refusedAs('payment_already_used', USED_BEFORE);
        }
        return { kind: 'served', response: record.response, replayed: true };
      }
      if (now.getTime() >= deadline)
        throw pending(record.signature, 'The first request with this payment is still settling; retry the same request to get its outcome.');
      await this.deps.clock.sleep(100);
    }
  }

  /**
   * We hold the claim: settle (resuming an earlier attempt), respond, record. The request is kept in the claim before
   * the facilitator is asked to settle, so whatever happens after — an unknown outcome, a crash — a replay
   * or the reconciliation job can finish the payment.
   */
  private async run(call: Call, record: PaidCallRecord, marked: boolean): Promise<CallOutcome> {
    const { network } = call.link;
    const request = facilitatorRequest(call);
    // `marked`: this claim inserted the row already attempted (nothing to resume, nothing more to mark)
    const resuming = record.attempted && !marked;
    let attempted = record.attempted;
    let settledAs: string | null = record.signature;
    const timings: ServerTimings = {};
    try {
      if (resuming) {
        // Money may have moved: only a facilitator with the fee payer the transaction names can learn its outcome. Any
        // other (a job runner configured with another key) would refuse it, and the refusal would drop a landed payment.
        const feePayer = call.accept.extra.feePayer;
        const ours = await this.deps.feePayer();
        if (typeof feePayer === 'string' && feePayer !== ours) {
          throw new DomainError(
            'payment_pending',
            `This payment names fee payer ${feePayer}, not this facilitator's (${ours}); it is kept for a gateway that settles with it.`,
            {
              signature: settledAs,
              reason: 'fee_payer_mismatch',
            },
          );
        }
      }
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
      // settle_policy on_success cannot hold back a wallet's payment: it landed before the paywall saw it.
      if (call.link.settlePolicy === 'on_success' && !resuming && !call.landed) {
        const verdict = await timed(timings, 'verify', () => this.deps.facilitator.verify(request));
        if (!verdict.isValid && verdict.invalidReason !== 'duplicate_settlement') {
          await this.deps.store.paidCalls.release(network, call.paymentKey);
          return refusedAs(verdict.invalidReason ?? 'invalid_payment', verdict.invalidMessage ?? 'The payment was refused.', verdict.invalidDetails);
        }
        // Already settled (by a process that died before recording it): the settle below learns from the ledger
        // whether it landed; the money moved, so the call is served and recorded like a resumed one.
        if (verdict.isValid) {
          served = await timed(timings, 'upstream', () => this.produce(call));
          if (!served.ok) {
            // DECISIONS settle_policy on_success: the buyer is not charged and gets the upstream status as
            // upstream_failed (the catch below forgets the payment).
            await this.deps.store.paymentLinks.countCall(network, call.link.pk, { at: this.deps.clock.now(), settledTxSig: null });
            throw served.error;
          }
        }
      }
      if (!attempted) {
        // Durable before the transaction can land: committed before the facilitator sees it.
        if (!(await this.deps.store.paidCalls.markAttempted(network, call.paymentKey, { request: pendingRequest(call), at: this.deps.clock.now() }))) {
          throw pending(null, 'Another request took this payment over; retry the same request to get its outcome.');
        }
        attempted = true;
      }
      const settled = await timed(timings, 'settle', () => this.settle(call, request));
      if (!settled.ok) return settled.result;
      settledAs = settled.signature;
      // before_forward (or an on_success call resumed after its answer was lost): the payment landed; an upstream
      // failure is what this paid call served (and what replays get).
      served ??= await timed(timings, 'upstream', () => this.produce(call));
      const value = served.ok ? served.value : errorResponse(served.error);
      const recorded = await timed(timings, 'record', () => this.deps.recorder.record(call, settled, value));
      // Returning payers: the paying wallet may sign in instead of paying again (core.ts signedIn). After the record,
      // outside its transaction: a crash in between costs the buyer the window, never money.
      if (recorded.kind === 'recorded' && call.link.accessWindowSeconds !== null && settled.payer) {
        await this.deps.store.linkAccess.recordPayment(network, call.link.pk, settled.payer, this.deps.clock.now());
      }
      return recorded.kind === 'recorded'
        ? {
            kind: 'served',
            response: recorded.response,
            replayed: false,
            paid: paidSummary(call, settled.signature, settled.payer, recorded.response.status),
            timings,
          }
        : refusedAs('payment_already_used', USED_BEFORE);
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

  private async settle(call: Call, request: FacilitatorRequest): Promise<({ ok: true } & Settled) | { ok: false; result: CallOutcome }> {
    const { network } = call.link;
    // The wallet rail: the buyer's wallet sent it and the ledger confirmed it (walletStatus) — nothing to settle.
    if (call.landed) return { ok: true, signature: call.landed.signature, payer: call.landed.payer, confirmed: false };
    let result: SettleResponse;
    try {
      result = call.mpp ? await this.mppSettle(call) : await this.deps.facilitator.settle(request);
    } catch (e) {
      if (e instanceof DomainError && e.code === 'payment_pending') throw pending(null, e.message);
      throw e;
    }
    if (result.success) return { ok: true, signature: result.transaction, payer: result.payer ?? null, confirmed: true };
    if (result.errorReason === 'settlement_pending') {
      throw pending(result.transaction || null, 'The payment was broadcast but its outcome is not known yet; retry the same request to get the response.');
    }
    // The facilitator's guard already settled this transaction (an earlier attempt of ours, by whichever process):
    // the ledger says whether it landed. Landed is a success to resume, never a 402.
    if (result.errorReason === 'duplicate_settlement' && result.transaction) {
      const outcome = await this.outcome(network, result.transaction);
      if (outcome === 'landed') return { ok: true, signature: result.transaction, payer: result.payer ?? null, confirmed: false };
      if (outcome === 'processing')
        throw pending(result.transaction, 'The payment landed and awaits confirmation; retry the same request to get the response.');
    }
    await this.deps.store.paidCalls.release(network, call.paymentKey);
    return {
      ok: false,
      result: refusedAs(result.errorReason ?? 'settlement_failed', result.errorMessage ?? 'The payment did not settle.', result.errorDetails),
    };
  }

  /** POST /mpp/settle, its answer in the settle shape the claim logic reads; the slot kept for the v0.2 receipt. */
  private async mppSettle(call: Call): Promise<SettleResponse> {
    const r: MppSettleResponse = await this.deps.facilitator.mppSettle({ challenge: call.mpp!.challenge, transaction: call.transaction });
    call.mpp!.slot = r.slot;
    return {
      success: r.success,
      transaction: r.signature,
      network: r.network,
      ...(r.payer ? { payer: r.payer } : {}),
      ...(r.errorReason ? { errorReason: r.errorReason } : {}),
      ...(r.errorMessage ? { errorMessage: r.errorMessage } : {}),
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
  async produce(call: Pick<Call, 'link' | 'request'>): Promise<Produced> {
    const { link, request } = call;
    const upstream = upstreamOf(link);
    if (!upstream) {
      const body = link.response.body;
      const bytes = typeof body === 'string' ? new TextEncoder().encode(body) : json(body);
      return {
        ok: true,
        value: { status: link.response.status, headers: { 'content-type': link.response.mimeType }, body: Buffer.from(bytes).toString('base64') },
      };
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
      return {
        ok: false,
        error: new DomainError('upstream_failed', `The upstream answered ${answer.status}; the payment was not settled.`, { upstream_status: answer.status }),
      };
    }
    const contentType = answer.headers['content-type'] ?? 'application/octet-stream';
    return { ok: true, value: { status: answer.status, headers: { 'content-type': contentType }, body: Buffer.from(answer.body).toString('base64') } };
  }
}

// ---- the steps' pure helpers, in the order the walk uses them ------------------------------------------------------

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

/** The call as the facilitator's verify and settle read it (x402 v2, the accept the buyer paid). */
export function facilitatorRequest(call: Call): FacilitatorRequest {
  return {
    x402Version: 2,
    paymentPayload: { x402Version: 2, resource: call.resource, accepted: call.accept, payload: { transaction: call.transaction } },
    paymentRequirements: call.accept,
  };
}

/** Rule 7: the upstream a paid call is forwarded to (metadata.upstream_url), else none: the link's response template. */
function upstreamOf(link: PaymentLinkRecord): string | undefined {
  return typeof link.metadata.upstream_url === 'string' ? link.metadata.upstream_url : undefined;
}

/** The payment may have moved and its outcome is not known yet: the buyer retries, or reconciliation finishes it. */
function pending(signature: string | null, message: string): DomainError {
  return new DomainError('payment_pending', message, { signature });
}

/** An upstream failure after settlement, as the paid call's answer (standard envelope; request_id added by HTTP). */
function errorResponse(error: DomainError): StoredResponse {
  const body = { error: error.code, message: error.message, details: error.details };
  return { status: error.status, headers: { 'content-type': 'application/json' }, body: Buffer.from(JSON.stringify(body)).toString('base64') };
}

/** The summary of a settled call: the amount of the accept the buyer paid, in its stable's units. */
function paidSummary(call: Call, signature: string, buyer: string | null, status: number): PaidCallSummary {
  const { link, accept } = call;
  const stable = STABLES[link.network].find((x) => x.mint === accept.asset);
  return {
    link_id: link.id,
    label: link.label,
    network: link.network,
    protocol: call.mpp ? 'mpp' : 'x402',
    amount: stable ? atomicToDecimal(BigInt(accept.amount), stable.decimals) : link.price,
    currency: stable?.symbol ?? link.currency,
    buyer,
    signature,
    status,
  };
}

// ---- a call built elsewhere: the resource a link offers, a buyer/payment's sale, a claim's kept request -------------

/** The resource a link's offer names: its share URL, label and response type. */
export function resourceOf(baseUrl: string, link: PaymentLinkRecord): ResourceInfo {
  return { url: shareUrl(baseUrl, link.network, link.id), description: link.label, mimeType: link.response.mimeType };
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
