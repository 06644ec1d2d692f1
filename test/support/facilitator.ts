import type { FeeTerms, PaymentRequirements } from '../../domain/facilitator/schema.ts';
import { FEE_EXTENSION_KEY } from '../../domain/facilitator/schema.ts';
import type { X402RequirementsV2 } from '../../domain/facilitator/wire.ts';
import { CAIP2, findStable } from '../../domain/shared/network.ts';

export const DEVNET_USDC = findStable('chain-devnet', 'USDC')!;

/**
 * One devnet USDC offer in both forms: the x402 v2 accept a resource server sends (extra.feePayer, and
 * extra["svc.fee"] with fee terms) and the domain requirements a buyer builds its transaction from.
 */
export function devnetUsdcOffer(o: { payTo: string; feePayer: string; amount: bigint; fee?: FeeTerms | undefined }): {
  offer: X402RequirementsV2;
  requirements: PaymentRequirements;
} {
  const offer: X402RequirementsV2 = {
    scheme: 'exact',
    network: CAIP2['chain-devnet'],
    asset: DEVNET_USDC.mint,
    amount: o.amount.toString(),
    payTo: o.payTo,
    maxTimeoutSeconds: 60,
    extra: o.fee ? { feePayer: o.feePayer, [FEE_EXTENSION_KEY]: { v: '1', ...o.fee } } : { feePayer: o.feePayer },
  };
  const requirements: PaymentRequirements = {
    scheme: 'exact',
    network: 'chain-devnet',
    payTo: o.payTo,
    asset: DEVNET_USDC.mint,
    amount: o.amount,
    tokenProgram: DEVNET_USDC.tokenProgramId as PaymentRequirements['tokenProgram'],
    decimals: DEVNET_USDC.decimals,
    ...(o.fee ? { fee: o.fee } : {}),
  };
  return { offer, requirements };
}
