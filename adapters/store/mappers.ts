import type { EventRecord } from '../../domain/events/schema.ts';
import type { EventRow } from './entities.ts';

// Rows hold what the database returns (decimal strings for numeric/bigint); records hold domain types.

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
