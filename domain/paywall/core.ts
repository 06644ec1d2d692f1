import { DomainError } from '../shared/errors.ts';
import { Network, NETWORKS, STABLES } from '../shared/network.ts';
import { atomicToDecimal, feeFor } from '../shared/money.ts';
import type { GatewaySettings } from '../shared/settings.ts';
import type { Clock } from '../ports/clock.ts';
import type { Facilitator } from '../ports/facilitator.ts';
import type { Ledger } from '../ports/ledger.ts';
import type { OutboundHttp } from '../ports/outbound-http.ts';
import type { Store } from '../ports/store.ts';
import { decodeTransaction } from '../facilitator/decode.ts';
import type { FacilitatorHealth, FacilitatorRequest, ResourceInfo, SettleResponse } from '../facilitator/wire.ts';
import type { PaymentLinkRecord } from '../payment-links/schema.ts';
import type { AgentProof } from '../agents/proof.ts';
import { sha256Hex } from '../receipts/schema.ts';
import { acceptsFor, chooseAccept, parsePayment, type OfferTerms } from './offer.ts';
import type { PaidCallRecord, StoredResponse } from './schema.ts';
import type { LinkCache } from './link-cache.ts';
import type { PaidCallRecorder } from './record.ts';
import { acceptOfCharge, isBoundTo, type MppSettleResponse } from '../facilitator/mpp.ts';
import { issueChallenges, paymentCredentialOf, readCredential, realmOf, type IssuedChallenge } from './mpp.ts';
import { checkSession, referenceOf } from './solana-pay.ts';
import { cosignRefusal, cosignRequest, requirementsOf, walletAccount, walletTransaction, withoutFeePayerSignature } from './wallet.ts';
import { verifyPayment } from '../facilitator/verify.ts';
import { errorResponse, facilitatorRequest, pending, pendingRequest, resourceOf, upstreamOf, type Accept, type Call, type PaywallRequest } from './call.ts';

// hosted-api §4.2 (rules 1–9) with DECISIONS "Payment links" and "x402 on the paywall": the paywall's core, like
// x402's resource server — no HTTP here; http.ts renders its results, interfaces/paywall/routes.ts serves them.
//
// A paid call: parse the payment → claim it in paid_calls (exactly once across instances) → keep its request in the
// claim (durable before any money can move) → settle (or, under settle_policy on_success, verify → forward → settle)
// → record (record.ts: counters, earn receipt, events, the stored response, webhook). A replay of a done payment gets
// the stored response; a settle whose outcome is unknown — or a process that died holding the claim — leaves it for
// the replay or the reconciliation job (reconcile.ts) to finish.

/** How long one request may hold a payment before another may take it over (settle + forward fit well inside). */
const LEASE_MS = 120_000;
const REPLAY_WINDOW_MS = 24 * 60 * 60 * 1000;
/** A concurrent replay waits this long for the first request to finish. */
const WAIT_FOR_OWNER_MS = 10_000;
const HEALTH_TTL_MS = 60_000;
const UNPAID = 'Payment required: pay one of the accepts and send it in PAYMENT-SIGNATURE (x402 v2) or X-PAYMENT (v1).';
const USED_BEFORE = 'This payment was used more than 24 hours ago; its response is no longer kept.';

/**
 * What the core decided: a 402 (its offer built on demand: the unpaid one is rendered once per link and terms), or
 * the response a payment bought — fresh, or replayed from its record.
 */
export type PaywallResult =
  | {
      kind: 'payment_required';
      link: PaymentLinkRecord;
      /** set for the plain unpaid offer only: the same link record under the same terms renders the same 402 */
      terms: OfferTerms | null;
      reason: string;
      message: string;
      /** what the refusal's reason needs to be acted on, e.g. insufficient_allowance's { allowance_atomic, required_atomic } */
      details?: Record<string, unknown> | undefined;
      offer: () => { accepts: Accept[]; resource: ResourceInfo };
    }
  | {
      /** the MPP rail's 402: fresh challenges, and on a refused credential why (an error envelope's fields) */
      kind: 'mpp_required';
      link: PaymentLinkRecord;
      challenges: IssuedChallenge[];
      refusal: MppRefusal | null;
      requestId: string | undefined;
    }
  | { kind: 'served'; response: StoredResponse; replayed: boolean; paid?: PaidCallSummary };

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

/** Where the wallet payment of a paywall page stands (docs/paywall.md "In a browser"). */
export type WalletStatus =
  | { state: 'waiting' }
  /** landed, not confirmed or not recorded yet */
  | { state: 'pending'; signature: string | null }
  /** recorded; `response` only for the one read that recorded it (replays and later reads get null) */
  | { state: 'paid'; signature: string; response: StoredResponse | null; paid?: PaidCallSummary }
  | { state: 'refused'; signature: string; reason: string; message: string };

/** Why an MPP credential was refused: the error envelope's fields, answered beside fresh challenges. */
export interface MppRefusal {
  error: string;
  message: string;
  details?: Record<string, unknown>;
}

export interface PaywallCoreDeps {
  store: Store;
  /** the links as the paywall reads them (process-local, invalidated on every write) */
  links: LinkCache;
  facilitator: Facilitator;
  outbound: OutboundHttp;
  ledgers: Partial<Record<Network, Ledger>>;
  clock: Clock;
  settings: GatewaySettings;
  /** the MPP challenges' HMAC key (DECISIONS "MPP rail": stateless, tamper-evident); shared by every instance */
  mppSecret: Uint8Array;
  /**
   * DECISIONS "Agents, submissions and events": no payment into the treasury of an agent not proven on the ledger.
   * The link row says whether its owner agent was proven when read; only an unproven one costs a look.
   */
  proof: Pick<AgentProof, 'requireLinkPayable' | 'linkPayableAtHand'>;
}

type Produced = { ok: true; value: StoredResponse } | { ok: false; error: DomainError };

const json = (value: unknown) => new TextEncoder().encode(JSON.stringify(value));

function refused(call: Call, reason: string, message: string, details?: Record<string, unknown>): PaywallResult {
  return {
    kind: 'payment_required',
    link: call.link,
    terms: null,
    reason,
    message,
    ...(details ? { details } : {}),
    offer: () => ({ accepts: call.accepts, resource: call.resource }),
  };
}

export class PaywallCore {
  private health: { at: number; value: Promise<FacilitatorHealth> } | undefined;

  constructor(
    private readonly deps: PaywallCoreDeps,
    private readonly recorder: PaidCallRecorder,
  ) {}

  /** One request to /x/{id}: a 402 to render, or the response it paid for (errors are thrown as DomainErrors). */
  async handle(request: PaywallRequest): Promise<PaywallResult> {
    const link = await this.resolveLink(request);
    // before any offer, claim or settlement, on both rails: an unproven seller is offered nothing and paid nothing
    await this.deps.proof.requireLinkPayable(link);
    if (link.protocol === 'mpp') return this.handleMpp(link, request);
    const terms = await this.offerTerms(link.network);
    const payment = parsePayment(request.headers);
    const baseUrl = this.deps.settings.baseUrl;
    // The unpaid offer is built only when the HTTP layer has not rendered this link under these terms yet.
    if (!payment)
      return {
        kind: 'payment_required',
        link,
        terms,
        reason: 'payment_required',
        message: UNPAID,
        offer: () => ({ accepts: acceptsFor(link, terms), resource: resourceOf(baseUrl, link) }),
      };
    const resource = resourceOf(baseUrl, link);
    const accepts = acceptsFor(link, terms);
    const offer = () => ({ accepts, resource });
    if (!payment.ok) return { kind: 'payment_required', link, terms: null, reason: payment.reason, message: payment.message, offer };
    const accept = chooseAccept(accepts, payment);
    if (!accept) {
      return {
        kind: 'payment_required',
        link,
        terms: null,
        reason: 'requirements_mismatch',
        message: 'The payment answers an offer this link does not make (amount, asset, payTo or network differ).',
        offer,
      };
    }

    let messageBytes: Uint8Array;
    try {
      messageBytes = decodeTransaction(payment.transactionBytes).messageBytes;
    } catch (e) {
      return {
        kind: 'payment_required',
        link,
        terms: null,
        reason: 'invalid_transaction',
        message: `The payment transaction does not parse: ${(e as Error).message}`,
        offer,
      };
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
   * The MPP rail (DECISIONS "MPP rail"): no credential → 402 with fresh challenges; a credential is authenticated (its
   * challenge's HMAC, this link, these terms, its transaction bound to that challenge by memo), then paid through the
   * same claim → settle → record path as x402 (exactly once per transaction; a replay gets the stored response, also
   * after the challenge expired). Every refusal is a 402 with fresh challenges and the reason.
   */
  private async handleMpp(link: PaymentLinkRecord, request: PaywallRequest): Promise<PaywallResult> {
    const terms = await this.offerTerms(link.network);
    const resource = resourceOf(this.deps.settings.baseUrl, link);
    const accepts = acceptsFor(link, terms);
    const now = this.deps.clock.now();
    const realm = realmOf(this.deps.settings.baseUrl);
    const answer = (refusal: MppRefusal | null): PaywallResult => this.mppRequired({ link, accepts, resource, requestId: request.requestId }, refusal);
    const encoded = paymentCredentialOf(request.headers.authorization);
    if (!encoded) return answer(null);
    const read = readCredential(encoded, { secret: this.deps.mppSecret, realm, now });
    if (!read.ok) return answer({ error: read.reason, message: read.message });
    const offered = acceptOfCharge(read.request);
    const ours = accepts.find((a) => a.network === offered.network && a.asset === offered.asset && a.amount === offered.amount && a.payTo === offered.payTo);
    if (read.network !== link.network || read.request.methodDetails.resource !== resource.url || !ours) {
      return answer({
        error: 'mpp_challenge_invalid',
        message: 'The challenge was issued for another resource or other terms than this link offers.',
        details: { challenge_id: read.challenge.id },
      });
    }
    let messageBytes: Uint8Array;
    try {
      messageBytes = decodeTransaction(read.transactionBytes).messageBytes;
    } catch (e) {
      return answer({ error: 'invalid_transaction', message: `The payment transaction does not parse: ${(e as Error).message}` });
    }
    if (!isBoundTo(read.transactionBytes, read.challenge.id)) {
      return answer({
        error: 'challenge_mismatch',
        message: 'The transaction is bound to another challenge (its memo must be the challenge id): it unlocks nothing here.',
        details: { challenge_id: read.challenge.id },
      });
    }
    const paymentKey = sha256Hex(messageBytes);
    if (read.expired && !(await this.deps.store.paidCalls.get(link.network, paymentKey))) {
      return answer({
        error: 'mpp_challenge_expired',
        message: 'The challenge expired (they are valid 5 minutes): answer a fresh one.',
        details: { challenge_id: read.challenge.id, expires: read.challenge.expires ?? null },
      });
    }
    const call: Call = {
      link,
      request,
      resource,
      accepts,
      // the terms the buyer signed for (the facilitator holds the fee terms to its own)
      accept: { ...offered, maxTimeoutSeconds: ours.maxTimeoutSeconds },
      version: 2,
      transaction: read.transaction,
      paymentKey,
      mpp: { challenge: read.challenge },
    };
    return this.pay(call, WAIT_FOR_OWNER_MS);
  }

  /** A refusal of a call in its rail's form: x402's 402 offer, or MPP's 402 with fresh challenges. */
  private refused(call: Call, reason: string, message: string, details?: Record<string, unknown>): PaywallResult {
    if (!call.mpp) return refused(call, reason, message, details);
    return this.mppRequired(
      { link: call.link, accepts: call.accepts, resource: call.resource, requestId: call.request.requestId },
      { error: reason, message, ...(details ? { details } : {}) },
    );
  }

  /** MPP's 402: fresh challenges for the link's terms, and the refusal's reason when there is one. */
  private mppRequired(
    offer: { link: PaymentLinkRecord; accepts: Accept[]; resource: ResourceInfo; requestId: string | undefined },
    refusal: MppRefusal | null,
  ): PaywallResult {
    const challenges = issueChallenges({
      secret: this.deps.mppSecret,
      realm: realmOf(this.deps.settings.baseUrl),
      network: offer.link.network,
      accepts: offer.accepts,
      resource: offer.resource,
      now: this.deps.clock.now(),
    });
    return { kind: 'mpp_required', link: offer.link, challenges, refusal, requestId: offer.requestId };
  }

  /**
   * The unpaid offer of a link for a person's browser (the paywall page): rules 1–2 and the proof check as `handle`,
   * whatever the link's method (the page describes how to call it), x402 and MPP links alike.
   */
  async offerOf(request: {
    id: string;
    network: string | undefined;
  }): Promise<{ link: PaymentLinkRecord; accepts: Accept[]; resource: ResourceInfo; terms: OfferTerms }> {
    const link = await this.resolveLink({ ...request, method: null });
    await this.deps.proof.requireLinkPayable(link);
    const terms = await this.offerTerms(link.network);
    return { link, accepts: acceptsFor(link, terms), resource: resourceOf(this.deps.settings.baseUrl, link), terms };
  }

  /**
   * A Solana Pay transaction request's POST (wallet.ts): the page's session checked (ours, this link, not expired), the
   * settlement built for the wallet's account with the page's reference, co-signed by the facilitator (which verifies it
   * as it would settle it: layout, fee leg, proven payee, the buyer's funds). The wallet signs and sends it.
   */
  async walletTransaction(input: {
    id: string;
    network: string | undefined;
    account: unknown;
    session: { reference: unknown; expires: unknown; sig: unknown };
  }): Promise<{ transaction: string; message: string }> {
    const { link, accepts, resource, terms } = await this.offerOf(input);
    if (link.protocol !== 'x402') throw new DomainError('invalid_request', 'This link is paid on the MPP rail; a wallet pays x402 links.');
    const session = checkSession({ key: this.deps.mppSecret, network: link.network, id: link.id, ...input.session, now: this.deps.clock.now() });
    if (!session.ok)
      throw new DomainError(session.reason, session.message, { reason: session.reason === 'transaction_expired' ? 'page_expired' : 'session_invalid' });
    const account = walletAccount(input.account, terms.feePayer);
    const ledger = this.deps.ledgers[link.network];
    if (!ledger) throw new DomainError('service_unavailable', `No ledger for ${link.network}.`);
    const accept = accepts[0]!;
    const { blockhash } = await ledger.getLatestBlockhash();
    const unsigned = walletTransaction({ network: link.network, accept, feePayer: terms.feePayer, account, reference: session.reference, blockhash });
    const answer = await this.deps.facilitator.cosign(cosignRequest(accept, resource, unsigned));
    if (!answer.success) throw cosignRefusal(answer);
    const stable = STABLES[link.network].find((x) => x.mint === accept.asset);
    const gross = requirementsOf(link.network, accept);
    const total = gross.amount + (gross.fee ? feeFor(gross.amount, gross.fee.bps) : 0n);
    return {
      transaction: answer.transaction,
      message: `${link.label}: ${atomicToDecimal(total, gross.decimals)} ${stable?.symbol ?? link.currency}`.slice(0, 200),
    };
  }

  /**
   * The status of a page's wallet payment, read by the page holding the session's secret: the transactions naming the
   * reference, oldest first; the first confirmed one that is this link's settlement (re-verified: fee payer, legs,
   * fee) is paid through the paywall's own claim → record path (exactly once, whichever instance or request reads
   * it first) as a settled x402 payment. Transactions that are not such a settlement are ignored (the reference is
   * public). The response goes to the read that recorded it; later reads learn it was paid.
   */
  async walletStatus(input: { id: string; network: string | undefined; reference: string; secret: string }): Promise<WalletStatus> {
    if (referenceOf(input.secret) !== input.reference) throw new DomainError('forbidden', "The page's secret does not match this payment's reference.");
    const { link, accepts, resource, terms } = await this.offerOf(input);
    const ledger = this.deps.ledgers[link.network];
    if (!ledger) throw new DomainError('service_unavailable', `No ledger for ${link.network}.`);
    // The reference is public (the QR code): anyone may land transactions naming it, paying their own fees. A full page
    // of the JSON-RPC's answer (its maximum, 1000) keeps a paid page from being buried under a few dozen of them.
    const seen = (await ledger.getSignaturesForAddress(input.reference, { limit: 1000 })).filter((x) => x.err === null).reverse();
    const requirements = accepts.map((a) => ({ accept: a, requirements: requirementsOf(link.network, a) }));
    for (const candidate of seen) {
      const [status] = await ledger.getSignatureStatuses([candidate.signature]);
      if (!status || status.err !== null) continue;
      if (status.confirmationStatus === 'processed') return { state: 'pending', signature: candidate.signature };
      const tx = await ledger.getTransaction(candidate.signature);
      if (!tx || tx.signers[0] !== terms.feePayer) continue;
      const unsigned = withoutFeePayerSignature(tx.wire);
      const match = requirements
        .map((r) => ({
          ...r,
          verdict: verifyPayment({
            transaction: unsigned,
            requirements: r.requirements,
            facilitator: { feePayer: terms.feePayer, enforcement: this.deps.settings.fee.enforcement },
          }),
        }))
        .find((r) => r.verdict.isValid);
      if (!match?.verdict.isValid) continue;
      const call: Call = {
        link,
        request: { id: link.id, network: link.network, method: link.method, forwardQuery: '', headers: {}, body: undefined },
        resource,
        accepts,
        accept: match.accept,
        version: 2,
        transaction: Buffer.from(tx.wire).toString('base64'),
        paymentKey: sha256Hex(decodeTransaction(tx.wire).messageBytes),
        landed: { signature: candidate.signature, payer: match.verdict.payer },
      };
      let result: PaywallResult;
      try {
        result = await this.pay(call, WAIT_FOR_OWNER_MS);
      } catch (e) {
        if (e instanceof DomainError && e.code === 'payment_pending') return { state: 'pending', signature: candidate.signature };
        throw e;
      }
      if (result.kind === 'served') {
        return result.replayed
          ? { state: 'paid', signature: candidate.signature, response: null }
          : { state: 'paid', signature: candidate.signature, response: result.response, ...(result.paid ? { paid: result.paid } : {}) };
      }
      if (result.kind === 'payment_required') return { state: 'refused', signature: candidate.signature, reason: result.reason, message: result.message };
    }
    return { state: 'waiting' };
  }

  /** Rules 1–3 and the DECISIONS error bodies: 404, 403 wrong_network naming the right one, 410, 405 + Allow (method null: any). */
  private async resolveLink(request: { id: string; network: string | undefined; method: string | null }): Promise<PaymentLinkRecord> {
    const parsed = Network.safeParse(request.network ?? 'chain-mainnet');
    if (!parsed.success) {
      throw DomainError.invalid(
        [{ path: 'network', message: `network must be one of ${NETWORKS.join(', ')}`, code: 'invalid_enum_value' }],
        'Unknown network.',
      );
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
    if (request.method !== null && request.method.toUpperCase() !== link.method) {
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
    const terms: OfferTerms = {
      feePayer: health.fee_payer,
      fee: fee.bps > 0 ? { bps: fee.bps, feeAuthority: authority } : null,
      facilitator: this.deps.settings.facilitatorUrl,
    };
    // One object per health answer, so a rendered challenge can tell whether its terms still hold by identity.
    this.terms.set(network, { health, terms });
    return terms;
  }

  private readonly terms = new Map<Network, { health: FacilitatorHealth; terms: OfferTerms }>();

  /**
   * The 402 fast path: the link and terms `handle` would use for an unpaid request, when both are at hand
   * without I/O (the link cached and fresh, the facilitator's health fresh and its terms derived); undefined otherwise,
   * and `handle` decides. Only a link `handle` would answer with its unpaid offer qualifies (enabled, x402, the method,
   * its owner agent proven).
   */
  unpaidAtHand(network: Network, id: string, method: string): { link: PaymentLinkRecord; terms: OfferTerms } | undefined {
    const link = this.deps.links.peek(network, id);
    if (!link || link.disabled || link.protocol !== 'x402' || method !== link.method || !this.deps.proof.linkPayableAtHand(link)) return undefined;
    const health = this.health;
    if (!health || this.deps.clock.now().getTime() - health.at > HEALTH_TTL_MS) return undefined;
    const known = this.terms.get(network);
    if (!known || !this.settledHealth.has(health.value) || this.settledHealth.get(health.value) !== known.health) return undefined;
    return { link, terms: known.terms };
  }

  /** the answer each health promise settled with (so a fresh one is known without awaiting it) */
  private readonly settledHealth = new WeakMap<Promise<FacilitatorHealth>, FacilitatorHealth>();

  private async facilitatorHealth(): Promise<FacilitatorHealth> {
    const now = this.deps.clock.now().getTime();
    if (!this.health || now - this.health.at > HEALTH_TTL_MS) {
      const value = this.deps.facilitator.health();
      this.health = { at: now, value };
      value.then((h) => this.settledHealth.set(value, h)).catch(() => {});
      value.catch(() => {
        if (this.health?.value === value) this.health = undefined;
      });
    }
    return this.health.value;
  }

  /**
   * Exactly once: claim the payment, or answer from its record. `waitMs`: how long to wait for a request working on
   * it (0 for reconciliation, which retries on its next run).
   */
  async pay(call: Call, waitMs: number): Promise<PaywallResult> {
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
        return this.refused(call, 'payment_already_used', 'This payment transaction was already used for another payment link.');
      }
      if (record.status === 'done' && record.response) {
        if (record.expiresAt.getTime() <= now.getTime()) {
          return this.refused(call, 'payment_already_used', USED_BEFORE);
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
  private async run(call: Call, record: PaidCallRecord, marked: boolean): Promise<PaywallResult> {
    const { network } = call.link;
    const request = facilitatorRequest(call);
    // `marked`: this claim inserted the row already attempted (nothing to resume, nothing more to mark)
    const resuming = record.attempted && !marked;
    let attempted = record.attempted;
    let settledAs: string | null = record.signature;
    try {
      if (resuming) {
        // Money may have moved: only a facilitator with the fee payer the transaction names can learn its outcome. Any
        // other (a job runner configured with another key) would refuse it, and the refusal would drop a landed payment.
        const feePayer = call.accept.extra.feePayer;
        const ours = (await this.facilitatorHealth()).fee_payer;
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
        const verdict = await this.deps.facilitator.verify(request);
        if (!verdict.isValid && verdict.invalidReason !== 'duplicate_settlement') {
          await this.deps.store.paidCalls.release(network, call.paymentKey);
          return this.refused(call, verdict.invalidReason ?? 'invalid_payment', verdict.invalidMessage ?? 'The payment was refused.', verdict.invalidDetails);
        }
        // Already settled (by a process that died before recording it): the settle below learns from the ledger
        // whether it landed; the money moved, so the call is served and recorded like a resumed one.
        if (verdict.isValid) {
          served = await this.produce(call);
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
      const settled = await this.settle(call, request);
      if (!settled.ok) return settled.result;
      settledAs = settled.signature;
      // before_forward (or an on_success call resumed after its answer was lost): the payment landed; an upstream
      // failure is what this paid call served (and what replays get).
      served ??= await this.produce(call);
      const value = served.ok ? served.value : errorResponse(served.error);
      const recorded = await this.recorder.record(call, settled.signature, settled.payer, value);
      return recorded.kind === 'recorded'
        ? { kind: 'served', response: recorded.response, replayed: false, paid: paidSummary(call, settled.signature, settled.payer, recorded.response.status) }
        : this.refused(call, 'payment_already_used', USED_BEFORE);
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

  private async settle(
    call: Call,
    request: FacilitatorRequest,
  ): Promise<{ ok: true; signature: string; payer: string | null } | { ok: false; result: PaywallResult }> {
    const { network } = call.link;
    // The wallet rail: the buyer's wallet sent it and the ledger confirmed it (walletStatus) — nothing to settle.
    if (call.landed) return { ok: true, signature: call.landed.signature, payer: call.landed.payer };
    let result: SettleResponse;
    try {
      result = call.mpp ? await this.mppSettle(call) : await this.deps.facilitator.settle(request);
    } catch (e) {
      if (e instanceof DomainError && e.code === 'payment_pending') throw pending(null, e.message);
      throw e;
    }
    if (result.success) return { ok: true, signature: result.transaction, payer: result.payer ?? null };
    if (result.errorReason === 'settlement_pending') {
      throw pending(result.transaction || null, 'The payment was broadcast but its outcome is not known yet; retry the same request to get the response.');
    }
    // The facilitator's guard already settled this transaction (an earlier attempt of ours, by whichever process):
    // the ledger says whether it landed. Landed is a success to resume, never a 402.
    if (result.errorReason === 'duplicate_settlement' && result.transaction) {
      const outcome = await this.outcome(network, result.transaction);
      if (outcome === 'landed') return { ok: true, signature: result.transaction, payer: result.payer ?? null };
      if (outcome === 'processing')
        throw pending(result.transaction, 'The payment landed and awaits confirmation; retry the same request to get the response.');
    }
    await this.deps.store.paidCalls.release(network, call.paymentKey);
    return {
      ok: false,
      result: this.refused(call, result.errorReason ?? 'settlement_failed', result.errorMessage ?? 'The payment did not settle.', result.errorDetails),
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
  private async produce(call: Call): Promise<Produced> {
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
