import { atomicToDecimal, bpsToPct, feeFor } from '../shared/money.ts';
import { STABLES, type Network } from '../shared/network.ts';
import { FEE_EXTENSION_KEY, FeeExtension } from '../facilitator/schema.ts';
import type { PaymentLinkRecord } from '../payment-links/schema.ts';
import type { Accept } from './call.ts';

// The paywall page (a person's browser on a share_url, docs/paywall.md "In a browser"): what the 402 offer says, in
// human units. Pure: interfaces/paywall/page.ts renders it as HTML.

/** One currency the link takes, e.g. { amount: "0.01", currency: "USDC", fee: "0.0001", gross: "0.0101", … } */
export interface PagePrice {
  /** the seller's price in the mint's units (its decimals), e.g. "0.01" */
  amount: string;
  currency: string;
  /** the mint */
  asset: string;
  /** the protocol fee the buyer adds (fee-facilitator-mpp-tools §2.2), "0" when off */
  fee: string;
  /** e.g. "1.00" (percent); null when no fee */
  feePct: string | null;
  /** amount + fee: what leaves the buyer's wallet */
  gross: string;
}

export interface PaywallPageModel {
  id: string;
  network: Network;
  label: string;
  /** metadata.description when the seller set one */
  description: string | null;
  method: string;
  /** what the paid call answers: the upstream's type or the template's mime type */
  mimeType: string;
  protocol: 'x402' | 'mpp';
  /** the share_url */
  url: string;
  prices: PagePrice[];
}

export function pageModel(link: PaymentLinkRecord, accepts: Accept[], url: string): PaywallPageModel {
  const prices = accepts.map((accept): PagePrice => {
    const stable = STABLES[link.network].find((s) => s.mint === accept.asset);
    const decimals = stable?.decimals ?? 6;
    const amount = BigInt(accept.amount);
    const terms = FeeExtension.safeParse(accept.extra[FEE_EXTENSION_KEY]);
    const fee = terms.success ? feeFor(amount, terms.data.bps) : 0n;
    return {
      amount: atomicToDecimal(amount, decimals),
      currency: stable?.symbol ?? link.currency,
      asset: accept.asset,
      fee: atomicToDecimal(fee, decimals),
      feePct: terms.success && terms.data.bps > 0 ? bpsToPct(terms.data.bps) : null,
      gross: atomicToDecimal(amount + fee, decimals),
    };
  });
  const description = typeof link.metadata.description === 'string' && link.metadata.description.trim() !== '' ? link.metadata.description : null;
  return {
    id: link.id,
    network: link.network,
    label: link.label,
    description,
    method: link.method,
    mimeType: link.response.mimeType,
    protocol: link.protocol,
    url,
    prices,
  };
}
