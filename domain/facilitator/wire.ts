import { z } from 'zod';
import { Address } from '../shared/address.ts';
import { CAIP2, Network, X402_V1_NETWORK } from '../shared/network.ts';
import { FeeEnforcement, VERIFY_REASONS } from './schema.ts';

// The x402 facilitator HTTP API as it travels (DECISIONS "Facilitator"; x402 v2 with v1 bodies accepted). These are
// the wire shapes every facilitator adapter speaks: the in-process one calls FacilitatorService with them, the HTTP
// one posts them. Unknown fields are kept (loose objects): x402 clients add extensions we pass through untouched.

const AtomicAmount = z.string().regex(/^[1-9]\d{0,19}$/, 'an atomic amount: a positive integer as a decimal string');
const Extra = z.record(z.string(), z.unknown());

/** One x402 v2 "accepts" entry, e.g. { scheme: "exact", network: "solana:EtWT…", asset: "4zMM…", amount: "10000", payTo: "<treasury>", maxTimeoutSeconds: 60, extra: { feePayer } } */
export const X402RequirementsV2 = z.looseObject({
  scheme: z.string(),
  network: z.string(),
  asset: Address,
  amount: AtomicAmount,
  payTo: Address,
  maxTimeoutSeconds: z.number().int().positive(),
  extra: Extra.default({}),
});
export type X402RequirementsV2 = z.infer<typeof X402RequirementsV2>;

/** The v1 form of the same offer (maxAmountRequired, resource, description, mimeType). */
export const X402RequirementsV1 = z.looseObject({
  scheme: z.string(),
  network: z.string(),
  maxAmountRequired: AtomicAmount,
  resource: z.string(),
  description: z.string().default(''),
  mimeType: z.string().default(''),
  payTo: Address,
  maxTimeoutSeconds: z.number().int().positive(),
  asset: Address,
  outputSchema: Extra.optional(),
  extra: Extra.default({}),
});
export type X402RequirementsV1 = z.infer<typeof X402RequirementsV1>;

/** The key of x402's multi-payee splits inside an accept's `extra` (exact/svm splits proposal). */
export const SPLITS_KEY = 'splits';

/** One leg of extra.splits, e.g. { payTo: "<fee authority>", amount: "100", ataCreationRequired: true } */
export const X402Split = z.looseObject({
  payTo: Address,
  amount: AtomicAmount,
  memo: z.string().max(566).optional(),
  ataCreationRequired: z.boolean().optional(),
});
export type X402Split = z.infer<typeof X402Split>;

/** The key of x402's facilitator fee disclosure extension (PaymentRequired and SettleResponse `extensions`). */
export const FACILITATOR_FEES_KEY = 'facilitatorFees';

export const ResourceInfo = z.looseObject({
  url: z.string(),
  description: z.string().optional(),
  mimeType: z.string().optional(),
});
export type ResourceInfo = z.infer<typeof ResourceInfo>;

/** The "exact" SVM payload: the buyer-signed transaction, base64 of the wire bytes. */
export const ExactSvmPayload = z.looseObject({ transaction: z.string().min(1).max(4096) });

export const PaymentPayloadV2 = z.looseObject({
  x402Version: z.literal(2),
  resource: ResourceInfo.optional(),
  accepted: X402RequirementsV2,
  payload: ExactSvmPayload,
  extensions: Extra.optional(),
});
export type PaymentPayloadV2 = z.infer<typeof PaymentPayloadV2>;

export const PaymentPayloadV1 = z.looseObject({
  x402Version: z.literal(1),
  scheme: z.string(),
  network: z.string(),
  payload: ExactSvmPayload,
});
export type PaymentPayloadV1 = z.infer<typeof PaymentPayloadV1>;

export const FacilitatorRequestV2 = z.looseObject({ x402Version: z.literal(2), paymentPayload: PaymentPayloadV2, paymentRequirements: X402RequirementsV2 });
export const FacilitatorRequestV1 = z.looseObject({ x402Version: z.literal(1), paymentPayload: PaymentPayloadV1, paymentRequirements: X402RequirementsV1 });

/**
 * The protocol version a verify/settle body is in: its top-level `x402Version`, else its payment payload's. x402 v2
 * carries the version in the payment payload; @x402/core's HTTPFacilitatorClient repeats it at the top, the v2 body and
 * faremeter's facilitator handler send only `{ paymentPayload, paymentRequirements }`.
 */
export function facilitatorRequestVersion(body: unknown): unknown {
  if (typeof body !== 'object' || body === null) return undefined;
  const { x402Version, paymentPayload } = body as { x402Version?: unknown; paymentPayload?: unknown };
  if (x402Version !== undefined) return x402Version;
  return typeof paymentPayload === 'object' && paymentPayload !== null ? (paymentPayload as { x402Version?: unknown }).x402Version : undefined;
}

/**
 * POST /verify and POST /settle body, v2 or v1. Parsed, it always names its version at the top (taken from the
 * payment payload when the body has none); a top-level version that differs from the payload's is refused.
 */
export const FacilitatorRequest = z.preprocess(
  (body) => {
    const version = facilitatorRequestVersion(body);
    return version !== undefined && (body as { x402Version?: unknown }).x402Version === undefined ? { ...(body as object), x402Version: version } : body;
  },
  z.union([FacilitatorRequestV2, FacilitatorRequestV1]),
);
export type FacilitatorRequest = z.infer<typeof FacilitatorRequest>;

/**
 * One offer as a faremeter seller states it to POST /accepts: an x402 v2 accept whose facilitator-side fields may be
 * missing (faremeter's in-process glue sends maxTimeoutSeconds 0 and no extra), e.g. { scheme: "exact", network:
 * "solana:EtWT…", amount: "10000", asset: "4zMM…", payTo: "<seller>" }.
 */
export const AcceptsOffer = z.looseObject({
  scheme: z.string(),
  network: z.string(),
  amount: AtomicAmount,
  asset: Address,
  payTo: Address,
  maxTimeoutSeconds: z.number().int().nonnegative().optional(),
  extra: Extra.optional(),
});
export type AcceptsOffer = z.infer<typeof AcceptsOffer>;

/** POST /accepts body, as @faremeter/middleware's facilitator handler sends it: { x402Version: 2, resource, accepts }. */
export const AcceptsRequest = z.looseObject({
  x402Version: z.literal(2),
  resource: ResourceInfo.optional(),
  accepts: z.array(AcceptsOffer).max(64),
});
export type AcceptsRequest = z.infer<typeof AcceptsRequest>;

/**
 * POST /accepts answer, an x402 v2 PaymentRequired: the offers this facilitator settles, completed with what a buyer
 * builds its transaction from, e.g. { x402Version: 2, resource: { url }, accepts: [{ …, maxTimeoutSeconds: 60, extra:
 * { feePayer, decimals: 6, tokenProgram, recentBlockhash } }] }; `error` says why an offer was left out.
 */
export const AcceptsResponse = z.looseObject({
  x402Version: z.literal(2),
  error: z.string().optional(),
  resource: ResourceInfo,
  accepts: z.array(X402RequirementsV2),
});
export type AcceptsResponse = z.infer<typeof AcceptsResponse>;

/**
 * Reasons beyond the pure verify's: request shape, network and asset support, the offer's fee terms against the
 * facilitator's own, rent sponsorship, the duplicate guard, and what simulation and broadcast report.
 */
export const FACILITATOR_REASONS = [
  ...VERIFY_REASONS,
  'invalid_payload',
  'unsupported_scheme',
  'unsupported_network',
  'unsupported_asset',
  'requirements_mismatch',
  'fee_terms_mismatch',
  'ata_creation_not_sponsored',
  'duplicate_settlement',
  'transaction_expired',
  'insufficient_funds',
  'insufficient_allowance',
  'simulation_failed',
  'settlement_failed',
  'settlement_pending',
  // the payTo is the treasury of an agent recorded at this gateway and not proven on the ledger (DECISIONS "Agents…")
  'agent_unproven',
] as const;
export const FacilitatorReason = z.enum(FACILITATOR_REASONS);
export type FacilitatorReason = z.infer<typeof FacilitatorReason>;

/** e.g. { isValid: false, invalidReason: "wrong_amount", invalidMessage: "the transfer moves 1 atoms…", payer: "7Yk…" } */
export const VerifyResponse = z.looseObject({
  isValid: z.boolean(),
  invalidReason: z.string().optional(),
  invalidMessage: z.string().optional(),
  /** what a client needs to act on the reason, e.g. insufficient_allowance: { allowance_atomic, required_atomic } */
  invalidDetails: z.record(z.string(), z.unknown()).optional(),
  payer: z.string().optional(),
});
export type VerifyResponse = z.infer<typeof VerifyResponse>;

/**
 * e.g. { success: true, transaction: "5VER…", network: "solana:EtWT…", payer: "7Yk…" }. On `settlement_pending`
 * (broadcast, outcome not known in time) `transaction` holds the signature to poll; otherwise it is "" on failure.
 */
export const SettleResponse = z.looseObject({
  success: z.boolean(),
  errorReason: z.string().optional(),
  errorMessage: z.string().optional(),
  /** as VerifyResponse.invalidDetails */
  errorDetails: z.record(z.string(), z.unknown()).optional(),
  transaction: z.string(),
  network: z.string(),
  payer: z.string().optional(),
});
export type SettleResponse = z.infer<typeof SettleResponse>;

/**
 * POST /cosign (not x402; Solana Pay wallets, docs/paywall.md "In a browser"): the buyer-unsigned settlement transaction
 * co-signed by the fee payer, e.g. { success: true, transaction: "<base64, the buyer's slot empty>", signature: "5VER…",
 * network: "solana:EtWT…", payer: "7Yk…" }; refused: { success: false, errorReason, errorMessage, transaction: "",
 * signature: "" }.
 */
export const CosignResponse = z.looseObject({
  success: z.boolean(),
  errorReason: z.string().optional(),
  errorMessage: z.string().optional(),
  errorDetails: z.record(z.string(), z.unknown()).optional(),
  transaction: z.string(),
  signature: z.string(),
  network: z.string(),
  payer: z.string().optional(),
});
export type CosignResponse = z.infer<typeof CosignResponse>;

/**
 * What settling costs the fee payer and what it accepts, beside the x402 fields of GET /supported (additions a
 * stock client ignores): the compute-budget caps verify enforces (DECISIONS "Facilitator"), the most
 * priority fee they allow, and the rent-sponsorship policy. Lamport amounts are decimal strings, e.g.
 * { computeUnitLimitMax: 400000, computeUnitPriceMaxMicroLamports: 5000000, priorityFeeMaxLamports: "2000000",
 *   rent: { sponsorsTokenAccounts: true, perOwnerAndMint: 1, dailyBudgetLamports: "1000000000",
 *   tokenAccountLamports: { "Tokenkeg…": "2039280", "TokenzQd…": "2074080" } } }
 */
export const FacilitatorCosts = z.object({
  computeUnitLimitMax: z.number().int(),
  computeUnitPriceMaxMicroLamports: z.number().int(),
  /** computeUnitLimitMax × computeUnitPriceMaxMicroLamports / 10^6, rounded up */
  priorityFeeMaxLamports: z.string(),
  rent: z.object({
    /** the facilitator pays for the seller's (and fee authority's) missing token account at settlement */
    sponsorsTokenAccounts: z.boolean(),
    /** sponsored creations per (owner, mint), ever: a closed and recreated account is not paid for again */
    perOwnerAndMint: z.number().int(),
    /** lamports of rent sponsored per network per UTC day; beyond it verify answers ata_creation_not_sponsored */
    dailyBudgetLamports: z.string(),
    /** the rent of one token account, per token program */
    tokenAccountLamports: z.record(z.string(), z.string()),
  }),
});
export type FacilitatorCosts = z.infer<typeof FacilitatorCosts>;

export const SupportedResponse = z.looseObject({
  kinds: z.array(z.looseObject({ x402Version: z.number().int(), scheme: z.string(), network: z.string(), extra: Extra.optional() })),
  extensions: z.array(z.string()),
  signers: z.record(z.string(), z.array(z.string())),
  costs: FacilitatorCosts.optional(),
});
export type SupportedResponse = z.infer<typeof SupportedResponse>;

/** The payment-identifier extension's id (@x402/extensions 2.27: 16–128 characters of letters, digits, `-` and `_`). */
export const PaymentIdentifier = z.string().regex(/^[A-Za-z0-9_-]{16,128}$/, '16 to 128 letters, digits, - or _');

/** The payment-identifier id a v2 payment payload carries in `extensions["payment-identifier"].info.id`, if a valid one. */
export function paymentIdOf(request: FacilitatorRequest): string | null {
  if (request.x402Version !== 2) return null;
  const ext = request.paymentPayload.extensions?.['payment-identifier'] as { info?: { id?: unknown } } | undefined;
  const id = PaymentIdentifier.safeParse(ext?.info?.id);
  return id.success ? id.data : null;
}

/**
 * GET /status: one of `transaction` (the signature), `messageHash` (base64 — or hex — SHA-256 of the transaction
 * message, the x402 reference facilitator's key of a payment) or `paymentId` (the payment-identifier extension's id);
 * `network` (CAIP-2 or v1 name) narrows it to one network. e.g. ?transaction=5VER… or ?paymentId=pay_7HkQ2m9xLw4RtY8Z
 */
export const SettlementStatusQuery = z
  .object({
    transaction: z
      .string()
      .regex(/^[1-9A-HJ-NP-Za-km-z]{32,90}$/, 'a base58 transaction signature')
      .optional(),
    messageHash: z
      .string()
      .regex(/^(?:[A-Za-z0-9+/]{43}=|[0-9a-fA-F]{64})$/, 'base64 or hex of a SHA-256 digest')
      .optional(),
    paymentId: PaymentIdentifier.optional(),
    network: z.string().max(64).optional(),
  })
  .refine((q) => [q.transaction, q.messageHash, q.paymentId].filter((v) => v !== undefined).length === 1, {
    message: 'give exactly one of transaction, messageHash or paymentId',
    path: ['transaction'],
  });
export type SettlementStatusQuery = z.infer<typeof SettlementStatusQuery>;

/**
 * GET /status answer, in the settle response's terms: the outcome of the facilitator's settlement of one payment —
 * `pending` (broadcast or being settled; the same settle again reconciles it), `settled`, `failed` (errorReason says
 * why; nothing moved unless it landed and failed on the ledger) or `unknown` (this facilitator never settled it).
 * e.g. { status: "settled", transaction: "5VER…", network: "solana:EtWT…", payer: "7Yk…", messageHash: "q3vB…=",
 * paymentId: null, updatedAt: "2026-11-28T17:02:11.000Z" }
 */
export const SettlementStatus = z.looseObject({
  status: z.enum(['pending', 'settled', 'failed', 'unknown']),
  transaction: z.string(),
  network: z.string(),
  payer: z.string().optional(),
  messageHash: z.string().nullable().optional(),
  paymentId: z.string().nullable().optional(),
  errorReason: z.string().optional(),
  updatedAt: z.string().optional(),
});
export type SettlementStatus = z.infer<typeof SettlementStatus>;

/** GET /health of the facilitator (fee-facilitator-mpp-tools §2.4, DECISIONS "Facilitator"). */
export const FacilitatorHealth = z.looseObject({
  ok: z.boolean(),
  fee_payer: z.string(),
  networks: z.array(Network),
  protocol_fee: z.object({
    bps: z.number().int(),
    enforcement: FeeEnforcement,
    /** the fee authority; per network in `authorities` when the two differ */
    authority: z.string(),
    authorities: z.record(z.string(), z.string()),
  }),
});
export type FacilitatorHealth = z.infer<typeof FacilitatorHealth>;

/** CAIP-2 id or v1 name → our network; undefined when it is neither. */
export function networkFromX402(id: string): Network | undefined {
  for (const n of Network.options) if (CAIP2[n] === id || X402_V1_NETWORK[n] === id) return n;
  return undefined;
}

/** The v2 accept from either form (v1 maxAmountRequired → amount). */
export function requirementsV2(r: X402RequirementsV2 | X402RequirementsV1): X402RequirementsV2 {
  if ('amount' in r && typeof r.amount === 'string') return r as X402RequirementsV2;
  const v1 = r as X402RequirementsV1;
  return {
    scheme: v1.scheme,
    network: v1.network,
    asset: v1.asset,
    amount: v1.maxAmountRequired,
    payTo: v1.payTo,
    maxTimeoutSeconds: v1.maxTimeoutSeconds,
    extra: v1.extra,
  };
}
