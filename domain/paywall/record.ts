import { newId } from '../shared/ids.ts';
import { newEvent, type EventKindName, type EventMetadata } from '../events/kinds.ts';
import { atomicToDecimal, feeFor } from '../shared/money.ts';
import { STABLES, type Stable } from '../shared/network.ts';
import type { GatewaySettings } from '../shared/settings.ts';
import type { Clock } from '../ports/clock.ts';
import type { OutboundHttp } from '../ports/outbound-http.ts';
import type { Repositories, Store } from '../ports/store.ts';
import { FEE_EXTENSION_KEY, FeeExtension } from '../facilitator/schema.ts';
import { chainReceipt, sha256Hex, type AnyReceiptDraft, type ChainHead, type Receipt, type ReceiptDraft, type ReceiptRecord } from '../receipts/schema.ts';
import { encodeReceipt } from '../facilitator/mpp.ts';
import type { NewEvent } from '../events/schema.ts';
import type { AgentRecord } from '../agents/schema.ts';
import type { Ledger } from '../ports/ledger.ts';
import type { Network } from '../shared/network.ts';
import { buyerAgentOf } from './buyer.ts';
import { enqueueLinkDelivery } from '../webhooks/service.ts';
import { facilitatorFeePaid, toV1 } from './offer.ts';
import type { StoredResponse } from './schema.ts';
import type { Call, Settled } from './call.ts';
import { confirmedBySettlement, verificationEvent } from '../receipts/verify.ts';
import type { VerificationUpdate } from '../ports/store.ts';
import type { ReceiptSigner } from '../receipts/signing.ts';
import { receiptPayload, withSignedReceipt } from './offer-receipt.ts';

// hosted-api §4.2 rule 9, DECISIONS "Receipts" and "Webhooks": what a landed payment leaves behind — the link's
// counters, the owner's earn receipt, the events and the response replays get — written once, in one transaction.

export type Recorded = { kind: 'recorded'; response: StoredResponse } | { kind: 'already_used' };

export interface RecorderDeps {
  store: Store;
  outbound: OutboundHttp;
  clock: Clock;
  settings: GatewaySettings;
  ledgers: Partial<Record<Network, Ledger>>;
  /**
   * The paywall settles through this gateway's own facilitator (in process): a settlement it answered as a success was
   * seen confirmed on the ledger, and its receipts are recorded `verified` (DECISIONS "Receipts"). Unset: an outside
   * facilitator's success is checked against the ledger by the receipts job, as a pushed receipt is.
   */
  ownFacilitator?: boolean | undefined;
  onWarning?: (message: string, context: Record<string, unknown>) => void;
  /** x402 offer-receipt: signs each paid x402 answer's receipt, stored with it so replays answer the same (offer-receipt.ts) */
  signer?: ReceiptSigner | undefined;
}

/** Group commit: at most this many queued calls are recorded in one transaction. */
const MAX_BATCH = 64;

/** Calls waiting for their next record transaction, and whether one of theirs runs. */
interface Lane {
  running: boolean;
  waiting: Queued[];
}

const sellerKey = (network: Network, seller: string) => `${network}:${seller}`;

const b64json = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64');

/**
 * What recording a payment ended with: the response it answers (null for a sale nobody was served: a buyer/payment), or
 * null (recorded already: under a pruned row, or by the other path of a buyer/payment).
 */
type Final = { response: StoredResponse | null } | null;

/** A landed payment to record. `served` null: no response was served for it (a buyer/payment of the link). */
interface Landed {
  call: Call;
  signature: string;
  payer: string | null;
  served: StoredResponse | null;
  buyer: AgentRecord | null;
  now: Date;
  /** our own facilitator saw the settlement confirmed: its receipts are recorded verified */
  confirmed: boolean;
}

/** A landed payment waiting for its seller's next record transaction. */
interface Queued extends Landed {
  served: StoredResponse;
  done: (final: Final) => void;
  failed: (error: unknown) => void;
}

export class PaidCallRecorder {
  constructor(private readonly deps: RecorderDeps) {}

  /**
   * Rule 9 in one transaction: counters, earn receipt, events, the stored response; then the webhook. Idempotent per
   * payment: a call recorded already answers what was stored; a transaction recorded under a pruned row is `already_used`.
   *
   * Group commit: the calls that land while a record transaction runs wait in memory (not on a pooled connection) and
   * are recorded together in the next one, whichever sellers they pay: each call's rows as alone, each seller's receipts
   * chained in arrival order, each link's counters added once, in a fixed number of round trips whatever the group's
   * size. A group never waits for a chain: it takes each chain it extends only if it is free now, and a seller whose
   * chain another transaction holds (a receipt push) is deferred to a queue of its own — where its calls wait for the
   * chain, in order, holding up no other seller — until that queue is empty. Should a group's transaction fail, its
   * calls are recorded again in their sellers' own queues, where a failing group is recorded call by call, so one
   * call's failure fails that call only.
   */
  async record(call: Call, settled: Settled, served: StoredResponse): Promise<Recorded> {
    const { signature, payer } = settled;
    const confirmed = settled.confirmed && this.deps.ownFacilitator === true;
    const { link } = call;
    const network = link.network;
    const now = this.deps.clock.now();
    // An agent's treasury paid (its executive as delegate): its spend receipt is recorded with the earn one.
    const buyer = await buyerAgentOf(call, { store: this.deps.store, ledger: this.deps.ledgers[network] }).catch((err: unknown) => {
      this.deps.onWarning?.('the buyer agent of a paid call could not be read; no spend receipt is written for it', { network, signature, err: String(err) });
      return null;
    });
    const final = await new Promise<Final>((done, failed) => this.enqueue(network, { call, signature, payer, served, buyer, now, confirmed, done, failed }));
    if (!final) {
      await this.deps.store.paidCalls.release(network, call.paymentKey);
      return { kind: 'already_used' };
    }
    // a paid call was served: its record answers a response
    return { kind: 'recorded', response: final.response! };
  }

  /**
   * A sale that did not go through the paywall (DECISIONS buyer/payment, hosted-api §4.2 rule 9): a buyer/payment of
   * the link whose transaction the confirmations job saw confirmed. Recorded in the caller's transaction, which holds
   * its chain heads (lockHead) in sorted order: the same counters, earn receipt, events and link webhook as a paid call
   * of the paywall, but no `payment_link.served` and no response (none was served). Once per payment, whichever path
   * sees it first: a payment the paywall recorded (its paid call's key done, or an earn receipt with its signature)
   * writes nothing, and a paywall call of a payment recorded here finds that receipt and is `already_used`.
   * Returns whether it was written now.
   */
  async recordSale(tx: Repositories, sale: { call: Call; signature: string; payer: string | null; now: Date }): Promise<boolean> {
    const [final] = await this.write(tx, [{ ...sale, served: null, buyer: null, confirmed: false }]);
    return final?.response === null;
  }

  /** network → the calls waiting for its next group, and whether a group transaction runs (in this process) */
  private readonly groups = new Map<Network, Lane>();
  /**
   * (network, seller) → the calls of a seller deferred from a group (its chain was held): recorded in its own
   * transactions, waiting for the chain, one after the other; the seller's new calls join them until none waits.
   */
  private readonly deferred = new Map<string, Lane>();

  /** How many landed calls of `seller` wait for their next record transaction in this process (not the one running). */
  waiting(network: Network, seller: string): number {
    const grouped = this.groups.get(network)?.waiting.filter((q) => q.call.link.ownerAgent === seller).length ?? 0;
    return grouped + (this.deferred.get(sellerKey(network, seller))?.waiting.length ?? 0);
  }

  private enqueue(network: Network, item: Queued): void {
    const own = this.deferred.get(sellerKey(network, item.call.link.ownerAgent));
    if (own) {
      own.waiting.push(item);
      return;
    }
    let group = this.groups.get(network);
    if (!group) {
      group = { running: false, waiting: [] };
      this.groups.set(network, group);
    }
    group.waiting.push(item);
    if (!group.running) {
      const lane = group;
      this.start(
        lane,
        () => this.commitGroup(network, lane.waiting.splice(0, MAX_BATCH)),
        () => this.groups.delete(network),
      );
    }
  }

  /**
   * Runs `step` while `lane` has calls waiting, then `idle`. A transaction records several requests' calls: never under
   * the scope (statement tag, timeout, cancellation) of the request that happened to start it.
   */
  private start(lane: Lane, step: () => Promise<void>, idle: () => void): void {
    lane.running = true;
    const drain = async () => {
      try {
        while (lane.waiting.length > 0) await step();
      } finally {
        lane.running = false;
        if (lane.waiting.length === 0) idle();
        else this.start(lane, step, idle);
      }
    };
    void (this.deps.store.unscoped ? this.deps.store.unscoped(drain) : drain());
  }

  /** One group: the calls whose chains were free are recorded; the sellers of the others are deferred. */
  private async commitGroup(network: Network, batch: Queued[]): Promise<void> {
    let outcome: { recorded: Queued[]; finals: Final[]; deferred: Queued[] };
    try {
      outcome = await this.deps.store.transaction((tx) => this.writeGroup(tx, network, batch));
    } catch (error) {
      if (batch.length === 1) return batch[0]!.failed(error);
      this.deps.onWarning?.('a group record transaction failed; its calls are recorded again by seller', { calls: batch.length, err: String(error) });
      return this.defer(network, batch);
    }
    for (const [i, item] of outcome.recorded.entries()) item.done(outcome.finals[i]!);
    if (outcome.deferred.length > 0) this.defer(network, outcome.deferred);
  }

  /**
   * The chains of the group taken without waiting: a call is recorded now when every chain it extends (its seller's,
   * its buyer agent's) was free; a seller with a call that is not has all its calls of the group deferred (its order kept).
   */
  private async writeGroup(tx: Repositories, network: Network, batch: Queued[]): Promise<{ recorded: Queued[]; finals: Final[]; deferred: Queued[] }> {
    const heads = await tx.receipts.tryLockHeads(network, batch.flatMap(chainsOf));
    const held = new Set(batch.filter((q) => chainsOf(q).some((agent) => !heads.has(agent))).map((q) => q.call.link.ownerAgent));
    const recorded = batch.filter((q) => !held.has(q.call.link.ownerAgent));
    const deferred = batch.filter((q) => held.has(q.call.link.ownerAgent));
    const finals = recorded.length > 0 ? await this.write(tx, recorded, heads) : [];
    return { recorded, finals, deferred };
  }

  /** Calls (in order) to their sellers' own queues, with those sellers' calls still waiting for a group after them. */
  private defer(network: Network, items: Queued[]): void {
    const sellers = new Set(items.map((q) => q.call.link.ownerAgent));
    const group = this.groups.get(network);
    const later = group ? group.waiting.filter((q) => sellers.has(q.call.link.ownerAgent)) : [];
    if (group && later.length > 0) group.waiting = group.waiting.filter((q) => !sellers.has(q.call.link.ownerAgent));
    for (const item of [...items, ...later]) {
      const key = sellerKey(network, item.call.link.ownerAgent);
      let own = this.deferred.get(key);
      if (!own) {
        own = { running: false, waiting: [] };
        this.deferred.set(key, own);
      }
      own.waiting.push(item);
      if (!own.running) {
        const lane = own;
        this.start(
          lane,
          () => this.commitOwn(lane.waiting.splice(0, MAX_BATCH)),
          () => this.deferred.delete(key),
        );
      }
    }
  }

  /** One transaction of a deferred seller's calls, waiting for its chain; a failed group is recorded call by call. */
  private async commitOwn(batch: Queued[]): Promise<void> {
    try {
      const finals = await this.deps.store.transaction((tx) => this.write(tx, batch));
      for (const [i, item] of batch.entries()) item.done(finals[i]!);
    } catch (error) {
      if (batch.length === 1) return batch[0]!.failed(error);
      this.deps.onWarning?.('a group record transaction failed; its calls are recorded one by one', { calls: batch.length, err: String(error) });
      for (const item of batch) await this.commitOwn([item]);
    }
  }

  /**
   * The batch's rows, in a fixed number of statements: its paid calls locked and triaged (`triage`), then the calls to
   * record now written together (`recordLive`), and every call answered (`answers`).
   */
  private async write(tx: Repositories, batch: readonly Landed[], heads?: Map<string, ChainHead | null>): Promise<Final[]> {
    const network = batch[0]!.call.link.network;
    const verdicts = await triage(tx, network, batch);
    const live = verdicts.flatMap((v, i) => (v.kind === 'live' ? [{ index: i, landed: batch[i]! }] : []));
    const recorded = live.length > 0 ? await this.recordLive(tx, { network, live, heads }) : new Map<number, Final>();
    return answers(verdicts, recorded);
  }

  /**
   * The live calls' rows: every chain they extend locked, each call's rows built in batch order (`rowsOf`), then written
   * in one statement per table. Answers each call's final by its index in the batch.
   */
  private async recordLive(
    tx: Repositories,
    batch: { network: Network; live: readonly { index: number; landed: Landed }[]; heads: Map<string, ChainHead | null> | undefined },
  ): Promise<Map<number, Final>> {
    const { network, live } = batch;
    // a group's chains are held already (writeGroup); else every chain the calls extend is locked now
    const chains = chainsFrom(
      batch.heads ??
        (await tx.receipts.lockHeads(
          network,
          live.flatMap((l) => chainsOf(l.landed)),
        )),
    );
    const rows = live.map((l) => this.rowsOf(l.landed, chains));
    await persist(tx, { network, rows, webhook: (w) => this.webhook(tx, w.call, w) });
    return new Map(live.map((l, i) => [l.index, { response: rows[i]!.response }]));
  }

  /** One landed call's rows: its earn receipt (and its buyer's spend receipt), events, stored response and webhook. */
  private rowsOf(landed: Landed, chains: Chains): CallRows {
    const { call, signature, payer, served, buyer, now } = landed;
    const network = call.link.network;
    const price = priceOf(call);
    const payment = { success: true, transaction: signature, network: call.accept.network, payer };
    const receipt = chains.append(earnDraft(landed, { price, facilitatorUrl: this.deps.settings.facilitatorUrl }));
    const receipts: (ReceiptRecord & { verification?: VerificationUpdate })[] = [
      { network, receipt, source: 'paywall', createdAt: now, ...verifiedAt(landed, receipt) },
    ];
    const events: NewEvent[] = [];
    const append = this.appender(events, call, now, signature);
    this.settledEvents(append, call, { payer, fee: price.fee, stable: price.stable, status: served?.status ?? null, signature });
    if (buyer) {
      const spend = this.spend({ buyer, earn: receipt, chains });
      receipts.push({ network: buyer.network, receipt: spend, source: 'buyer', createdAt: now, ...verifiedAt(landed, spend) });
      events.push(spendEvent({ buyer, spend, linkId: call.link.id, signature, now }));
    }
    this.receiptEvents(append, call, { signature, receipt, fee: price.fee, stable: price.stable });
    for (const r of receipts) {
      const owner = r.source === 'buyer' ? buyer!.ownerPrincipal : call.link.ownerPrincipal;
      if (r.verification?.status !== 'verified') continue;
      // as the receipts job would have written its decision
      const event = verificationEvent({ network: r.network, owner, receipt: r.receipt, source: r.source, now: r.createdAt }, r.verification);
      if (event) events.push(event);
    }
    const response = served ? this.signed(landed, servedResponse({ landed, served, receipt, payment, fee: price.fee }), receipt) : null;
    return { call, now, signature, payer, receipts, events, response, payment, receipt };
  }

  /** The x402 answer with its signed receipt naming this earn receipt (offer-receipt.ts); MPP answers carry their own. */
  private signed(landed: Landed, response: StoredResponse, receipt: Receipt): StoredResponse {
    const { call, payer } = landed;
    if (!this.deps.signer || call.mpp) return response;
    const payload = receiptPayload({ accept: call.accept, resourceUrl: call.resource.url, payer, receipt });
    return withSignedReceipt(response, this.deps.signer.sign(payload));
  }

  /** The buyer agent's spend receipt: the same request and price block as the earn receipt, on its own chain. */
  private spend(e: { buyer: AgentRecord; earn: Receipt; chains: Chains }): Receipt {
    const { nonce: _n, prev_receipt_hash: _p, receipt_hash: _h, response: _r, ...draft } = e.earn;
    // Stored pending: the verification job checks the debit of the buyer's treasury against the ledger.
    return e.chains.append({ ...draft, kind: 'spend', agent: e.buyer.mint });
  }

  private appender(events: NewEvent[], call: Call, now: Date, signature: string) {
    const { link } = call;
    const base = {
      network: link.network,
      agentAsset: link.ownerAgent,
      owner: link.ownerPrincipal,
      phase: 'confirmed' as const,
      createdAt: now,
      confirmedAt: now,
    };
    return <K extends EventKindName>(kind: K, metadata: EventMetadata<K>) => {
      events.push(newEvent(kind, { ...base, id: newId(now.getTime()), signature }, metadata));
    };
  }

  /** The events a landed payment leaves that need no receipt. */
  private settledEvents(
    append: ReturnType<PaidCallRecorder['appender']>,
    call: Call,
    paid: { payer: string | null; fee: bigint; stable: Stable; status: number | null; signature: string },
  ) {
    const { link } = call;
    const { payer, fee, stable, status, signature } = paid;
    append('payment_link.settled', {
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
    if (status !== null) append('payment_link.served', { payment_link_id: link.id, status, tx_sig: signature, method: link.method });
  }

  /** The earn receipt's events. */
  private receiptEvents(
    append: ReturnType<PaidCallRecorder['appender']>,
    call: Call,
    paid: { signature: string; receipt: Receipt; fee: bigint; stable: Stable },
  ) {
    const { link } = call;
    const { signature, receipt, fee, stable } = paid;
    append('receipt.published', { payment_link_id: link.id, source: 'paywall', receipt_hash: receipt.receipt_hash, nonce: receipt.nonce, receipt });
    if (fee > 0n) {
      // fee-facilitator-mpp-tools §6 path 1: once per receipt with a fee.
      append('protocol.fee.collected', {
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
   * record transaction so a recorded payment's webhook is never lost. `response` is null for a sale that served nothing
   * (a buyer/payment of the link).
   */
  private async webhook(tx: Repositories, call: Call, sent: WebhookSent): Promise<void> {
    const { link } = call;
    const { payment, response, receipt, now } = sent;
    if (!link.webhookUrl || !link.webhookSecret) return;
    const data = {
      payment_link_id: link.id,
      payment,
      receipt,
      response: response && { status: response.status, headers: response.headers, body: response.body },
    };
    await enqueueLinkDelivery(tx, { network: link.network, linkPk: link.pk, kind: 'payment_link.settled', data, now });
  }
}

/** What the webhook of a recorded call sends. */
interface WebhookSent {
  payment: Record<string, unknown>;
  response: StoredResponse | null;
  receipt: Receipt;
  now: Date;
}

/** The rows one live call leaves: written with the batch's others (`persist`). */
interface CallRows extends WebhookSent {
  call: Call;
  signature: string;
  payer: string | null;
  receipts: (ReceiptRecord & { verification?: VerificationUpdate })[];
  events: NewEvent[];
}

/** Where a call of the batch stands once its paid call row and the receipts are read (`triage`). */
type Verdict =
  /** decided without writing: recorded already (`final` is what it answers) */
  | { kind: 'answered'; final: Final }
  /** the same payment earlier in the batch: answered as that one */
  | { kind: 'repeat'; of: number }
  /** recorded now */
  | { kind: 'live' };

/**
 * Each call's verdict. Under the paid calls' row locks: whoever records a payment first records it; a second finisher
 * (a takeover racing a process thought dead) serves what was stored, and a payment whose row was pruned after the 24 h
 * replay window came back recorded already (its earn receipt holds its signature).
 */
async function triage(tx: Repositories, network: Network, batch: readonly Landed[]): Promise<Verdict[]> {
  const rows = await tx.paidCalls.getMany(
    network,
    batch.map((b) => b.call.paymentKey),
  );
  const current = new Map(rows.map((r) => [r.paymentKey, r]));
  const first = new Map<string, number>();
  const verdicts = batch.map((b, i): Verdict => {
    const row = current.get(b.call.paymentKey);
    if (row?.status === 'done' && row.response) return { kind: 'answered', final: b.served ? { response: row.response } : null };
    const of = first.get(b.call.paymentKey);
    if (of !== undefined) return { kind: 'repeat', of };
    first.set(b.call.paymentKey, i);
    return { kind: 'live' };
  });
  const open = [...first.values()];
  if (open.length === 0) return verdicts;
  const used = await tx.receipts.paywallTxSigs(
    network,
    open.map((i) => batch[i]!.signature),
  );
  for (const i of open) if (used.has(batch[i]!.signature)) verdicts[i] = { kind: 'answered', final: null };
  return verdicts;
}

/** Each call's final: its own, what was stored, or (the same payment twice in the batch) its first's. */
function answers(verdicts: readonly Verdict[], recorded: ReadonlyMap<number, Final>): Final[] {
  const finalOf = (i: number): Final => {
    const v = verdicts[i]!;
    if (v.kind === 'answered') return v.final;
    if (v.kind === 'repeat') return finalOf(v.of);
    return recorded.get(i)!;
  };
  return verdicts.map((_, i) => finalOf(i));
}

/** The heads of the chains a batch extends, locked; each receipt appended moves its agent's head. */
interface Chains {
  append<D extends AnyReceiptDraft>(draft: D): ReturnType<typeof chainReceipt<D>>;
}

/** The agents whose chains a call extends: its seller's, and its buyer agent's (a spend receipt). */
function chainsOf(landed: Landed): string[] {
  return [landed.call.link.ownerAgent, ...(landed.buyer ? [landed.buyer.mint] : [])];
}

/**
 * The chains of locked heads (receipts.lockHeads locks them in one order, by mint, so payments crossing between agents
 * cannot deadlock; tryLockHeads waits for none).
 */
function chainsFrom(heads: Map<string, ChainHead | null>): Chains {
  return {
    append(draft) {
      const receipt = chainReceipt(draft, heads.get(draft.agent) ?? null);
      heads.set(draft.agent, { nonce: receipt.nonce, receiptHash: receipt.receipt_hash });
      return receipt;
    },
  };
}

/** The rows of the live calls in one statement per table; the links' counters rows (locked until commit) last. */
async function persist(tx: Repositories, batch: { network: Network; rows: readonly CallRows[]; webhook: (rows: CallRows) => Promise<void> }): Promise<void> {
  const { network, rows } = batch;
  await tx.receipts.insertMany(rows.flatMap((r) => r.receipts));
  const completed = rows.flatMap((r) =>
    r.response ? [{ paymentKey: r.call.paymentKey, signature: r.signature, payer: r.payer, response: r.response, at: r.now }] : [],
  );
  await tx.paidCalls.completeMany(network, completed);
  await tx.events.appendMany(rows.flatMap((r) => r.events));
  for (const r of rows) await batch.webhook(r);
  const counted = new Map<string, { pk: string; calls: number; at: Date; settledTxSig: string }>();
  for (const r of rows) {
    const pk = r.call.link.pk;
    counted.set(pk, { pk, calls: (counted.get(pk)?.calls ?? 0) + 1, at: r.now, settledTxSig: r.signature });
  }
  await tx.paymentLinks.countCalls(network, [...counted.values()]);
}

/** A call's price block: the link's amount in its stable, and the protocol fee its accept carried (F§2). */
interface Price {
  stable: Stable;
  bps: number;
  fee: bigint;
  feeAuthority: string | null;
}

function priceOf(call: Call): Price {
  const stable = STABLES[call.link.network].find((s) => s.mint === call.accept.asset)!;
  const terms = FeeExtension.safeParse(call.accept.extra[FEE_EXTENSION_KEY]);
  if (!terms.success) return { stable, bps: 0, fee: 0n, feeAuthority: null };
  return { stable, bps: terms.data.bps, fee: feeFor(call.link.amountAtomic, terms.data.bps), feeAuthority: terms.data.feeAuthority };
}

/** The owner's earn receipt before it is chained: v0.1, or v0.2 on the MPP rail. */
function earnDraft(landed: Landed, terms: { price: Price; facilitatorUrl: string }): AnyReceiptDraft {
  const { call, signature, served, now } = landed;
  const { link } = call;
  const { stable, bps, fee, feeAuthority } = terms.price;
  const draft: ReceiptDraft = {
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
      feeAuthority,
    },
    // a buyer/payment is broadcast by the gateway's submit, not settled by a facilitator, and serves nothing
    ...(served ? { facilitator: terms.facilitatorUrl, response: { status: served.status, body_hash: sha256Hex(Buffer.from(served.body, 'base64')) } } : {}),
    tx_sig: signature,
  };
  if (!call.mpp) return draft;
  // fee-facilitator-mpp-tools §2.6: a settlement on the MPP rail is a v0.2 receipt (tx_sig kept too, so every
  // reader of the settlement — counters, verification, spend rollups — treats both rails alike).
  return {
    ...draft,
    v: '0.2' as const,
    protocol: 'mpp' as const,
    mpp_challenge_id: call.mpp.challenge.id,
    mpp_settlement_tx: signature,
    ...(typeof call.mpp.slot === 'number' ? { mpp_settlement_slot: call.mpp.slot } : {}),
  };
}

/** A receipt's verification when recorded: decided by our facilitator's confirmation, else none (the job checks it). */
function verifiedAt(landed: Landed, receipt: Receipt): { verification?: VerificationUpdate } {
  if (!landed.confirmed) return {};
  const check = confirmedBySettlement(receipt);
  return { verification: { ...check, checkedAt: landed.now, attempts: 0, nextCheckAt: null } };
}

/** The buyer agent's `receipt.published`, on the buyer's own scope. */
function spendEvent(e: { buyer: AgentRecord; spend: Receipt; linkId: string; signature: string; now: Date }): NewEvent {
  const { buyer, spend, now } = e;
  return newEvent(
    'receipt.published',
    {
      id: newId(now.getTime()),
      network: buyer.network,
      agentAsset: buyer.mint,
      owner: buyer.ownerPrincipal,
      phase: 'confirmed',
      createdAt: now,
      confirmedAt: now,
      signature: e.signature,
    },
    { payment_link_id: e.linkId, source: 'buyer', receipt_hash: spend.receipt_hash, nonce: spend.nonce, receipt: spend },
  );
}

/**
 * The response stored and replayed for a served call: the upstream's (wrapped with its receipt when the link asks),
 * with the settlement header of its rail (x402 PAYMENT-RESPONSE, and X-PAYMENT-RESPONSE for v1; MPP Payment-Receipt).
 */
function servedResponse(e: { landed: Landed; served: StoredResponse; receipt: Receipt; payment: Record<string, unknown>; fee: bigint }): StoredResponse {
  const { call, signature, now } = e.landed;
  const feePaid = facilitatorFeePaid(call.accept, e.fee);
  const body = call.link.wrapReceipt ? wrapped(e.served, e.receipt) : e.served;
  const headers: Record<string, string> = call.mpp
    ? {
        ...body.headers,
        'payment-receipt': encodeReceipt({
          reference: signature,
          timestamp: now.toISOString(),
          slot: call.mpp.slot ?? null,
          challengeId: call.mpp.challenge.id,
        }),
      }
    : { ...body.headers, 'payment-response': b64json(withFeeReceipt(e.payment, feePaid)) };
  if (call.version === 1 && !call.mpp) {
    const v1 = { ...e.payment, network: toV1(call.accept, call.link.network, call.resource).network };
    headers['x-payment-response'] = b64json(withFeeReceipt(v1, feePaid));
  }
  return { ...body, headers };
}

/** DECISIONS wrap_receipt: { data: <template body or upstream JSON>, receipt }. */
function wrapped(served: StoredResponse, receipt: Receipt): StoredResponse {
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

/** PAYMENT-RESPONSE with x402's facilitatorFees receipt (SettleResponse.extensions) when a fee leg was paid. */
function withFeeReceipt<T extends object>(response: T, extensions: object | undefined): T {
  return extensions ? { ...response, extensions } : response;
}
