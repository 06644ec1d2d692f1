import { createHash } from 'node:crypto';
import { z } from 'zod';
import { canonicalJson } from '../shared/canonical-json.ts';
import { Address } from '../shared/address.ts';
import type { Network } from '../shared/network.ts';
import { Cursor, Limit, listEnvelope } from '../shared/pagination.ts';

// DECISIONS "Receipts": ReceiptV1 (v "0.1"), v0.2 for the MPP rail (fee-facilitator-mpp-tools §2.6), hash-chained per
// agent with gapless nonces from 0. One schema for push, pull, the paywall's earn receipts, REST, tRPC and GraphQL.
// Objects are strict: receipt_hash covers every field, so a field this schema does not know is refused by name
// rather than dropped (which would answer a confusing receipt_hash_invalid).

const Atomic = z.string().regex(/^\d{1,40}$/, 'Expected an atomic amount: a decimal string of digits');
export const ReceiptHash = z.string().regex(/^[0-9a-f]{64}$/, 'Expected a lowercase hex SHA-256');
/** a transaction signature: base58, 64 bytes (86–88 characters) */
const Signature = z.string().regex(/^[1-9A-HJ-NP-Za-km-z]{64,88}$/, 'Expected a base58 transaction signature');
const Text = (max: number) => z.string().max(max);

export const ReceiptPrice = z
  .strictObject({
    /** display amount of the seller leg, e.g. "0.01" */
    amount: Text(64).describe('display amount of the seller leg, e.g. "0.01"'),
    currency: Text(32).describe('stable symbol, e.g. USDC'),
    /** mint */
    asset: Text(64).describe('token mint address'),
    /** CAIP-2 network id */
    network: Text(128).describe('CAIP-2 network id, e.g. solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1'),
    amount_atomic: Atomic.describe('the seller leg in atomic units, decimal string'),
    /** atomic amount of the fee leg; "0" without one */
    fee: Atomic.describe('the protocol fee leg in atomic units, decimal string; "0" without one'),
    /** amount_atomic + fee */
    gross: Atomic.describe('amount_atomic + fee: what the buyer signed, atomic units'),
    feeBps: z.number().int().min(0).max(10_000).describe('fee rate in basis points (fee-facilitator-mpp-tools §2.2)'),
    feeAuthority: Text(64).nullable().describe('owner of the fee token account; null without a fee'),
  })
  .describe('The price block: the same in the seller’s earn and the buyer’s spend receipt (fee-facilitator-mpp-tools §2.2.5).');
export type ReceiptPrice = z.infer<typeof ReceiptPrice>;

const receiptFields = {
  kind: z.enum(['earn', 'spend']).describe('earn (the seller’s side) or spend (the buyer’s side)'),
  agent: Address.describe('mint of the agent whose chain the receipt belongs to'),
  nonce: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).describe('position in the agent’s chain: gapless from 0'),
  ts: z.iso.datetime({ offset: true }).describe('ISO 8601 time of the decision'),
  request: z
    .strictObject({
      method: Text(16).describe('HTTP method of the paid call'),
      url: Text(4096).describe('URL of the paid call'),
      body_hash: ReceiptHash.describe('lowercase hex SHA-256 of the request body, when one was sent').optional(),
    })
    .describe('the paid HTTP call'),
  decision: z.enum(['allow', 'deny', 'rejected']).describe('allow (paid and served), deny (refused by policy) or rejected (payment refused)'),
  reason: Text(1000).describe('why, for deny and rejected').optional(),
  price: ReceiptPrice,
  facilitator: Text(2048).describe('URL of the facilitator that settled').optional(),
  response: z
    .strictObject({
      status: z.number().int().min(100).max(599).describe('HTTP status answered'),
      body_hash: ReceiptHash.describe('lowercase hex SHA-256 of the response body').optional(),
    })
    .describe('what the paid call answered')
    .optional(),
  tx_sig: Signature.describe('the settlement transaction signature').optional(),
  prev_receipt_hash: ReceiptHash.nullable().describe('receipt_hash of the previous receipt of the chain; null for nonce 0'),
  receipt_hash: ReceiptHash.describe('lowercase hex SHA-256 of the RFC 8785 canonical JSON of the receipt without receipt_hash'),
};

export const ReceiptV1 = z
  .strictObject({ v: z.literal('0.1').describe("receipt version '0.1'"), ...receiptFields })
  .describe('A hash-chained receipt of a paid call (DECISIONS "Receipts").');
export type ReceiptV1 = z.infer<typeof ReceiptV1>;

/** fee-facilitator-mpp-tools §2.6: a receipt of the MPP rail; tx_sig optional, the settlement in mpp_settlement_tx. */
export const ReceiptV02 = z
  .strictObject({
    v: z.literal('0.2').describe("receipt version '0.2' (the MPP rail)"),
    ...receiptFields,
    protocol: z.literal('mpp').describe("'mpp'"),
    mpp_challenge_id: Text(256).describe('the MPP challenge the payment answered'),
    mpp_settlement_tx: Signature.describe('the settlement transaction signature'),
    mpp_settlement_slot: z.number().int().min(0).describe('the slot the settlement landed in').optional(),
  })
  .describe('A receipt of the MPP rail (fee-facilitator-mpp-tools §2.6).');
export type ReceiptV02 = z.infer<typeof ReceiptV02>;

/** Any receipt version; mixed feeds are parsed by version (hosted-api §9). */
export const Receipt = z.discriminatedUnion('v', [ReceiptV1, ReceiptV02]);
export type Receipt = z.infer<typeof Receipt>;

/** A receipt before it is placed on its agent's chain. */
export type ReceiptDraft = Omit<ReceiptV1, 'nonce' | 'prev_receipt_hash' | 'receipt_hash'>;

/** The head of an agent's chain: the latest receipt's nonce and hash; null for an empty chain. */
export interface ChainHead {
  nonce: number;
  receiptHash: string;
}

/** lowercase hex SHA-256 of the RFC 8785 canonical JSON of the receipt without receipt_hash. */
export function receiptHash(receipt: Omit<Receipt, 'receipt_hash'>): string {
  const { receipt_hash: _ignored, ...body } = receipt as Receipt;
  return createHash('sha256').update(canonicalJson(body)).digest('hex');
}

/** A receipt of either version before it is placed on its agent's chain (v0.2: the MPP rail). */
export type AnyReceiptDraft = ReceiptDraft | Omit<ReceiptV02, 'nonce' | 'prev_receipt_hash' | 'receipt_hash'>;

/** The next link of a chain: nonce = head + 1 (0 on an empty chain), prev = head's hash, then its own hash. */
export function chainReceipt<D extends AnyReceiptDraft>(
  draft: D,
  head: ChainHead | null,
): D & { nonce: number; prev_receipt_hash: string | null; receipt_hash: string } {
  const linked = { ...draft, nonce: head ? head.nonce + 1 : 0, prev_receipt_hash: head ? head.receiptHash : null };
  return { ...linked, receipt_hash: receiptHash(linked as Omit<Receipt, 'receipt_hash'>) };
}

export function sha256Hex(bytes: Uint8Array | string): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/** The signature the ledger is asked about: tx_sig, else a v0.2 receipt's settlement. */
export function settlementSignature(receipt: Receipt): string | null {
  return receipt.tx_sig ?? (receipt.v === '0.2' ? receipt.mpp_settlement_tx : null);
}

// Every receipt with a transaction is checked against its network's ledger.
export const VERIFICATIONS = ['verified', 'mismatch', 'pending', 'not_applicable'] as const;
export const VerificationStatus = z.enum(VERIFICATIONS);
export type VerificationStatus = z.infer<typeof VerificationStatus>;

/** paywall: an earn receipt of a paid call; buyer: the spend receipt of a confirmed buyer/payment. */
export const RECEIPT_SOURCES = ['paywall', 'push', 'pull', 'buyer'] as const;
export type ReceiptSource = (typeof RECEIPT_SOURCES)[number];

/** A stored receipt. */
export interface ReceiptRecord {
  network: Network;
  receipt: Receipt;
  /** one of RECEIPT_SOURCES */
  source: string;
  createdAt: Date;
}

/** The ledger check of a stored receipt. */
export interface ReceiptVerification {
  status: VerificationStatus;
  /** why it is not verified (or what was checked), e.g. "seller leg moved 5000 of 4zMM… to the treasury, expected 10000" */
  reason: string | null;
  checkedAt: Date | null;
  attempts: number;
}

/** A stored receipt with its verification. */
export interface StoredReceipt extends ReceiptRecord {
  verification: ReceiptVerification;
}

// ---- wire ---------------------------------------------------------------------------------------------------------

const Verification = z
  .object({
    status: VerificationStatus.describe('verified (the ledger shows the settlement), mismatch, pending (not checked yet) or not_applicable (no transaction)'),
    reason: z.string().nullable().describe('why it is not verified, or what was checked; null when nothing to say'),
    checked_at: z.string().nullable().describe('ISO 8601 time of the last check; null before one'),
  })
  .describe('The check of a receipt’s settlement against the ledger.');

/** What a read adds beside the receipt's own fields; none of these names is a receipt field. */
const readFields = {
  network: z.string().describe('the network the receipt is stored on (chain-devnet or chain-mainnet)'),
  source: z.enum(RECEIPT_SOURCES).describe('how the gateway got it: paywall (earn), push, pull, or buyer (spend of buyer/payment)'),
  received_at: z.string().describe('when the gateway stored it'),
  verification: Verification.describe('the check of its settlement against the ledger'),
};
const READ_FIELDS = Object.keys(readFields) as (keyof typeof readFields)[];

/**
 * hosted-api §4.7 "one receipt plus a network field": a stored receipt as every read answers it — the receipt's own
 * fields at the top level, with its network, source, arrival time and ledger check beside them. receipt_hash covers
 * the receipt's fields only: `receiptOf` takes the read fields off again.
 */
export const StoredReceiptOutput = z
  .discriminatedUnion('v', [ReceiptV1.extend(readFields), ReceiptV02.extend(readFields)])
  .describe('A receipt (ReceiptV1 or v0.2) with its fields at the top level, plus network, source, received_at and verification.');
export type StoredReceiptOutput = z.infer<typeof StoredReceiptOutput>;

/** The receipt document of a read (what receipt_hash covers): the read without network, source, received_at, verification. */
export function receiptOf(read: StoredReceiptOutput): Receipt {
  const receipt: Record<string, unknown> = { ...read };
  for (const field of READ_FIELDS) delete receipt[field];
  return receipt as Receipt;
}

export const PushReceiptInput = z
  .object({ agent: Address.describe('mint of the agent whose chain the receipt extends (path parameter)') })
  .and(z.object({ receipt: z.unknown().describe('the ReceiptV1 (or v0.2) document') }));

export const AgentPathInput = z.object({ agent: Address.describe('the agent’s mint') });

export const PushReceiptResult = z
  .object({
    ok: z.literal(true).describe('always true on success'),
    duplicate: z.boolean().describe('true when the receipt was already stored (status 200, nothing written)'),
    /** the receipt.published event; null for a duplicate (no event is written) */
    event_id: z.string().nullable().describe('the receipt.published event; null for a duplicate'),
    receipt_hash: ReceiptHash.describe('the stored receipt’s hash'),
    nonce: z.number().int().describe('the stored receipt’s nonce'),
    verification: Verification,
  })
  .describe('The outcome of a receipt push (hosted-api §4.7).');
export type PushReceiptResult = z.infer<typeof PushReceiptResult>;

export const ListReceiptsInput = z.object({
  agent: Address.describe('the agent’s mint'),
  kind: z.enum(['earn', 'spend']).describe('only earn or only spend receipts').optional(),
  decision: z.enum(['allow', 'deny', 'rejected']).describe('only receipts with this decision').optional(),
  since: z.iso.datetime({ offset: true }).describe('only receipts at or after this ISO 8601 time').optional(),
  cursor: Cursor.optional(),
  limit: Limit,
});
export type ListReceiptsInput = z.input<typeof ListReceiptsInput>;

export const ReceiptList = listEnvelope(StoredReceiptOutput);
export type ReceiptList = z.infer<typeof ReceiptList>;

export const ReceiptHashInput = z.object({ hash: ReceiptHash.describe('the receipt_hash (lowercase hex SHA-256)') });

export const ChainReport = z
  .object({
    agent: z.string().describe('the agent’s mint'),
    network: z.string().describe('the network walked'),
    /** receipts walked */
    length: z.number().int().describe('receipts walked'),
    ok: z.boolean().describe('true when every link holds'),
    head: z
      .object({ nonce: z.number().int().describe('the latest receipt’s nonce'), receipt_hash: z.string().describe('the latest receipt’s hash') })
      .nullable()
      .describe('the latest receipt; null for an empty chain'),
    /** the first break; null when the chain holds */
    first_break: z
      .object({
        nonce: z.number().int().describe('nonce of the receipt where the chain breaks'),
        receipt_hash: z.string().describe('its receipt_hash'),
        problem: z.enum(['hash_invalid', 'prev_mismatch', 'nonce_gap', 'agent_mismatch', 'schema_invalid']).describe('what is wrong there'),
        message: z.string().describe('the problem in words'),
      })
      .nullable()
      .describe('the first break; null when the chain holds'),
  })
  .describe('The walk of an agent’s receipt chain over prev_receipt_hash links (hosted-api §4.7).');
export type ChainReport = z.infer<typeof ChainReport>;
