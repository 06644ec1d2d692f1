import { DomainError } from '../shared/errors.ts';
import { newId } from '../shared/ids.ts';
import type { Network } from '../shared/network.ts';
import { decodeCursor, encodeCursor, toPage } from '../shared/pagination.ts';
import { iso, isoOrNull } from '../shared/settings.ts';
import { parseInput } from '../shared/validation.ts';
import { z } from 'zod';
import type { Clock } from '../ports/clock.ts';
import type { Ledger, LedgerTransaction } from '../ports/ledger.ts';
import type { EventFeed, Repositories, Store, VerificationUpdate } from '../ports/store.ts';
import { canAccess, type Caller } from '../access/ownership.ts';
import { dailyBuckets, DailyTransactionsInput, windowStart, type DailyTransactions } from './daily.ts';
import { newEvent } from '../events/kinds.ts';
import type { EventRecord, NewEvent } from '../events/schema.ts';
import { checkReceipt, nextCheckAt, verificationEvent } from './verify.ts';
import type { Watchlist } from '../indexer/watchlist.ts';
import {
  ListReceiptsInput,
  Receipt,
  receiptHash,
  settlementSignature,
  type ChainReport,
  type PushReceiptResult,
  type ReceiptList,
  type ReceiptSource,
  type StoredReceipt,
  type StoredReceiptOutput,
} from './schema.ts';

// hosted-api §4.7, DECISIONS "Receipts": one use case per route, shared by REST, tRPC, GraphQL, the pull
// worker and the retry job. Receipts belong to their agent's owner principal (docs/architecture.md "Ownership").

export function toStoredReceiptOutput(r: StoredReceipt): StoredReceiptOutput {
  return {
    ...r.receipt,
    network: r.network,
    source: r.source as ReceiptSource,
    received_at: iso(r.createdAt),
    verification: { status: r.verification.status, reason: r.verification.reason, checked_at: isoOrNull(r.verification.checkedAt) },
  };
}

/** What ingesting one receipt did. */
export type IngestOutcome =
  | { accepted: true; duplicate: false; eventId: string; receipt: Receipt; verification: VerificationUpdate }
  | { accepted: true; duplicate: true; eventId: null; receipt: Receipt; verification: VerificationUpdate };

const CHAIN_PAGE = 500;
/** At most this many just-published paywall receipts are checked together */
const PUBLISHED_BATCH = 64;

export class ReceiptService {
  constructor(
    private readonly deps: {
      store: Store;
      clock: Clock;
      ledgers: Partial<Record<Network, Ledger>>;
      onWarning?: ((message: string, context: Record<string, unknown>) => void) | undefined;
      /** A pushed receipt's agent and treasury join the indexer's watchlist */
      watchlist?: Pick<Watchlist, 'watchAgent'> | undefined;
    },
  ) {}

  /**
   * POST /v1/receipts/{agent}: only the agent's owner principal (or an admin of its network) pushes; anyone else gets
   * agent_not_found, as for a missing agent.
   */
  async push(caller: Caller, agent: string, body: unknown): Promise<PushReceiptResult> {
    const record = await this.ownedAgent(caller, agent);
    await this.deps.watchlist?.watchAgent(caller.network, agent, record.ownerPrincipal);
    const out = await this.ingest({ network: caller.network, agent, owner: record.ownerPrincipal, body, via: { source: 'push' } });
    return {
      ok: true,
      duplicate: out.duplicate,
      event_id: out.eventId,
      receipt_hash: out.receipt.receipt_hash,
      nonce: out.receipt.nonce,
      verification: { status: out.verification.status, reason: out.verification.reason, checked_at: isoOrNull(out.verification.checkedAt) },
    };
  }

  /**
   * The one ingest path (push and pull): schema, agent, hash, idempotency on (network, receipt_hash), the ledger check
   * (outside the chain lock: it reads only the ledger), then — under the agent's head lock — the chain rule, the row and
   * its events in one transaction.
   */
  async ingest(input: {
    network: Network;
    agent: string;
    owner: string | null;
    body: unknown;
    via: { source: 'push' } | { source: 'pull'; pullTargetId: string };
  }): Promise<IngestOutcome> {
    const { network, agent, owner, body, via } = input;
    const receipt = parseInput(Receipt, body);
    if (receipt.agent !== agent) {
      throw new DomainError('receipt_agent_mismatch', `The receipt's agent ${receipt.agent} is not ${agent}.`, { agent: receipt.agent, expected: agent });
    }
    const expected = receiptHash(receipt);
    if (expected !== receipt.receipt_hash) {
      throw new DomainError('receipt_hash_invalid', 'receipt_hash is not the SHA-256 of the RFC 8785 canonical JSON of the receipt without receipt_hash.', {
        receipt_hash: receipt.receipt_hash,
        expected,
      });
    }
    // A repeat is found before the ledger is asked; without a transaction to check, the chain rule below finds it
    // (a stored receipt is never head + 1) and the catch answers the duplicate, saving a round trip on every push.
    if (settlementSignature(receipt) !== null) {
      const existing = await this.deps.store.receipts.get(network, receipt.receipt_hash);
      if (existing) return this.duplicate(existing, agent);
    }

    const now = this.deps.clock.now();
    const verification = await this.check(network, receipt, 0, now);
    try {
      return await this.deps.store.transaction(async (tx) => {
        const head = await tx.receipts.lockHead(network, agent);
        const wantNonce = head ? head.nonce + 1 : 0;
        const wantPrev = head ? head.receiptHash : null;
        if (receipt.nonce !== wantNonce || receipt.prev_receipt_hash !== wantPrev) {
          throw new DomainError('receipt_chain_invalid', `The chain of ${agent} expects nonce ${wantNonce} with prev_receipt_hash ${wantPrev ?? 'null'}.`, {
            expected_nonce: wantNonce,
            expected_prev_receipt_hash: wantPrev,
            nonce: receipt.nonce,
            prev_receipt_hash: receipt.prev_receipt_hash,
          });
        }
        await tx.receipts.insert({ network, receipt, source: via.source, createdAt: now }, verification);
        const eventId = await this.published(tx, { network, owner, receipt, now, via });
        await this.decided(tx, { network, owner, receipt, source: via.source, now }, verification);
        return { accepted: true as const, duplicate: false as const, eventId, receipt, verification };
      });
    } catch (e) {
      // A concurrent push of the same receipt committed first: that is the idempotent repeat, not a fork.
      if (e instanceof DomainError && e.code === 'receipt_chain_invalid') {
        const stored = await this.deps.store.receipts.get(network, receipt.receipt_hash);
        if (stored) return this.duplicate(stored, agent);
      }
      throw e;
    }
  }

  private duplicate(existing: StoredReceipt, agent: string): IngestOutcome {
    // The same hash on another agent's chain cannot happen with a valid hash (agent is hashed); refuse it plainly.
    if (existing.receipt.agent !== agent) throw new DomainError('receipt_agent_mismatch', `The receipt's agent is not ${agent}.`);
    const v = existing.verification;
    return { accepted: true, duplicate: true, eventId: null, receipt: existing.receipt, verification: { ...v, nextCheckAt: null } };
  }

  /** receipt.published for a push, receipt.pulled for a pull item; protocol.fee.collected once per earn receipt with a fee. */
  private async published(
    tx: Repositories,
    e: { network: Network; owner: string | null; receipt: Receipt; now: Date; via: { source: 'push' } | { source: 'pull'; pullTargetId: string } },
  ): Promise<string> {
    const { receipt, now } = e;
    const base = { network: e.network, agentAsset: receipt.agent, owner: e.owner, phase: 'confirmed' as const, createdAt: now, confirmedAt: now };
    const sig = settlementSignature(receipt);
    const id = newId(now.getTime());
    if (e.via.source === 'pull') {
      await tx.events.append(
        newEvent(
          'receipt.pulled',
          { ...base, id, signature: sig },
          { pull_target_id: e.via.pullTargetId, source: 'pull', receipt_hash: receipt.receipt_hash, nonce: receipt.nonce, receipt },
        ),
      );
    } else {
      await tx.events.append(
        newEvent('receipt.published', { ...base, id, signature: sig }, { source: 'push', receipt_hash: receipt.receipt_hash, nonce: receipt.nonce, receipt }),
      );
    }
    // fee-facilitator-mpp-tools §6 path 1: a settled earn receipt with a fee, once per (network, receipt_hash).
    if (receipt.kind === 'earn' && receipt.decision === 'allow' && sig && BigInt(receipt.price.fee) > 0n) {
      await tx.events.append(
        newEvent(
          'protocol.fee.collected',
          { ...base, id: newId(now.getTime()), signature: sig },
          {
            source: 'receipt',
            receipt_hash: receipt.receipt_hash,
            tx_sig: sig,
            mint: receipt.price.asset,
            currency: receipt.price.currency,
            fee_atomic: receipt.price.fee,
            fee_authority: receipt.price.feeAuthority,
          },
        ),
      );
    }
    return id;
  }

  /** receipt.verified / receipt.mismatch when a check decided; nothing while pending or without a transaction. */
  private async decided(
    tx: Repositories,
    e: { network: Network; owner: string | null; receipt: Receipt; source: string; now: Date },
    v: VerificationUpdate,
  ): Promise<void> {
    const event = verificationEvent(e, v);
    if (event) await tx.events.append(event);
  }

  /** One ledger check: never throws; an unreachable ledger (or none in this process) leaves the receipt pending. */
  private async check(network: Network, receipt: Receipt, attemptsSoFar: number, now: Date): Promise<VerificationUpdate> {
    const sig = settlementSignature(receipt);
    if (sig === null) return { status: 'not_applicable', reason: 'The receipt names no transaction.', checkedAt: null, attempts: 0, nextCheckAt: null };
    const ledger = this.deps.ledgers[network];
    if (!ledger)
      return { status: 'pending', reason: 'No ledger is reachable from this process yet.', checkedAt: null, attempts: attemptsSoFar, nextCheckAt: now };
    let tx: LedgerTransaction | null;
    try {
      tx = await ledger.getTransaction(sig);
    } catch (err) {
      const attempts = attemptsSoFar + 1;
      this.deps.onWarning?.('receipt check: the ledger did not answer; will retry', {
        network,
        tx_sig: sig,
        err: err instanceof Error ? err.message : String(err),
      });
      return {
        status: 'pending',
        reason: 'The ledger did not answer; the check will be retried.',
        checkedAt: now,
        attempts,
        nextCheckAt: nextCheckAt(now, attempts),
      };
    }
    const result = checkReceipt(receipt, tx, attemptsSoFar);
    const attempts = attemptsSoFar + 1;
    return { ...result, checkedAt: now, attempts, nextCheckAt: result.status === 'pending' ? nextCheckAt(now, attempts) : null };
  }

  /**
   * The retry job (and the check right after a paywall receipt): re-checks pending receipts whose time has come,
   * records each decision once, with its event. Returns how many were decided.
   */
  async verifyDue(limit = 100): Promise<{ checked: number; decided: number }> {
    const now = this.deps.clock.now();
    const due = await this.deps.store.receipts.duePending(now, limit);
    let decided = 0;
    for (const r of due) if (await this.verifyStored(r, now)) decided++;
    return { checked: due.length, decided };
  }

  /** Checks one stored pending receipt now (e.g. the paywall's, as soon as it is published). */
  async verifyOne(network: Network, hash: string): Promise<boolean> {
    const stored = await this.deps.store.receipts.get(network, hash);
    if (stored?.verification.status !== 'pending') return false;
    return this.verifyStored(stored, this.deps.clock.now());
  }

  private async verifyStored(r: StoredReceipt, now: Date): Promise<boolean> {
    const update = await this.check(r.network, r.receipt, r.verification.attempts, now);
    if (update.status === 'pending') {
      await this.deps.store.receipts.setVerification(r.network, r.receipt.receipt_hash, update);
      return false;
    }
    const agent = await this.deps.store.agents.get(r.network, r.receipt.agent);
    return this.deps.store.transaction(async (tx) => {
      if (!(await tx.receipts.setVerification(r.network, r.receipt.receipt_hash, update))) return false;
      await this.decided(tx, { network: r.network, owner: agent?.ownerPrincipal ?? null, receipt: r.receipt, source: r.source, now }, update);
      return true;
    });
  }

  /** GET /v1/receipts/{agent}: nonce descending, filters kind, decision, since; opaque cursor. */
  async list(caller: Caller, input: ListReceiptsInput): Promise<ReceiptList> {
    const q = parseInput(ListReceiptsInput, input);
    await this.ownedAgent(caller, q.agent);
    const before = q.cursor ? decodeCursor(z.object({ n: z.number().int().min(0) }), q.cursor).n : undefined;
    const rows = await this.deps.store.receipts.page(caller.network, q.agent, {
      kind: q.kind,
      decision: q.decision,
      since: q.since ? new Date(q.since) : undefined,
      beforeNonce: before,
      limit: q.limit + 1,
    });
    return toPage(rows, q.limit, toStoredReceiptOutput, (r) => encodeCursor({ n: r.receipt.nonce }));
  }

  /** GET /v1/receipts/{agent}/daily: settled receipts of the last `days` days in UTC daily buckets. */
  async daily(caller: Caller, input: DailyTransactionsInput): Promise<DailyTransactions> {
    const q = parseInput(DailyTransactionsInput, input);
    await this.ownedAgent(caller, q.agent);
    const now = this.deps.clock.now();
    const rows = await this.deps.store.receipts.dailyTotals(caller.network, q.agent, windowStart(now, q.days));
    return dailyBuckets({ agent: q.agent, network: caller.network, days: q.days, now, rows });
  }

  /** GET /v1/receipts/by-hash/{hash}: 404 on another network and for another principal's agent. */
  async getByHash(caller: Caller, hash: string): Promise<StoredReceiptOutput> {
    const stored = await this.deps.store.receipts.get(caller.network, hash);
    const agent = stored ? await this.deps.store.agents.get(caller.network, stored.receipt.agent) : null;
    if (!stored || !canAccess(caller, agent?.ownerPrincipal ?? null)) {
      throw new DomainError('receipt_not_found', `No receipt ${hash} on ${caller.network}.`, { receipt_hash: hash, network: caller.network });
    }
    return toStoredReceiptOutput(stored);
  }

  /** GET /v1/receipts/{agent}/verify-chain: walks the stored chain from nonce 0 and reports the first break. */
  async verifyChain(caller: Caller, agent: string): Promise<ChainReport> {
    await this.ownedAgent(caller, agent);
    let length = 0;
    let prev: { nonce: number; hash: string } | null = null;
    let afterNonce: number | undefined;
    for (;;) {
      const rows = await this.deps.store.receipts.listByAgent(caller.network, agent, { afterNonce, limit: CHAIN_PAGE });
      for (const r of rows) {
        const report = (problem: NonNullable<ChainReport['first_break']>['problem'], message: string): ChainReport => ({
          agent,
          network: caller.network,
          length,
          ok: false,
          head: prev ? { nonce: prev.nonce, receipt_hash: prev.hash } : null,
          first_break: { nonce: r.receipt.nonce, receipt_hash: r.receipt.receipt_hash, problem, message },
        });
        const wantNonce: number = prev ? prev.nonce + 1 : 0;
        if (!Receipt.safeParse(r.receipt).success) return report('schema_invalid', 'The stored receipt does not match its schema.');
        if (r.receipt.agent !== agent) return report('agent_mismatch', `The receipt names agent ${r.receipt.agent}.`);
        if (r.receipt.nonce !== wantNonce) return report('nonce_gap', `Expected nonce ${wantNonce}, found ${r.receipt.nonce}.`);
        if (r.receipt.prev_receipt_hash !== (prev?.hash ?? null)) {
          return report(
            'prev_mismatch',
            `prev_receipt_hash is ${r.receipt.prev_receipt_hash ?? 'null'}, the previous receipt's hash is ${prev?.hash ?? 'null (none)'}.`,
          );
        }
        const hash = receiptHash(r.receipt);
        if (hash !== r.receipt.receipt_hash) return report('hash_invalid', `receipt_hash is ${r.receipt.receipt_hash}, the canonical hash is ${hash}.`);
        prev = { nonce: r.receipt.nonce, hash };
        length++;
      }
      if (rows.length < CHAIN_PAGE) break;
      afterNonce = prev?.nonce;
    }
    return { agent, network: caller.network, length, ok: true, head: prev ? { nonce: prev.nonce, receipt_hash: prev.hash } : null, first_break: null };
  }

  /** The caller's agent: another principal's answers agent_not_found (existence is not disclosed). */
  private async ownedAgent(caller: Caller, mint: string) {
    const agent = await this.deps.store.agents.get(caller.network, mint);
    if (!agent || !canAccess(caller, agent.ownerPrincipal)) {
      throw new DomainError('agent_not_found', `No agent ${mint} on ${caller.network}.`, { mint, network: caller.network });
    }
    return agent;
  }

  /**
   * Paywall receipts our own facilitator did not see confirmed (a wallet's payment, an outside facilitator's
   * settlement) are written pending by the paywall's transaction; this checks each as soon as its receipt.published is
   * committed (the retry job catches any this process misses). Returns the unsubscribe.
   */
  watchPublished(feed: EventFeed): () => void {
    // One paid call's receipt used to cost a check of seven round trips of its own. The receipts published
    // while a check runs wait and are checked together by the next one (per network): one transaction records all
    // their decisions and events, whatever their number.
    const queues = new Map<Network, { running: boolean; waiting: EventRecord[] }>();
    const drain = async (network: Network, queue: { running: boolean; waiting: EventRecord[] }) => {
      queue.running = true;
      try {
        while (queue.waiting.length > 0) {
          const batch = queue.waiting.splice(0, PUBLISHED_BATCH);
          await this.verifyPublished(network, batch).catch((err) =>
            this.deps.onWarning?.('receipt check after publish failed; the retry job will do it', {
              receipt_hashes: batch.map((e) => e.metadata.receipt_hash),
              err: err instanceof Error ? err.message : String(err),
            }),
          );
        }
      } finally {
        queue.running = false;
      }
    };
    return feed.subscribe((event) => {
      if (event.kind !== 'receipt.published' || event.metadata.source !== 'paywall') return;
      if (typeof event.metadata.receipt_hash !== 'string' || !this.deps.ledgers[event.network]) return;
      let queue = queues.get(event.network);
      if (!queue) {
        queue = { running: false, waiting: [] };
        queues.set(event.network, queue);
      }
      queue.waiting.push(event);
      if (!queue.running) void drain(event.network, queue);
    });
  }

  /**
   * The paywall's receipts just published (the receipt as its receipt.published event carries it, stored `pending`
   * with no attempt yet): each checked against the ledger, then every decision and its event written in one
   * transaction. A receipt decided meanwhile elsewhere (no longer pending) is left as it is; one the ledger cannot
   * decide yet stays pending for the retry job. Returns how many were decided here.
   */
  async verifyPublished(network: Network, published: readonly EventRecord[]): Promise<number> {
    const now = this.deps.clock.now();
    const carried = published.map((e) => e.metadata.receipt as Receipt).filter((r) => r && typeof r.receipt_hash === 'string');
    // Most were recorded verified already (DECISIONS "Receipts": our facilitator saw them confirmed): the ledger is
    // asked about the ones still pending only.
    const pending = await this.deps.store.receipts.pendingAmong(
      network,
      carried.map((r) => r.receipt_hash),
    );
    const receipts = carried.filter((r) => pending.has(r.receipt_hash));
    if (receipts.length === 0) return 0;
    const checks = await Promise.all(receipts.map((receipt) => this.check(network, receipt, 0, now)));
    const decided = receipts.map((receipt, i) => ({ receipt, update: checks[i]! })).filter((d) => d.update.status !== 'pending');
    for (const d of receipts.map((receipt, i) => ({ receipt, update: checks[i]! })).filter((d) => d.update.status === 'pending')) {
      await this.deps.store.receipts.setVerification(network, d.receipt.receipt_hash, d.update);
    }
    if (decided.length === 0) return 0;
    const owners = new Map<string, string | null>();
    for (const agent of new Set(decided.map((d) => d.receipt.agent)))
      owners.set(agent, (await this.deps.store.agents.get(network, agent))?.ownerPrincipal ?? null);
    return this.deps.store.transaction(async (tx) => {
      const set = await tx.receipts.setVerifications(
        network,
        decided.map((d) => ({ receiptHash: d.receipt.receipt_hash, update: d.update })),
      );
      const events = decided
        .filter((d) => set.has(d.receipt.receipt_hash))
        .map((d) => verificationEvent({ network, owner: owners.get(d.receipt.agent) ?? null, receipt: d.receipt, source: 'paywall', now }, d.update))
        .filter((e): e is NewEvent => e !== null);
      await tx.events.appendMany(events);
      return set.size;
    });
  }
}
