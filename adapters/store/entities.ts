import { EntitySchema } from '@mikro-orm/core';

// Entities as EntitySchema (tsx emits no decorator metadata). Columns are snake_case of the properties.

export interface PaymentLinkRow {
  pk: string;
  id: string;
  network: string;
  label: string;
  ownerAgent: string;
  method: string;
  price: string;
  currency: string;
  /** numeric(20,0) read as a decimal string; converted to bigint by the mapper */
  amountAtomic: string;
  acceptsCurrencies: string[];
  protocol: string;
  response: { status: number; mimeType: string; body: unknown };
  webhookUrl: string | null;
  webhookSecret: string | null;
  wrapReceipt: boolean;
  settlePolicy: string;
  metadata: Record<string, unknown>;
  disabled: boolean;
  callCount: number;
  settledCount: number;
  lastCalledAt: Date | null;
  lastSettledAt: Date | null;
  lastTxSig: string | null;
  createdBy: string;
  ownerPrincipal: string;
  createdAt: Date;
  updatedAt: Date;
}

export const PaymentLinkEntity = new EntitySchema<PaymentLinkRow>({
  name: 'PaymentLink',
  tableName: 'payment_links',
  properties: {
    pk: { type: 'string', primary: true },
    id: { type: 'string' },
    network: { type: 'string' },
    label: { type: 'string' },
    ownerAgent: { type: 'string' },
    method: { type: 'string' },
    price: { type: 'string' },
    currency: { type: 'string' },
    amountAtomic: { type: 'string', columnType: 'numeric(20,0)' },
    acceptsCurrencies: { type: 'json' },
    protocol: { type: 'string' },
    response: { type: 'json' },
    webhookUrl: { type: 'string', nullable: true },
    webhookSecret: { type: 'string', nullable: true },
    wrapReceipt: { type: 'boolean' },
    settlePolicy: { type: 'string' },
    metadata: { type: 'json' },
    disabled: { type: 'boolean' },
    callCount: { type: 'integer' },
    settledCount: { type: 'integer' },
    lastCalledAt: { type: 'Date', columnType: 'timestamptz', nullable: true },
    lastSettledAt: { type: 'Date', columnType: 'timestamptz', nullable: true },
    lastTxSig: { type: 'string', nullable: true },
    createdBy: { type: 'string' },
    ownerPrincipal: { type: 'string' },
    createdAt: { type: 'Date', columnType: 'timestamptz' },
    updatedAt: { type: 'Date', columnType: 'timestamptz' },
  },
});

export interface EventRow {
  id: string;
  /** bigint column read as a decimal string */
  seq: string;
  network: string;
  kind: string;
  phase: string;
  agentAsset: string | null;
  signature: string | null;
  blockTime: string | null;
  confirmedAt: Date | null;
  slot: string | null;
  errorCode: string | null;
  errorLogs: string[] | null;
  metadata: Record<string, unknown>;
  clientReference: string | null;
  ownerPrincipal: string | null;
  createdAt: Date;
  updatedAt: Date;
}

export const EventEntity = new EntitySchema<EventRow>({
  name: 'Event',
  tableName: 'events',
  properties: {
    id: { type: 'string', primary: true },
    seq: { type: 'string', columnType: 'bigint' },
    network: { type: 'string' },
    kind: { type: 'string' },
    phase: { type: 'string' },
    agentAsset: { type: 'string', nullable: true },
    signature: { type: 'string', nullable: true },
    blockTime: { type: 'string', columnType: 'bigint', nullable: true },
    confirmedAt: { type: 'Date', columnType: 'timestamptz', nullable: true },
    slot: { type: 'string', columnType: 'bigint', nullable: true },
    errorCode: { type: 'string', nullable: true },
    errorLogs: { type: 'json', nullable: true },
    metadata: { type: 'json' },
    clientReference: { type: 'string', nullable: true },
    ownerPrincipal: { type: 'string', nullable: true },
    createdAt: { type: 'Date', columnType: 'timestamptz' },
    updatedAt: { type: 'Date', columnType: 'timestamptz' },
  },
});

export const entities = [PaymentLinkEntity, EventEntity];
