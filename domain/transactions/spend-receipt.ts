import { newId } from '../shared/ids.ts';
import { atomicToDecimal } from '../shared/money.ts';
import { CAIP2, STABLES, type Network } from '../shared/network.ts';
import type { Repositories } from '../ports/store.ts';
import type { LedgerTransaction } from '../ports/ledger.ts';
import { newEvent } from '../events/kinds.ts';
import { chainReceipt, type StoredReceipt } from '../receipts/schema.ts';
import { checkReceipt } from '../receipts/verify.ts';
import { shareUrl } from '../payment-links/service.ts';
import type { PreparedTransactionRecord } from './schema.ts';

// The buyer side of a payment made through the gateway. When a buyer/payment transaction is confirmed, the
// buyer agent's chain gets its spend receipt (same price block as the seller's earn receipt would carry,
// fee-facilitator-mpp-tools §2.2.5), checked against the landed transaction, with its receipt.published event — in
// the transaction that confirms the event.

/** The envelope echo of buildBuyerPayment (domain/agents/build/buyer.ts). */
interface BuyerEcho {
  buyer_agent: string;
  pay_to: string;
  currency: string;
  mint: string;
  amount_atomic: string;
  fee_atomic: string;
  gross_atomic: string;
  fee_bps: number;
  fee_authority: string | null;
  payment_link?: string;
  /** a link's method and share URL (envelopes prepared before it was echoed lack it) */
  request?: { method: string; url: string };
}

export async function recordSpendReceipt(
  tx: Repositories,
  e: { row: PreparedTransactionRecord; metadata: Record<string, unknown>; landed: LedgerTransaction | null; signature: string; now: Date; baseUrl: string },
): Promise<StoredReceipt['receipt']> {
  const echo = e.metadata.echo as BuyerEcho;
  const network: Network = e.row.network;
  const decimals = STABLES[network].find((s) => s.mint === echo.mint)?.decimals ?? 6;
  const head = await tx.receipts.lockHead(network, echo.buyer_agent);
  // POST /v1/buyer/receipt/finalize may have recorded this settlement already (under the same chain lock): one receipt
  // per settlement, so the spend is never counted twice (chain, daily rollup, daily cap)
  const known = await tx.buyer.spendReceiptOf(network, echo.buyer_agent, e.signature);
  if (known) return known.receipt;
  // the paid request: a link's own method and share URL, as the seller's earn receipt records them (an envelope
  // prepared before they were echoed: the link as it is now); a direct payment was asked for through buyer/payment
  const link = echo.request || !echo.payment_link ? null : await tx.paymentLinks.get(network, echo.payment_link);
  const request =
    echo.request ??
    (echo.payment_link
      ? { method: link?.method ?? 'GET', url: shareUrl(e.baseUrl, network, echo.payment_link) }
      : { method: 'POST', url: `${e.baseUrl}/v1/buyer/payment/prepare` });
  const receipt = chainReceipt(
    {
      v: '0.1',
      kind: 'spend',
      agent: echo.buyer_agent,
      ts: e.now.toISOString(),
      request: { method: request.method, url: request.url },
      decision: 'allow',
      price: {
        amount: atomicToDecimal(BigInt(echo.amount_atomic), decimals),
        currency: echo.currency,
        asset: echo.mint,
        network: CAIP2[network],
        amount_atomic: echo.amount_atomic,
        fee: echo.fee_atomic,
        gross: echo.gross_atomic,
        feeBps: echo.fee_bps,
        feeAuthority: echo.fee_authority,
      },
      tx_sig: e.signature,
    },
    head,
  );
  const check = checkReceipt(receipt, e.landed, 0);
  const decided = check.status === 'verified' || check.status === 'mismatch';
  await tx.receipts.insert(
    { network, receipt, source: 'buyer', createdAt: e.now },
    { status: check.status, reason: check.reason, checkedAt: e.now, attempts: 1, nextCheckAt: decided ? null : e.now },
  );
  const base = {
    network,
    agentAsset: receipt.agent,
    owner: e.row.owner,
    phase: 'confirmed' as const,
    createdAt: e.now,
    confirmedAt: e.now,
    signature: e.signature,
  };
  await tx.events.append(
    newEvent(
      'receipt.published',
      { ...base, id: newId(e.now.getTime()) },
      {
        source: 'buyer',
        receipt_hash: receipt.receipt_hash,
        nonce: receipt.nonce,
        receipt,
        ...(echo.payment_link ? { payment_link_id: echo.payment_link } : {}),
      },
    ),
  );
  return receipt;
}
