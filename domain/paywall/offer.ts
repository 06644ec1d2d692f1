import { CAIP2, findStable, X402_V1_NETWORK, type Network } from '../shared/network.ts';
import { treasuryOf } from '../treasury/derive.ts';
import { FACILITATOR_EXTRA_KEY, FacilitatorLocation, FEE_EXTENSION_KEY, FeeExtension } from '../facilitator/schema.ts';
import { feeSplits } from '../facilitator/splits.ts';
import { feeFor } from '../shared/money.ts';
import { decodeTransaction } from '../facilitator/decode.ts';
import { readTransferChecked } from '../facilitator/instructions.ts';
import {
  FACILITATOR_FEES_KEY,
  PaymentPayloadV1,
  PaymentPayloadV2,
  SPLITS_KEY,
  type ResourceInfo,
  type X402RequirementsV1,
  type X402RequirementsV2,
} from '../facilitator/wire.ts';
import type { PaymentLinkRecord } from '../payment-links/schema.ts';
import type { OfferBlockhash } from './blockhash.ts';

// The x402 side of the paywall (DECISIONS "x402 on the paywall"): the 402 offer in v2 (header) and v1 (body) form,
// and the payment headers buyers answer with. Pure.

/** How long a buyer may take between the 402 and paying (x402 maxTimeoutSeconds). */
export const MAX_TIMEOUT_SECONDS = 60;

export interface OfferTerms {
  /** the facilitator's fee payer (extra.feePayer) */
  feePayer: string;
  /** the protocol fee when on (bps > 0) */
  fee: { bps: number; feeAuthority: string } | null;
  /** the facilitator that settles and publishes the fee terms (GET /health, §2.4): extra["svc.facilitator"] when the fee is on */
  facilitator?: string;
  /** the network's current blockhash (blockhash.ts), stated in each accept; absent when the ledger gave none */
  blockhash?: OfferBlockhash | undefined;
}

/** One x402 v2 accept per currency of the link (hosted-api §2.3): payTo is the owner agent's treasury. */
export function acceptsFor(
  link: Pick<PaymentLinkRecord, 'ownerAgent' | 'network' | 'currency' | 'acceptsCurrencies' | 'amountAtomic'>,
  terms: OfferTerms,
): X402RequirementsV2[] {
  const payTo = treasuryOf(link.ownerAgent);
  return [link.currency, ...link.acceptsCurrencies].map((symbol) => {
    const stable = findStable(link.network, symbol)!;
    const extra: Record<string, unknown> = { feePayer: terms.feePayer };
    if (terms.fee && terms.fee.bps > 0) {
      const { bps, feeAuthority } = terms.fee;
      // The facilitator travels with the terms, so a scheme client checks them against its /health (§2.4) with no
      // option of its own — also in x402 clients whose core never shows a scheme the 402's resource.
      extra[FEE_EXTENSION_KEY] = { v: '1', bps, feeAuthority };
      if (terms.facilitator) extra[FACILITATOR_EXTRA_KEY] = terms.facilitator;
      // The same fee leg in the shape of x402's multi-payee splits proposal (exact/svm extra.splits), for clients that
      // build every leg from the offer: a leg on top of `amount`, as §2.2 grosses up; its account may not exist yet.
      extra[SPLITS_KEY] = feeSplits(link.amountAtomic, terms.fee);
    }
    withServerBlockhash(extra, terms.blockhash);
    return {
      scheme: 'exact',
      network: CAIP2[link.network],
      asset: stable.mint,
      amount: link.amountAtomic.toString(),
      payTo,
      maxTimeoutSeconds: MAX_TIMEOUT_SECONDS,
      extra,
    };
  });
}

/**
 * x402 PR #2693's server-provided blockhash (exact scheme on Solana): extra.recentBlockhash and
 * extra.lastValidBlockHeight (a decimal string), so a buyer signs with no getLatestBlockhash of its own. Clients that
 * ignore the fields fetch their own as before; the paywall matches a payment to its accept without them.
 */
export function withServerBlockhash(extra: Record<string, unknown>, blockhash: OfferBlockhash | undefined): void {
  if (!blockhash) return;
  extra.recentBlockhash = blockhash.blockhash;
  extra.lastValidBlockHeight = blockhash.lastValidBlockHeight;
}

export function toV1(accept: X402RequirementsV2, network: Network, resource: ResourceInfo): X402RequirementsV1 {
  return {
    scheme: accept.scheme,
    network: X402_V1_NETWORK[network],
    maxAmountRequired: accept.amount,
    resource: resource.url,
    description: resource.description ?? '',
    mimeType: resource.mimeType ?? '',
    payTo: accept.payTo,
    maxTimeoutSeconds: accept.maxTimeoutSeconds,
    asset: accept.asset,
    extra: accept.extra,
  };
}

/**
 * The human message of a 402 after a refused payment. A stock x402 client pays only the seller leg; on a fee-on link
 * it is refused with fee_leg_missing, and its user learns here what to add.
 */
export function refusalMessage(reason: string, message: string): string {
  if (reason !== 'fee_leg_missing') return message;
  // The verifier's part names the missing leg without a closing full stop; the hint is its own sentence.
  const stated = /[.!?]$/.test(message) ? message : `${message}.`;
  return (
    `${stated} This link charges a protocol fee (extra["${FEE_EXTENSION_KEY}"] in the offer, also stated as extra.splits), ` +
    `which a stock x402 client that pays only payTo leaves out. ` +
    `With any @x402/core 2.x client (@x402/fetch, @x402/axios, @payai/x402) register the fee scheme, one line: ` +
    `client.register('solana:*', new ExactSvmFeeScheme(signer, { rpcUrl })) with ExactSvmFeeScheme from 'svc-gateway/x402'; ` +
    `or pay every leg of extra.splits in the same transaction; or pay with createPayingFetch from 'svc-gateway/client/pay'.`
  );
}

/**
 * The fee disclosed in the shape of x402's facilitatorFees extension (PaymentRequired.extensions): one option naming the
 * facilitator (its URL, where GET /health publishes the terms) and the most its fee comes to over these accepts.
 * undefined when no accept carries a fee.
 */
export function facilitatorFeesDisclosure(accepts: X402RequirementsV2[]) {
  let facilitator: string | undefined;
  let max = -1n;
  for (const accept of accepts) {
    const terms = FeeExtension.safeParse(accept.extra[FEE_EXTENSION_KEY]);
    if (!terms.success || terms.data.bps === 0) continue;
    facilitator ??= locationOf(accept);
    const fee = feeFor(BigInt(accept.amount), terms.data.bps);
    if (fee > max) max = fee;
  }
  if (max < 0n || !facilitator) return undefined;
  return {
    info: {
      version: '1',
      options: [{ facilitatorId: facilitator, facilitatorFeeQuoteRef: `${facilitator}/health`, maxFacilitatorFee: max.toString() }],
    },
  };
}

/** extra["svc.facilitator"] when it is an http(s) URL. */
function locationOf(accept: X402RequirementsV2): string | undefined {
  const parsed = FacilitatorLocation.safeParse(accept.extra[FACILITATOR_EXTRA_KEY]);
  return parsed.success ? parsed.data : undefined;
}

/** The settlement's facilitatorFees receipt (SettleResponse.extensions): the fee leg the transaction paid. */
export function facilitatorFeePaid(accept: X402RequirementsV2, fee: bigint) {
  const terms = FeeExtension.safeParse(accept.extra[FEE_EXTENSION_KEY]);
  if (!terms.success || fee === 0n) return undefined;
  const facilitator = locationOf(accept);
  const paid = { facilitatorFeePaid: fee.toString(), asset: accept.asset, model: 'bps', ...(facilitator ? { facilitatorId: facilitator } : {}) };
  return { [FACILITATOR_FEES_KEY]: { info: { version: '1', facilitatorFeePaid: paid } } };
}

/** The unpaid answer: the v2 envelope for PAYMENT-REQUIRED and the v1 form for the body. */
export function paymentRequired(
  network: Network,
  offer: { accepts: X402RequirementsV2[]; resource: ResourceInfo; extensions?: Record<string, unknown> | undefined },
  error: string,
) {
  const { accepts, resource } = offer;
  const fees = facilitatorFeesDisclosure(accepts);
  const extensions = { ...(fees ? { [FACILITATOR_FEES_KEY]: fees } : {}), ...offer.extensions };
  const v2 = { x402Version: 2, error, resource, accepts, ...(Object.keys(extensions).length > 0 ? { extensions } : {}) };
  const v1 = { x402Version: 1, error, accepts: accepts.map((a) => toV1(a, network, resource)) };
  return { header: Buffer.from(JSON.stringify(v2)).toString('base64'), body: v1 };
}

export interface PaymentHeaders {
  /** PAYMENT-SIGNATURE (x402 v2) */
  paymentSignature?: string | undefined;
  /** X-PAYMENT (x402 v1 payload, or a bare base64 signed transaction) */
  xPayment?: string | undefined;
}

export type ParsedPayment =
  | {
      ok: true;
      version: 1 | 2;
      transaction: string;
      transactionBytes: Uint8Array;
      accepted: X402RequirementsV2 | null;
      /** a v2 payload's extensions (payment-identifier's id among them) */
      extensions?: Record<string, unknown> | undefined;
    }
  | { ok: false; reason: 'invalid_payload' | 'invalid_transaction'; message: string };

function jsonOf(base64: string): unknown {
  try {
    return JSON.parse(Buffer.from(base64, 'base64').toString('utf8')) as unknown;
  } catch {
    return undefined;
  }
}

function bytesOf(base64: string): Uint8Array | null {
  const text = base64.trim();
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(text) || text.length % 4 !== 0) return null;
  return Uint8Array.from(Buffer.from(text, 'base64'));
}

/** null when the request carries no payment at all. */
export function parsePayment(headers: PaymentHeaders): ParsedPayment | null {
  const raw = headers.paymentSignature ?? headers.xPayment;
  if (raw === undefined || raw.trim() === '') return null;
  const json = jsonOf(raw);
  let version: 1 | 2;
  let transaction: string;
  let accepted: X402RequirementsV2 | null = null;
  let extensions: Record<string, unknown> | undefined;
  if (json !== undefined && typeof json === 'object' && json !== null) {
    const v2 = PaymentPayloadV2.safeParse(json);
    const v1 = v2.success ? undefined : PaymentPayloadV1.safeParse(json);
    if (v2.success) {
      version = 2;
      transaction = v2.data.payload.transaction;
      accepted = v2.data.accepted;
      extensions = v2.data.extensions;
    } else if (v1?.success) {
      version = 1;
      transaction = v1.data.payload.transaction;
    } else {
      const issue = (v2.error ?? v1?.error)?.issues[0];
      return { ok: false, reason: 'invalid_payload', message: `the payment header is not an x402 payment payload: ${issue?.path.join('.')} ${issue?.message}` };
    }
  } else if (headers.paymentSignature !== undefined) {
    return { ok: false, reason: 'invalid_payload', message: 'PAYMENT-SIGNATURE must be base64 of an x402 v2 payment payload (JSON)' };
  } else {
    // DECISIONS: X-PAYMENT may carry the bare base64 signed transaction (hosted-api §4.2 rule 5).
    version = 1;
    transaction = raw.trim();
  }
  const transactionBytes = bytesOf(transaction);
  if (!transactionBytes) return { ok: false, reason: 'invalid_transaction', message: 'the payment transaction is not base64' };
  return { ok: true, version, transaction, transactionBytes, accepted, extensions };
}

/**
 * Which of the link's accepts a payment answers: v2 names it (`accepted`, matched on what the buyer signed for);
 * v1 and bare transactions are matched by the mint of their first TransferChecked. undefined when none matches.
 */
export function chooseAccept(accepts: X402RequirementsV2[], payment: Extract<ParsedPayment, { ok: true }>): X402RequirementsV2 | undefined {
  if (payment.accepted) {
    const a = payment.accepted;
    return accepts.find((o) => o.network === a.network && o.asset === a.asset && o.amount === a.amount && o.payTo === a.payTo && o.scheme === a.scheme);
  }
  let mint: string | undefined;
  try {
    for (const ix of decodeTransaction(payment.transactionBytes).instructions) {
      const t = readTransferChecked(ix);
      if (t) {
        mint = t.mint;
        break;
      }
    }
  } catch {
    // an undecodable transaction is the facilitator's to refuse, with its reason
  }
  return accepts.find((o) => o.asset === mint) ?? accepts[0];
}
