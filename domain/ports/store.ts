import type { Network } from '../shared/network.ts';
import type { ApiKeyRecord } from '../access/schema.ts';
import type { AgentRecord } from '../agents/schema.ts';
import type { PaymentLinkRecord } from '../payment-links/schema.ts';
import type { EventPhase, EventRecord, NewEvent } from '../events/schema.ts';
import type { PreparedTransactionRecord } from '../transactions/schema.ts';
import type { ChainHead, ReceiptRecord, ReceiptVerification, StoredReceipt } from '../receipts/schema.ts';
import type { PullOutcome, PullTargetRecord } from '../receipts/pull-targets.ts';
import type { CardRecord, ClaimRecord, DisclosureRecord, DomainRecord, ProfileRecord, ReputationRow } from '../identity/schema.ts';
import type { PaidCallRecord, PendingRequest, StoredResponse } from '../paywall/schema.ts';
import type { JobQueue } from './job-queue.ts';
import type { WebhookDeliveryRepository, WebhookRepository } from './webhook-store.ts';
import type { IndexerRepository } from './indexer-store.ts';
import type { BuyerRepository } from './buyer-store.ts';
import type { DiscoveryRepository } from './discovery-store.ts';
import type { StreamTokenRepository } from './stream-token-store.ts';
import type { LinkAccessRepository } from './link-access-store.ts';
import type { DailyTotalRow } from '../receipts/daily.ts';

// Every read and write names its network: isolation is part of the port (hosted-api §5.3).

export interface ApiKeyRepository {
  insert(record: ApiKeyRecord): Promise<void>;
  /** by SHA-256 hex of the full key, e.g. "9f86d08…"; null when unknown */
  findByHash(keyHash: string): Promise<ApiKeyRecord | null>;
  touch(id: string, at: Date): Promise<void>;
  get(network: Network, id: string): Promise<ApiKeyRecord | null>;
  /** newest first, id < beforeId */
  list(network: Network, query: { ownerWallet?: string | undefined; beforeId?: string | undefined; limit: number }): Promise<ApiKeyRecord[]>;
  /** sets disabled_at once (keeps the first time); returns the row, null when absent on the network */
  disable(network: Network, id: string, at: Date): Promise<ApiKeyRecord | null>;
}

export interface AgentRepository {
  /** inserts a new (network, mint); false when it is already recorded */
  insert(record: AgentRecord): Promise<boolean>;
  /**
   * Replaces owner, owner principal, name and uri of (network, mint) only while the stored owner and owner principal
   * are still `expected` (compare-and-set: a concurrent re-record cannot be overwritten unseen); false otherwise.
   */
  replace(record: AgentRecord, expected: { owner: string; ownerPrincipal: string | null }): Promise<boolean>;
  get(network: Network, mint: string): Promise<AgentRecord | null>;
  /** sets the agent's executive; with `ifCurrent`, only while the stored one is that wallet (a revoke clears its own) */
  setExecutive(network: Network, mint: string, executive: string | null, options?: { ifCurrent?: string }): Promise<void>;
  /** the agent whose treasury (asset-signer PDA) is `treasury`; null when none is recorded */
  findByTreasury(network: Network, treasury: string): Promise<AgentRecord | null>;
  /** the ledger showed its asset with its owner at `at`: proven_at (kept when set already) and ledger_checked_at */
  markProven(network: Network, mint: string, at: Date): Promise<void>;
  /** the ledger was looked at `at` and did not prove it: ledger_checked_at of an unproven row */
  markChecked(network: Network, mint: string, at: Date): Promise<void>;
  /** unproven agents of every network last looked at before `checkedBefore` (never looked at first), at most `limit` */
  listUnproven(options: { limit: number; checkedBefore: Date }): Promise<AgentRecord[]>;
}

export interface PaymentLinkListQuery {
  /** the owning principal; undefined: the whole network (an admin's read). Required so no caller forgets it. */
  owner: string | undefined;
  ownerAgent?: string | undefined;
  /** exclusive upper bound on pk (newest first) */
  beforePk?: string | undefined;
  limit: number;
}

export interface PaymentLinkRepository {
  /** throws DomainError `conflict` when (network, id) is taken */
  insert(record: PaymentLinkRecord): Promise<void>;
  get(network: Network, id: string): Promise<PaymentLinkRecord | null>;
  list(network: Network, query: PaymentLinkListQuery): Promise<PaymentLinkRecord[]>;
  update(record: PaymentLinkRecord): Promise<void>;
  /** true when a row was removed */
  delete(network: Network, id: string): Promise<boolean>;
  /** `countCall` of several links in one statement (each link at most once), locked in the order of their pk */
  countCalls(network: Network, calls: readonly { pk: string; at: Date; settledTxSig: string; calls: number }[]): Promise<void>;
  /** hosted-api §2.4 counters of a paid call, in place (no read-modify-write) */
  countCall(
    network: Network,
    pk: string,
    call: { at: Date; settledTxSig: string | null /** calls counted at once (default 1); at and settledTxSig: the last one's */; calls?: number },
  ): Promise<void>;
}

export interface ReceiptPageQuery {
  kind?: 'earn' | 'spend' | undefined;
  decision?: 'allow' | 'deny' | 'rejected' | undefined;
  /** receipts whose ts is at or after this */
  since?: Date | undefined;
  /** exclusive upper bound on nonce (the cursor) */
  beforeNonce?: number | undefined;
  limit: number;
}

/** A ledger check to store; `nextCheckAt` schedules the retry of a pending one (null otherwise). */
export interface VerificationUpdate extends ReceiptVerification {
  nextCheckAt: Date | null;
}

export interface ReceiptRepository {
  /**
   * Inside a transaction: locks the agent's chain until commit and returns its head (null when empty), so
   * concurrent appends to one agent queue up and never fork the chain.
   */
  lockHead(network: Network, agent: string): Promise<ChainHead | null>;
  /** `lockHead` of several agents in two round trips whatever their number, locked in sorted order (no deadlock) */
  lockHeads(network: Network, agents: readonly string[]): Promise<Map<string, ChainHead | null>>;
  /**
   * `lockHeads` without waiting: the heads of the agents whose chains were free to lock now (locked until commit);
   * an agent whose chain another transaction holds is left out of the map. Two round trips whatever their number.
   */
  tryLockHeads(network: Network, agents: readonly string[]): Promise<Map<string, ChainHead | null>>;
  /**
   * throws DomainError `receipt_chain_invalid` when the nonce or hash is taken. Without `verification` a receipt with a
   * transaction is stored `pending` and due for its ledger check at once; one without is `not_applicable`.
   */
  insert(record: ReceiptRecord, verification?: VerificationUpdate): Promise<void>;
  get(network: Network, receiptHash: string): Promise<StoredReceipt | null>;
  /** the ones of `txSigs` the paywall already recorded an earn receipt for (one round trip) */
  paywallTxSigs(network: Network, txSigs: readonly string[]): Promise<Set<string>>;
  /**
   * Group commit: receipts appended in one statement, as `insert` appends each (callers hold the chains' locks; each
   * chain's links in nonce order). throws DomainError `receipt_chain_invalid`.
   */
  insertMany(records: readonly (ReceiptRecord & { verification?: VerificationUpdate | undefined })[]): Promise<void>;
  /** the ones of `receiptHashes` still `pending` (one round trip) */
  pendingAmong(network: Network, receiptHashes: readonly string[]): Promise<Set<string>>;
  /** oldest first */
  listByAgent(network: Network, agent: string, query: { afterNonce?: number | undefined; limit: number }): Promise<StoredReceipt[]>;
  /** nonce descending, each filter combination served by an index in that order */
  page(network: Network, agent: string, query: ReceiptPageQuery): Promise<StoredReceipt[]>;
  /**
   * Stores a check of a receipt that is still `pending`; false when it is no longer pending (another process decided
   * it first), so each decision is recorded — and its event written — once.
   */
  setVerification(network: Network, receiptHash: string, update: VerificationUpdate): Promise<boolean>;
  /** `setVerification` of several receipts in one statement; answers the hashes that were still pending (and now are not) */
  setVerifications(network: Network, updates: readonly { receiptHash: string; update: VerificationUpdate }[]): Promise<Set<string>>;
  /** pending checks due at `now`, oldest due first, across networks */
  duePending(now: Date, limit: number): Promise<StoredReceipt[]>;
  /**
   * Settled (decision allow) receipts with ts ≥ `since`, summed per UTC day, kind and asset; one range of the
   * (network, agent, ts) index of settled receipts, never a scan of the chain.
   */
  dailyTotals(network: Network, agent: string, since: Date): Promise<DailyTotalRow[]>;
}

export interface PullTargetRepository {
  /** throws DomainError `conflict` when (network, agent, url) is taken */
  insert(record: PullTargetRecord): Promise<void>;
  get(network: Network, id: string): Promise<PullTargetRecord | null>;
  /** by id (creation order), id > afterId */
  listByAgent(network: Network, agent: string, query: { afterId?: string | undefined; limit: number }): Promise<PullTargetRecord[]>;
  delete(network: Network, id: string): Promise<boolean>;
  /** Leases up to `limit` targets due at `now` to this run (skipping those another run holds) until `leaseUntil`. */
  claimDue(now: Date, leaseUntil: Date, limit: number): Promise<PullTargetRecord[]>;
  /** Records a run and releases the lease. */
  recordRun(network: Network, id: string, outcome: PullOutcome): Promise<void>;
  /** the earliest next_run_at of all targets, null without any */
  nextDue(): Promise<Date | null>;
}

/**
 * DECISIONS "x402 on the paywall": one row per payment transaction, the exactly-once record. The row is
 * durable before any money can move (markAttempted, committed before the facilitator is asked to settle), and a
 * claim names its owner process, so after a crash every payment that may have landed is found and finished.
 */
export interface PaidCallRepository {
  /**
   * Takes the payment for this request: inserts a `running` row owned by this process, or takes over one of the same
   * link that nobody is working on — `pending` after an unknown settle outcome, `running` whose lease lapsed, or
   * `running` whose owner process is gone (at once). Otherwise returns the row as it is (done, running elsewhere, or
   * another link's).
   *
   * With `attempt`, a payment seen for the first time is inserted already attempted with its request (the
   * claim and markAttempted in one statement; `marked: true`), for calls that go straight from the claim to
   * settlement. A row taken over is left as it was (`marked: false`): the caller reads `attempted` to know whether it
   * resumes, and marks it itself.
   */
  claim(claim: {
    network: Network;
    paymentKey: string;
    linkPk: string;
    linkId: string;
    lockedUntil: Date;
    at: Date;
    expiresAt: Date;
    attempt?: { request: PendingRequest } | undefined;
  }): Promise<{ claimed: true; record: PaidCallRecord; marked: boolean } | { claimed: false; record: PaidCallRecord }>;
  /** inside a transaction the row is locked until commit */
  get(network: Network, paymentKey: string): Promise<PaidCallRecord | null>;
  /** `get` of several (the ones that exist); inside a transaction they are locked until commit, in key order */
  getMany(network: Network, paymentKeys: readonly string[]): Promise<PaidCallRecord[]>;
  /**
   * The claim is about to be settled: keeps the request (what a replay or the reconciliation job needs to finish it)
   * and marks that money may move from now on. False when this process no longer holds the claim.
   */
  markAttempted(network: Network, paymentKey: string, attempt: { request: PendingRequest; at: Date }): Promise<boolean>;
  /** settle outcome unknown: keep the signature and the request; a replay (or the reconciliation job) may take over at once */
  markPending(network: Network, paymentKey: string, pending: { signature: string | null; request: PendingRequest; at: Date }): Promise<void>;
  /**
   * Unanswered calls untouched since `before` that nobody is working on (pending, or running with a lapsed lease or
   * a dead owner), oldest first, across networks.
   */
  listUnresolved(query: { before: Date; now: Date; limit: number }): Promise<PaidCallRecord[]>;
  /** removes a running call that never reached settlement and whose owner is gone (nothing moved); true when removed */
  forgetUnattempted(network: Network, paymentKey: string, now: Date): Promise<boolean>;
  /** stores the responses served for these payments (inside the record transaction; group commit), one round trip */
  completeMany(
    network: Network,
    done: readonly { paymentKey: string; signature: string; payer: string | null; response: StoredResponse; at: Date }[],
  ): Promise<void>;
  /** the payment was refused and nothing moved: forget it */
  release(network: Network, paymentKey: string): Promise<void>;
  /** removes answered calls past their replay window; returns how many */
  deleteExpired(now: Date): Promise<number>;
}

/**
 * x402 payment-identifier ids (domain/paywall/payment-id.ts), per link: each bound to the payment (paid_calls key) it
 * first came with, for the replay window. e.g. bind({ network: "chain-devnet", linkPk: "01J…", paymentId:
 * "pay_7d5d747be160e280", paymentKey: "9f86…", at, expiresAt }) → "9f86…" (or the key another payment bound it to).
 */
export interface PaymentIdRepository {
  /**
   * Binds the id to `paymentKey` unless it is bound to another payment (and not expired); answers the key it is bound
   * to now and, when that is `paymentKey`, this binding's generation (each request binding the same payment again
   * starts a new one). Two requests racing with one id are decided by the database: one key wins, the other reads it.
   */
  bind(binding: {
    network: Network;
    linkPk: string;
    paymentId: string;
    paymentKey: string;
    at: Date;
    expiresAt: Date;
  }): Promise<{ paymentKey: string; generation: string | null }>;
  /**
   * Frees the id of a payment refused with nothing moved: removed only while bound to `paymentKey` in the caller's
   * `generation` (a retry of the same payment that bound it since goes on with it) and no paid call of that key exists
   * (a retry holding a claim keeps it).
   */
  unbind(binding: { network: Network; linkPk: string; paymentId: string; paymentKey: string; generation: string }): Promise<void>;
  /** removes ids past their replay window; returns how many */
  deleteExpired(now: Date): Promise<number>;
}

export interface EventFilter {
  /** the owning principal; undefined: the whole network (an admin's read). Required so no caller forgets it. */
  owner: string | undefined;
  /** kind patterns: exact kinds or prefixes ending in ".*"; "*" matches all */
  kinds?: string[] | undefined;
  agent?: string | undefined;
  id?: string | undefined;
}

/** A phase change of a ledger action's event (hosted-api §3.1); unset fields keep their value. */
export interface EventTransition {
  /** the phases the event must be in for the change to apply */
  from: readonly EventPhase[];
  phase: EventPhase;
  at: Date;
  signature?: string;
  slot?: number;
  blockTime?: number | null;
  confirmedAt?: Date;
  errorCode?: string;
  errorLogs?: string[];
  clientReference?: string | null;
}

export interface EventRepository {
  /**
   * Appends inside the current transaction (transactional outbox). The event's `seq` orders events by commit,
   * and subscribers on every node are woken after commit. The event's webhook deliveries and their jobs are made in
   * the same transaction (webhookDeliveries.fanOut).
   */
  append(event: NewEvent): Promise<EventRecord>;
  /**
   * Group commit: `events` appended as `append` does each, in this order, in one round trip (their webhook
   * deliveries made in the same transaction).
   */
  appendMany(events: readonly NewEvent[]): Promise<void>;
  /**
   * Inside a transaction: moves the event to a new phase when it is in one of `from` (null otherwise). The event takes
   * a new `seq` (so subscribers and cursors see the change as they see an append), wakes the feed after commit, and
   * its webhook deliveries for the new phase are made in the same transaction.
   */
  transition(network: Network, id: string, change: EventTransition): Promise<EventRecord | null>;
  get(network: Network, id: string): Promise<EventRecord | null>;
  /** newest first, seq < beforeSeq */
  list(network: Network, filter: EventFilter & { beforeSeq?: bigint | undefined; limit: number }): Promise<EventRecord[]>;
  /** oldest first, seq > afterSeq: replay for subscribers */
  after(network: Network, afterSeq: bigint, filter: EventFilter, limit: number): Promise<EventRecord[]>;
  /**
   * per (kind, phase) counts on a network of one owner's events (owner undefined: the whole network), e.g.
   * [{ kind: "payment_link.created", phase: "confirmed", count: 3 }]
   */
  countByKind(network: Network, filter: { owner: string | undefined; since?: Date | undefined }): Promise<{ kind: string; phase: string; count: number }[]>;
  /** folds the counters' deltas (appends never wait on a counter row) into the rollup; the number of counters changed */
  compactCounts(): Promise<number>;
}

/** The transactions of the prepare routes (hosted-api §4.5), tracked until they are decided. */
export interface PreparedTransactionRepository {
  insert(record: PreparedTransactionRecord): Promise<void>;
  /** inside a transaction the row is locked until commit */
  get(network: Network, eventId: string): Promise<PreparedTransactionRecord | null>;
  /** prepared → submitted with the signed bytes; false when it is no longer prepared */
  markSubmitted(
    network: Network,
    eventId: string,
    submitted: { signature: string; transaction: Uint8Array; clientReference: string | null; at: Date; nextCheckAt: Date },
  ): Promise<boolean>;
  /**
   * Submitted rows whose status check is due at `now`, oldest due first, across networks; each is leased to the caller
   * (its next check moved to `leaseUntil`) so two runners do not check one row at the same time.
   */
  claimDue(now: Date, leaseUntil: Date, limit: number): Promise<PreparedTransactionRecord[]>;
  /** the next status check of a submitted row */
  scheduleCheck(network: Network, eventId: string, nextCheckAt: Date): Promise<void>;
  /** decided (confirmed, failed or expired): no job looks at it again */
  finish(network: Network, eventId: string): Promise<void>;
  /** the earliest next check of a submitted row, null without any */
  nextDue(): Promise<Date | null>;
  /** rows still `prepared` that were created before `before`, oldest first, across networks */
  listStalePrepared(before: Date, limit: number): Promise<PreparedTransactionRecord[]>;
}

/** Profiles, claimed domains and the reputation read of an agent (migrations/0013-identity.ts). */
export interface IdentityRepository {
  getProfile(network: Network, mint: string): Promise<ProfileRecord | null>;
  /** case-insensitive */
  findByHandle(network: Network, handle: string): Promise<ProfileRecord | null>;
  /** insert or replace; a handle another agent of the network holds (any case) is `conflict` */
  putProfile(record: ProfileRecord): Promise<ProfileRecord>;
  /** inserts the claim, or answers the existing one of (network, mint, domain) unchanged */
  addDomain(record: DomainRecord): Promise<DomainRecord>;
  getDomain(network: Network, mint: string, domain: string): Promise<DomainRecord | null>;
  /** false when another agent of the network verified the domain first */
  markDomainVerified(network: Network, mint: string, domain: string, at: Date): Promise<boolean>;
  /** the agent's verified domains, by domain */
  verifiedDomains(network: Network, mint: string): Promise<DomainRecord[]>;
  /** the agent that verified `domain` on the network */
  findVerifiedDomain(network: Network, domain: string): Promise<DomainRecord | null>;
  /**
   * The agent was recorded with a new owner: its profile's handle is released and its claimed domains are unverified
   * again, each with a fresh token derived from `secret` (the former owner's document proves nothing of the new one),
   * all now the new `ownerPrincipal`'s. Answers the profile as it was (null without one).
   */
  resetForNewOwner(network: Network, mint: string, next: { ownerPrincipal: string | null; secret: string }): Promise<ProfileRecord | null>;
  /** the agent's earn receipts that count (decision allow, settlement verified on the ledger) per currency and asset, from their rollup */
  reputation(network: Network, agent: string): Promise<ReputationRow[]>;
  insertClaim(record: ClaimRecord): Promise<void>;
  /** inside a transaction the row is locked until commit */
  getClaim(network: Network, mint: string, id: string): Promise<ClaimRecord | null>;
  /** sets revoked_at once; false when already revoked */
  revokeClaim(network: Network, mint: string, id: string, at: Date): Promise<boolean>;
  /**
   * oldest first (created_at, id), at most `limit` (default 200); `publicOnly`: public claims not revoked; `after`: the
   * claims after that one (a page's cursor)
   */
  listClaims(network: Network, mint: string, options: { publicOnly: boolean; limit?: number; after?: { createdAt: Date; id: string } }): Promise<ClaimRecord[]>;
  insertDisclosure(record: DisclosureRecord): Promise<void>;
  /** by the token's hash alone (the anonymous read: the link names its network) */
  getDisclosure(tokenHash: string): Promise<DisclosureRecord | null>;
  /** private claims not revoked, oldest first */
  privateClaims(network: Network, mint: string): Promise<ClaimRecord[]>;
  /** a second card with the agent's capability name is `conflict` */
  insertCard(record: CardRecord): Promise<void>;
  /** inside a transaction the row is locked until commit */
  getCard(network: Network, mint: string, id: string): Promise<CardRecord | null>;
  updateCard(record: CardRecord): Promise<void>;
  /** true when a row was removed */
  deleteCard(network: Network, mint: string, id: string): Promise<boolean>;
  /** by capability name; `publicOnly`: public cards only. Inside a transaction the agent's cards are locked until commit (another create waits). */
  listCards(network: Network, mint: string, options: { publicOnly: boolean }): Promise<CardRecord[]>;
}

export interface Repositories {
  /** Spend policies and the daily spend rollup */
  buyer: BuyerRepository;
  /** identity: profiles, claimed domains, claims, capability cards */
  identity: IdentityRepository;
  apiKeys: ApiKeyRepository;
  agents: AgentRepository;
  paymentLinks: PaymentLinkRepository;
  events: EventRepository;
  receipts: ReceiptRepository;
  pullTargets: PullTargetRepository;
  paidCalls: PaidCallRepository;
  /** x402 payment-identifier ids bound to their payment */
  paymentIds: PaymentIdRepository;
  preparedTransactions: PreparedTransactionRepository;
  webhooks: WebhookRepository;
  webhookDeliveries: WebhookDeliveryRepository;
  /** The indexer's watchlist, cursors and exactly-once record */
  indexer: IndexerRepository;
  /** The catalogues of svc_discover */
  discovery: DiscoveryRepository;
  /** Single-use subscription tokens for browsers */
  streamTokens: StreamTokenRepository;
  /** Returning payers: who paid which link when, and the spent sign-in nonces */
  linkAccess: LinkAccessRepository;
  /** the job queue on the same database: inside a transaction a job is enqueued only if the transaction commits */
  jobs: JobQueue;
}

/**
 * One request's database work, e.g. { tag: "01J…", heavy: true, principal: "chain-devnet key:01J…",
 * signal } for GET /v1/metrics/events. `heavy` requests (lists and aggregates) run on their own share of the pool, at
 * most a few at once per principal, under a shorter budget.
 */
/**
 * What a request scope listens to for its client leaving: an AbortSignal, or anything as small that aborts once (issue
 * 19: the HTTP doors' is a listener on the response, made only when a scope asks — interfaces/policies/heavy.ts).
 */
export interface CancelSignal {
  readonly aborted: boolean;
  addEventListener(type: 'abort', listener: () => void, options?: { once?: boolean }): void;
  removeEventListener(type: 'abort', listener: () => void): void;
}

export interface RequestScope {
  /** the request id: the request's statements carry it, so it can cancel them */
  tag: string;
  heavy: boolean;
  /** who the per-principal cap counts (heavy requests only) */
  principal: string;
  /** aborts when the client has gone: the running statement is cancelled */
  signal?: CancelSignal | undefined;
  /** the class's budget, set by the store */
  timeoutMs?: number;
}

export interface Store extends Repositories {
  /** Runs `work` in one database transaction; all writes through `tx` commit or roll back together. */
  transaction<T>(work: (tx: Repositories) => Promise<T>): Promise<T>;
  /**
   * Runs a request's reads under its class's limits: a timeout (`timeout` error), cancellation when `signal` aborts,
   * and for heavy requests a per-principal cap (`rate_limited` with `retry_after_ms`) and a share of the pool.
   */
  scoped?<T>(scope: RequestScope, work: () => Promise<T>): Promise<T>;
  /**
   * Runs `work` outside any request's scope: work shared by several requests (a group commit) is not tagged with,
   * timed by or cancelled with the one that happened to start it.
   */
  unscoped?<T>(work: () => Promise<T>): Promise<T>;
}

/**
 * Live feed of committed events from every process on the database (LISTEN/NOTIFY), in seq order.
 * `subscribe` returns an unsubscribe function.
 */
export interface EventFeed {
  subscribe(listener: (event: EventRecord) => void): () => void;
}
