import { FeeEnforcement } from '../shared/settings.ts';
import { z } from 'zod';
import { Address } from '../shared/address.ts';
import { Network, TOKEN_2022_PROGRAM_ID, TOKEN_PROGRAM_ID } from '../shared/network.ts';
import { U64_MAX } from '../shared/money.ts';

// The facilitator's verify contract (fee-facilitator-mpp-tools §2.1–2.3, §4.1; DECISIONS "Facilitator").

export { ASSOCIATED_TOKEN_PROGRAM_ID, COMPUTE_BUDGET_PROGRAM_ID, MEMO_PROGRAM_ID, SYSTEM_PROGRAM_ID } from '../shared/program-ids.ts';
/** Wallet-protection assertions (Phantom appends them); allowed only at the end of the transaction. */
export const LIGHTHOUSE_PROGRAM_ID = 'L2TExMFKdjpN9kozasaurPirfHy9P8sbXoAN1qA3S95';

/** DECISIONS "Facilitator": caps on the buyer-chosen compute budget (the facilitator pays for it). */
export const DEFAULT_COMPUTE_UNIT_LIMIT_MAX = 400_000;
export const DEFAULT_COMPUTE_UNIT_PRICE_MAX = 5_000_000;
/** fee-facilitator-mpp-tools §8: at most seven instructions (trailing Lighthouse assertions not counted). */
export const MAX_INSTRUCTIONS = 7;
export const MAX_ATA_CREATIONS = 2;
/** Solana's packet limit for a serialized transaction. */
export const MAX_TRANSACTION_BYTES = 1232;

/** x402 maxTimeoutSeconds of an offer completed by POST /accepts when its seller named none (the paywall's offers use 60 too). */
export const DEFAULT_MAX_TIMEOUT_SECONDS = 60;

/** The key of the fee extension inside an accepts entry's `extra` (fee-facilitator-mpp-tools §2.1). */
export const FEE_EXTENSION_KEY = 'svc.fee';

/**
 * Beside extra["svc.fee"]: the facilitator whose GET /health publishes the fee terms (§2.4), e.g.
 * "https://gw.example/facilitator", so a buyer's scheme client checks them with no option of its own.
 */
export const FACILITATOR_EXTRA_KEY = 'svc.facilitator';
export const FacilitatorLocation = z.url({ protocol: /^https?$/ });

/** extra["svc.fee"] as it travels on the wire. */
export const FeeExtension = z.object({
  v: z.literal('1'),
  bps: z.number().int().min(0).max(10_000),
  feeAuthority: Address,
});
export type FeeExtension = z.infer<typeof FeeExtension>;

/** The fee terms a verify runs against: present when the offer carried extra["svc.fee"]. */
export const FeeTerms = z.object({
  bps: z.number().int().min(0).max(10_000),
  feeAuthority: Address,
});
export type FeeTerms = z.infer<typeof FeeTerms>;

/**
 * One x402 "exact" offer in domain form. `payTo` is the recipient's *owner* (x402 semantics: the seller leg
 * credits ATA(payTo, asset, tokenProgram), off-curve owners such as an agent treasury PDA allowed).
 */
export const PaymentRequirements = z.object({
  scheme: z.literal('exact'),
  network: Network,
  payTo: Address,
  asset: Address,
  amount: z.bigint().positive().max(U64_MAX),
  tokenProgram: z.enum([TOKEN_PROGRAM_ID, TOKEN_2022_PROGRAM_ID]),
  decimals: z.number().int().min(0).max(255),
  fee: FeeTerms.optional(),
});
export type PaymentRequirements = z.infer<typeof PaymentRequirements>;

/** SVC_FEE_ENFORCE (fee-facilitator-mpp-tools §2.5). */
export { FeeEnforcement };

/** What the facilitator itself brings to a verify: its fee payer and its policy. */
export const FacilitatorPolicy = z.object({
  feePayer: Address,
  enforcement: FeeEnforcement,
  computeUnitLimitMax: z.number().int().positive().max(1_400_000).default(DEFAULT_COMPUTE_UNIT_LIMIT_MAX),
  /** micro-lamports per compute unit */
  computeUnitPriceMax: z.number().int().nonnegative().default(DEFAULT_COMPUTE_UNIT_PRICE_MAX),
});
export type FacilitatorPolicy = z.input<typeof FacilitatorPolicy>;

export interface VerifyPaymentInput {
  /** the buyer-signed wire transaction (legacy or v0, no address lookup tables) */
  transaction: Uint8Array;
  requirements: PaymentRequirements;
  facilitator: FacilitatorPolicy;
  /** a Solana Pay wallet signs after the facilitator: the buyer's slots must be empty instead of signed */
  buyerSignsLater?: boolean;
  /**
   * 'mpp': the instruction order the MPP rail's stock clients build (draft-solana-charge-00, @solana/mpp, faremeter) is
   * accepted besides §2.3's — compute-budget instructions optional and in either order, memos between the two legs.
   * Default 'x402': the layout of DECISIONS "Facilitator".
   */
  layout?: 'x402' | 'mpp';
}

/** Every reason a verify can fail with; clients branch on these, never on the message. */
export const VERIFY_REASONS = [
  'invalid_requirements',
  'invalid_transaction',
  'address_lookup_tables_unsupported',
  'fee_payer_mismatch',
  'too_many_instructions',
  'compute_budget_missing',
  'compute_limit_too_high',
  'compute_price_too_high',
  'fee_payer_in_instruction',
  'fee_payer_is_authority',
  'fee_payer_is_source',
  'ata_creation_not_allowed',
  'unexpected_instruction',
  'transfer_missing',
  'transfer_multisig_unsupported',
  'wrong_token_program',
  'wrong_mint',
  'wrong_decimals',
  'wrong_amount',
  'wrong_destination',
  'fee_leg_missing',
  'fee_leg_wrong_amount',
  'fee_leg_wrong_destination',
  'fee_leg_wrong_source',
  'fee_leg_wrong_authority',
  'fee_leg_wrong_mint',
  'unexpected_fee_leg',
  'missing_signature',
  'invalid_signature',
  'fee_payer_signed',
] as const;
export const VerifyReason = z.enum(VERIFY_REASONS);
export type VerifyReason = z.infer<typeof VerifyReason>;

/** Under enforcement 'warn' these fee-leg findings are reported instead of rejected. */
export const VERIFY_WARNINGS = ['fee_leg_missing', 'fee_leg_wrong_amount'] as const satisfies readonly VerifyReason[];
export type VerifyWarning = (typeof VERIFY_WARNINGS)[number];

export interface VerifyValid {
  isValid: true;
  /** the transfer authority (the buyer's wallet or its delegate) */
  payer: string;
  /** the debited token account */
  source: string;
  /** the seller's token account: ATA(payTo, asset, tokenProgram) */
  destination: string;
  amount: bigint;
  /** atomic amount of the fee leg as signed; 0n when the transaction carries none */
  fee: bigint;
  /** ATA(feeAuthority, asset, tokenProgram) when a fee leg is present */
  feeDestination: string | null;
  /** token accounts the transaction creates at the facilitator's expense (CreateIdempotent targets) */
  createsAccounts: string[];
  warnings: VerifyWarning[];
}

export interface VerifyInvalid {
  isValid: false;
  invalidReason: VerifyReason;
  /** the transfer authority when the transaction names one */
  payer: string | null;
  message: string;
}

export type VerifyResult = VerifyValid | VerifyInvalid;
