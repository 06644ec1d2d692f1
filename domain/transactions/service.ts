import { createHash } from 'node:crypto';
import { Keypair, PublicKey, Transaction } from '@solana/web3.js';
import { DomainError } from '../shared/errors.ts';
import type { Network } from '../shared/network.ts';
import { STABLES } from '../shared/network.ts';
import type { GatewaySettings } from '../shared/settings.ts';
import { newId } from '../shared/ids.ts';
import { parseInput } from '../shared/validation.ts';
import { encodeBase58 } from '../shared/base58.ts';
import type { Clock } from '../ports/clock.ts';
import type { Ledger, LedgerTransaction, LedgerTransactionError } from '../ports/ledger.ts';
import { recordSpendReceipt } from './spend-receipt.ts';
import type { Repositories, Store } from '../ports/store.ts';
import { canAccess, type Caller } from '../access/ownership.ts';
import { newEvent, type EventMetadata, type PreparedKind } from '../events/kinds.ts';
import type { EventRecord } from '../events/schema.ts';
import { decodeTransaction, DecodeError } from '../facilitator/decode.ts';
import { verifyEd25519 } from '../facilitator/ed25519.ts';
import type { AgentRecord } from '../agents/schema.ts';
import { treasuryOf } from '../treasury/derive.ts';
import { PREPARE_ROUTES, directOffer, feeTermsOf, type BuyerOffer, type PrepareRouteName } from '../agents/build/index.ts';
import type { PrepareBuyerPaymentInput } from '../agents/prepare-schema.ts';
import { findStable } from '../shared/network.ts';
import { shareUrl } from '../payment-links/service.ts';
import type { Watchlist } from '../indexer/watchlist.ts';
import { isNoOp, type AgentBuildContext, type BuildContext, type PlanOutcome, type TransactionPlan } from './plan.ts';
import { describeMissing, recordedSigners, signerRoles, type SignatureProblem } from './signers.ts';
import { SubmitInput, type PreparedEnvelope, type PreparedTransactionRecord, type SubmitResult } from './schema.ts';
import type { PaidCallRecorder } from '../paywall/record.ts';
import { saleCall, type Call } from '../paywall/call.ts';
import type { PaymentLinkRecord } from '../payment-links/schema.ts';
import { CAIP2 } from '../shared/network.ts';
import { FEE_EXTENSION_KEY } from '../facilitator/schema.ts';

// Prepare → sign (by the user) → submit → track (hosted-api §2.5, §3.1, §4.5; DECISIONS "Prepare / submit
// / events"). A builder (domain/agents/build) decides the instructions; this service adds the blockhash, stores the
// message with an event in phase `prepared`, checks the signed bytes on submit, broadcasts them, and the
// confirmations job moves the event to confirmed or failed.

/** The job that checks submitted transactions; it schedules itself while any is open (a minute tick as backstop). */
export const CONFIRM_TASK = 'confirm_transactions';
/** DECISIONS: prepared events older than 24 h are failed with error_code "expired". */
export const PREPARED_TTL_MS = 24 * 60 * 60 * 1000;
/** The first status check after a submit, then backing off to at most MAX_CHECK_INTERVAL_MS. */
const FIRST_CHECK_MS = 400;
const MAX_CHECK_INTERVAL_MS = 5_000;
/** How long a runner holds the rows it checks before another may take them. */
const CHECK_LEASE_MS = 30_000;
/**
 * How long the process that broadcast a transaction waits for the ledger's notification of it (about a blockhash's
 * life); past that, or when the wait ends without a confirmation, the confirmations job's polling decides.
 */
const FOLLOW_MS = 60_000;

export interface TransactionDeps {
  store: Store;
  clock: Clock;
  ledgers: Partial<Record<Network, Ledger>>;
  settings: GatewaySettings;
  /** Hosted-api §3.1: the agent of a prepared transaction joins the indexer's watchlist */
  watchlist?: Pick<Watchlist, 'watchAgent'> | undefined;
  /**
   * DECISIONS "Agents, submissions and events": a buyer payment to the treasury of an agent that is not proven on the
   * ledger is not prepared (AgentProof.requirePayToPayable; absent: not checked)
   */
  payees?: { requirePayToPayable(network: Network, payTo: string): Promise<void> } | undefined;
  /**
   * DECISIONS buyer/payment: a confirmed buyer/payment of a payment link is that link's sale, recorded by the paywall's
   * recorder in the confirming transaction (absent: only the buyer's spend receipt is written)
   */
  sales?: Pick<PaidCallRecorder, 'recordSale'> | undefined;
  /** told of every first submit, broadcast or refused by the ledger (the operator's log line); never throws */
  onSubmitted?: ((summary: SubmitSummary) => void) | undefined;
  /** told of every transaction decided on the ledger's notification (the job logs its own decisions); never throws */
  onDecided?: ((decision: Decision) => void) | undefined;
}

/** A submit, for the operator's log line: public facts only. */
export interface SubmitSummary {
  event_id: string;
  kind: string;
  network: Network;
  agent: string;
  outcome: 'submitted' | 'rejected';
  signature: string;
  error_code: string | null;
  ms: number;
}

/** What the confirmations job decided about one submitted transaction. */
export interface Decision {
  event_id: string;
  kind: string;
  network: Network;
  agent: string;
  phase: 'confirmed' | 'failed';
  signature: string;
  slot: number | null;
  error_code: string | null;
  /** from the submit to the decision, by the service's clock */
  ms: number | null;
}

export class TransactionService {
  /** the waits for the notifications of this process's broadcasts */
  private readonly following = new Set<Promise<void>>();

  constructor(private readonly deps: TransactionDeps) {}

  /** The build context of a network: its ledger's reads, its stables, the fee. */
  private context(network: Network): BuildContext & { ledger: Ledger } {
    const ledger = this.deps.ledgers[network];
    if (!ledger) throw new DomainError('service_unavailable', `No ledger is configured for ${network}.`, { network });
    const { fee, baseUrl, programsCommand } = this.deps.settings;
    return { network, ledger, reads: ledger, stables: STABLES[network], fee, baseUrl, programsCommand: programsCommand?.[network] };
  }

  /**
   * One of the 14 prepare routes (domain/agents/build PREPARE_ROUTES) with its parsed input: the agent of `{mint}` (or
   * the buyer agent) must be the caller's; a payment link is resolved to its offer.
   */
  async prepareRoute(caller: Caller, name: PrepareRouteName, input: Record<string, unknown>): Promise<PreparedEnvelope> {
    const route = PREPARE_ROUTES[name] as (typeof PREPARE_ROUTES)[PrepareRouteName];
    switch (route.context) {
      case 'network':
        return this.prepare(caller, (ctx) => route.build(input as never, ctx));
      case 'agent':
        return this.prepareForAgent(caller, String(input.mint), (ctx) => route.build(input as never, ctx));
      case 'buyer': {
        const payment = input as PrepareBuyerPaymentInput;
        const offer = payment.payment_link !== undefined ? await this.offerOfLink(caller.network, payment.payment_link) : undefined;
        const payTo = offer?.pay_to ?? payment.pay_to;
        if (payTo !== undefined) await this.deps.payees?.requirePayToPayable(caller.network, payTo);
        return this.prepareForAgent(caller, payment.buyer_agent, (ctx) => route.build(payment, offer ?? directOffer(payment, ctx), ctx));
      }
    }
  }

  /** What paying a link costs: its primary currency's amount to its owner agent's treasury, with the fee terms. */
  private async offerOfLink(network: Network, id: string): Promise<BuyerOffer> {
    const link = await this.deps.store.paymentLinks.get(network, id);
    if (!link) throw new DomainError('payment_link_not_found', `No payment link ${id} on ${network}.`, { id, network });
    if (link.disabled) throw new DomainError('payment_link_disabled', `Payment link ${id} is disabled.`, { id });
    const stable = findStable(network, link.currency);
    if (!stable) throw new DomainError('invalid_request', `Payment link ${id} is priced in ${link.currency}, which ${network} does not offer.`, { id });
    const ctx = this.context(network);
    return {
      pay_to: treasuryOf(link.ownerAgent),
      amount: link.amountAtomic,
      stable,
      fee: feeTermsOf(ctx),
      payment_link: link.id,
      request: { method: link.method, url: shareUrl(this.deps.settings.baseUrl, network, link.id) },
    };
  }

  /** A route that is not about an existing agent (agents/prepare, buyer/payment). */
  async prepare(caller: Caller, build: (ctx: BuildContext) => Promise<PlanOutcome>): Promise<PreparedEnvelope> {
    const ctx = this.context(caller.network);
    return this.finish(caller, ctx.ledger, await build(ctx), null);
  }

  /** A route about one of the caller's agents: another principal's agent is not found (docs/architecture.md "Ownership"). */
  async prepareForAgent(caller: Caller, mint: string, build: (ctx: AgentBuildContext) => Promise<PlanOutcome>): Promise<PreparedEnvelope> {
    const agent = await this.deps.store.agents.get(caller.network, mint);
    if (!agent || !canAccess(caller, agent.ownerPrincipal)) {
      throw new DomainError('agent_not_found', `No agent ${mint} on ${caller.network}.`, { mint, network: caller.network });
    }
    const ctx = this.context(caller.network);
    return this.finish(caller, ctx.ledger, await build({ ...ctx, agent }), agent.owner);
  }

  private async finish(caller: Caller, ledger: Ledger, plan: PlanOutcome, agentOwner: string | null): Promise<PreparedEnvelope> {
    const { network } = caller;
    if (isNoOp(plan)) return { event_id: null, network, transaction: null, echo: plan.echo, no_op: true, ...plan.extras };
    await this.deps.watchlist?.watchAgent(network, plan.agent, caller.owner);
    const { blockhash, lastValidBlockHeight } = await ledger.getLatestBlockhash();
    const { transaction, message, signers, presigned } = compile(plan, blockhash, lastValidBlockHeight);
    const now = this.deps.clock.now();
    const eventId = newId(now.getTime());
    const text = (v: unknown) => (typeof v === 'string' ? v : null);
    // The event records whose key each signature slot is, so a refusal on submit can name it (hosted-api §4.5.1).
    const roles = signerRoles(signers, {
      feePayer: plan.feePayer,
      presigned,
      owner: agentOwner ?? text(plan.echo.owner),
      executive: text(plan.echo.executive) ?? text(plan.echo.delegate),
    });
    const metadata = { ...plan.metadata, echo: plan.echo, signers: roles } as EventMetadata<PreparedKind>;
    await this.deps.store.transaction(async (tx) => {
      await tx.events.append(
        newEvent(plan.kind, { id: eventId, phase: 'prepared', network, agentAsset: plan.agent, owner: caller.owner, createdAt: now }, metadata),
      );
      await tx.preparedTransactions.insert({
        eventId,
        network,
        kind: plan.kind,
        agent: plan.agent,
        owner: caller.owner,
        message,
        signers,
        recentBlockhash: blockhash,
        lastValidBlockHeight,
        state: 'prepared',
        signature: null,
        transaction: null,
        clientReference: null,
        submittedAt: null,
        nextCheckAt: null,
        checks: 0,
        createdAt: now,
      });
    });
    return {
      event_id: eventId,
      network,
      transaction: {
        base64: Buffer.from(transaction).toString('base64'),
        message_base64: Buffer.from(message).toString('base64'),
        message_hash: createHash('sha256').update(message).digest('hex'),
        recent_blockhash: blockhash,
        last_valid_block_height: lastValidBlockHeight,
        fee_payer: signers[0]!,
        signers,
      },
      echo: plan.echo,
      ...plan.extras,
    };
  }

  /**
   * hosted-api §4.5: the signed transaction of a prepared event. Its message must be the prepared one (only signatures
   * added), every required signer must have signed, and its blockhash must still be valid. The event is `submitted`
   * (durably, with the signed bytes) before the broadcast, so a crash or an unknown broadcast outcome leaves it to the
   * confirmations job, which reads its status and re-broadcasts while the blockhash is valid.
   */
  async submit(caller: Caller, input: SubmitInput): Promise<SubmitResult> {
    const started = performance.now();
    const parsed = parseInput(SubmitInput, input);
    const { network } = caller;
    const { ledger } = this.context(network);
    // Both rows read at once (two pool connections): the submit waits for one round trip, not two, before its
    // broadcast. The prepared row is used only once the caller may read the event.
    const [event, prepared] = await Promise.all([
      this.deps.store.events.get(network, parsed.event_id),
      this.deps.store.preparedTransactions.get(network, parsed.event_id),
    ]);
    if (!event || !canAccess(caller, event.owner)) throw eventNotFound(network, parsed.event_id);
    if (!prepared) {
      throw new DomainError('invalid_request', `Event ${parsed.event_id} is a ${event.kind} event, not a prepared transaction.`, {
        path: 'event_id',
        kind: event.kind,
      });
    }
    const wire = Uint8Array.from(Buffer.from(parsed.transaction_base64, 'base64'));
    if (prepared.state === 'done' && prepared.signature === null) throw closedUnsubmitted(prepared, event);
    // hosted-api §4.5.4–5 (DECISIONS "Agents, submissions and events"): once submitted, the event's transaction is
    // fixed — the same bytes are a replay, any other bytes (another message included) are 409, never 422.
    if (prepared.state !== 'prepared') return this.repeat(prepared, firstSignature(wire));
    const signed = checkSigned(prepared, wire, event);
    // The preflight is asked with the blockhash check, in the same message to the ledger (one hop, not two); its answer
    // is read only once the blockhash is known valid, so an expired one is still transaction_expired.
    const simulating = ledger.simulateTransaction(wire, { sigVerify: true });
    simulating.catch(() => undefined); // read below, or dropped with the expired blockhash
    if (!(await ledger.isBlockhashValid(prepared.recentBlockhash))) {
      throw new DomainError('transaction_expired', `The blockhash of event ${prepared.eventId} is no longer valid; prepare again.`, {
        event_id: prepared.eventId,
        recent_blockhash: prepared.recentBlockhash,
      });
    }
    // Preflight before anything is broadcast. The message is fully signed and still the ledger refuses it (a program
    // error, missing funds, a stale blockhash): signing it again cannot help, so the event is failed with the cause
    // (DECISIONS "Agents, submissions and events": a refused submit is written on the event) and a tracking loop ends.
    // Nothing landed, nothing was charged; the client prepares a new transaction.
    const simulated = await simulating;
    if (simulated.err !== null) {
      const code = errorCode(simulated.err);
      // Already processed: the same bytes reached the ledger another way; the event is not failed on that word.
      const failed =
        code === 'already_processed'
          ? false
          : await this.failPrepared(prepared, code, [
              `hint: nothing landed and nothing was charged. ${rejectionHint(code, simulated.logs)}`,
              ...failureLogs(simulated.err, simulated.logs),
            ]);
      this.told(prepared, { signature: signed.signature, started, code }, null);
      throw rejected(prepared.eventId, { err: simulated.err, logs: simulated.logs, phase: failed ? 'failed' : event.phase, code });
    }

    const now = this.deps.clock.now();
    const nextCheckAt = new Date(now.getTime() + FIRST_CHECK_MS);
    const marked = await this.deps.store.transaction(async (tx) => {
      const ok = await tx.preparedTransactions.markSubmitted(network, prepared.eventId, {
        signature: signed.signature,
        transaction: wire,
        clientReference: parsed.client_reference ?? null,
        at: now,
        nextCheckAt,
      });
      if (!ok) return false;
      await tx.events.transition(network, prepared.eventId, {
        from: ['prepared'],
        phase: 'submitted',
        at: now,
        signature: signed.signature,
        clientReference: parsed.client_reference ?? null,
      });
      await tx.jobs.add(CONFIRM_TASK, {}, { jobKey: CONFIRM_TASK, runAt: nextCheckAt });
      return true;
    });
    if (!marked) {
      // A concurrent submit of the same event won: answer as its repeat.
      const current = await this.deps.store.preparedTransactions.get(network, prepared.eventId);
      if (current && current.state === 'done' && current.signature === null)
        throw closedUnsubmitted(current, (await this.deps.store.events.get(network, prepared.eventId)) ?? event);
      return this.repeat(current ?? prepared, signed.signature);
    }
    const result: SubmitResult = { event_id: prepared.eventId, signature: signed.signature, phase: 'submitted', network, replayed: false };
    let sent: Awaited<ReturnType<typeof ledger.sendTransaction>>;
    const sending = ledger.sendTransaction(wire);
    // The wait for its confirmation is asked with the broadcast, not after its answer: the embedded ledger gets both in
    // one message and answers the wait with the send when the commit confirms it (one hop to the ledger thread less
    // between the confirmation and the event); an RPC node's signatureSubscribe is in place before the transaction can
    // land. A broadcast that is refused or does not answer leaves the wait to its deadline (FOLLOW_MS); what it then
    // reads decides nothing that the job would not (a phase moves only from `submitted`).
    this.follow(ledger, { ...prepared, state: 'submitted', signature: signed.signature, transaction: wire, submittedAt: now, nextCheckAt });
    try {
      sent = await sending;
    } catch (e) {
      // rpc_unavailable or submit_timeout: the event stays submitted; poll it (hosted-api §7).
      if (e instanceof DomainError)
        throw new DomainError(e.code, `${e.message} Event ${prepared.eventId} stays submitted; poll GET /v1/events/${prepared.eventId}.`, {
          ...e.details,
          event_id: prepared.eventId,
          signature: signed.signature,
        });
      throw e;
    }
    if (!sent.ok) {
      // The confirmations job may have broadcast the same bytes first (a slow send): then it landed, and the job
      // decides the event. Otherwise it was refused after the preflight passed (the state moved in between):
      // nothing landed and nothing will.
      let landed: unknown; // a status, or true when unknown
      try {
        [landed] = await ledger.getSignatureStatuses([signed.signature]);
      } catch {
        landed = true; // not known whether it landed: the job reads the status and decides
      }
      if (landed) return this.told(prepared, { signature: signed.signature, started }, result);
      await this.fail(prepared, errorCode(sent.err), failureLogs(sent.err, sent.logs));
      this.told(prepared, { signature: signed.signature, started, code: errorCode(sent.err) }, null);
      throw rejected(prepared.eventId, { err: sent.err, logs: sent.logs, phase: 'failed', code: errorCode(sent.err) });
    }
    return this.told(prepared, { signature: signed.signature, started }, result);
  }

  /**
   * hosted-api §3.1: the event is decided when the ledger notifies its signature confirmed (the embedded ledger at the
   * history write holding it, an RPC node through signatureSubscribe), not at the job's next poll. The decision is the
   * job's own (`decide`): a phase moves only from `submitted`, so this wait, the job and other nodes decide it once.
   * Nothing here is needed for correctness: a wait that ends without a confirmation, or a process that stops, leaves
   * the row to the confirmations job.
   */
  private follow(ledger: Ledger, row: PreparedTransactionRecord): void {
    const done = ledger
      .waitForSignature(row.signature!, { timeoutMs: FOLLOW_MS })
      .then(async (status) => {
        if (!status || status.confirmationStatus === 'processed') return;
        const decision = await this.decide(ledger, row, status);
        if (decision) this.deps.onDecided?.(decision);
      })
      .catch(() => undefined)
      .finally(() => this.following.delete(done));
    this.following.add(done);
  }

  /** Waits for the decisions in flight (before the store closes); the waits still open end with the ledger. */
  async drain(): Promise<void> {
    await Promise.allSettled([...this.following]);
  }

  /** Tells the observer of a first submit (broadcast, or refused by the ledger with `code`); passes the result through. */
  private told<R extends SubmitResult | null>(
    row: PreparedTransactionRecord,
    submit: { signature: string; started: number; code?: string | null },
    result: R,
  ): R {
    const { signature, started, code = null } = submit;
    try {
      this.deps.onSubmitted?.({
        event_id: row.eventId,
        kind: row.kind,
        network: row.network,
        agent: row.agent,
        outcome: result ? 'submitted' : 'rejected',
        signature,
        error_code: code,
        ms: Math.round(performance.now() - started),
      });
    } catch {
      // an observer's fault never changes a submit's answer
    }
    return result;
  }

  /** The same transaction again → its stored outcome, replayed; another one → event_already_submitted. */
  private repeat(prepared: PreparedTransactionRecord, signature: string | null): SubmitResult {
    if (signature !== null && prepared.signature === signature) {
      return { event_id: prepared.eventId, signature, phase: 'submitted', network: prepared.network, replayed: true };
    }
    throw new DomainError('event_already_submitted', `Event ${prepared.eventId} was already submitted with another transaction (${prepared.signature}).`, {
      event_id: prepared.eventId,
      signature: prepared.signature,
    });
  }

  /**
   * The confirmations job: reads the status of due submitted transactions and decides them — confirmed (slot,
   * block_time) or failed (error_code, error_logs); unknown ones are re-broadcast while their blockhash is valid and
   * failed as `expired` once it is not. Returns what it did and when the next check is due.
   */
  async checkDue(limit = 100): Promise<{ checked: number; decided: number; decisions: Decision[]; nextDue: Date | null }> {
    const now = this.deps.clock.now();
    const due = await this.deps.store.preparedTransactions.claimDue(now, new Date(now.getTime() + CHECK_LEASE_MS), limit);
    const decisions: Decision[] = [];
    const byNetwork = new Map<Network, PreparedTransactionRecord[]>();
    for (const row of due) byNetwork.set(row.network, [...(byNetwork.get(row.network) ?? []), row]);
    for (const [network, rows] of byNetwork) {
      const ledger = this.deps.ledgers[network];
      if (!ledger) continue;
      let statuses: Awaited<ReturnType<typeof ledger.getSignatureStatuses>>;
      try {
        statuses = await ledger.getSignatureStatuses(rows.map((r) => r.signature!));
      } catch {
        for (const r of rows) await this.deps.store.preparedTransactions.scheduleCheck(network, r.eventId, this.nextCheck(r));
        continue;
      }
      for (const [i, row] of rows.entries()) {
        const decision = await this.decide(ledger, row, statuses[i] ?? null);
        if (decision) decisions.push(decision);
      }
    }
    return { checked: due.length, decided: decisions.length, decisions, nextDue: await this.deps.store.preparedTransactions.nextDue() };
  }

  private async decide(
    ledger: Ledger,
    row: PreparedTransactionRecord,
    status: Awaited<ReturnType<Ledger['getSignatureStatuses']>>[number],
  ): Promise<Decision | null> {
    const signature = row.signature!;
    const decision = (phase: 'confirmed' | 'failed', code: string | null, slot: number | null): Decision => ({
      event_id: row.eventId,
      kind: row.kind,
      network: row.network,
      agent: row.agent,
      phase,
      signature,
      slot,
      error_code: code,
      ms: row.submittedAt ? this.deps.clock.now().getTime() - row.submittedAt.getTime() : null,
    });
    if (status && status.confirmationStatus !== 'processed') {
      const landed = await ledger.getTransaction(signature).catch(() => null);
      // null when another decided it first (the job, the notification's wait, another node): each decision is told once
      if (status.err === null) return (await this.confirm(row, status.slot, landed)) ? decision('confirmed', null, status.slot) : null;
      const code = errorCode(status.err);
      return (await this.fail(row, code, failureLogs(status.err, landed?.logs ?? []), status.slot)) ? decision('failed', code, status.slot) : null;
    }
    if (!status) {
      const valid = await ledger.isBlockhashValid(row.recentBlockhash).catch(() => true);
      if (!valid) {
        // One last read: it may have landed just before the blockhash ran out.
        const [late] = await ledger.getSignatureStatuses([signature]).catch(() => [null]);
        if (late) return this.decide(ledger, row, late);
        return (await this.fail(row, 'expired', ['the transaction did not land before its blockhash expired'])) ? decision('failed', 'expired', null) : null;
      }
      // Dropped or not yet seen: broadcast the same bytes again (same signature: it lands once at most).
      await ledger.sendTransaction(row.transaction!, { skipPreflight: true }).catch(() => undefined);
    }
    await this.deps.store.preparedTransactions.scheduleCheck(row.network, row.eventId, this.nextCheck(row));
    return null;
  }

  private nextCheck(row: PreparedTransactionRecord): Date {
    const wait = Math.min(FIRST_CHECK_MS * 2 ** Math.min(row.checks + 1, 10), MAX_CHECK_INTERVAL_MS);
    return new Date(this.deps.clock.now().getTime() + wait);
  }

  /**
   * Confirmed, with what it makes: the agent a mint created; for a buyer payment the buyer's spend receipt and, when it
   * paid a payment link, the link's sale (counters, earn receipt, events — as the paywall records a paid call). True
   * when this call moved the event (false: it was decided already, and nothing more is written).
   */
  private async confirm(row: PreparedTransactionRecord, slot: number, landed: LedgerTransaction | null): Promise<boolean> {
    const now = this.deps.clock.now();
    // The link is read before the transaction: the sale locks the receipt chains first and the link's counters last,
    // in the paywall's order, so a confirmation and a paid call of the same agents never wait on each other in a cycle.
    const sale = row.kind === 'buyer.payment' ? await this.saleOf(row) : null;
    return this.deps.store.transaction(async (tx) => {
      const event = await tx.events.transition(row.network, row.eventId, {
        from: ['submitted'],
        phase: 'confirmed',
        at: now,
        slot,
        blockTime: landed?.blockTime ?? null,
        confirmedAt: now,
      });
      await tx.preparedTransactions.finish(row.network, row.eventId);
      if (!event) return false;
      if (row.kind === 'agent.create') await tx.agents.insert(createdAgent(row, event.metadata, now));
      await recordExecutive(tx, row, event.metadata);
      if (row.kind === 'buyer.payment') {
        const buyer = (event.metadata.echo as { buyer_agent: string }).buyer_agent;
        if (sale) for (const agent of [...new Set([buyer, sale.link.ownerAgent])].sort()) await tx.receipts.lockHead(row.network, agent);
        await recordSpendReceipt(tx, { row, metadata: event.metadata, landed, signature: row.signature!, now, baseUrl: this.deps.settings.baseUrl });
        if (sale) await this.deps.sales!.recordSale(tx, { call: sale, signature: row.signature!, payer: sale.payer, now });
      }
      return true;
    });
  }

  /**
   * The sale a buyer payment makes (DECISIONS buyer/payment): the link it paid, as it was paid — the amount, stable and
   * fee terms prepared, into the treasury of the link's owner agent. None when it paid no link, when no recorder is
   * wired, or when the link is gone or names another agent now (its counters are not that agent's sales).
   */
  private async saleOf(row: PreparedTransactionRecord): Promise<(Call & { payer: string }) | null> {
    if (!this.deps.sales || !row.transaction) return null;
    const prepared = await this.deps.store.events.get(row.network, row.eventId);
    const echo = (prepared?.metadata.echo ?? {}) as Partial<Record<string, unknown>>;
    if (typeof echo.payment_link !== 'string') return null;
    const link = await this.deps.store.paymentLinks.get(row.network, echo.payment_link);
    if (!link || treasuryOf(link.ownerAgent) !== echo.pay_to) return null;
    const fee =
      typeof echo.fee_bps === 'number' && echo.fee_bps > 0 && typeof echo.fee_authority === 'string'
        ? { [FEE_EXTENSION_KEY]: { v: '1', bps: echo.fee_bps, feeAuthority: echo.fee_authority } }
        : {};
    const paid: PaymentLinkRecord = { ...link, amountAtomic: BigInt(String(echo.amount_atomic)) };
    const call = saleCall(this.deps.settings.baseUrl, paid, {
      transaction: row.transaction,
      message: row.message,
      // maxTimeoutSeconds: the x402 shape asks for one; nothing waits on it for a payment that has landed
      accept: {
        scheme: 'exact',
        network: CAIP2[row.network],
        asset: String(echo.mint),
        amount: String(echo.amount_atomic),
        payTo: String(echo.pay_to),
        maxTimeoutSeconds: 60,
        extra: fee,
      },
    });
    return { ...call, payer: String(echo.delegate) };
  }

  /** true when this call moved the event (false: it was decided already) */
  private async fail(row: PreparedTransactionRecord, code: string, logs: string[], slot?: number): Promise<boolean> {
    const now = this.deps.clock.now();
    return this.deps.store.transaction(async (tx) => {
      const event = await tx.events.transition(row.network, row.eventId, {
        from: ['prepared', 'submitted'],
        phase: 'failed',
        at: now,
        errorCode: code,
        errorLogs: logs,
        ...(slot !== undefined ? { slot } : {}),
      });
      await tx.preparedTransactions.finish(row.network, row.eventId);
      return event !== null;
    });
  }

  /** A prepared event the ledger refused in preflight → failed; only while still prepared (a concurrent submit may have won). */
  private async failPrepared(row: PreparedTransactionRecord, code: string, logs: string[]): Promise<boolean> {
    const now = this.deps.clock.now();
    return this.deps.store.transaction(async (tx) => {
      const event = await tx.events.transition(row.network, row.eventId, { from: ['prepared'], phase: 'failed', at: now, errorCode: code, errorLogs: logs });
      if (event) await tx.preparedTransactions.finish(row.network, row.eventId);
      return event !== null;
    });
  }

  /** DECISIONS: prepared events older than 24 h → failed with error_code "expired". Returns how many. */
  async expirePrepared(limit = 500): Promise<number> {
    const before = new Date(this.deps.clock.now().getTime() - PREPARED_TTL_MS);
    const stale = await this.deps.store.preparedTransactions.listStalePrepared(before, limit);
    let expired = 0;
    for (const row of stale) {
      const now = this.deps.clock.now();
      // Only while still prepared: a submit that won the race keeps its event and row.
      const moved = await this.deps.store.transaction(async (tx) => {
        const event = await tx.events.transition(row.network, row.eventId, {
          from: ['prepared'],
          phase: 'failed',
          at: now,
          errorCode: 'expired',
          errorLogs: ['not submitted within 24 h of its preparation'],
        });
        if (event) await tx.preparedTransactions.finish(row.network, row.eventId);
        return event !== null;
      });
      if (moved) expired++;
    }
    return expired;
  }
}

/**
 * The legacy transaction of a plan: fee payer first, the builder's instructions, the blockhash; fresh accounts the
 * gateway created (a new asset) sign their slot. Returns the wire bytes (other slots empty), the message and its
 * ordered signers.
 */
export function compile(
  plan: TransactionPlan,
  blockhash: string,
  lastValidBlockHeight: number,
): { transaction: Uint8Array; message: Uint8Array; signers: string[]; presigned: string[] } {
  const tx = new Transaction({ feePayer: new PublicKey(plan.feePayer), blockhash, lastValidBlockHeight }).add(...plan.instructions);
  const compiled = tx.compileMessage();
  const message = compiled.serialize();
  const signers = compiled.accountKeys.slice(0, compiled.header.numRequiredSignatures).map((k) => k.toBase58());
  const presigners = (plan.presigners ?? []).map((secret) => Keypair.fromSecretKey(secret));
  if (presigners.length) tx.partialSign(...presigners);
  const transaction = tx.serialize({ requireAllSignatures: false, verifySignatures: false });
  return { transaction: Uint8Array.from(transaction), message: Uint8Array.from(message), signers, presigned: presigners.map((k) => k.publicKey.toBase58()) };
}

/** The transaction's first signature (its id), or null when the bytes do not parse or it is unsigned. */
function firstSignature(wire: Uint8Array): string | null {
  try {
    const first = decodeTransaction(wire).signatures[0];
    return first?.some((b) => b !== 0) ? encodeBase58(first) : null;
  } catch {
    return null;
  }
}

/** DECISIONS `transaction_invalid`: bytes that do not parse, differ from the prepared message, or lack a signature. */
function checkSigned(prepared: PreparedTransactionRecord, wire: Uint8Array, event: EventRecord): { signature: string } {
  let decoded: ReturnType<typeof decodeTransaction>;
  try {
    decoded = decodeTransaction(wire);
  } catch (e) {
    throw new DomainError('transaction_invalid', `transaction_base64 is not a transaction: ${e instanceof DecodeError ? e.message : 'unreadable'}.`, {
      path: 'transaction_base64',
    });
  }
  if (!equalBytes(decoded.messageBytes, prepared.message)) {
    throw new DomainError(
      'transaction_invalid',
      `The transaction's message differs from the one prepared for event ${prepared.eventId}; only signatures may be added.`,
      {
        path: 'transaction_base64',
        event_id: prepared.eventId,
      },
    );
  }
  const problems: SignatureProblem[] = [];
  for (const [i, signer] of recordedSigners(prepared.signers, event.metadata).entries()) {
    const signature = decoded.signatures[i];
    if (!signature || signature.every((b) => b === 0)) problems.push({ ...signer, problem: 'missing' });
    else if (!verifyEd25519(new PublicKey(signer.address).toBytes(), decoded.messageBytes, signature)) problems.push({ ...signer, problem: 'invalid' });
  }
  if (problems.length) {
    // The message is the prepared one, so nothing is written on the event: signed again, the same event is submittable.
    const { message, hint } = describeMissing(problems, prepared.eventId);
    throw new DomainError('transaction_invalid', message, {
      path: 'transaction_base64',
      event_id: prepared.eventId,
      phase: event.phase,
      missing_signers: problems.map((p) => p.address),
      signers: problems,
      hint,
    });
  }
  return { signature: encodeBase58(decoded.signatures[0]!) };
}

function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && Buffer.compare(Buffer.from(a.buffer, a.byteOffset, a.length), Buffer.from(b.buffer, b.byteOffset, b.length)) === 0;
}

/** At most this many program log lines are kept on a failed event and in a refusal, the last ones (where the error is). */
export const MAX_ERROR_LOG_LINES = 20;
const MAX_ERROR_LOG_CHARS = 500;

/** What the ledger said, as an event's `error_logs`: the error, then the last program log lines, each line bounded. */
function failureLogs(err: LedgerTransactionError, logs: string[]): string[] {
  const cut = (line: string) => (line.length > MAX_ERROR_LOG_CHARS ? `${line.slice(0, MAX_ERROR_LOG_CHARS)}…` : line);
  return [`err: ${JSON.stringify(err)}`, ...logs.slice(-MAX_ERROR_LOG_LINES).map(cut)].map(cut);
}

/** A hint for the commonest refusals; what the program said is in the logs. */
function rejectionHint(code: string, logs: string[]): string {
  if (code === 'blockhash_not_found')
    return 'The blockhash expired before the transaction reached the ledger; prepare a new transaction and submit it promptly.';
  if (code === 'insufficient_funds_for_fee' || code === 'account_not_found')
    return 'The fee payer has no SOL for the fee; fund it, then prepare a new transaction.';
  if (logs.some((l) => /insufficient/i.test(l)))
    return 'An account lacks the funds the transaction moves; fund it (or ask for less), then prepare a new transaction.';
  return 'A program refused the transaction (see logs); fix the cause, then prepare a new transaction.';
}

function rejected(eventId: string, refusal: { err: LedgerTransactionError; logs: string[]; phase: string; code: string }): DomainError {
  const { err, logs, phase, code } = refusal;
  const hint = rejectionHint(code, logs);
  const written = phase === 'failed' ? ` Event ${eventId} is now failed (error_code ${code}); it cannot be submitted again.` : '';
  return new DomainError(
    'transaction_rejected',
    `The ledger refused the transaction of event ${eventId}: ${JSON.stringify(err)}. Nothing landed and nothing was charged.${written} ${hint}`,
    {
      event_id: eventId,
      phase,
      error_code: code,
      err,
      logs: logs.slice(-MAX_ERROR_LOG_LINES),
      hint,
    },
  );
}

/**
 * A prepared event that closed without a submit: failed `expired` after 24 h (409 transaction_expired, DECISIONS
 * "Prepare / submit / events"), or refused by the ledger in preflight (409 event_failed). Either way nothing landed and
 * nothing was charged; its transaction can never be submitted, so the answer says to prepare a new one.
 */
function closedUnsubmitted(prepared: PreparedTransactionRecord, event: EventRecord): DomainError {
  if (event.errorCode === null || event.errorCode === 'expired') {
    return new DomainError('transaction_expired', `Event ${prepared.eventId} expired before it was submitted; prepare again.`, {
      event_id: prepared.eventId,
      phase: event.phase,
    });
  }
  return new DomainError(
    'event_failed',
    `Event ${prepared.eventId} failed (${event.errorCode}): the ledger refused its transaction, nothing landed and nothing was charged. It cannot be submitted again; prepare a new transaction (see the event's error_logs for the cause).`,
    { event_id: prepared.eventId, phase: event.phase, error_code: event.errorCode },
  );
}

function eventNotFound(network: Network, id: string): DomainError {
  return new DomainError('event_not_found', `No event ${id} on ${network}.`, { id, network });
}

/** A ledger error as a stable snake_case code: "BlockhashNotFound" → "blockhash_not_found", { InstructionError: … } → "instruction_error". */
export function errorCode(err: LedgerTransactionError): string {
  const name = typeof err === 'string' ? err : (Object.keys(err)[0] ?? 'unknown');
  return name.replace(/([a-z0-9])([A-Z])/g, '$1_$2').toLowerCase();
}

/**
 * The agent record's `executive` (DECISIONS "Prepare / submit / events"): the wallet of the last executive delegation
 * (Execute, `agent.executive.delegate`) or token delegation (`agent.delegation.set`) the gateway prepared and saw
 * confirmed; `agent.executive.revoke` of that wallet clears it. A token delegation revoked leaves it: the allowances
 * themselves are the record's `delegations`, read from the ledger.
 */
async function recordExecutive(tx: Repositories, row: PreparedTransactionRecord, metadata: Record<string, unknown>): Promise<void> {
  const wallet = (v: unknown) => (typeof v === 'string' && v.length > 0 ? v : null);
  if (row.kind === 'agent.executive.delegate' || row.kind === 'agent.delegation.set') {
    const executive = wallet(row.kind === 'agent.executive.delegate' ? metadata.executive : metadata.delegate);
    if (executive) await tx.agents.setExecutive(row.network, row.agent, executive);
  } else if (row.kind === 'agent.executive.revoke') {
    const executive = wallet(metadata.executive);
    if (executive) await tx.agents.setExecutive(row.network, row.agent, null, { ifCurrent: executive });
  }
}

/** The agent an `agent.create` transaction made, recorded when it is confirmed (source "prepared"). */
function createdAgent(row: PreparedTransactionRecord, metadata: Record<string, unknown>, now: Date): AgentRecord {
  const echo = (metadata.echo ?? {}) as Record<string, unknown>;
  const text = (v: unknown) => (typeof v === 'string' ? v : null);
  return {
    mint: row.agent,
    network: row.network,
    owner: text(echo.owner) ?? '',
    name: text(echo.name),
    uri: text(echo.uri),
    treasury: treasuryOf(row.agent),
    executive: null,
    source: 'prepared',
    ownerPrincipal: row.owner,
    registeredAt: now,
    // its mint transaction confirmed: the ledger holds the asset (DECISIONS "Agents, submissions and events")
    provenAt: now,
  };
}
