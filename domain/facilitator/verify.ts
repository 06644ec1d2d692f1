import { PublicKey } from '@solana/web3.js';
import type { z } from 'zod';
import { feeFor } from '../shared/money.ts';
import { boundDigestOf } from '../shared/request-binding.ts';
import { ataOf } from './ata.ts';
import { DecodeError, decodeTransaction, type DecodedTransaction } from './decode.ts';
import { isAllZero, verifyEd25519 } from './ed25519.ts';
import {
  isAtaProgram,
  isLighthouse,
  isMemo,
  isOtherTokenInstruction,
  readAtaCreation,
  readComputeUnitLimit,
  readComputeUnitPrice,
  readTransferChecked,
  type TransferChecked,
} from './instructions.ts';
import {
  COMPUTE_BUDGET_PROGRAM_ID,
  FacilitatorPolicy,
  MAX_ATA_CREATIONS,
  MAX_INSTRUCTIONS,
  PaymentRequirements,
  SYSTEM_PROGRAM_ID,
  type FeeEnforcement,
  type VerifyPaymentInput,
  type VerifyReason,
  type VerifyResult,
  type VerifyWarning,
} from './schema.ts';

// fee-facilitator-mpp-tools §4.1 "Verify procedure" extended by DECISIONS "Facilitator". One pass over a buyer-signed
// transaction, no I/O: the facilitator service adds the stateful checks (rent sponsorship budget, duplicate guard)
// and the simulation of §4.1.5 around it.
//
// Accepted layout (the stock x402 "exact" layout is the case without creations and without a fee leg):
//   0  SetComputeUnitLimit                                   required, ≤ computeUnitLimitMax
//   1  SetComputeUnitPrice                                   required, ≤ computeUnitPriceMax
//   …  CreateAssociatedTokenAccountIdempotent × 0..2          payer = facilitator fee payer; payTo's or the fee account
//   k  TransferChecked: seller leg                           exact amount to ATA(payTo, asset, tokenProgram)
//   …  Memo × 0..n, CreateAssociatedTokenAccountIdempotent   the splits shape: between the legs, the fee account only
//   k+1 TransferChecked: fee leg                             only with fee terms (bps > 0); ceil(amount × bps / 10000)
//   …  Memo / Lighthouse                                     any number; at most 7 instructions before trailing Lighthouse
//
// The MPP rail's layout (input.layout 'mpp', draft-solana-charge-00 as @solana/mpp and faremeter build it) differs only
// in order: SetComputeUnitLimit and SetComputeUnitPrice are optional, each at most once, in either order (a price needs
// a limit, so the fee payer's cost keeps the same cap), and memos may sit between the seller leg and the fee leg.
//
// Enforcement of the fee terms (SVC_FEE_ENFORCE): 'enforce' rejects a missing fee leg or a wrong fee amount; 'warn'
// accepts them with a warning; 'off' checks neither. Under every mode a second transfer must be a well-formed fee leg —
// same source, authority, mint, decimals and token program as the seller leg, crediting the fee account — because the
// facilitator never co-signs a transfer it cannot name; without fee terms any second transfer is rejected.

class Rejection extends Error {
  constructor(
    readonly reason: VerifyReason,
    message: string,
  ) {
    super(message);
  }
}

function reject(reason: VerifyReason, message: string): never {
  throw new Rejection(reason, message);
}

/** Verifies a buyer-signed settlement transaction against one offer; every rejection is a result, not an exception. */
export function verifyPayment(input: VerifyPaymentInput): VerifyResult {
  const requirements = PaymentRequirements.safeParse(input.requirements);
  const policy = FacilitatorPolicy.safeParse(input.facilitator);
  if (!requirements.success || !policy.success) {
    const issue = (requirements.error ?? policy.error)?.issues[0];
    return invalid('invalid_requirements', `requirements or facilitator policy invalid: ${issue?.path.join('.')} ${issue?.message}`, null);
  }

  let tx: DecodedTransaction;
  try {
    tx = decodeTransaction(input.transaction);
  } catch (e) {
    if (e instanceof DecodeError) return invalid('invalid_transaction', e.message, null);
    return invalid('invalid_transaction', 'the transaction bytes do not parse', null);
  }

  const payer = firstTransferAuthority(tx);
  try {
    return check(tx, requirements.data, { ...policy.data, buyerSignsLater: input.buyerSignsLater === true, layout: input.layout ?? 'x402' });
  } catch (e) {
    if (e instanceof Rejection) return invalid(e.reason, e.message, payer);
    throw e;
  }
}

function invalid(invalidReason: VerifyReason, message: string, payer: string | null): VerifyResult {
  return { isValid: false, invalidReason, payer, message };
}

/** The stock facilitator's notion of the payer: the authority of the first TransferChecked. */
function firstTransferAuthority(tx: DecodedTransaction): string | null {
  for (const ix of tx.instructions) {
    const transfer = readTransferChecked(ix);
    if (transfer) return transfer.authority;
  }
  return null;
}

interface Expected {
  requirements: PaymentRequirements;
  feePayer: string;
  enforcement: FeeEnforcement;
  sellerAccount: string;
  /** set when the fee leg is on: fee terms present with bps > 0 */
  fee: { bps: number; amount: bigint; account: string; authority: string } | null;
}

function check(
  tx: DecodedTransaction,
  requirements: PaymentRequirements,
  policy: z.output<typeof FacilitatorPolicy> & { buyerSignsLater: boolean; layout: 'x402' | 'mpp' },
): VerifyResult {
  const feePayer = policy.feePayer;
  const { asset, tokenProgram } = requirements;
  const terms = requirements.fee && requirements.fee.bps > 0 ? requirements.fee : null;
  const expected: Expected = {
    requirements,
    feePayer,
    enforcement: policy.enforcement,
    sellerAccount: ataOf(requirements.payTo, asset, tokenProgram),
    fee: terms
      ? {
          bps: terms.bps,
          amount: feeFor(requirements.amount, terms.bps),
          account: ataOf(terms.feeAuthority, asset, tokenProgram),
          authority: terms.feeAuthority,
        }
      : null,
  };

  if (tx.addressTableLookups > 0) {
    reject('address_lookup_tables_unsupported', 'the transaction loads accounts from address lookup tables; send every account as a static key');
  }
  if (tx.accountKeys[0] !== feePayer) {
    reject('fee_payer_mismatch', `the fee payer is ${tx.accountKeys[0]}, expected the facilitator's ${feePayer}`);
  }
  let core = tx.instructions.length;
  while (core > 0 && isLighthouse(tx.instructions[core - 1]!)) core--;
  if (core > MAX_INSTRUCTIONS) {
    reject('too_many_instructions', `${core} instructions before trailing Lighthouse assertions; at most ${MAX_INSTRUCTIONS}`);
  }
  checkFeePayerIsolation(tx, feePayer);

  const instructions = tx.instructions;
  let i = policy.layout === 'mpp' ? checkOptionalComputeBudget(instructions, policy) : checkComputeBudget(instructions, policy);
  const createsAccounts: string[] = [];
  while (instructions[i] && isAtaProgram(instructions[i]!)) {
    createsAccounts.push(checkAtaCreation(instructions[i]!, createsAccounts, expected));
    i++;
  }

  const seller = sellerLeg(instructions[i], i, expected, policy.layout);
  checkExtras(tx, seller);
  checkSigner(tx, seller.authority);
  i++;

  const warnings: VerifyWarning[] = [];
  let fee = 0n;
  let feeDestination: string | null = null;
  const owed = expected.fee;
  // The splits shape (x402 exact/svm extra.splits) orders a payment leg by leg: the seller leg and its memo, then the
  // split's own account creation and transfer. Between the legs only memos and the fee account's creation may sit.
  let k = i;
  while (instructions[k] && isMemo(instructions[k]!)) k++;
  const creation = owed && instructions[k] && isAtaProgram(instructions[k]!) ? instructions[k++]! : undefined;
  const next = readTransferChecked(instructions[k]);
  if (next && !owed) reject('unexpected_fee_leg', `instruction ${k} is a second transfer but the offer carries no fee`);
  if (creation && !next) reject('ata_creation_not_allowed', `instruction ${creation.index}: a creation after the seller leg must precede the fee leg`);
  if (next && owed) {
    if (creation) {
      const target = checkAtaCreation(creation, createsAccounts, expected);
      if (target !== owed.account) reject('ata_creation_not_allowed', `instruction ${creation.index}: only the fee account may be created before the fee leg`);
      createsAccounts.push(target);
    }
    i = k;
    checkExtras(tx, next);
    checkFeeLegShape(next, seller, owed.account);
    if (next.amount !== owed.amount) {
      const message = `fee leg of ${next.amount} atoms; ceil(${requirements.amount} × ${owed.bps} / 10000) = ${owed.amount}`;
      if (expected.enforcement === 'enforce') reject('fee_leg_wrong_amount', message);
      if (expected.enforcement === 'warn') warnings.push('fee_leg_wrong_amount');
    }
    fee = next.amount;
    feeDestination = next.destination;
    i++;
  } else if (owed) {
    const message = `instruction ${i} must be the fee leg: TransferChecked of ${owed.amount} to ${owed.account}`;
    if (expected.enforcement === 'enforce') reject('fee_leg_missing', message);
    if (expected.enforcement === 'warn') warnings.push('fee_leg_missing');
  }

  for (; i < instructions.length; i++) {
    const ix = instructions[i]!;
    if (isMemo(ix) || isLighthouse(ix)) continue;
    if (isAtaProgram(ix)) reject('ata_creation_not_allowed', `instruction ${i}: token-account creations must come right after the compute budget`);
    if (readTransferChecked(ix)) {
      reject(
        expected.fee ? 'unexpected_instruction' : 'unexpected_fee_leg',
        `instruction ${i} is another transfer; only Memo or Lighthouse may follow the transfers`,
      );
    }
    reject('unexpected_instruction', `instruction ${i} (program ${ix.programId}): only Memo or Lighthouse may follow the transfers`);
  }

  checkSignatures(tx, policy.buyerSignsLater);
  return {
    isValid: true,
    payer: seller.authority,
    source: seller.source,
    destination: seller.destination,
    amount: seller.amount,
    fee,
    feeDestination,
    createsAccounts,
    warnings,
  };
}

type Policy = Pick<z.output<typeof FacilitatorPolicy>, 'computeUnitLimitMax' | 'computeUnitPriceMax'>;

function capLimit(units: number, policy: Policy): void {
  if (units > policy.computeUnitLimitMax) reject('compute_limit_too_high', `compute unit limit ${units} exceeds ${policy.computeUnitLimitMax}`);
}

function capPrice(price: bigint, policy: Policy): void {
  if (price > BigInt(policy.computeUnitPriceMax)) {
    reject('compute_price_too_high', `compute unit price ${price} micro-lamports exceeds ${policy.computeUnitPriceMax}`);
  }
}

/** DECISIONS "Facilitator": SetComputeUnitLimit then SetComputeUnitPrice, both required; the index after them. */
function checkComputeBudget(instructions: DecodedTransaction['instructions'], policy: Policy): number {
  const units = readComputeUnitLimit(instructions[0]);
  if (units === null) reject('compute_budget_missing', 'instruction 0 must be SetComputeUnitLimit');
  capLimit(units, policy);
  const price = readComputeUnitPrice(instructions[1]);
  if (price === null) reject('compute_budget_missing', 'instruction 1 must be SetComputeUnitPrice');
  capPrice(price, policy);
  return 2;
}

/**
 * The MPP layout: leading compute-budget instructions, each at most once, in either order, none required — but a price
 * only with a limit, so the fee payer's priority fee stays under limit cap × price cap. The index after them.
 */
function checkOptionalComputeBudget(instructions: DecodedTransaction['instructions'], policy: Policy): number {
  let units: number | null = null;
  let price: bigint | null = null;
  let i = 0;
  for (; i < instructions.length && instructions[i]!.programId === COMPUTE_BUDGET_PROGRAM_ID; i++) {
    const ix = instructions[i]!;
    const limit = readComputeUnitLimit(ix);
    const micro = readComputeUnitPrice(ix);
    if (limit !== null && units === null) units = limit;
    else if (micro !== null && price === null) price = micro;
    else reject('unexpected_instruction', `instruction ${i}: only one SetComputeUnitLimit and one SetComputeUnitPrice may lead the transaction`);
  }
  if (units !== null) capLimit(units, policy);
  if (price !== null) capPrice(price, policy);
  if (price !== null && price > 0n && units === null) reject('compute_budget_missing', 'a SetComputeUnitPrice needs a SetComputeUnitLimit');
  return i;
}

/**
 * DECISIONS "Facilitator": the fee payer appears in no instruction — except as the funding account of a token-account
 * creation, which checkAtaCreation then holds to the allowed targets. Runs before the layout so the reason names the
 * abuse rather than a layout symptom.
 */
function checkFeePayerIsolation(tx: DecodedTransaction, feePayer: string): void {
  for (const ix of tx.instructions) {
    if (ix.programId === feePayer) reject('fee_payer_in_instruction', `instruction ${ix.index} invokes the fee payer as a program`);
    const transfer = readTransferChecked(ix);
    ix.accounts.forEach((account, position) => {
      if (account !== feePayer) return;
      if (isAtaProgram(ix) && position === 0) return;
      if (transfer && position === 3) reject('fee_payer_is_authority', `instruction ${ix.index}: the fee payer is the transfer authority`);
      if (transfer && position === 0) reject('fee_payer_is_source', `instruction ${ix.index}: the fee payer is the transfer source`);
      reject('fee_payer_in_instruction', `instruction ${ix.index} (program ${ix.programId}) lists the fee payer as account ${position}`);
    });
    // The fee payer's own token account as source: it could only be spent through a delegation the facilitator never grants.
    if (transfer && transfer.source === ataOf(feePayer, transfer.mint, transfer.programId)) {
      reject('fee_payer_is_source', `instruction ${ix.index}: the source is the fee payer's token account`);
    }
  }
}

/** §4.1.1: idempotent, funded by the facilitator, same mint and token program, target payTo's or the fee account. */
function checkAtaCreation(ix: DecodedTransaction['instructions'][number], earlier: string[], expected: Expected): string {
  const create = readAtaCreation(ix);
  const where = `instruction ${ix.index}`;
  const { asset, tokenProgram, payTo } = expected.requirements;
  if (earlier.length >= MAX_ATA_CREATIONS) reject('ata_creation_not_allowed', `${where}: at most ${MAX_ATA_CREATIONS} token-account creations`);
  if (!create.idempotent) reject('ata_creation_not_allowed', `${where}: only CreateAssociatedTokenAccountIdempotent is allowed`);
  if (create.accountCount !== 6) reject('ata_creation_not_allowed', `${where}: expected 6 accounts, found ${create.accountCount}`);
  if (create.payer !== expected.feePayer) reject('ata_creation_not_allowed', `${where}: the creation must be funded by the facilitator's fee payer`);
  if (create.mint !== asset) reject('ata_creation_not_allowed', `${where}: creates an account for mint ${create.mint}, not ${asset}`);
  if (create.tokenProgram !== tokenProgram) reject('ata_creation_not_allowed', `${where}: token program ${create.tokenProgram}, not ${tokenProgram}`);
  if (create.systemProgram !== SYSTEM_PROGRAM_ID) reject('ata_creation_not_allowed', `${where}: the fifth account must be the system program`);
  const allowed = [{ owner: payTo, account: expected.sellerAccount }];
  if (expected.fee) allowed.push({ owner: expected.fee.authority, account: expected.fee.account });
  const target = allowed.find((a) => a.owner === create.owner && a.account === create.account);
  if (!target) {
    reject(
      'ata_creation_not_allowed',
      `${where}: creates ${create.account} for ${create.owner}; only the seller's or the fee authority's account may be created`,
    );
  }
  if (earlier.includes(target.account)) reject('ata_creation_not_allowed', `${where}: creates ${target.account} twice`);
  return target.account;
}

/** §4.1.2: the seller TransferChecked. */
function sellerLeg(ix: DecodedTransaction['instructions'][number] | undefined, position: number, expected: Expected, layout: 'x402' | 'mpp'): TransferChecked {
  const { asset, tokenProgram, decimals, amount } = expected.requirements;
  if (!ix || isMemo(ix) || isLighthouse(ix)) reject('transfer_missing', `instruction ${position} must be the seller's TransferChecked`);
  if (isOtherTokenInstruction(ix)) reject('transfer_missing', `instruction ${position} is a token instruction other than TransferChecked`);
  const transfer = readTransferChecked(ix);
  if (!transfer) reject('unexpected_instruction', `instruction ${position} (program ${ix.programId}) where the seller's TransferChecked belongs`);
  const t = transfer;
  if (t.programId !== tokenProgram) reject('wrong_token_program', `the transfer runs under ${t.programId}, the asset under ${tokenProgram}`);
  if (t.mint !== asset) reject('wrong_mint', `the transfer moves mint ${t.mint}, the offer asks for ${asset}`);
  if (t.decimals !== decimals) reject('wrong_decimals', `the transfer states ${t.decimals} decimals, the mint has ${decimals}`);
  if (t.destination !== expected.sellerAccount) {
    reject('wrong_destination', `the transfer credits ${t.destination}, expected ATA(payTo) ${expected.sellerAccount}`);
  }
  // An MPP client that ignores methodDetails.splits sends the whole charge to the recipient: name the fix, not the symptom.
  if (layout === 'mpp' && expected.fee && t.amount === amount + expected.fee.amount) {
    reject(
      'fee_leg_missing',
      `the transfer moves the whole ${t.amount} atoms to the recipient; the protocol fee is the charge's split: ${amount} to the recipient and ${expected.fee.amount} to ${expected.fee.authority} (methodDetails.splits, draft-solana-charge-00)`,
    );
  }
  if (t.amount !== amount) reject('wrong_amount', `the transfer moves ${t.amount} atoms, the offer asks for exactly ${amount}`);
  return t;
}

/** §4.1.3: same source, authority, mint and program as the seller leg, crediting the fee account. Checked under every enforcement. */
function checkFeeLegShape(leg: TransferChecked, seller: TransferChecked, feeAccount: string): void {
  const where = `fee leg (instruction ${leg.index})`;
  if (leg.destination !== feeAccount) {
    reject('fee_leg_wrong_destination', `${where} credits ${leg.destination}, expected the fee account ${feeAccount}`);
  }
  if (leg.programId !== seller.programId || leg.mint !== seller.mint || leg.decimals !== seller.decimals) {
    reject('fee_leg_wrong_mint', `${where} must move the same mint, decimals and token program as the seller leg`);
  }
  if (leg.source !== seller.source) reject('fee_leg_wrong_source', `${where} debits ${leg.source}, the seller leg ${seller.source}`);
  if (leg.authority !== seller.authority)
    reject('fee_leg_wrong_authority', `${where} is authorised by ${leg.authority}, the seller leg by ${seller.authority}`);
}

/**
 * Accounts after a transfer's authority: a multisig authority's co-signers (unsupported), or Solana Pay reference keys —
 * read-only non-signers, which the token program ignores for a single authority and cannot count for a multisig one.
 */
function checkExtras(tx: DecodedTransaction, transfer: TransferChecked): void {
  for (const extra of transfer.multisigSigners) {
    const at = tx.accountKeys.indexOf(extra);
    if (at < 0 || at < tx.numRequiredSignatures || tx.writable[at]) {
      reject(
        'transfer_multisig_unsupported',
        `instruction ${transfer.index}: multisig transfer authorities are not supported (accounts after the authority may only be read-only non-signer references)`,
      );
    }
  }
}

function checkSigner(tx: DecodedTransaction, authority: string): void {
  const at = tx.accountKeys.indexOf(authority);
  if (at < 0 || at >= tx.numRequiredSignatures) reject('missing_signature', `the transfer authority ${authority} is not a signer of the message`);
}

/**
 * Every signer but the fee payer signed the exact message bytes; the fee payer's slot is empty for the facilitator.
 * `buyerSignsLater` (a Solana Pay wallet signs after the facilitator): every slot is still empty.
 */
function checkSignatures(tx: DecodedTransaction, buyerSignsLater: boolean): void {
  if (!isAllZero(tx.signatures[0]!)) reject('fee_payer_signed', "the fee payer's signature slot must be empty: the facilitator signs it");
  for (let s = 1; s < tx.numRequiredSignatures; s++) {
    const signer = tx.accountKeys[s]!;
    const signature = tx.signatures[s]!;
    if (buyerSignsLater) {
      if (!isAllZero(signature)) reject('invalid_signature', `${signer} signed before the facilitator: a wallet signs the co-signed transaction`);
      continue;
    }
    if (isAllZero(signature)) reject('missing_signature', `${signer} has not signed`);
    if (!verifyEd25519(new PublicKey(signer).toBytes(), tx.messageBytes, signature)) {
      reject('invalid_signature', `the signature of ${signer} does not verify over the message`);
    }
  }
}

/**
 * Request-bound payments (domain/shared/request-binding.ts): what the transaction's memos say about the request it
 * pays for, against the digest of the request it arrived with. 'bound': a memo binds it to this request; 'foreign': a
 * binding memo names another request (it was made for another resource, query or body: refused everywhere);
 * 'unbound': no binding memo (a stock client; the link's request_binding decides). The digests are public hashes of
 * the request, compared as they are.
 *
 * On the MPP rail (`challenge`) the credential's challenge states the digest of the request it was issued for (its
 * externalId is the binding memo, covered by the HMAC id): a challenge issued for another request is 'foreign' whatever
 * the transaction carries, and a memo holding the challenge id binds the transaction to that challenge's request.
 */
export function requestBindingOf(
  tx: Pick<DecodedTransaction, 'instructions'>,
  digest: string,
  challenge?: { id: string; digest: string | undefined },
): 'bound' | 'foreign' | 'unbound' {
  if (challenge?.digest !== undefined && challenge.digest !== digest) return 'foreign';
  let seen: 'foreign' | 'unbound' = 'unbound';
  for (const ix of tx.instructions) {
    if (!isMemo(ix)) continue;
    const memo = new TextDecoder().decode(ix.data);
    if (challenge?.digest !== undefined && memo === challenge.id) return 'bound';
    const bound = boundDigestOf(memo);
    if (bound === undefined) continue;
    if (bound === digest) return 'bound';
    seen = 'foreign';
  }
  return seen;
}
