import { decodeTokenAccount } from '../../shared/token-account.ts';
import { feeLayoutFor, settlementInstructions } from '../../facilitator/build.ts';
import type { FeeTerms, PaymentRequirements } from '../../facilitator/schema.ts';
import { DomainError } from '../../shared/errors.ts';
import type { Stable } from '../../shared/network.ts';
import { treasuryOf } from '../../treasury/derive.ts';
import { ataOf as associatedTokenAccount } from '../../facilitator/ata.ts';
import type { AgentBuildContext, BuildContext, PlanOutcome } from '../../transactions/plan.ts';
import type { PrepareBuyerPaymentInput } from '../prepare-schema.ts';
import { stableOf } from './delegation.ts';
import { wholeUnitsToAtomic } from './execute.ts';

// buyer/payment/prepare: the settlement layout of fee-facilitator-mpp-tools §2.3, built by the facilitator's own
// builder (one layout, written once), debiting the buyer agent's treasury token account with the executive signing
// as its SPL delegate (the allowance delegation/prepare approved).

/** What the buyer pays, resolved from a payment link (by the service) or from (pay_to, amount, currency) (directOffer). */
export interface BuyerOffer {
  /** the seller: owner of the receiving token account (an agent treasury for a link) */
  pay_to: string;
  /** atomic units of the seller leg */
  amount: bigint;
  stable: Stable;
  /** the protocol fee terms; null: no fee leg */
  fee: FeeTerms | null;
  /** memo text; default a random nonce, so two equal payments are distinct transactions */
  memo?: string;
  /** the link the offer came from, echoed */
  payment_link?: string;
  /** the paid request a link stands for (its method and share URL): the spend receipt's `request` */
  request?: { method: string; url: string };
}

/** (pay_to, amount, currency) of the request → the offer, with the gateway's fee terms when the fee is on. */
export function directOffer(input: PrepareBuyerPaymentInput, ctx: BuildContext): BuyerOffer {
  if (input.pay_to === undefined || input.amount === undefined || input.currency === undefined) {
    throw new DomainError('invalid_request', 'pay_to, amount and currency are needed without a payment_link');
  }
  const stable = stableOf(ctx, input.currency, 'currency');
  const amount = wholeUnitsToAtomic(input.amount, stable.decimals, 'amount', stable.symbol);
  if (amount === 0n)
    throw DomainError.invalid([{ path: 'amount', message: 'amount must be greater than zero', code: 'invalid_amount' }], 'amount must be greater than zero');
  return { pay_to: input.pay_to, amount, stable, fee: feeTermsOf(ctx) };
}

/** The gateway's fee terms on the context's network; null when the fee is off (0 bps). */
export function feeTermsOf(ctx: BuildContext): FeeTerms | null {
  return ctx.fee.bps > 0 ? { bps: ctx.fee.bps, feeAuthority: ctx.fee.authorities[ctx.network] } : null;
}

/** buildBuyerPayment's context: the BUYER agent (the one whose treasury pays). */
export type BuyerBuildContext = AgentBuildContext;

export async function buildBuyerPayment(input: PrepareBuyerPaymentInput, offer: BuyerOffer, ctx: BuyerBuildContext): Promise<PlanOutcome> {
  if (input.buyer_agent !== ctx.agent.mint) {
    throw new DomainError('invalid_request', `the context's agent ${ctx.agent.mint} is not buyer_agent ${input.buyer_agent}`);
  }
  const { stable } = offer;
  const treasury = treasuryOf(input.buyer_agent);
  const source = associatedTokenAccount(treasury, stable.mint, stable.tokenProgramId);
  const feePayer = input.payer ?? input.executive;
  const requirements: PaymentRequirements = {
    scheme: 'exact',
    network: ctx.network,
    payTo: offer.pay_to,
    asset: stable.mint,
    amount: offer.amount,
    tokenProgram: stable.tokenProgramId as PaymentRequirements['tokenProgram'],
    decimals: stable.decimals,
    ...(offer.fee ? { fee: offer.fee } : {}),
  };
  await requireSpendable(ctx, { source, executive: input.executive, symbol: stable.symbol, gross: feeLayoutFor(requirements).gross });
  const { instructions, layout } = settlementInstructions({
    feePayer,
    payer: input.executive,
    source,
    requirements,
    ...(offer.memo !== undefined ? { memo: offer.memo } : {}),
  });
  const echo = {
    buyer_agent: input.buyer_agent,
    treasury,
    source_token_account: source,
    delegate: input.executive,
    pay_to: offer.pay_to,
    destination_token_account: layout.sellerAccount,
    currency: stable.symbol,
    mint: stable.mint,
    amount_atomic: layout.amount.toString(),
    fee_atomic: layout.fee.toString(),
    gross_atomic: layout.gross.toString(),
    fee_bps: layout.bps,
    fee_authority: layout.feeAuthority,
    ...(offer.payment_link !== undefined ? { payment_link: offer.payment_link } : {}),
    ...(offer.request !== undefined ? { request: offer.request } : {}),
  };
  return {
    kind: 'buyer.payment',
    agent: input.buyer_agent,
    feePayer,
    instructions,
    echo,
    metadata: { echo, pay_to: offer.pay_to, amount_atomic: layout.amount.toString(), currency: stable.symbol },
  };
}

const refuse = (path: string, code: string, message: string, details: Record<string, unknown> = {}): DomainError =>
  new DomainError('invalid_request', message, { issues: [{ path, message, code }], ...details });

/**
 * The payment can only land when the treasury token account exists, names the executive as its delegate and both
 * its allowance and its balance cover the gross (seller leg + fee leg, fee-facilitator-mpp-tools §2.2.6).
 */
async function requireSpendable(ctx: BuyerBuildContext, a: { source: string; executive: string; symbol: string; gross: bigint }): Promise<void> {
  const account = await ctx.reads.getAccount(a.source);
  const data = decodeTokenAccount(account);
  if (!data) {
    throw refuse('buyer_agent', 'token_account_missing', `The buyer treasury has no ${a.symbol} token account (${a.source}): provision and fund it first`);
  }
  const delegate = data.delegate;
  if (delegate !== a.executive) {
    throw refuse(
      'executive',
      'not_delegate',
      `${a.executive} is not the delegate of the buyer treasury's ${a.symbol} account (delegate: ${delegate ?? 'none'}); approve it with delegation/prepare`,
      {
        delegate,
      },
    );
  }
  if (data.delegatedAmount < a.gross) {
    // fee-facilitator-mpp-tools §2.2.6, §7: the code a buyer told to size its delegation in gross branches on
    throw new DomainError(
      'insufficient_allowance',
      `The remaining allowance ${data.delegatedAmount} of ${a.executive} on the buyer treasury's ${a.symbol} account is below the gross ${a.gross} (amount + protocol fee); approve at least that with delegation/prepare (pad_for_protocol_fee).`,
      {
        allowance_atomic: data.delegatedAmount.toString(),
        required_atomic: a.gross.toString(),
        gross_atomic: a.gross.toString(),
        delegate: a.executive,
        token_account: a.source,
      },
    );
  }
  if (data.amount < a.gross) {
    throw refuse('amount', 'insufficient_funds', `The buyer treasury holds ${data.amount}, below the gross ${a.gross} (amount + protocol fee)`, {
      balance_atomic: data.amount.toString(),
      gross_atomic: a.gross.toString(),
    });
  }
}
