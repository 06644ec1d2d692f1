import { canAccess, type Caller } from '../access/ownership.ts';
import type { Clock } from '../ports/clock.ts';
import type { Ledger, LedgerTransaction } from '../ports/ledger.ts';
import type { Store } from '../ports/store.ts';
import { newEvent } from '../events/kinds.ts';
import { readTransferChecked } from '../facilitator/instructions.ts';
import { SettleResponse } from '../facilitator/wire.ts';
import { chainReceipt, receiptHash, settlementSignature, type Receipt, type ReceiptPrice } from '../receipts/schema.ts';
import { checkReceipt, nextCheckAt } from '../receipts/verify.ts';
import { toStoredReceiptOutput } from '../receipts/service.ts';
import { canonicalJson } from '../shared/canonical-json.ts';
import { DomainError } from '../shared/errors.ts';
import { newId } from '../shared/ids.ts';
import { atomicToDecimal, feeFor } from '../shared/money.ts';
import { CAIP2, STABLES, type Network } from '../shared/network.ts';
import type { GatewaySettings } from '../shared/settings.ts';
import { parseInput } from '../shared/validation.ts';
import { associatedTokenAccount, treasuryOf } from '../treasury/derive.ts';
import { ownedAgent } from './owned.ts';
import { FinalizeInput, VerifyReceiptInput, type FinalizeResult, type VerifyReceiptResult } from './schema.ts';

// The buyer agent's spend receipts. finalize records one from a paid response's settlement (a payment to
// any x402 seller, made client-side from the agent's treasury): the price is read from the landed transaction itself
// — the seller leg and the fee leg out of the treasury's token account — chained on the agent's receipts like every
// receipt, checked against the ledger, with its receipt.published event; idempotent per settlement signature (a
// settlement the gateway already recorded — a buyer/payment confirmation, a paid call at this gateway's paywall —
// answers the receipt it has). verify checks a receipt's hash, its position on the stored chain and its settlement.

export interface BuyerReceiptServiceDeps {
  store: Store;
  clock: Clock;
  ledgers: Partial<Record<Network, Ledger>>;
  settings: GatewaySettings;
}

export class BuyerReceiptService {
  constructor(private readonly deps: BuyerReceiptServiceDeps) {}

  async finalize(caller: Caller, input: FinalizeInput): Promise<FinalizeResult> {
    const q = parseInput(FinalizeInput, input);
    const agent = await ownedAgent(this.deps.store, caller, q.agent);
    const signature = q.signature ?? signatureOfPaymentResponse(q.payment_response!);
    const { network } = caller;
    const known = await this.deps.store.buyer.spendReceiptOf(network, q.agent, signature);
    if (known) return { recorded: false, receipt: toStoredReceiptOutput(known) };
    const landed = await this.ledger(network).getTransaction(signature);
    if (landed === null) {
      throw new DomainError('transaction_invalid', `Transaction ${signature} is not on the ${network} ledger (yet): finalize once it has landed.`, {
        signature,
        retry: true,
      });
    }
    if (landed.err !== null)
      throw new DomainError('transaction_invalid', `Transaction ${signature} failed on the ledger: nothing was paid.`, { signature, err: landed.err });
    const price = this.priceOf(landed, q.agent, network);
    const now = this.deps.clock.now();
    return this.deps.store.transaction(async (tx) => {
      const head = await tx.receipts.lockHead(network, q.agent);
      // Under the chain's lock: a concurrent finalize (or the confirmation of the same payment) recorded it first.
      const again = await tx.buyer.spendReceiptOf(network, q.agent, signature);
      if (again) return { recorded: false, receipt: toStoredReceiptOutput(again) };
      const receipt = chainReceipt(
        {
          v: '0.1',
          kind: 'spend',
          agent: q.agent,
          ts: now.toISOString(),
          request: q.request ?? { method: 'POST', url: `${this.deps.settings.baseUrl}/v1/buyer/receipt/finalize` },
          decision: 'allow',
          price,
          ...(q.response ? { response: q.response } : {}),
          tx_sig: signature,
        },
        head,
      );
      const check = checkReceipt(receipt, landed, 0);
      const verification = {
        status: check.status,
        reason: check.reason,
        checkedAt: now,
        attempts: 1,
        nextCheckAt: check.status === 'pending' ? nextCheckAt(now, 1) : null,
      };
      const record = { network, receipt, source: 'buyer', createdAt: now };
      await tx.receipts.insert(record, verification);
      const fields = {
        id: newId(now.getTime()),
        network,
        agentAsset: q.agent,
        owner: agent.ownerPrincipal,
        phase: 'confirmed' as const,
        createdAt: now,
        confirmedAt: now,
        signature,
      };
      await tx.events.append(newEvent('receipt.published', fields, { source: 'buyer', receipt_hash: receipt.receipt_hash, nonce: receipt.nonce, receipt }));
      return {
        recorded: true,
        receipt: toStoredReceiptOutput({ ...record, verification: { status: check.status, reason: check.reason, checkedAt: now, attempts: 1 } }),
      };
    });
  }

  /**
   * The price block of a payment out of the agent's treasury: the first TransferChecked whose source is the
   * treasury's token account of its mint is the seller leg, a second one of the same mint and source the fee leg
   * (the settlement layout of fee-facilitator-mpp-tools §2.3).
   */
  private priceOf(tx: LedgerTransaction, agent: string, network: Network): ReceiptPrice {
    const treasury = treasuryOf(agent);
    const legs = tx.instructions
      .map((ix, index) => readTransferChecked({ ...ix, index }))
      .filter((t): t is NonNullable<typeof t> => t !== null && t.source === associatedTokenAccount(treasury, t.mint, t.programId));
    const seller = legs[0];
    if (!seller) {
      throw new DomainError(
        'transaction_invalid',
        `Transaction ${tx.signature} moves nothing out of the treasury of agent ${agent}: it is not this agent's payment.`,
        {
          signature: tx.signature,
        },
      );
    }
    const feeLeg = legs.slice(1).find((l) => l.mint === seller.mint);
    const fee = feeLeg?.amount ?? 0n;
    const ownerOf = (account: string) => [...tx.postTokenBalances, ...tx.preTokenBalances].find((b) => b.account === account)?.owner ?? null;
    const stable = STABLES[network].find((s) => s.mint === seller.mint);
    const bps = this.deps.settings.fee.bps;
    const feeBps = fee === 0n ? 0 : feeFor(seller.amount, bps) === fee ? bps : Number((fee * 10_000n) / (seller.amount === 0n ? 1n : seller.amount));
    return {
      amount: atomicToDecimal(seller.amount, seller.decimals),
      currency: stable?.symbol ?? seller.mint,
      asset: seller.mint,
      network: CAIP2[network],
      amount_atomic: seller.amount.toString(),
      fee: fee.toString(),
      gross: (seller.amount + fee).toString(),
      feeBps,
      feeAuthority: feeLeg ? ownerOf(feeLeg.destination) : null,
    };
  }

  async verify(caller: Caller, input: VerifyReceiptInput): Promise<VerifyReceiptResult> {
    const q = parseInput(VerifyReceiptInput, input);
    const { network } = caller;
    const hash = q.receipt_hash ?? q.receipt!.receipt_hash;
    const stored = await this.deps.store.receipts.get(network, hash);
    const receipt: Receipt | null = q.receipt ?? stored?.receipt ?? null;
    const agentMint = receipt?.agent ?? null;
    const agent = agentMint ? await this.deps.store.agents.get(network, agentMint) : null;
    if (!receipt || (stored !== null && !canAccess(caller, agent?.ownerPrincipal ?? null))) {
      throw new DomainError('receipt_not_found', `No receipt ${hash} on ${network}.`, { receipt_hash: hash, network });
    }
    if (!stored) await ownedAgent(this.deps.store, caller, receipt.agent);
    const checks: VerifyReceiptResult['checks'] = [];
    const canonical = receiptHash(receipt);
    checks.push(
      canonical === receipt.receipt_hash
        ? { name: 'hash', ok: true, detail: 'receipt_hash is the SHA-256 of the RFC 8785 canonical JSON of the receipt.' }
        : { name: 'hash', ok: false, detail: `receipt_hash is ${receipt.receipt_hash}, the canonical hash is ${canonical}.` },
    );
    if (!stored) checks.push({ name: 'stored', ok: false, detail: `No receipt ${hash} is on the chain of ${receipt.agent} on ${network}.` });
    else if (q.receipt && canonicalJson(stored.receipt) !== canonicalJson(q.receipt))
      checks.push({ name: 'stored', ok: false, detail: 'The stored receipt of this hash differs from the one given.' });
    else checks.push({ name: 'stored', ok: true, detail: `Stored on the chain of ${receipt.agent} at nonce ${receipt.nonce} (source ${stored.source}).` });
    checks.push(await this.position(network, receipt));
    const settlement = await this.settlement(network, receipt);
    checks.push({
      name: 'settlement',
      ok: settlement.status === 'verified' || settlement.status === 'not_applicable',
      detail: settlement.reason ?? settlement.status,
    });
    return { ok: checks.every((c) => c.ok), receipt_hash: hash, agent: receipt.agent, nonce: receipt.nonce, checks, settlement: settlement.status };
  }

  /** The previous link's hash is prev_receipt_hash (null at nonce 0) and the next link, when there is one, points here. */
  private async position(network: Network, receipt: Receipt): Promise<VerifyReceiptResult['checks'][number]> {
    const around = await this.deps.store.receipts.listByAgent(network, receipt.agent, { afterNonce: receipt.nonce - 2, limit: 3 });
    const prev = around.find((r) => r.receipt.nonce === receipt.nonce - 1) ?? null;
    const next = around.find((r) => r.receipt.nonce === receipt.nonce + 1) ?? null;
    const wantPrev = receipt.nonce === 0 ? null : (prev?.receipt.receipt_hash ?? undefined);
    if (wantPrev === undefined) return { name: 'chain_position', ok: false, detail: `The chain has no receipt at nonce ${receipt.nonce - 1}.` };
    if (receipt.prev_receipt_hash !== wantPrev) {
      return {
        name: 'chain_position',
        ok: false,
        detail: `prev_receipt_hash is ${receipt.prev_receipt_hash ?? 'null'}, the chain's receipt at nonce ${receipt.nonce - 1} is ${wantPrev ?? 'none (nonce 0)'}.`,
      };
    }
    if (next && next.receipt.prev_receipt_hash !== receipt.receipt_hash) {
      return {
        name: 'chain_position',
        ok: false,
        detail: `The chain's receipt at nonce ${receipt.nonce + 1} points to ${next.receipt.prev_receipt_hash}, not to this receipt.`,
      };
    }
    return {
      name: 'chain_position',
      ok: true,
      detail: `Nonce ${receipt.nonce} links to ${wantPrev ?? 'the start of the chain'}${next ? ` and is linked from nonce ${receipt.nonce + 1}` : ' and is the head'}.`,
    };
  }

  private async settlement(network: Network, receipt: Receipt) {
    const sig = settlementSignature(receipt);
    if (sig === null) return checkReceipt(receipt, null, 0);
    const landed = await this.ledger(network).getTransaction(sig);
    return checkReceipt(receipt, landed, 0);
  }

  private ledger(network: Network): Ledger {
    const ledger = this.deps.ledgers[network];
    if (!ledger) throw new DomainError('service_unavailable', `No ${network} ledger is reachable from this process.`, { network });
    return ledger;
  }
}

/** PAYMENT-RESPONSE / X-PAYMENT-RESPONSE (base64 JSON { success, transaction, network, payer }) → the signature. */
export function signatureOfPaymentResponse(header: string): string {
  let parsed: ReturnType<typeof SettleResponse.safeParse> | null;
  try {
    parsed = SettleResponse.safeParse(JSON.parse(Buffer.from(header, 'base64').toString('utf8')));
  } catch {
    parsed = null;
  }
  const bad = (message: string) => DomainError.invalid([{ path: 'payment_response', message, code: 'invalid_payment_response' }], message);
  if (!parsed?.success) throw bad('payment_response is not a base64 x402 settlement response ({ success, transaction, network })');
  if (!parsed.data.success) throw bad(`payment_response reports a failed settlement (${parsed.data.errorReason ?? 'no reason'}): nothing was paid`);
  if (!/^[1-9A-HJ-NP-Za-km-z]{64,88}$/.test(parsed.data.transaction)) throw bad('payment_response names no transaction signature');
  return parsed.data.transaction;
}
