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
import type { FacilitatorHealth, ResourceInfo } from '../facilitator/wire.ts';
import type { PaymentLinkRecord } from '../payment-links/schema.ts';
import type { AgentProof } from '../agents/proof.ts';
import { sha256Hex } from '../receipts/schema.ts';
import { acceptsFor, chooseAccept, parsePayment, type OfferTerms } from './offer.ts';
import type { StoredResponse } from './schema.ts';
import type { LinkCache } from './link-cache.ts';
import { OfferBlockhashes, type OfferBlockhash } from './blockhash.ts';
import { acceptOfCharge, bindingOf } from '../facilitator/mpp.ts';
import { issueChallenges, paymentCredentialOf, readCredential, realmOf, type IssuedChallenge } from './mpp.ts';
import { checkSession, referenceOf } from './solana-pay.ts';
import { cosignRefusal, cosignRequest, requirementsOf, walletAccount, walletTransaction, withoutFeePayerSignature } from './wallet.ts';
import { requestBindingOf, verifyPayment } from '../facilitator/verify.ts';
import { bindingMemo, boundDigestOf, REQUEST_BINDING_EXTENSION, REQUEST_BINDING_PREFIX, requestDigest } from '../shared/request-binding.ts';
import { checkSignIn, SIGN_IN_WITH_X, signInChallenge } from './access.ts';
import { formatAccessWindow } from '../payment-links/schema.ts';
import type { ReceiptSigner } from '../receipts/signing.ts';
import { offersRenewAt, signedOffers, OFFER_RECEIPT } from './offer-receipt.ts';
import { PAYMENT_ID_DECLARATION, PAYMENT_IDENTIFIER, paymentIdConflict, paymentIdOf } from './payment-id.ts';
import { PaidCalls, resourceOf, type Accept, type Call, type CallOutcome, type CallRecorder, type PaidCallSummary, type PaywallRequest } from './call.ts';

export type { PaidCallSummary } from './call.ts';

// hosted-api §4.2 (rules 1–9) with DECISIONS "Payment links" and "x402 on the paywall": the paywall's core, like
// x402's resource server — no HTTP here; http.ts renders its results, interfaces/paywall/routes.ts serves them.
//
// A request: resolve the link (rules 1–3) → no payment: the unpaid 402 → a payment: parse it (x402 header, MPP
// credential) into a Call → call.ts pays it (claim → settle → produce → record) → its outcome, a refusal answered in
// the rail's 402. The paywall page's wallet payment (walletStatus) is paid through the same call.ts walk.

/** A concurrent replay waits this long for the first request to finish. */
const WAIT_FOR_OWNER_MS = 10_000;
/** A payment id stays bound to its payment as long as the paid call's response is kept for replays (call.ts). */
const PAYMENT_ID_WINDOW_MS = 24 * 60 * 60 * 1000;
const HEALTH_TTL_MS = 60_000;
/** plain requests' digests kept (one per link and method in use) */
const MAX_PLAIN_DIGESTS = 10_000;
const UNPAID = 'Payment required: pay one of the accepts and send it in PAYMENT-SIGNATURE (x402 v2) or X-PAYMENT (v1).';

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
      offer: () => OfferBuilt;
    }
  | {
      /** the MPP rail's 402: fresh challenges, and on a refused credential why (an error envelope's fields) */
      kind: 'mpp_required';
      link: PaymentLinkRecord;
      challenges: IssuedChallenge[];
      refusal: MppRefusal | null;
      requestId: string | undefined;
    }
  | Extract<CallOutcome, { kind: 'served' }>;

/** Where the wallet payment of a paywall page stands (docs/paywall.md "In a browser"). */
export type WalletStatus =
  | { state: 'waiting' }
  /** landed, not confirmed or not recorded yet */
  | { state: 'pending'; signature: string | null }
  /** recorded; `response` only for the one read that recorded it (replays and later reads get null) */
  | { state: 'paid'; signature: string; response: StoredResponse | null; paid?: PaidCallSummary }
  | { state: 'refused'; signature: string; reason: string; message: string };

/**
 * An x402 offer as the 402 renders it: the accepts and resource, and the extensions the gateway adds (payment-identifier's
 * declaration, the signed offers); `renewAt` (ms): when a rendered copy must be signed again.
 */
export interface OfferBuilt {
  accepts: Accept[];
  resource: ResourceInfo;
  extensions?: Record<string, unknown> | undefined;
  renewAt?: number | undefined;
}

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
  /** signs the offers of the 402s and the receipts of paid answers (x402 offer-receipt); none: neither is signed */
  signer?: ReceiptSigner | undefined;
}

/** extensions["svc.request-binding"]: the digest of the request a 402 answered, and whether the link requires binding. */
function bindingExtension(digest: string, link: PaymentLinkRecord) {
  return { info: { version: '1', digest, memoPrefix: REQUEST_BINDING_PREFIX, required: link.requestBinding === 'required' } };
}

/** The request-binding digest of a request to a link's resource (request-binding.ts): what its payment must name. */
function digestOf(request: Pick<PaywallRequest, 'method' | 'forwardQuery' | 'body'>, resource: ResourceInfo): Promise<string> {
  return requestDigest({ method: request.method, path: new URL(resource.url).pathname, query: request.forwardQuery, body: request.body });
}

/**
 * The request a paywall page stands for — a browser's GET of the resource, no query for the seller, no body — which
 * the page's wallet payment is bound to and produces (request-binding.ts), so a link requiring binding is payable there.
 */
function pageDigestOf(resource: ResourceInfo): Promise<string> {
  return digestOf({ method: 'GET', forwardQuery: '', body: undefined }, resource);
}

/** Why a payment's request binding refuses it (checked before anything is claimed or settled), or null. */
function bindingRefusal(
  binding: 'bound' | 'foreign' | 'unbound',
  link: PaymentLinkRecord,
  digest: string,
  unboundHint: string,
): { reason: string; message: string; details: Record<string, unknown> } | null {
  if (binding === 'bound' || (binding === 'unbound' && link.requestBinding !== 'required')) return null;
  return {
    reason: binding === 'foreign' ? 'payment_bound_elsewhere' : 'payment_unbound',
    message:
      binding === 'foreign'
        ? 'The payment is bound (by its memo) to another request — another resource, query or body: it pays for that request only.'
        : `This link accepts only request-bound payments: ${unboundHint}`,
    details: { request_digest: digest },
  };
}

/** x402's 402 for a refused payment: the call's offer and why. */
function refused(offer: { call: Call; build: () => OfferBuilt }, reason: string, message: string, details?: Record<string, unknown>): PaywallResult {
  return { kind: 'payment_required', link: offer.call.link, terms: null, reason, message, ...(details ? { details } : {}), offer: offer.build };
}

/**
 * Rules 1 and 3 on a found link: why it answers no request with this method (method null: any), or null when it does.
 * `handle` throws the refusal (410, 405 + Allow); the unpaid 402 without I/O (`unpaidAtHand`) leaves the request to it.
 */
function linkRefusal(link: PaymentLinkRecord, method: string | null): 'payment_link_disabled' | 'method_not_allowed' | null {
  if (link.disabled) return 'payment_link_disabled';
  if (method !== null && method.toUpperCase() !== link.method) return 'method_not_allowed';
  return null;
}

export class PaywallCore {
  private health: { at: number; value: Promise<FacilitatorHealth> } | undefined;

  /**
   * The request digest of a plain request (no query for the seller, no body) by method and resource URL: one per link
   * and method, so computed once — not two WebCrypto digests (each a thread-pool job) per paid call and 402.
   */
  private readonly plainDigests = new Map<string, Promise<string>>();

  private plainDigest(method: string, url: string): Promise<string> {
    const key = `${method}\u0000${url}`;
    let digest = this.plainDigests.get(key);
    if (!digest) {
      if (this.plainDigests.size >= MAX_PLAIN_DIGESTS) this.plainDigests.delete(this.plainDigests.keys().next().value!);
      digest = requestDigest({ method, path: new URL(url).pathname, query: '', body: undefined });
      this.plainDigests.set(key, digest);
      digest.catch(() => this.plainDigests.delete(key));
    }
    return digest;
  }

  /** one paid call's walk (call.ts), shared with the reconciliation job */
  readonly calls: PaidCalls;

  constructor(
    private readonly deps: PaywallCoreDeps,
    recorder: CallRecorder,
  ) {
    this.calls = new PaidCalls({ ...deps, recorder, feePayer: async () => (await this.facilitatorHealth()).fee_payer });
    this.blockhashes = new OfferBlockhashes({ ledgers: deps.ledgers });
  }

  /** One request to /x/{id}: a 402 to render, or the response it paid for (errors are thrown as DomainErrors). */
  async handle(request: PaywallRequest): Promise<PaywallResult> {
    const link = await this.resolveLink(request);
    // before any offer, claim or settlement, on both rails: an unproven seller is offered nothing and paid nothing
    await this.deps.proof.requireLinkPayable(link);
    if (link.protocol === 'mpp') return this.handleMpp(link, request);
    const terms = await this.offerTerms(link.network);
    const payment = parsePayment(request.headers);
    const baseUrl = this.deps.settings.baseUrl;
    const resource = resourceOf(baseUrl, link);
    // Request-bound payments: the digest of this request, stated in the 402 for scheme clients and held against the
    // payment's binding memo. A plain request (no query for the seller, no body) has one digest per link, so its 402
    // stays rendered once; any other is rendered for itself.
    const plain = request.forwardQuery === '' && !request.body?.length;
    const digest = plain ? await this.plainDigest(request.method, resource.url) : await digestOf(request, resource);
    const extensions = { ...this.accessExtension(link, resource), [REQUEST_BINDING_EXTENSION]: bindingExtension(digest, link) };
    // The unpaid offer is built only when the HTTP layer has not rendered this link under these terms yet.
    if (!payment) {
      const access = link.accessWindowSeconds !== null ? await this.signedIn(link, resource, request) : null;
      if (access?.kind === 'served') return access;
      return {
        kind: 'payment_required',
        link,
        // a sign-in challenge carries a fresh nonce: rendered for each request
        terms: plain && link.accessWindowSeconds === null ? terms : null,
        reason: access?.reason ?? 'payment_required',
        message: access?.message ?? UNPAID,
        offer: () => this.offerBuilt(acceptsFor(link, terms), resource, extensions),
      };
    }
    const accepts = acceptsFor(link, terms);
    const offer = () => this.offerBuilt(accepts, resource, extensions);
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

    let decoded: ReturnType<typeof decodeTransaction>;
    try {
      decoded = decodeTransaction(payment.transactionBytes);
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
    // Checked before anything is claimed or settled: a payment made for another request moves no money here.
    const unbound = bindingRefusal(
      requestBindingOf(decoded, digest),
      link,
      digest,
      `a memo "${REQUEST_BINDING_PREFIX}<digest>" naming this request (the digest is in the 402's extensions["${REQUEST_BINDING_EXTENSION}"]).`,
    );
    if (unbound) return { kind: 'payment_required', link, terms: null, ...unbound, offer };
    const messageBytes = decoded.messageBytes;
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
    const paymentId = paymentIdOf(payment.extensions);
    if (paymentId === null) return this.answer(call, await this.calls.pay(call, WAIT_FOR_OWNER_MS));
    return this.payIdentified(call, paymentId);
  }

  /**
   * payment-id.ts: the id is bound to this payment (or was, by an earlier request with it), else refused before anything
   * settles; then the paid call as any other — its claim answers a done payment's stored response, waits for one in
   * flight. A payment refused with nothing moved frees its id for the buyer's next payment.
   */
  private async payIdentified(call: Call, paymentId: string): Promise<PaywallResult> {
    const { network, pk: linkPk } = call.link;
    const now = this.deps.clock.now();
    const binding = { network, linkPk, paymentId, paymentKey: call.paymentKey };
    const bound = await this.deps.store.paymentIds.bind({ ...binding, at: now, expiresAt: new Date(now.getTime() + PAYMENT_ID_WINDOW_MS) });
    if (bound.paymentKey !== call.paymentKey) throw paymentIdConflict(paymentId);
    // only this request's own binding is freed: a retry of the same payment that bound it since keeps it
    const free = () =>
      bound.generation === null ? Promise.resolve() : this.deps.store.paymentIds.unbind({ ...binding, generation: bound.generation }).catch(() => {});
    let outcome: CallOutcome;
    try {
      outcome = await this.calls.pay(call, WAIT_FOR_OWNER_MS);
    } catch (e) {
      // pending (money may have moved) keeps its claim, and unbind keeps the id with it
      if (!(e instanceof DomainError && e.code === 'payment_pending')) await free();
      throw e;
    }
    if (outcome.kind === 'refused') await free();
    return this.answer(call, outcome);
  }

  /**
   * The x402 offer with the gateway's extensions: payment-identifier declared, each accept's offer signed, and the
   * request's own (`perRequest`: request binding, a sign-in challenge).
   */
  private offerBuilt(accepts: Accept[], resource: ResourceInfo, perRequest: Record<string, unknown> = {}): OfferBuilt {
    const extensions: Record<string, unknown> = { ...perRequest, [PAYMENT_IDENTIFIER]: PAYMENT_ID_DECLARATION };
    const signer = this.deps.signer;
    if (!signer) return { accepts, resource, extensions };
    const now = this.deps.clock.now();
    extensions[OFFER_RECEIPT] = signedOffers(signer, { accepts, resource, now });
    return { accepts, resource, extensions, renewAt: offersRenewAt(now) };
  }

  /**
   * The MPP rail (DECISIONS "MPP rail"): no credential → 402 with fresh challenges, bound to this request (their
   * externalId is its binding memo); a credential is authenticated (its challenge's HMAC, this link, these terms), held
   * to this request (its challenge's and its transaction's binding, before anything is claimed), its transaction not
   * bound to another challenge by memo, then paid through the same claim → settle → record path as x402 (exactly once
   * per transaction; a replay gets the stored response, also after the challenge expired). Every refusal is a 402
   * with fresh challenges and the reason.
   */
  private async handleMpp(link: PaymentLinkRecord, request: PaywallRequest): Promise<PaywallResult> {
    const terms = await this.offerTerms(link.network);
    const resource = resourceOf(this.deps.settings.baseUrl, link);
    const accepts = acceptsFor(link, terms);
    const now = this.deps.clock.now();
    const realm = realmOf(this.deps.settings.baseUrl);
    const digest = await digestOf(request, resource);
    const answer = (refusal: MppRefusal | null): PaywallResult => this.mppRequired({ link, accepts, resource, digest, requestId: request.requestId }, refusal);
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
    let decoded: ReturnType<typeof decodeTransaction>;
    try {
      decoded = decodeTransaction(read.transactionBytes);
    } catch (e) {
      return answer({ error: 'invalid_transaction', message: `The payment transaction does not parse: ${(e as Error).message}` });
    }
    const stated = boundDigestOf(read.request.externalId ?? '');
    const unbound = bindingRefusal(
      requestBindingOf(decoded, digest, { id: read.challenge.id, digest: stated }),
      link,
      digest,
      "a memo holding the challenge's externalId (its request-binding memo) or id — @solana/mpp writes the externalId.",
    );
    if (unbound) return answer({ error: unbound.reason, message: unbound.message, details: { ...unbound.details, challenge_id: read.challenge.id } });
    if (bindingOf(read.transactionBytes, { id: read.challenge.id, request: read.request }) === 'foreign') {
      return answer({
        error: 'challenge_mismatch',
        message: 'The transaction is bound to another challenge (a memo names neither this challenge id nor its externalId): it unlocks nothing here.',
        details: { challenge_id: read.challenge.id },
      });
    }
    const paymentKey = sha256Hex(decoded.messageBytes);
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
    return this.answer(call, await this.calls.pay(call, WAIT_FOR_OWNER_MS), digest);
  }

  /** A paid call's outcome as the core's result: what it bought, or its refusal in the rail's form (MPP: `digest` binds the fresh challenges). */
  private answer(call: Call, outcome: CallOutcome, digest?: string): PaywallResult {
    if (outcome.kind === 'served') return outcome;
    const { reason, message, details } = outcome;
    if (!call.mpp || digest === undefined) return refused({ call, build: () => this.offerBuilt(call.accepts, call.resource) }, reason, message, details);
    // MPP's 402 with fresh challenges, the refusal's reason beside them
    return this.mppRequired(
      { link: call.link, accepts: call.accepts, resource: call.resource, digest, requestId: call.request.requestId },
      { error: reason, message, ...(details ? { details } : {}) },
    );
  }

  /** MPP's 402: fresh challenges for the link's terms, bound to the request of `digest`, and the refusal's reason when there is one. */
  private mppRequired(
    offer: { link: PaymentLinkRecord; accepts: Accept[]; resource: ResourceInfo; digest: string; requestId: string | undefined },
    refusal: MppRefusal | null,
  ): PaywallResult {
    const challenges = issueChallenges({
      secret: this.deps.mppSecret,
      realm: realmOf(this.deps.settings.baseUrl),
      network: offer.link.network,
      accepts: offer.accepts,
      resource: offer.resource,
      digest: offer.digest,
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
    const [{ blockhash }, digest] = await Promise.all([ledger.getLatestBlockhash(), pageDigestOf(resource)]);
    const unsigned = walletTransaction({
      network: link.network,
      accept,
      feePayer: terms.feePayer,
      account,
      reference: session.reference,
      blockhash,
      memo: bindingMemo(digest),
    });
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
   * public), as are those bound to another request than the page's, or unbound where the link requires binding. The
   * response goes to the read that recorded it; later reads learn it was paid.
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
    const digest = await pageDigestOf(resource);
    for (const candidate of seen) {
      const [status] = await ledger.getSignatureStatuses([candidate.signature]);
      if (!status || status.err !== null) continue;
      if (status.confirmationStatus === 'processed') return { state: 'pending', signature: candidate.signature };
      const tx = await ledger.getTransaction(candidate.signature);
      if (!tx || tx.signers[0] !== terms.feePayer) continue;
      const decoded = decodeTransaction(tx.wire);
      if (bindingRefusal(requestBindingOf(decoded, digest), link, digest, '')) continue;
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
        paymentKey: sha256Hex(decoded.messageBytes),
        landed: { signature: candidate.signature, payer: match.verdict.payer },
      };
      let result: CallOutcome;
      try {
        result = await this.calls.pay(call, WAIT_FOR_OWNER_MS);
      } catch (e) {
        if (e instanceof DomainError && e.code === 'payment_pending') return { state: 'pending', signature: candidate.signature };
        throw e;
      }
      if (result.kind === 'served') {
        return result.replayed
          ? { state: 'paid', signature: candidate.signature, response: null }
          : { state: 'paid', signature: candidate.signature, response: result.response, ...(result.paid ? { paid: result.paid } : {}) };
      }
      return { state: 'refused', signature: candidate.signature, reason: result.reason, message: result.message };
    }
    return { state: 'waiting' };
  }

  /** extensions["sign-in-with-x"] of a link with an access window: a fresh challenge (none for other links). */
  private accessExtension(link: PaymentLinkRecord, resource: ResourceInfo): Record<string, unknown> {
    if (link.accessWindowSeconds === null) return {};
    const { baseUrl } = this.deps.settings;
    return {
      [SIGN_IN_WITH_X]: signInChallenge({ secret: this.deps.mppSecret, baseUrl, resourceUrl: resource.url, network: link.network, now: this.deps.clock.now() }),
    };
  }

  /**
   * A returning payer (link with an access_window): the SIGN-IN-WITH-X header checked (access.ts), the wallet's last
   * paid call on this link within the window, the nonce spent once — then the link's response, with no payment, no
   * receipt and no counters (an access is not a sale: docs/paywall.md "Returning payers"). Null without the header; a
   * refusal's reason otherwise (the caller answers the 402 with a fresh challenge).
   */
  private async signedIn(
    link: PaymentLinkRecord,
    resource: ResourceInfo,
    request: PaywallRequest,
  ): Promise<Extract<PaywallResult, { kind: 'served' }> | { kind: 'refused'; reason: string; message: string } | null> {
    const header = request.headers.signInWithX;
    if (!header || link.accessWindowSeconds === null) return null;
    const now = this.deps.clock.now();
    const check = checkSignIn(header, {
      secret: this.deps.mppSecret,
      baseUrl: this.deps.settings.baseUrl,
      resourceUrl: resource.url,
      network: link.network,
      now,
    });
    if (!check.ok) return { kind: 'refused', reason: check.reason, message: check.message };
    const paidAt = await this.deps.store.linkAccess.lastPaid(link.network, link.pk, check.address);
    if (!paidAt) return { kind: 'refused', reason: 'siwx_not_paid', message: `${check.address} has not paid for this link: pay once, then sign in.` };
    if (now.getTime() - paidAt.getTime() > link.accessWindowSeconds * 1000) {
      return {
        kind: 'refused',
        reason: 'siwx_access_expired',
        message: `The access ${check.address} bought on ${paidAt.toISOString()} lasted ${formatAccessWindow(link.accessWindowSeconds)}: pay again.`,
      };
    }
    if (!(await this.deps.store.linkAccess.useNonce(check.nonce, check.expiresAt, now))) {
      return { kind: 'refused', reason: 'siwx_nonce_used', message: 'This sign-in was already used: sign the fresh challenge in this 402.' };
    }
    const produced = await this.calls.produce({ link, request });
    if (!produced.ok) throw produced.error;
    const response = { ...produced.value, headers: { ...produced.value.headers, 'x-svc-access': SIGN_IN_WITH_X } };
    return { kind: 'served', response, replayed: false };
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
    const refusal = linkRefusal(link, request.method);
    if (refusal === 'payment_link_disabled') throw new DomainError(refusal, `Payment link ${request.id} is disabled.`, { id: request.id });
    if (refusal === 'method_not_allowed') throw new DomainError(refusal, `Payment link ${request.id} answers ${link.method} only.`, { allow: link.method });
    return link;
  }

  /**
   * extra.feePayer and extra["svc.fee"] come from the facilitator that will settle: its /health, cached; the network's
   * current blockhash (blockhash.ts) rides along.
   */
  private async offerTerms(network: Network): Promise<OfferTerms> {
    const [health, blockhash] = await Promise.all([this.facilitatorHealth(), this.blockhashes.current(network)]);
    const known = this.terms.get(network);
    if (known && known.health === health && known.blockhash === blockhash) return known.terms;
    const fee = health.protocol_fee;
    const authority = fee.authorities[network] ?? fee.authority;
    const terms: OfferTerms = {
      feePayer: health.fee_payer,
      fee: fee.bps > 0 ? { bps: fee.bps, feeAuthority: authority } : null,
      facilitator: this.deps.settings.facilitatorUrl,
      ...(blockhash ? { blockhash } : {}),
    };
    // One object per health answer and blockhash, so a rendered challenge can tell whether its terms still hold by identity.
    this.terms.set(network, { health, blockhash, terms });
    return terms;
  }

  private readonly terms = new Map<Network, { health: FacilitatorHealth; blockhash: OfferBlockhash | undefined; terms: OfferTerms }>();

  /** The offer terms of a network for listings (the bazaar's discovery routes): no blockhash, which a listing outlives. */
  async listingTerms(network: Network): Promise<OfferTerms> {
    return { ...(await this.offerTerms(network)), blockhash: undefined };
  }

  /** the blockhash each network's offers carry (x402 PR #2693), one value per network at a time */
  private readonly blockhashes: OfferBlockhashes;

  /**
   * The unpaid 402 without I/O (service.ts unpaidChallenge): the link and terms `handle` would use for an unpaid
   * request, when both are at hand (the link cached and fresh, the facilitator's health fresh and its terms derived);
   * undefined otherwise, and `handle` decides. Only a link `handle` would answer with its unpaid offer qualifies: one
   * `linkRefusal` passes (enabled, the method), on x402 (MPP issues fresh challenges), its owner agent proven.
   */
  unpaidAtHand(network: Network, id: string, method: string): { link: PaymentLinkRecord; terms: OfferTerms } | undefined {
    const link = this.deps.links.peek(network, id);
    if (!link || linkRefusal(link, method) !== null || link.protocol !== 'x402' || !this.deps.proof.linkPayableAtHand(link)) return undefined;
    const health = this.health;
    if (!health || this.deps.clock.now().getTime() - health.at > HEALTH_TTL_MS) return undefined;
    const known = this.terms.get(network);
    if (!known || !this.settledHealth.has(health.value) || this.settledHealth.get(health.value) !== known.health) return undefined;
    // a blockhash replaced (or aged out) since these terms were made: `handle` makes new ones and renders them
    if (this.blockhashes.peek(network) !== known.blockhash) return undefined;
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
}
