import { newId } from '../shared/ids.ts';
import { newEvent, type EventKindName, type EventMetadata } from '../events/kinds.ts';
import { atomicToDecimal, feeFor } from '../shared/money.ts';
import { STABLES, type Stable } from '../shared/network.ts';
import type { GatewaySettings } from '../shared/settings.ts';
import type { Clock } from '../ports/clock.ts';
import type { OutboundHttp } from '../ports/outbound-http.ts';
import type { Repositories, Store } from '../ports/store.ts';
import { FEE_EXTENSION_KEY, FeeExtension } from '../facilitator/schema.ts';
import { chainReceipt, sha256Hex, type ChainHead, type Receipt, type ReceiptDraft } from '../receipts/schema.ts';
import { encodeReceipt } from '../facilitator/mpp.ts';
import type { AgentRecord } from '../agents/schema.ts';
import type { Ledger } from '../ports/ledger.ts';
import type { Network } from '../shared/network.ts';
import { buyerAgentOf } from './buyer.ts';
import { enqueueLinkDelivery } from '../webhooks/service.ts';
import { toV1 } from './offer.ts';
import type { StoredResponse } from './schema.ts';
import type { Call } from './call.ts';

// hosted-api §4.2 rule 9, DECISIONS "Receipts" and "Webhooks": what a landed payment leaves behind — the link's
// counters, the owner's earn receipt, the events and the response replays get — written once, in one transaction.

export type Recorded = { kind: 'recorded'; response: StoredResponse } | { kind: 'already_used' };

export interface RecorderDeps {
  store: Store;
  outbound: OutboundHttp;
  clock: Clock;
  settings: GatewaySettings;
  ledgers: Partial<Record<Network, Ledger>>;
  onWarning?: (message: string, context: Record<string, unknown>) => void;
}

/** record transactions of one seller at once per process (the chain lock orders them; see fewAtATime) */
const RECORDS_PER_SELLER = 2;

const b64json = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64');

export class PaidCallRecorder {
  constructor(private readonly deps: RecorderDeps) {}

  /**
   * Rule 9 in one transaction: counters, earn receipt, events, the stored response; then the webhook. Idempotent per
   * payment: a call recorded already answers what was stored; a transaction recorded under a pruned row is `already_used`.
   */
  async record(call: Call, signature: string, payer: string | null, served: StoredResponse): Promise<Recorded> {
    const { link } = call;
    const network = link.network;
    const now = this.deps.clock.now();
    const stable = STABLES[network].find((s) => s.mint === call.accept.asset)!;
    const feeTerms = FeeExtension.safeParse(call.accept.extra[FEE_EXTENSION_KEY]);
    const bps = feeTerms.success ? feeTerms.data.bps : 0;
    const fee = feeTerms.success ? feeFor(link.amountAtomic, bps) : 0n;
    const paymentResponse = { success: true, transaction: signature, network: call.accept.network, payer };
    // Issue 11: an agent's treasury paid (its executive as delegate): its spend receipt is recorded with the earn one.
    const buyer = await buyerAgentOf(call, { store: this.deps.store, ledger: this.deps.ledgers[network] }).catch((err: unknown) => {
      this.deps.onWarning?.('the buyer agent of a paid call could not be read; no spend receipt is written for it', { network, signature, err: String(err) });
      return null;
    });

    // At most RECORDS_PER_SELLER record transactions of one seller at a time from this process: the others wait here,
    // not in PostgreSQL holding a pooled connection each (which starved the claims and settlements of every other
    // call); the chain lock below orders them, across processes too.
    const final = await this.fewAtATime(`${network}:${link.ownerAgent}`, () => this.deps.store.transaction(async (tx): Promise<{ response: StoredResponse; receipt: Receipt | null } | null> => {
      // Under the paid call's row lock: whoever records a payment first records it; a second finisher (a takeover
      // racing a process thought dead) serves what was stored.
      const current = await tx.paidCalls.get(network, call.paymentKey);
      if (current?.status === 'done' && current.response) return { response: current.response, receipt: null };
      // Its row was pruned after the 24 h replay window and the payment came back: it was recorded then.
      if (await tx.receipts.hasPaywallTxSig(network, signature)) return null;
      // Issue 19: the locks a seller's calls share are taken as late as they can be, so they are held for the fewest
      // statements: what needs no chain (the settled and served events) is written before the chain heads are
      // locked, and the link's counters row (locked by its update until commit) is the last write.
      await this.emitSettled(tx, call, now, signature, payer, fee, stable, served.status);
      // Both chains' heads are locked in one order (by mint), so payments crossing between two agents cannot deadlock.
      const heads = new Map<string, ChainHead | null>();
      for (const agent of [link.ownerAgent, ...(buyer ? [buyer.mint] : [])].sort()) heads.set(agent, await tx.receipts.lockHead(network, agent));
      const head = heads.get(link.ownerAgent) ?? null;
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
            feeAuthority: feeTerms.success ? feeTerms.data.feeAuthority : null,
          },
          facilitator: this.deps.settings.facilitatorUrl,
          response: { status: served.status, body_hash: sha256Hex(Buffer.from(served.body, 'base64')) },
          tx_sig: signature,
        };
      // fee-facilitator-mpp-tools §2.6: a settlement on the MPP rail is a v0.2 receipt (tx_sig kept too, so every
      // reader of the settlement — counters, verification, spend rollups — treats both rails alike).
      const receipt = chainReceipt(
        call.mpp
          ? {
              ...draft,
              v: '0.2' as const,
              protocol: 'mpp' as const,
              mpp_challenge_id: call.mpp.challenge.id,
              mpp_settlement_tx: signature,
              ...(typeof call.mpp.slot === 'number' ? { mpp_settlement_slot: call.mpp.slot } : {}),
            }
          : draft,
        head,
      );
      await tx.receipts.insert({ network, receipt, source: 'paywall', createdAt: now });
      if (buyer) await this.spend(tx, { buyer, earn: receipt, head: heads.get(buyer.mint) ?? null, now, signature, link: link.id });

      const body = link.wrapReceipt ? wrapped(served, receipt) : served;
      const headers: Record<string, string> = call.mpp
        ? { ...body.headers, 'payment-receipt': encodeReceipt({ reference: signature, timestamp: now.toISOString(), slot: call.mpp.slot ?? null, challengeId: call.mpp.challenge.id }) }
        : { ...body.headers, 'payment-response': b64json(paymentResponse) };
      if (call.version === 1 && !call.mpp) headers['x-payment-response'] = b64json({ ...paymentResponse, network: toV1(call.accept, network, call.resource).network });
      const response: StoredResponse = { ...body, headers };
      await tx.paidCalls.complete(network, call.paymentKey, { signature, payer, response, at: now });
      await this.emitReceipt(tx, call, now, signature, receipt, fee, stable);
      await this.webhook(tx, call, paymentResponse, response, receipt, now);
      await tx.paymentLinks.countCall(network, link.pk, { at: now, settledTxSig: signature });
      return { response, receipt };
    }));

    if (!final) {
      await this.deps.store.paidCalls.release(network, call.paymentKey);
      return { kind: 'already_used' };
    }
    return { kind: 'recorded', response: final.response };
  }

  private readonly running = new Map<string, { active: number; waiting: (() => void)[] }>();

  /**
   * Runs `work` once fewer than RECORDS_PER_SELLER works of the same key run in this process: the next record's part
   * before the chain lock overlaps the current one's chain part, and the rest wait in memory, not on a connection.
   */
  private async fewAtATime<T>(key: string, work: () => Promise<T>): Promise<T> {
    let slot = this.running.get(key);
    if (!slot) this.running.set(key, (slot = { active: 0, waiting: [] }));
    if (slot.active >= RECORDS_PER_SELLER) await new Promise<void>((go) => slot.waiting.push(go));
    else slot.active++;
    try {
      return await work();
    } finally {
      const next = slot.waiting.shift();
      if (next) next(); // the slot passes on as it is
      else if (--slot.active === 0) this.running.delete(key);
    }
  }

  /** The buyer agent's spend receipt: the same request and price block as the earn receipt, on its own chain. */
  private async spend(tx: Repositories, e: { buyer: AgentRecord; earn: Receipt; head: ChainHead | null; now: Date; signature: string; link: string }): Promise<void> {
    const { nonce: _n, prev_receipt_hash: _p, receipt_hash: _h, response: _r, ...draft } = e.earn;
    const receipt = chainReceipt({ ...draft, kind: 'spend', agent: e.buyer.mint }, e.head);
    // Stored pending: the verification job checks the debit of the buyer's treasury against the ledger.
    await tx.receipts.insert({ network: e.buyer.network, receipt, source: 'buyer', createdAt: e.now });
    await tx.events.append(
      newEvent(
        'receipt.published',
        { id: newId(e.now.getTime()), network: e.buyer.network, agentAsset: e.buyer.mint, owner: e.buyer.ownerPrincipal, phase: 'confirmed', createdAt: e.now, confirmedAt: e.now, signature: e.signature },
        { payment_link_id: e.link, source: 'buyer', receipt_hash: receipt.receipt_hash, nonce: receipt.nonce, receipt },
      ),
    );
  }

  private appender(tx: Repositories, call: Call, now: Date, signature: string) {
    const { link } = call;
    const base = { network: link.network, agentAsset: link.ownerAgent, owner: link.ownerPrincipal, phase: 'confirmed' as const, createdAt: now, confirmedAt: now };
    return <K extends EventKindName>(kind: K, metadata: EventMetadata<K>) => tx.events.append(newEvent(kind, { ...base, id: newId(now.getTime()), signature }, metadata));
  }

  /** The events a landed payment leaves that need no receipt (written before the chain lock). */
  private async emitSettled(tx: Repositories, call: Call, now: Date, signature: string, payer: string | null, fee: bigint, stable: Stable, status: number) {
    const { link } = call;
    const append = this.appender(tx, call, now, signature);
    await append('payment_link.settled', {
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
    await append('payment_link.served', { payment_link_id: link.id, status, tx_sig: signature, method: link.method });
  }

  /** The earn receipt's events (under the chain lock). */
  private async emitReceipt(tx: Repositories, call: Call, now: Date, signature: string, receipt: Receipt, fee: bigint, stable: Stable) {
    const { link } = call;
    const append = this.appender(tx, call, now, signature);
    await append('receipt.published', { payment_link_id: link.id, source: 'paywall', receipt_hash: receipt.receipt_hash, nonce: receipt.nonce, receipt });
    if (fee > 0n) {
      // fee-facilitator-mpp-tools §6 path 1: once per receipt with a fee.
      await append('protocol.fee.collected', {
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
   * record transaction so a recorded payment's webhook is never lost.
   */
  private async webhook(tx: Repositories, call: Call, payment: Record<string, unknown>, response: StoredResponse, receipt: Receipt, now: Date): Promise<void> {
    const { link } = call;
    if (!link.webhookUrl || !link.webhookSecret) return;
    const data = { payment_link_id: link.id, payment, receipt, response: { status: response.status, headers: response.headers, body: response.body } };
    await enqueueLinkDelivery(tx, { network: link.network, linkPk: link.pk, kind: 'payment_link.settled', data, now });
  }
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
