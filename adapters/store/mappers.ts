import type { PaymentLinkRecord } from '../../domain/payment-links/schema.ts';
import type { EventRecord } from '../../domain/events/schema.ts';
import type { EventRow, PaymentLinkRow } from './entities.ts';

// Rows hold what the database returns (decimal strings for numeric/bigint); records hold domain types.

export const paymentLinkFromRow = (r: PaymentLinkRow): PaymentLinkRecord => ({
  pk: r.pk,
  id: r.id,
  network: r.network as PaymentLinkRecord['network'],
  label: r.label,
  ownerAgent: r.ownerAgent,
  method: r.method as PaymentLinkRecord['method'],
  price: r.price,
  currency: r.currency as PaymentLinkRecord['currency'],
  amountAtomic: BigInt(r.amountAtomic),
  acceptsCurrencies: r.acceptsCurrencies as PaymentLinkRecord['acceptsCurrencies'],
  protocol: r.protocol as PaymentLinkRecord['protocol'],
  response: r.response,
  webhookUrl: r.webhookUrl,
  webhookSecret: r.webhookSecret,
  wrapReceipt: r.wrapReceipt,
  settlePolicy: r.settlePolicy as PaymentLinkRecord['settlePolicy'],
  metadata: r.metadata,
  disabled: r.disabled,
  callCount: r.callCount,
  settledCount: r.settledCount,
  lastCalledAt: r.lastCalledAt,
  lastSettledAt: r.lastSettledAt,
  lastTxSig: r.lastTxSig,
  createdBy: r.createdBy,
  ownerPrincipal: r.ownerPrincipal,
  createdAt: r.createdAt,
  updatedAt: r.updatedAt,
});

export const paymentLinkToRow = (r: PaymentLinkRecord): PaymentLinkRow => ({ ...r, amountAtomic: r.amountAtomic.toString() });

export const eventFromRow = (r: EventRow): EventRecord => ({
  id: r.id,
  seq: BigInt(r.seq),
  kind: r.kind,
  phase: r.phase as EventRecord['phase'],
  network: r.network as EventRecord['network'],
  agentAsset: r.agentAsset,
  signature: r.signature,
  blockTime: r.blockTime === null ? null : Number(r.blockTime),
  confirmedAt: r.confirmedAt,
  slot: r.slot === null ? null : Number(r.slot),
  errorCode: r.errorCode,
  errorLogs: r.errorLogs,
  metadata: r.metadata,
  clientReference: r.clientReference,
  owner: r.ownerPrincipal,
  createdAt: r.createdAt,
  updatedAt: r.updatedAt,
});
