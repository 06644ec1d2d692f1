import { PublicKey, TransactionMessage, VersionedTransaction } from '@solana/web3.js';
import { DomainError } from '../shared/errors.ts';
import { decodeAddress } from '../shared/base58.ts';
import { STABLES, type Network } from '../shared/network.ts';
import { settlementInstructions } from '../facilitator/build.ts';
import { FEE_EXTENSION_KEY, FeeExtension, type PaymentRequirements } from '../facilitator/schema.ts';
import type { CosignResponse, FacilitatorRequest, ResourceInfo } from '../facilitator/wire.ts';
import type { Accept } from './call.ts';

// The wallet rail of the paywall page (docs/paywall.md "In a browser", solana-pay.ts): the Solana Pay transaction a
// wallet signs and sends is the §2.3 settlement the facilitator accepts — seller leg, fee leg, memo, the facilitator
// as fee payer — with the page's reference as a read-only non-signer key on the seller leg (Solana Pay), so the
// ledger finds it by that address. Pure: core.ts does the I/O around these.

/** The offer as the settlement builders and the verify procedure read it. */
export function requirementsOf(network: Network, accept: Accept): PaymentRequirements {
  const stable = STABLES[network].find((s) => s.mint === accept.asset);
  if (!stable) throw new DomainError('invalid_request', `The link's asset ${accept.asset} is not a curated stable of ${network}.`);
  const terms = FeeExtension.safeParse(accept.extra[FEE_EXTENSION_KEY]);
  return {
    scheme: 'exact',
    network,
    payTo: accept.payTo,
    asset: accept.asset,
    amount: BigInt(accept.amount),
    tokenProgram: stable.tokenProgramId as PaymentRequirements['tokenProgram'],
    decimals: stable.decimals,
    ...(terms.success && terms.data.bps > 0 ? { fee: { bps: terms.data.bps, feeAuthority: terms.data.feeAuthority } } : {}),
  };
}

/** The wallet's `account` of a transaction request: a base58 Solana address, not the fee payer. */
export function walletAccount(account: unknown, feePayer: string): string {
  if (typeof account !== 'string' || decodeAddress(account) === null) {
    throw DomainError.invalid(
      [{ path: 'account', message: 'must be a base58 Solana address', code: 'invalid_string' }],
      'account must be the base58 address of the paying wallet.',
    );
  }
  if (account === feePayer)
    throw DomainError.invalid([{ path: 'account', message: "is the facilitator's fee payer", code: 'invalid_value' }], 'The fee payer cannot pay.');
  return account;
}

/**
 * The unsigned settlement for `account`: no token-account creation (the seller's exists; the facilitator co-signs no
 * rent it cannot guard), the reference appended to the seller leg's accounts, `memo` (the request-binding memo of the
 * page's request, request-binding.ts) as its memo.
 */
export function walletTransaction(input: {
  network: Network;
  accept: Accept;
  feePayer: string;
  account: string;
  reference: string;
  blockhash: string;
  memo?: string | undefined;
}): Uint8Array {
  const requirements = requirementsOf(input.network, input.accept);
  const { instructions } = settlementInstructions({
    feePayer: input.feePayer,
    payer: input.account,
    requirements,
    createAtas: false,
    ...(input.memo ? { memo: input.memo } : {}),
  });
  const seller = instructions.find((ix) => ix.programId.toBase58() === requirements.tokenProgram && ix.data[0] === 12);
  if (!seller) throw new Error('the settlement has no seller leg');
  seller.keys.push({ pubkey: new PublicKey(input.reference), isSigner: false, isWritable: false });
  const message = new TransactionMessage({ payerKey: new PublicKey(input.feePayer), recentBlockhash: input.blockhash, instructions }).compileToV0Message();
  return new VersionedTransaction(message).serialize();
}

export function cosignRequest(accept: Accept, resource: ResourceInfo, transaction: Uint8Array): FacilitatorRequest {
  return {
    x402Version: 2,
    paymentPayload: { x402Version: 2, resource, accepted: accept, payload: { transaction: Buffer.from(transaction).toString('base64') } },
    paymentRequirements: accept,
  };
}

/** A refused co-sign as the envelope the wallet shows (the facilitator's reason kept in details). */
export function cosignRefusal(answer: CosignResponse): DomainError {
  const reason = answer.errorReason ?? 'settlement_failed';
  const message = answer.errorMessage ?? 'The facilitator refused the payment.';
  const details = { reason, ...(answer.errorDetails ?? {}) };
  if (reason === 'agent_unproven') return new DomainError('agent_unproven', message, details);
  if (reason === 'insufficient_allowance') return new DomainError('insufficient_allowance', message, details);
  return new DomainError('transaction_invalid', message, details);
}

/** The landed transaction with the fee payer's slot emptied: what the verify procedure checks before co-signing. */
export function withoutFeePayerSignature(wire: Uint8Array): Uint8Array {
  const copy = Uint8Array.from(wire);
  // the first signature slot sits right after the one-byte signature count (fewer than 128 signers)
  copy.fill(0, 1, 65);
  return copy;
}
