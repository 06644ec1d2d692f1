import { ComputeBudgetProgram, PublicKey, TransactionInstruction, TransactionMessage, VersionedTransaction } from '@solana/web3.js';
import { createAssociatedTokenAccountIdempotentInstruction, createTransferCheckedInstruction } from '@solana/spl-token';
import { DomainError } from '../shared/errors.ts';
import { feeFor } from '../shared/money.ts';
import { ataOf } from './ata.ts';
import { MEMO_PROGRAM_ID, PaymentRequirements } from './schema.ts';

/** Solana's per-transaction compute ceiling. */
const MAX_COMPUTE_UNIT_LIMIT = 1_400_000;

// Builders for the settlement transaction of fee-facilitator-mpp-tools §2.3, shared by the buyer kit and the tests.

/** Derived on demand by both sides (§2.1): what the buyer signs for one offer. */
export interface FeeLayout {
  amount: bigint;
  /** 0 when the offer has no fee terms */
  bps: number;
  /** ceil(amount × bps / 10000); 0n when the fee leg is off */
  fee: bigint;
  /** amount + fee: what budgets and delegations must cover (§2.2.6) */
  gross: bigint;
  /** ATA(payTo, asset, tokenProgram) */
  sellerAccount: string;
  feeAuthority: string | null;
  /** ATA(feeAuthority, asset, tokenProgram) when the fee leg is on */
  feeAccount: string | null;
}

export function feeLayoutFor(requirements: PaymentRequirements): FeeLayout {
  const { amount, asset, tokenProgram, payTo } = requirements;
  const terms = requirements.fee && requirements.fee.bps > 0 ? requirements.fee : null;
  const fee = terms ? feeFor(amount, terms.bps) : 0n;
  return {
    amount,
    bps: terms?.bps ?? 0,
    fee,
    gross: amount + fee,
    sellerAccount: ataOf(payTo, asset, tokenProgram),
    feeAuthority: terms?.feeAuthority ?? null,
    feeAccount: terms ? ataOf(terms.feeAuthority, asset, tokenProgram) : null,
  };
}

/**
 * Measured on the embedded ledger (LiteSVM): two creations, both legs and the memo use ~28k units under SPL Token and
 * ~37k under Token-2022; without creations under 5k. The cluster builds of the programs cost more, so the defaults
 * leave headroom while staying far under the facilitator's cap (the limit is what the fee payer can be charged for).
 */
export const DEFAULT_SETTLEMENT_COMPUTE_UNITS = { withCreations: 100_000, withoutCreations: 40_000 } as const;
/** micro-lamports per unit, as the stock x402 client */
export const DEFAULT_SETTLEMENT_COMPUTE_UNIT_PRICE = 1;

export interface BuildPaymentInput {
  /** the facilitator's fee payer (extra.feePayer) */
  feePayer: string;
  /** the transfer authority: the buyer's wallet, or the delegate spending from a treasury account */
  payer: string;
  /** token account debited; default ATA(payer, asset, tokenProgram) */
  source?: string;
  requirements: PaymentRequirements;
  blockhash: string;
  /** default: a random 16-byte hex nonce, as the stock client, so two equal payments are distinct transactions */
  memo?: string;
  /** prepend CreateAssociatedTokenAccountIdempotent for the seller's (and fee) account, funded by the fee payer; default true */
  createAtas?: boolean;
  computeUnitLimit?: number;
  /** micro-lamports per compute unit */
  computeUnitPrice?: number | bigint;
}

/** The instructions of the settlement layout (§2.3), without the fee payer and blockhash. */
export type SettlementInstructionsInput = Omit<BuildPaymentInput, 'blockhash'>;

/**
 * The §2.3 layout as instructions: limit, price, creations, seller leg, fee leg (fee on), memo. Shared by the buyer
 * kit's transaction (below) and the buyer/payment prepare route, where the fee payer may be the transfer authority.
 */
export function settlementInstructions(input: SettlementInstructionsInput): { instructions: TransactionInstruction[]; layout: FeeLayout } {
  const parsed = PaymentRequirements.safeParse(input.requirements);
  if (!parsed.success) {
    throw DomainError.invalid(parsed.error.issues.map((i) => ({ path: i.path.join('.'), message: i.message, code: i.code })));
  }
  const requirements = parsed.data;
  const layout = feeLayoutFor(requirements);
  const createAtas = input.createAtas ?? true;
  const units = input.computeUnitLimit ?? DEFAULT_SETTLEMENT_COMPUTE_UNITS[createAtas ? 'withCreations' : 'withoutCreations'];
  if (!Number.isInteger(units) || units <= 0 || units > MAX_COMPUTE_UNIT_LIMIT) {
    throw new DomainError('invalid_request', `compute unit limit ${units} is out of range`);
  }

  const key = (address: string) => new PublicKey(address);
  const feePayer = key(input.feePayer);
  const authority = key(input.payer);
  const mint = key(requirements.asset);
  const program = key(requirements.tokenProgram);
  const source = key(input.source ?? ataOf(input.payer, requirements.asset, requirements.tokenProgram));

  const instructions: TransactionInstruction[] = [
    ComputeBudgetProgram.setComputeUnitLimit({ units }),
    ComputeBudgetProgram.setComputeUnitPrice({ microLamports: input.computeUnitPrice ?? DEFAULT_SETTLEMENT_COMPUTE_UNIT_PRICE }),
  ];
  if (createAtas) {
    instructions.push(createAssociatedTokenAccountIdempotentInstruction(feePayer, key(layout.sellerAccount), key(requirements.payTo), mint, program));
    if (layout.feeAccount && layout.feeAuthority) {
      instructions.push(createAssociatedTokenAccountIdempotentInstruction(feePayer, key(layout.feeAccount), key(layout.feeAuthority), mint, program));
    }
  }
  instructions.push(createTransferCheckedInstruction(source, mint, key(layout.sellerAccount), authority, layout.amount, requirements.decimals, [], program));
  if (layout.feeAccount) {
    instructions.push(createTransferCheckedInstruction(source, mint, key(layout.feeAccount), authority, layout.fee, requirements.decimals, [], program));
  }
  instructions.push(new TransactionInstruction({ programId: key(MEMO_PROGRAM_ID), keys: [], data: Buffer.from(input.memo ?? randomHex(16), 'utf8') }));
  return { instructions, layout };
}

/** The unsigned v0 settlement transaction: limit, price, creations, seller leg, fee leg (fee on), memo. */
export function buildPaymentTransaction(input: BuildPaymentInput): VersionedTransaction {
  // The facilitator pays the fees: it must never be the one whose tokens move.
  if (input.feePayer === input.payer) {
    throw new DomainError('invalid_request', 'the fee payer cannot be the transfer authority');
  }
  const { instructions } = settlementInstructions(input);
  const feePayer = new PublicKey(input.feePayer);
  const message = new TransactionMessage({ payerKey: feePayer, recentBlockhash: input.blockhash, instructions }).compileToV0Message();
  return new VersionedTransaction(message);
}

/** Random hex without node:crypto (the buyer kit also runs in browsers): Web Crypto, global in Node ≥ 19. */
function randomHex(bytes: number): string {
  return Array.from(globalThis.crypto.getRandomValues(new Uint8Array(bytes)), (b) => b.toString(16).padStart(2, '0')).join('');
}
