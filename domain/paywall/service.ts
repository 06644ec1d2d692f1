import type { PaywallRequest } from './call.ts';
import { PaywallCore, type PaidCallSummary, type PaywallCoreDeps } from './core.ts';
import { carriesPayment, PaywallHttp, splitQuery, type PaywallResponse, type RequestHeaders } from './http.ts';
import { PaidCallReconciler, type ReconcileTally } from './reconcile.ts';
import { PaidCallRecorder } from './record.ts';
import { NETWORKS, type Network } from '../shared/network.ts';
import { pageModel, type PaywallPageModel } from './page.ts';
import { newPageSession, type PageSession } from './solana-pay.ts';

// hosted-api §4.2: the public /x/{id}, in the layers of x402's resource server — core.ts (a request's link and payment,
// returning a result), call.ts (one paid call: claim → settle → produce → record), http.ts (status, headers, body from
// the result), record.ts and reconcile.ts — put together here for the composition root; interfaces/paywall/routes.ts
// is the thin fastify adapter.

export type { PaywallRequest } from './call.ts';
export type { PaywallResponse } from './http.ts';
export type { PaywallResult, WalletStatus } from './core.ts';

export interface PaywallDeps extends PaywallCoreDeps {
  /** failures nobody is waiting for (webhooks), for the operator's log */
  onWarning?: (message: string, context: Record<string, unknown>) => void;
  /** rule 9's writer, shared with the confirmations of buyer payments (their sales); default one of its own */
  recorder?: PaidCallRecorder | undefined;
}

export class PaywallService {
  readonly core: PaywallCore;
  private readonly http = new PaywallHttp();
  private readonly reconciler: PaidCallReconciler;
  /** rule 9's writer (its group commit's queue is observable: `waiting`) */
  readonly recorder: PaidCallRecorder;

  constructor(private readonly deps: PaywallDeps) {
    const recorder = deps.recorder ?? new PaidCallRecorder(deps);
    this.recorder = recorder;
    this.core = new PaywallCore(deps, recorder);
    this.reconciler = new PaidCallReconciler(deps, this.core.calls);
  }

  /**
   * The unpaid 402, decided here once for both doors that answer it (interfaces/paywall/fast-402.ts before fastify,
   * routes.ts in it): the challenge `handle` answers a request carrying no payment, when it is at hand without I/O or
   * a promise — the link cached, the terms known, the challenge rendered. Undefined: ask `handle`, which decides the
   * same way with I/O (and renders the challenge for the next request).
   */
  unpaidChallenge(request: { id: string; url: string; method: string; headers: RequestHeaders }): PaywallResponse | undefined {
    if (carriesPayment(request.headers)) return undefined;
    // the rendered 402 states the request digest of a plain request (core.ts): one with a query for the seller or a body
    // gets its own (a GET's body is read by no one, so it binds nothing)
    const length = request.headers['content-length'];
    if (request.method !== 'GET' && ((length !== undefined && length !== '0') || request.headers['transfer-encoding'] !== undefined)) return undefined;
    const { network: named, forwardQuery } = splitQuery(request.url);
    if (forwardQuery !== '') return undefined;
    const network = named ?? 'chain-mainnet';
    if (!(NETWORKS as readonly string[]).includes(network)) return undefined;
    const unpaid = this.core.unpaidAtHand(network as Network, request.id, request.method);
    return unpaid && this.http.renderedChallenge(unpaid.link, unpaid.terms, this.deps.clock.now().getTime());
  }

  /** The rendered answer; `paid` when this request settled a payment (the HTTP layer logs it, hosted-api §4.2). */
  async handle(request: PaywallRequest): Promise<PaywallResponse & { paid?: PaidCallSummary }> {
    const result = await this.core.handle(request);
    const response = this.http.render(result, this.deps.clock.now().getTime());
    return result.kind === 'served' && result.paid ? { ...response, paid: result.paid } : response;
  }

  /**
   * The paywall page of a person's browser (docs/paywall.md "In a browser"): the link's unpaid offer in human units
   * and a fresh wallet-payment session (solana-pay.ts). Throws what `handle` would for the link (404, 403, 410, 409).
   */
  async page(request: { id: string; network: string | undefined }): Promise<{ model: PaywallPageModel; session: PageSession }> {
    const { link, accepts, resource } = await this.core.offerOf(request);
    const session = newPageSession({ key: this.deps.mppSecret, network: link.network, id: link.id, now: this.deps.clock.now() });
    return { model: pageModel(link, accepts, resource.url), session };
  }

  /** Solana Pay POST of the page's wallet payment (core.ts walletTransaction). */
  walletTransaction(input: Parameters<PaywallCore['walletTransaction']>[0]) {
    return this.core.walletTransaction(input);
  }

  /** The page's wallet payment status (core.ts walletStatus). */
  walletStatus(input: Parameters<PaywallCore['walletStatus']>[0]) {
    return this.core.walletStatus(input);
  }

  /** The reconciliation job's work (see reconcile.ts). */
  resolvePending(options: { olderThanMs?: number; limit?: number } = {}): Promise<ReconcileTally> {
    return this.reconciler.resolvePending(options);
  }
}
