import { z } from 'zod';
import { Network } from '../shared/network.ts';
import type { PreparedKind } from '../events/kinds.ts';

// hosted-api §2.5 (the prepared-transaction envelope) and §2.6 (submit), DECISIONS "Prepare / submit / events".

const Base64 = z.string().regex(/^[A-Za-z0-9+/]*={0,2}$/, 'Expected base64');

export const PreparedTransaction = z
  .object({
    base64: z.string().describe('the transaction with empty signature slots (a fresh asset’s slot is signed by the gateway)'),
    message_base64: z.string().describe('the message to sign'),
    message_hash: z.string().describe('lowercase hex SHA-256 of the message bytes'),
    recent_blockhash: z.string().describe('the blockhash the message uses'),
    last_valid_block_height: z.number().int().describe('the last block height at which the transaction can land; after it, prepare again'),
    fee_payer: z.string().describe('first account of the message; always the first entry of signers'),
    signers: z.array(z.string()).describe('ordered public keys whose signatures submit expects'),
  })
  .describe('The unsigned transaction to sign locally (hosted-api §2.5).');
export type PreparedTransaction = z.infer<typeof PreparedTransaction>;

export const PreparedEnvelope = z
  .object({
    event_id: z.string().nullable().describe('ULID of the event in phase prepared; null on a no-op'),
    network: Network,
    transaction: PreparedTransaction.nullable().describe('the unsigned transaction; null on a no-op'),
    echo: z.record(z.string(), z.unknown()).describe('route-specific extras (asset, treasury, token accounts and similar); same shape on a no-op'),
    no_op: z.literal(true).describe('present and true only on a no-op envelope').optional(),
    will_create_destination_ata: z.boolean().describe('withdraw routes: true when the transaction first creates the destination’s token account').optional(),
    fee_padding_atoms: z.string().describe('atomic units added to the allowance for the protocol fee').optional(),
    identity: z.enum(['registered', 'not_registered']).describe('agent prepare: whether the transaction also registers the on-chain identity').optional(),
    warnings: z.array(z.string()).describe('things the caller should know before signing; absent when none').optional(),
  })
  .describe('What every prepare route answers: the event and the transaction to sign, or a no-op (hosted-api §2.5).');
export type PreparedEnvelope = z.infer<typeof PreparedEnvelope>;

export const SubmitInput = z
  .strictObject({
    event_id: z.string().min(1).max(64).describe('the event_id a prepare route answered; the event must be in phase prepared'),
    transaction_base64: Base64.min(1).max(4096).describe('the fully signed transaction, base64; its message must equal the prepared one'),
    client_reference: z.string().min(1).max(200).describe('your own reference, echoed on the event').optional(),
  })
  .describe('A signed prepared transaction to broadcast (hosted-api §2.6).');
export type SubmitInput = z.input<typeof SubmitInput>;

export const SubmitResult = z
  .object({
    event_id: z.string().describe('the submitted event'),
    signature: z.string().describe('the transaction signature'),
    phase: z.literal('submitted').describe("'submitted': confirmation follows (poll the event or receive webhooks)"),
    network: Network,
    replayed: z.boolean().describe('true on an idempotent repeat of the same transaction (status 200, nothing broadcast again)'),
  })
  .describe('The event after its broadcast (hosted-api §2.6).');
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
