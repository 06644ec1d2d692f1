import { z } from 'zod';
import { Network } from '../shared/network.ts';
import type { PreparedKind } from '../events/kinds.ts';

// hosted-api §2.5 (the prepared-transaction envelope) and §2.6 (submit), DECISIONS "Prepare / submit / events".

const Base64 = z.string().regex(/^[A-Za-z0-9+/]*={0,2}$/, 'Expected base64');

export const PreparedTransaction = z.object({
  base64: z.string().describe('the transaction with empty signature slots (a fresh asset’s slot is signed by the gateway)'),
  message_base64: z.string().describe('the message to sign'),
  message_hash: z.string().describe('lowercase hex SHA-256 of the message bytes'),
  recent_blockhash: z.string(),
  last_valid_block_height: z.number().int(),
  fee_payer: z.string().describe('first account of the message; always the first entry of signers'),
  signers: z.array(z.string()).describe('ordered public keys whose signatures submit expects'),
});
export type PreparedTransaction = z.infer<typeof PreparedTransaction>;

export const PreparedEnvelope = z.object({
  event_id: z.string().nullable().describe('ULID of the event in phase prepared; null on a no-op'),
  network: Network,
  transaction: PreparedTransaction.nullable(),
  echo: z.record(z.string(), z.unknown()),
  no_op: z.literal(true).optional().describe('present and true only on a no-op envelope'),
  will_create_destination_ata: z.boolean().optional(),
  fee_padding_atoms: z.string().optional().describe('atomic units added to the allowance for the protocol fee'),
  identity: z.enum(['registered', 'not_registered']).optional(),
  warnings: z.array(z.string()).optional(),
});
export type PreparedEnvelope = z.infer<typeof PreparedEnvelope>;

export const SubmitInput = z.strictObject({
  event_id: z.string().min(1).max(64),
  transaction_base64: Base64.min(1).max(4096),
  client_reference: z.string().min(1).max(200).optional(),
});
export type SubmitInput = z.input<typeof SubmitInput>;

export const SubmitResult = z.object({
  event_id: z.string(),
  signature: z.string(),
  phase: z.literal('submitted'),
  network: Network,
  replayed: z.boolean(),
});
export type SubmitResult = z.infer<typeof SubmitResult>;

export type PreparedState = 'prepared' | 'submitted' | 'done';

/** A row of prepared_transactions: what submit checks and the confirmations job tracks. */
export interface PreparedTransactionRecord {
  eventId: string;
  network: Network;
  kind: PreparedKind;
  agent: string;
  owner: string | null;
  message: Uint8Array;
  signers: string[];
  recentBlockhash: string;
  lastValidBlockHeight: number;
  state: PreparedState;
  signature: string | null;
  /** the signed transaction, once submitted */
  transaction: Uint8Array | null;
  clientReference: string | null;
  submittedAt: Date | null;
  nextCheckAt: Date | null;
  checks: number;
  createdAt: Date;
}
