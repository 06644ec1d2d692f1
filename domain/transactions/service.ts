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
import type { Store } from '../ports/store.ts';
import { canAccess, type Caller } from '../access/ownership.ts';
import { newEvent, type EventMetadata, type PreparedKind } from '../events/kinds.ts';
import { decodeTransaction, DecodeError } from '../facilitator/decode.ts';
import { verifyEd25519 } from '../facilitator/ed25519.ts';
import type { AgentRecord } from '../agents/schema.ts';
import { treasuryOf } from '../treasury/derive.ts';
import { PREPARE_ROUTES, directOffer, feeTermsOf, type BuyerOffer, type PrepareRouteName } from '../agents/build/index.ts';
import type { PrepareBuyerPaymentInput } from '../agents/prepare-schema.ts';
import { findStable } from '../shared/network.ts';
import type { Watchlist } from '../indexer/watchlist.ts';
import { isNoOp, type AgentBuildContext, type BuildContext, type PlanOutcome, type TransactionPlan } from './plan.ts';
import { SubmitInput, type PreparedEnvelope, type PreparedTransactionRecord, type SubmitResult } from './schema.ts';

// Issue 10: prepare → sign (by the user) → submit → track (hosted-api §2.5, §3.1, §4.5; DECISIONS "Prepare / submit
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

export interface TransactionDeps {
  store: Store;
  clock: Clock;
  ledgers: Partial<Record<Network, Ledger>>;
  settings: GatewaySettings;
  /** issue 12 (hosted-api §3.1): the agent of a prepared transaction joins the indexer's watchlist */
  watchlist?: Pick<Watchlist, 'watchAgent'> | undefined;
}

export class TransactionService {
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
    return { pay_to: treasuryOf(link.ownerAgent), amount: link.amountAtomic, stable, fee: feeTermsOf(ctx), payment_link: link.id };
  }

  /** A route that is not about an existing agent (agents/prepare, buyer/payment). */
  async prepare(caller: Caller, build: (ctx: BuildContext) => Promise<PlanOutcome>): Promise<PreparedEnvelope> {
    const ctx = this.context(caller.network);
    return this.finish(caller, ctx.ledger, await build(ctx));
  }

  /** A route about one of the caller's agents: another principal's agent is not found (README "Ownership"). */
  async prepareForAgent(caller: Caller, mint: string, build: (ctx: AgentBuildContext) => Promise<PlanOutcome>): Promise<PreparedEnvelope> {
    const agent = await this.deps.store.agents.get(caller.network, mint);
    if (!agent || !canAccess(caller, agent.ownerPrincipal)) {
      throw new DomainError('agent_not_found', `No agent ${mint} on ${caller.network}.`, { mint, network: caller.network });
    }
    const ctx = this.context(caller.network);
    return this.finish(caller, ctx.ledger, await build({ ...ctx, agent }));
  }

  private async finish(caller: Caller, ledger: Ledger, plan: PlanOutcome): Promise<PreparedEnvelope> {
    const { network } = caller;
    if (isNoOp(plan)) return { event_id: null, network, transaction: null, echo: plan.echo, no_op: true, ...plan.extras };
    await this.deps.watchlist?.watchAgent(network, plan.agent, caller.owner);
    const { blockhash, lastValidBlockHeight } = await ledger.getLatestBlockhash();
    const { transaction, message, signers } = compile(plan, blockhash, lastValidBlockHeight);
    const now = this.deps.clock.now();
    const eventId = newId(now.getTime());
    const metadata = { ...plan.metadata, echo: plan.echo } as EventMetadata<PreparedKind>;
    await this.deps.store.transaction(async (tx) => {
      await tx.events.append(newEvent(plan.kind, { id: eventId, phase: 'prepared', network, agentAsset: plan.agent, owner: caller.owner, createdAt: now }, metadata));
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
    const parsed = parseInput(SubmitInput, input);
    const { network } = caller;
    const { ledger } = this.context(network);
    const event = await this.deps.store.events.get(network, parsed.event_id);
    if (!event || !canAccess(caller, event.owner)) throw eventNotFound(network, parsed.event_id);
    const prepared = await this.deps.store.preparedTransactions.get(network, parsed.event_id);
    if (!prepared) {
      throw new DomainError('invalid_request', `Event ${parsed.event_id} is a ${event.kind} event, not a prepared transaction.`, { path: 'event_id', kind: event.kind });
    }
    const wire = Uint8Array.from(Buffer.from(parsed.transaction_base64, 'base64'));
    const signed = checkSigned(prepared, wire);
    if (prepared.state !== 'prepared') return this.repeat(prepared, signed.signature, event.phase);
    if (!(await ledger.isBlockhashValid(prepared.recentBlockhash))) {
      throw new DomainError('transaction_expired', `The blockhash of event ${prepared.eventId} is no longer valid; prepare again.`, {
        event_id: prepared.eventId,
        recent_blockhash: prepared.recentBlockhash,
      });
    }
    // Preflight before anything is recorded: a transaction the ledger refuses leaves the event prepared, to be signed
    // again (or funded and submitted again) while its blockhash lasts.
    const simulated = await ledger.simulateTransaction(wire, { sigVerify: true });
    if (simulated.err !== null) throw rejected(prepared.eventId, simulated.err, simulated.logs);

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
      return this.repeat(current ?? prepared, signed.signature, "submitted");
    }
    const result: SubmitResult = { event_id: prepared.eventId, signature: signed.signature, phase: 'submitted', network, replayed: false };
    let sent;
    try {
      sent = await ledger.sendTransaction(wire);
    } catch (e) {
      // rpc_unavailable or submit_timeout: the event stays submitted; poll it (hosted-api §7).
      if (e instanceof DomainError) throw new DomainError(e.code, `${e.message} Event ${prepared.eventId} stays submitted; poll GET /v1/events/${prepared.eventId}.`, { ...e.details, event_id: prepared.eventId, signature: signed.signature });
      throw e;
    }
    if (!sent.ok) {
      // The confirmations job may have broadcast the same bytes first (a slow send): then it landed, and the job
      // decides the event. Otherwise it was refused after the preflight passed (the state moved in between):
      // nothing landed and nothing will.
      let landed;
      try {
        [landed] = await ledger.getSignatureStatuses([signed.signature]);
      } catch {
        return result; // not known whether it landed: the job reads the status and decides
      }
      if (landed) return result;
      await this.fail(prepared, errorCode(sent.err), [`err: ${JSON.stringify(sent.err)}`, ...sent.logs]);
      throw rejected(prepared.eventId, sent.err, sent.logs);
    }
    return result;
  }

  /** The same transaction again → its stored outcome, replayed; another one → event_already_submitted. */
  private repeat(prepared: PreparedTransactionRecord, signature: string, phase: string): SubmitResult {
    if (prepared.signature === signature) {
      return { event_id: prepared.eventId, signature, phase: 'submitted', network: prepared.network, replayed: true };
    }
    if (prepared.signature === null) {
      // Never submitted and no longer open: it expired.
      throw new DomainError('transaction_expired', `Event ${prepared.eventId} expired before it was submitted; prepare again.`, { event_id: prepared.eventId, phase });
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
  async checkDue(limit = 100): Promise<{ checked: number; decided: number; nextDue: Date | null }> {
    const now = this.deps.clock.now();
    const due = await this.deps.store.preparedTransactions.claimDue(now, new Date(now.getTime() + CHECK_LEASE_MS), limit);
    let decided = 0;
    const byNetwork = new Map<Network, PreparedTransactionRecord[]>();
    for (const row of due) byNetwork.set(row.network, [...(byNetwork.get(row.network) ?? []), row]);
    for (const [network, rows] of byNetwork) {
      const ledger = this.deps.ledgers[network];
      if (!ledger) continue;
      let statuses;
      try {
        statuses = await ledger.getSignatureStatuses(rows.map((r) => r.signature!));
      } catch {
        for (const r of rows) await this.deps.store.preparedTransactions.scheduleCheck(network, r.eventId, this.nextCheck(r));
        continue;
      }
      for (const [i, row] of rows.entries()) {
        if (await this.decide(ledger, row, statuses[i] ?? null)) decided++;
      }
    }
    return { checked: due.length, decided, nextDue: await this.deps.store.preparedTransactions.nextDue() };
  }

  private async decide(ledger: Ledger, row: PreparedTransactionRecord, status: Awaited<ReturnType<Ledger['getSignatureStatuses']>>[number]): Promise<boolean> {
    const signature = row.signature!;
    if (status && status.confirmationStatus !== 'processed') {
      const landed = await ledger.getTransaction(signature).catch(() => null);
      if (status.err === null) {
        await this.confirm(row, status.slot, landed);
      } else {
        await this.fail(row, errorCode(status.err), [`err: ${JSON.stringify(status.err)}`, ...(landed?.logs ?? [])], status.slot);
      }
      return true;
    }
    if (!status) {
      const valid = await ledger.isBlockhashValid(row.recentBlockhash).catch(() => true);
      if (!valid) {
        // One last read: it may have landed just before the blockhash ran out.
        const [late] = await ledger.getSignatureStatuses([signature]).catch(() => [null]);
        if (late) return this.decide(ledger, row, late);
        await this.fail(row, 'expired', ['the transaction did not land before its blockhash expired']);
        return true;
      }
      // Dropped or not yet seen: broadcast the same bytes again (same signature: it lands once at most).
      await ledger.sendTransaction(row.transaction!, { skipPreflight: true }).catch(() => undefined);
    }
    await this.deps.store.preparedTransactions.scheduleCheck(row.network, row.eventId, this.nextCheck(row));
    return false;
  }

  private nextCheck(row: PreparedTransactionRecord): Date {
    const wait = Math.min(FIRST_CHECK_MS * 2 ** Math.min(row.checks + 1, 10), MAX_CHECK_INTERVAL_MS);
    return new Date(this.deps.clock.now().getTime() + wait);
  }

  /** Confirmed, with what it makes: the agent a mint created, the spend receipt of a buyer payment (issue 11). */
  private async confirm(row: PreparedTransactionRecord, slot: number, landed: LedgerTransaction | null): Promise<void> {
    const now = this.deps.clock.now();
    await this.deps.store.transaction(async (tx) => {
      const event = await tx.events.transition(row.network, row.eventId, { from: ['submitted'], phase: 'confirmed', at: now, slot, blockTime: landed?.blockTime ?? null, confirmedAt: now });
      await tx.preparedTransactions.finish(row.network, row.eventId);
      if (!event) return;
      if (row.kind === 'agent.create') await tx.agents.insert(createdAgent(row, event.metadata, now));
      if (row.kind === 'buyer.payment') {
        await recordSpendReceipt(tx, { row, metadata: event.metadata, landed, signature: row.signature!, now, baseUrl: this.deps.settings.baseUrl });
      }
    });
  }

  private async fail(row: PreparedTransactionRecord, code: string, logs: string[], slot?: number): Promise<void> {
    const now = this.deps.clock.now();
    await this.deps.store.transaction(async (tx) => {
      await tx.events.transition(row.network, row.eventId, { from: ['prepared', 'submitted'], phase: 'failed', at: now, errorCode: code, errorLogs: logs, ...(slot !== undefined ? { slot } : {}) });
      await tx.preparedTransactions.finish(row.network, row.eventId);
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
        const event = await tx.events.transition(row.network, row.eventId, { from: ['prepared'], phase: 'failed', at: now, errorCode: 'expired', errorLogs: ['not submitted within 24 h of its preparation'] });
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
export function compile(plan: TransactionPlan, blockhash: string, lastValidBlockHeight: number): { transaction: Uint8Array; message: Uint8Array; signers: string[] } {
  const tx = new Transaction({ feePayer: new PublicKey(plan.feePayer), blockhash, lastValidBlockHeight }).add(...plan.instructions);
  const compiled = tx.compileMessage();
  const message = compiled.serialize();
  const signers = compiled.accountKeys.slice(0, compiled.header.numRequiredSignatures).map((k) => k.toBase58());
  const presigners = (plan.presigners ?? []).map((secret) => Keypair.fromSecretKey(secret));
  if (presigners.length) tx.partialSign(...presigners);
  const transaction = tx.serialize({ requireAllSignatures: false, verifySignatures: false });
  return { transaction: Uint8Array.from(transaction), message: Uint8Array.from(message), signers };
}

/** DECISIONS `transaction_invalid`: bytes that do not parse, differ from the prepared message, or lack a signature. */
function checkSigned(prepared: PreparedTransactionRecord, wire: Uint8Array): { signature: string } {
  let decoded;
  try {
    decoded = decodeTransaction(wire);
  } catch (e) {
    throw new DomainError('transaction_invalid', `transaction_base64 is not a transaction: ${e instanceof DecodeError ? e.message : 'unreadable'}.`, { path: 'transaction_base64' });
  }
  if (!equalBytes(decoded.messageBytes, prepared.message)) {
    throw new DomainError('transaction_invalid', `The transaction's message differs from the one prepared for event ${prepared.eventId}; only signatures may be added.`, {
      path: 'transaction_base64',
      event_id: prepared.eventId,
    });
  }
  const missing = prepared.signers.filter((signer, i) => {
    const signature = decoded.signatures[i];
    return !signature || !verifyEd25519(new PublicKey(signer).toBytes(), decoded.messageBytes, signature);
  });
  if (missing.length) {
    throw new DomainError('transaction_invalid', `The transaction lacks a valid signature of ${missing.join(', ')}.`, { path: 'transaction_base64', missing_signers: missing });
  }
  return { signature: encodeBase58(decoded.signatures[0]!) };
}

function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && Buffer.compare(Buffer.from(a.buffer, a.byteOffset, a.length), Buffer.from(b.buffer, b.byteOffset, b.length)) === 0;
}

function rejected(eventId: string, err: LedgerTransactionError, logs: string[]): DomainError {
  return new DomainError('transaction_rejected', `The ledger refused the transaction of event ${eventId} in preflight: ${JSON.stringify(err)}. Nothing landed.`, {
    event_id: eventId,
    err,
    logs: logs.slice(-20),
  });
}

function eventNotFound(network: Network, id: string): DomainError {
  return new DomainError('event_not_found', `No event ${id} on ${network}.`, { id, network });
}

/** A ledger error as a stable snake_case code: "BlockhashNotFound" → "blockhash_not_found", { InstructionError: … } → "instruction_error". */
export function errorCode(err: LedgerTransactionError): string {
  const name = typeof err === 'string' ? err : (Object.keys(err)[0] ?? 'unknown');
  return name.replace(/([a-z0-9])([A-Z])/g, '$1_$2').toLowerCase();
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
  };
}
