import { EntitySchema } from '@mikro-orm/core';

// Entities as EntitySchema (tsx emits no decorator metadata). Columns are snake_case of the properties.

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

export const entities = [EventEntity];
