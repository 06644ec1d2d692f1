import { randomBytes } from 'node:crypto';
import type { Store, EventFeed, RequestScope } from '../domain/ports/store.ts';
import type { PolicyStore } from '../domain/ports/policy-store.ts';
import type { Clock } from '../domain/ports/clock.ts';
import type { GatewaySettings } from '../domain/shared/settings.ts';
import { AccessService } from '../domain/access/service.ts';
import { AdminService } from '../domain/admin/service.ts';
import { AgentService } from '../domain/agents/service.ts';
import { PaymentLinkService } from '../domain/payment-links/service.ts';
import { EventService } from '../domain/events/service.ts';
import { MetaService, type LedgerHealth } from '../domain/meta/service.ts';
import { MetricsService } from '../domain/metrics/service.ts';
import { RequestRecorder } from '../domain/metrics/recorder.ts';
import { IdempotencyService } from '../domain/policies/idempotency.ts';
import { RateLimiter, type Bucket } from '../domain/policies/rate-limit.ts';
import { PolicyMaintenance } from '../domain/policies/maintenance.ts';
import { DevService } from '../domain/dev/service.ts';
import type { Ledger } from '../domain/ports/ledger.ts';
import type { Faucet } from '../domain/ports/faucet.ts';
import type { Network } from '../domain/shared/network.ts';
import type { Facilitator } from '../domain/ports/facilitator.ts';
import type { OutboundHttp } from '../domain/ports/outbound-http.ts';
import type { FacilitatorService } from '../domain/facilitator/service.ts';
import { PaywallService } from '../domain/paywall/service.ts';
import { LinkCache } from '../domain/paywall/link-cache.ts';
import { PaidCallMaintenance } from '../domain/paywall/maintenance.ts';
import { PaidCallRecorder } from '../domain/paywall/record.ts';
import type { ReceiptSigner } from '../domain/receipts/signing.ts';
import type { AgentProof } from '../domain/agents/proof.ts';
import { TreasuryAccounts } from '../domain/treasury/accounts.ts';
import { TreasuryService } from '../domain/treasury/balances.ts';
import { WebhookService } from '../domain/webhooks/service.ts';
import { ReceiptService } from '../domain/receipts/service.ts';
import { PullService } from '../domain/receipts/pull.ts';
import type { JobQueue } from '../domain/ports/job-queue.ts';
import { TransactionService, type TransactionDeps } from '../domain/transactions/service.ts';
import { Watchlist } from '../domain/indexer/watchlist.ts';
import { IndexerService } from '../domain/indexer/service.ts';
import { IdentityService } from '../domain/identity/service.ts';
import { BuyerCatalog, BuyerPaymentService, BuyerReceiptService, QuoteService, SpendPolicyService, type BuyerServices } from '../domain/buyer/service.ts';
import { DiscoveryService } from '../domain/discovery/service.ts';

/** The domain services every front door calls; built once by the composition root. */
export interface Services {
  access: AccessService;
  admin: AdminService;
  agents: AgentService;
  /** hosted-api §4.4: treasury balances and pay-to */
  treasury: TreasuryService;
  paymentLinks: PaymentLinkService;
  events: EventService;
  meta: MetaService;
  metrics: MetricsService;
  rateLimiter: RateLimiter;
  idempotency: IdempotencyService;
  recorder: RequestRecorder;
  maintenance: PolicyMaintenance;
  paidCallMaintenance: PaidCallMaintenance;
  dev: DevService;
  /** per network; empty in a process that opened none (the job runner run apart) */
  ledgers: Partial<Record<Network, Ledger>>;
  settings: GatewaySettings;
  /** this process's facilitator (mounted at /facilitator); absent in a process without ledgers */
  facilitator: FacilitatorService | undefined;
  /** the public /x/{id}; absent in a process without ledgers */
  paywall: PaywallService | undefined;
  /** x402 offer-receipt: signs the paywall's offers and receipts; its public keys at /.well-known/jwks.json */
  signer: ReceiptSigner | undefined;
  webhooks: WebhookService;
  /** Push, list, by-hash, verify-chain and the ledger checks */
  receipts: ReceiptService;
  /** Pull targets and the pull worker's run */
  pull: PullService;
  /** Prepare → submit → track */
  transactions: TransactionService;
  /** What the indexer follows, and the indexer's runs and status */
  watchlist: Watchlist;
  indexer: IndexerService;
  /** Profiles, handles, domains, verify verdicts */
  identity: IdentityService;
  /** Quote, spend policy, execute, buyer receipts, networks/currency/facilitator */
  buyer: BuyerServices;
  /** The discovery catalogues of svc_discover */
  discovery: DiscoveryService;
  clock: Clock;
  /** Runs a request's database work under its class's limits (Store.scoped; interfaces/policies/heavy.ts) */
  requestScope: <T>(scope: RequestScope, work: () => Promise<T>) => Promise<T>;
}

export interface ServiceDeps {
  store: Store;
  policies: PolicyStore;
  feed: EventFeed;
  clock: Clock;
  settings: GatewaySettings;
  limits: Record<Bucket, number>;
  ledgers: Partial<Record<Network, Ledger>>;
  faucet: Faucet | undefined;
  embeddedNetworks: ReadonlySet<Network>;
  /** The programs each embedded ledger loaded (GET /v1/health) */
  ledgerPrograms?: Partial<Record<Network, LedgerHealth>> | undefined;
  facilitator?: FacilitatorService | undefined;
  /** which agents are proven, shared with the in-process facilitator (default: the agent service's own) */
  agentProof?: AgentProof | undefined;
  /** the facilitator the paywall settles through: in-process by default, HTTP with SVC_PAYWALL_FACILITATOR_URL */
  paywallFacilitator?: Facilitator | undefined;
  /** the paywall's facilitator is this process's own (in process): its confirmed settlements' receipts are recorded verified */
  ownPaywallFacilitator?: boolean | undefined;
  /** the MPP challenges' HMAC key (SVC_MPP_SECRET or one kept under the data directory); default a random one */
  mppSecret?: Uint8Array | undefined;
  /** the offer-receipt signing keys (SVC_SIGNING_KEYS_FILE); none: the paywall signs no offers and no receipts */
  signer?: ReceiptSigner | undefined;
  outbound: OutboundHttp;
  /** the job queue (wakes the pull worker when a target is created) */
  queue?: JobQueue | undefined;
  onRecorderError?: (e: unknown) => void;
  onWarning?: (message: string, context: Record<string, unknown>) => void;
  onSubmitted?: TransactionDeps['onSubmitted'];
  onDecided?: TransactionDeps['onDecided'];
}

export function buildServices(deps: ServiceDeps): Services {
  const { store, policies, feed, clock, settings, limits } = deps;
  const access = new AccessService({ store, clock, feed });
  const treasuryAccounts = deps.paywallFacilitator ? new TreasuryAccounts({ facilitator: deps.paywallFacilitator, onWarning: deps.onWarning }) : undefined;
  const watchlist = new Watchlist({ store, clock });
  const agents = new AgentService({ store, clock, ledgers: deps.ledgers, treasuryAccounts, watchlist, proof: deps.agentProof });
  const links = new LinkCache({ store, clock, feed });
  const receipts = new ReceiptService({ store, clock, ledgers: deps.ledgers, onWarning: deps.onWarning, watchlist });
  const queue = deps.queue;
  const events = new EventService({ store, feed });
  // one recorder of sales: the paywall's paid calls and the links' buyer payments (DECISIONS buyer/payment)
  const sales = new PaidCallRecorder({
    store,
    outbound: deps.outbound,
    clock,
    settings,
    ledgers: deps.ledgers,
    ownFacilitator: deps.ownPaywallFacilitator,
    onWarning: deps.onWarning,
    signer: deps.signer,
  });
  const transactions = new TransactionService({
    store,
    clock,
    ledgers: deps.ledgers,
    settings,
    watchlist,
    onSubmitted: deps.onSubmitted,
    onDecided: deps.onDecided,
    payees: agents.proof,
    sales,
  });
  const identity = new IdentityService({ store, clock, agents, ledgers: deps.ledgers, outbound: deps.outbound, baseUrl: settings.baseUrl, events });
  const quotes = new QuoteService({ store, clock, outbound: deps.outbound, identity, settings, facilitator: deps.paywallFacilitator });
  const spendPolicies = new SpendPolicyService({ store, clock, quotes, ledgers: deps.ledgers });
  const services: Services = {
    receipts,
    pull: new PullService({
      store,
      clock,
      outbound: deps.outbound,
      receipts,
      wake: queue ? (at) => queue.add('pull_receipts', {}, { jobKey: 'pull_receipts', runAt: at }) : undefined,
      onWarning: deps.onWarning,
    }),
    access,
    admin: new AdminService({ store, clock, access }),
    agents,
    treasury: new TreasuryService({ agents, ledgers: deps.ledgers, watchlist }),
    paymentLinks: new PaymentLinkService({
      store,
      clock,
      agents,
      settings,
      treasuryAccounts,
      outbound: deps.outbound,
      onChange: (network, id) => links.invalidate(network, id),
    }),
    events,
    meta: new MetaService({ settings, clock, ledgers: deps.ledgerPrograms }),
    metrics: new MetricsService({ store, records: policies.requestRecords, clock, settlements: deps.facilitator }),
    rateLimiter: new RateLimiter({ store: policies.rateLimits, clock, limits }),
    idempotency: new IdempotencyService({ store: policies.idempotency, clock }),
    recorder: new RequestRecorder({ store: policies.requestRecords, clock, onError: deps.onRecorderError }),
    maintenance: new PolicyMaintenance({ store: policies, clock }),
    paidCallMaintenance: new PaidCallMaintenance({ store, clock }),
    requestScope: (scope, work) => (store.scoped ? store.scoped(scope, work) : work()),
    dev: new DevService({ faucet: deps.faucet, embedded: deps.embeddedNetworks, ledgers: deps.ledgers }),
    ledgers: deps.ledgers,
    settings,
    facilitator: deps.facilitator,
    paywall: deps.paywallFacilitator
      ? new PaywallService({
          store,
          links,
          facilitator: deps.paywallFacilitator,
          outbound: deps.outbound,
          ledgers: deps.ledgers,
          clock,
          settings,
          mppSecret: deps.mppSecret ?? randomBytes(32),
          proof: agents.proof,
          onWarning: deps.onWarning,
          recorder: sales,
          signer: deps.signer,
        })
      : undefined,
    signer: deps.signer,
    webhooks: new WebhookService({ store, clock, outbound: deps.outbound, onWarning: deps.onWarning }),
    transactions,
    watchlist,
    indexer: new IndexerService({ store, clock, ledgers: deps.ledgers, settings, ownFeePayers: deps.facilitator ? [deps.facilitator.feePayer] : [] }),
    identity,
    buyer: {
      catalog: new BuyerCatalog({ settings, facilitator: deps.paywallFacilitator }),
      quotes,
      policies: spendPolicies,
      payments: new BuyerPaymentService({ store, quotes, policies: spendPolicies, transactions }),
      receipts: new BuyerReceiptService({ store, clock, ledgers: deps.ledgers, settings }),
    },
    // the bazaar's lists state the accepts the paywall would offer (domain/discovery/service.ts)
    discovery: new DiscoveryService({
      store,
      baseUrl: settings.baseUrl,
      version: settings.version,
      offerTerms: deps.paywallFacilitator ? async (network) => services.paywall?.core.listingTerms(network) : undefined,
    }),
    clock,
  };
  return services;
}
