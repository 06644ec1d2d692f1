import { createHash } from 'node:crypto';
import { z } from 'zod';
import { canonicalJson } from '../shared/canonical-json.ts';
import type { Network } from '../shared/network.ts';

// DECISIONS "Receipts": ReceiptV1 (v "0.1"), hash-chained per agent with gapless nonces from 0.

const Atomic = z.string().regex(/^\d+$/);
const Hash = z.string().regex(/^[0-9a-f]{64}$/);

export const ReceiptPrice = z.object({
  /** display amount of the seller leg, e.g. "0.01" */
  amount: z.string(),
  currency: z.string(),
  /** mint */
  asset: z.string(),
  /** CAIP-2 network id */
  network: z.string(),
  amount_atomic: Atomic,
  /** atomic amount of the fee leg; "0" without one */
  fee: Atomic,
  /** amount_atomic + fee */
  gross: Atomic,
  feeBps: z.number().int().min(0).max(10_000),
  feeAuthority: z.string().nullable(),
});
export type ReceiptPrice = z.infer<typeof ReceiptPrice>;

export const ReceiptV1 = z.object({
  v: z.literal('0.1'),
  kind: z.enum(['earn', 'spend']),
  agent: z.string(),
  nonce: z.number().int().min(0),
  ts: z.string(),
  request: z.object({ method: z.string(), url: z.string(), body_hash: Hash.optional() }),
  decision: z.enum(['allow', 'deny', 'rejected']),
  reason: z.string().optional(),
  price: ReceiptPrice,
  facilitator: z.string().optional(),
  response: z.object({ status: z.number().int(), body_hash: Hash.optional() }).optional(),
  tx_sig: z.string().optional(),
  prev_receipt_hash: Hash.nullable(),
  receipt_hash: Hash,
});
export type ReceiptV1 = z.infer<typeof ReceiptV1>;

/** A receipt before it is placed on its agent's chain. */
export type ReceiptDraft = Omit<ReceiptV1, 'nonce' | 'prev_receipt_hash' | 'receipt_hash'>;

/** The head of an agent's chain: the latest receipt's nonce and hash; null for an empty chain. */
export interface ChainHead {
  nonce: number;
  receiptHash: string;
}

/** lowercase hex SHA-256 of the RFC 8785 canonical JSON of the receipt without receipt_hash. */
export function receiptHash(receipt: Omit<ReceiptV1, 'receipt_hash'>): string {
  const { receipt_hash: _ignored, ...body } = receipt as ReceiptV1;
  return createHash('sha256').update(canonicalJson(body)).digest('hex');
}

/** The next link of a chain: nonce = head + 1 (0 on an empty chain), prev = head's hash, then its own hash. */
export function chainReceipt(draft: ReceiptDraft, head: ChainHead | null): ReceiptV1 {
  const linked = { ...draft, nonce: head ? head.nonce + 1 : 0, prev_receipt_hash: head ? head.receiptHash : null };
  return { ...linked, receipt_hash: receiptHash(linked) };
}

export function sha256Hex(bytes: Uint8Array | string): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/** A stored receipt. */
export interface ReceiptRecord {
  network: Network;
  receipt: ReceiptV1;
  /** "paywall" | "push" | "pull" */
  source: string;
  createdAt: Date;
}
