import { z } from 'zod';
import { Address } from '../shared/address.ts';
import { Network, StableSymbol } from '../shared/network.ts';
import { listEnvelope } from '../shared/pagination.ts';
import { WholeUnits, PrepareBuyerPaymentInput } from '../agents/prepare-schema.ts';
import { Verdict, Check as IdentityCheck } from '../identity/schema.ts';
import { PreparedEnvelope } from '../transactions/schema.ts';
import { Receipt, ReceiptHash, StoredReceiptOutput } from '../receipts/schema.ts';

// hosted-api §4.8 "Buyer": one schema per body and per resource, shared by REST, tRPC and GraphQL. The
// shapes are ours (the spec shows none): what an agent framework wants to branch on — decimal strings for people,
// atomic strings for code, one `kind` per payment option so another rail (MPP) is one more kind, not a new shape.

// ---- catalogue ----------------------------------------------------------------------------------------------------

/** One curated stable (the one STABLES definition the seller side answers from too). */
export const StableInfo = z.object({
  symbol: StableSymbol,
  mint: z.string(),
  decimals: z.number().int(),
  /** "spl" | "token-2022" */
  token_program: z.string(),
  token_program_id: z.string(),
});
export type StableInfo = z.infer<typeof StableInfo>;

/** GET /v1/buyer/networks */
export const BuyerNetworks = listEnvelope(
  z.object({
    network: Network,
    caip2: z.string(),
    x402_network: z.string(),
    /** the caller's key's network: the only one it can pay on */
    current: z.boolean(),
    /** the payment rails the gateway's buyer routes speak, e.g. ["x402"] */
    rails: z.array(z.string()),
    protocol_fee: z.object({ bps: z.number().int(), pct: z.string(), authority: z.string() }),
    stables: z.array(StableInfo),
  }),
);
export type BuyerNetworks = z.infer<typeof BuyerNetworks>;

/** GET /v1/buyer/currency: the curated stables of the caller's network. */
export const BuyerCurrencies = z.object({ network: Network, ...listEnvelope(StableInfo).shape });
export type BuyerCurrencies = z.infer<typeof BuyerCurrencies>;

/** GET /v1/seller/facilitator */
export const FacilitatorInfo = z.object({
  /** the facilitator links advertise, e.g. "http://localhost:8080/facilitator" */
  url: z.string(),
  networks: z.array(
    z.object({
      network: Network,
      caip2: z.string(),
      /** the address that pays transaction fees (x402 extra.feePayer); null when the facilitator did not say */
      fee_payer: z.string().nullable(),
      supported: z.boolean(),
    }),
  ),
  /** the facilitator's own GET /health; null when it did not answer (health_error says why) */
  health: z
    .object({
      ok: z.boolean(),
      fee_payer: z.string(),
      networks: z.array(Network),
      protocol_fee: z.object({ bps: z.number().int(), enforcement: z.string(), authority: z.string(), authorities: z.record(z.string(), z.string()) }),
    })
    .nullable(),
  health_error: z.string().nullable(),
});
export type FacilitatorInfo = z.infer<typeof FacilitatorInfo>;

// ---- quote --------------------------------------------------------------------------------------------------------

/** A URL to probe (any x402 v1/v2 seller) or a payment link of this gateway (resolved locally). */
const QuoteTarget = {
  url: z.url({ protocol: /^https?$/ }).max(2048).optional().describe('the paid resource: probed once, its 402 read'),
  payment_link: z.string().min(1).max(128).optional().describe("a payment link id of this gateway (no network round trip)"),
};

const oneTarget = (v: { url?: string | undefined; payment_link?: string | undefined }) => [v.url, v.payment_link].filter((x) => x !== undefined).length === 1;
const ONE_TARGET = { message: 'Give exactly one of url or payment_link', path: ['url'] };

export const QuoteInput = z
  .strictObject({
    ...QuoteTarget,
    /** the method the resource is called with; default GET */
    method: z.enum(['GET', 'POST', 'PUT', 'PATCH', 'DELETE']).optional(),
  })
  .refine(oneTarget, ONE_TARGET);
export type QuoteInput = z.input<typeof QuoteInput>;

/** The MPP side of an option (kind "mpp"): the challenge a buyer answers; null fields for a link resolved locally. */
export const MppOfferInfo = z.object({
  method: z.string(),
  intent: z.string(),
  /** the challenge id (HMAC-bound, valid until expires); null when the offer was resolved without a probe */
  challenge_id: z.string().nullable(),
  realm: z.string().nullable(),
  expires: z.string().nullable(),
});

/** One way to pay: kind "x402" (v1 or v2, scheme "exact") or "mpp" (a Solana charge challenge, fee-facilitator-mpp-tools §4.2). */
export const QuoteOption = z.object({
  kind: z.enum(['x402', 'mpp']),
  /** x402 only; null for an MPP offer */
  x402_version: z.number().int().nullable(),
  scheme: z.string(),
  /** our network name; null for a network the gateway does not serve */
  network: Network.nullable(),
  /** the network as offered, e.g. "solana:EtWT…" or "solana-devnet" */
  network_id: z.string(),
  /** the curated stable's symbol; null for another mint */
  currency: StableSymbol.nullable(),
  asset: z.string(),
  decimals: z.number().int().nullable(),
  pay_to: z.string(),
  /** what the seller receives (the seller leg), decimal and atomic */
  net: z.string().nullable(),
  net_atomic: z.string(),
  /** the protocol fee leg the offer asks for on top (extra["svc.fee"]); "0" without one */
  fee: z.string().nullable(),
  fee_atomic: z.string(),
  /** what the buyer pays: net + fee */
  gross: z.string().nullable(),
  gross_atomic: z.string(),
  fee_bps: z.number().int(),
  fee_authority: z.string().nullable(),
  /** the facilitator's fee payer (extra.feePayer) */
  fee_payer: z.string().nullable(),
  max_timeout_seconds: z.number().int().nullable(),
  /** this gateway can pay it for the caller: on the caller's network, a curated stable */
  payable: z.boolean(),
  /** kind "mpp": the challenge; null for x402 */
  mpp: MppOfferInfo.nullable().default(null),
});
export type QuoteOption = z.infer<typeof QuoteOption>;

export const SellerIdentity = z.object({
  verdict: Verdict,
  score: z.number().int(),
  checks: z.array(IdentityCheck),
});
export type SellerIdentity = z.infer<typeof SellerIdentity>;

export const Quote = z.object({
  /** where the quote came from: "url" (probed), "payment_link" (resolved locally), "direct" (execute's pay_to, amount, currency) */
  source: z.enum(['url', 'payment_link', 'direct']),
  /** null for a direct payment (no resource) */
  url: z.string().nullable(),
  method: z.string(),
  /** the host of url, what allowed_domains is matched against; null without a url */
  domain: z.string().nullable(),
  payment_link: z.string().nullable(),
  resource: z.object({ url: z.string(), description: z.string().nullable(), mime_type: z.string().nullable() }).nullable(),
  options: z.array(QuoteOption).max(64),
  seller: z.object({
    /** the pay_to of the payable options (an agent treasury for a gateway seller) */
    pay_to: z.string().nullable(),
    /** the recorded agent whose treasury pay_to is; null when pay_to is nobody's treasury here */
    agent: z.string().nullable(),
    /** POST /v1/identity/verify of that agent; null without one */
    identity: SellerIdentity.nullable(),
  }),
  quoted_at: z.string(),
});
export type Quote = z.infer<typeof Quote>;

// ---- spend policy -------------------------------------------------------------------------------------------------

export const VERDICT_RANK: Record<Verdict, number> = { deny: 0, warn: 1, allow: 2 };

export const SpendLimit = z.strictObject({
  currency: StableSymbol,
  /** the most one call may cost (gross: net + fee), whole units, e.g. "0.50" */
  per_call: WholeUnits.optional(),
  /** the most the agent may spend per UTC day (gross), whole units */
  daily: WholeUnits.optional(),
});
export type SpendLimit = z.infer<typeof SpendLimit>;

/** PUT /v1/buyer/policy: the whole policy of a buyer agent (a field left out means "no rule"). */
export const PutPolicyInput = z
  .strictObject({
    agent: Address,
    /** per stable; a stable not listed is not limited by amount */
    limits: z.array(SpendLimit).max(8).optional(),
    /** agent mints or pay_to addresses the agent may pay; absent: any */
    allowed_sellers: z.array(Address).max(256).optional(),
    /** hosts the agent may pay (exact, or "*.example.com" for subdomains); absent: any */
    allowed_domains: z.array(z.string().min(1).max(260).regex(/^(\*\.)?[a-z0-9.:-]+$/, 'Expected a lower-case host, optionally "*." first')).max(256).optional(),
    /** the seller's identity verdict must be at least this ("warn" admits warn and allow); absent: any */
    min_identity_verdict: z.enum(['allow', 'warn']).optional(),
  })
  .superRefine((p, ctx) => {
    const seen = new Set<string>();
    for (const [i, l] of (p.limits ?? []).entries()) {
      if (seen.has(l.currency)) ctx.addIssue({ code: 'custom', path: ['limits', i, 'currency'], message: `${l.currency} is listed twice` });
      seen.add(l.currency);
    }
  });
export type PutPolicyInput = z.input<typeof PutPolicyInput>;

export const SpendPolicy = z.object({
  agent: z.string(),
  network: Network,
  limits: z.array(z.object({ currency: StableSymbol, per_call: z.string().nullable(), daily: z.string().nullable() })),
  allowed_sellers: z.array(z.string()).nullable(),
  allowed_domains: z.array(z.string()).nullable(),
  min_identity_verdict: z.enum(['allow', 'warn']).nullable(),
  updated_at: z.string(),
});
export type SpendPolicy = z.infer<typeof SpendPolicy>;

export const AgentInput = z.object({ agent: Address });
export type AgentInput = z.input<typeof AgentInput>;

/** POST /v1/buyer/policy/evaluate: a quote already made, or a target to quote now. */
export const EvaluateInput = z
  .strictObject({
    agent: Address,
    quote: Quote.optional(),
    ...QuoteTarget,
    /** evaluate only the option in this stable; default every payable option, the first allowed one is chosen */
    currency: StableSymbol.optional(),
  })
  .refine((v) => [v.quote, v.url, v.payment_link].filter((x) => x !== undefined).length === 1, {
    message: 'Give exactly one of quote, url or payment_link',
    path: ['quote'],
  });
export type EvaluateInput = z.input<typeof EvaluateInput>;

export const RuleResult = z.object({
  /** per_call_max | daily_cap | allowed_sellers | allowed_domains | min_identity_verdict | payable_option | policy */
  rule: z.string(),
  ok: z.boolean(),
  detail: z.string(),
  currency: StableSymbol.nullable(),
});
export type RuleResult = z.infer<typeof RuleResult>;

export const Evaluation = z.object({
  decision: z.enum(['allow', 'deny']),
  /** why it was denied (each failed rule's detail); empty when allowed */
  reasons: z.array(z.string()),
  checks: z.array(RuleResult),
  /** the option the decision is about: the first allowed one, else the first evaluated; null without a payable one */
  option: QuoteOption.nullable(),
  /** what the agent spent today per stable, gross atomic, as the daily cap read it */
  spent_today: z.array(z.object({ currency: StableSymbol, gross_atomic: z.string() })),
  /** payments of the agent prepared or submitted and not landed yet, per stable, gross atomic: the daily cap counts them too */
  in_flight: z.array(z.object({ currency: StableSymbol, gross_atomic: z.string() })),
  quote: Quote,
});
export type Evaluation = z.infer<typeof Evaluation>;

// ---- execute ------------------------------------------------------------------------------------------------------

/** POST /v1/buyer/payment/execute: the body of buyer/payment/prepare, evaluated against the agent's policy first. */
export const ExecuteInput = PrepareBuyerPaymentInput;
export type ExecuteInput = z.input<typeof ExecuteInput>;

export const ExecuteResult = z.object({
  decision: z.literal('allow'),
  checks: z.array(RuleResult),
  /** sign it client-side and send it to POST /v1/submit */
  prepared: PreparedEnvelope,
});
export type ExecuteResult = z.infer<typeof ExecuteResult>;

// ---- receipts -----------------------------------------------------------------------------------------------------

const Signature = z.string().regex(/^[1-9A-HJ-NP-Za-km-z]{64,88}$/, 'Expected a base58 transaction signature');

/** POST /v1/buyer/receipt/finalize: the paid response's settlement, recorded as the agent's spend receipt. */
export const FinalizeInput = z
  .strictObject({
    agent: Address,
    /** the settlement transaction's signature */
    signature: Signature.optional(),
    /** or the PAYMENT-RESPONSE / X-PAYMENT-RESPONSE header of the paid response as received (base64 JSON) */
    payment_response: z.string().min(1).max(4096).optional(),
    /** the paid request, for the receipt */
    request: z.strictObject({ method: z.string().min(1).max(16), url: z.string().min(1).max(4096), body_hash: ReceiptHash.optional() }).optional(),
    /** the paid response, for the receipt */
    response: z.strictObject({ status: z.number().int().min(100).max(599), body_hash: ReceiptHash.optional() }).optional(),
  })
  .refine((v) => [v.signature, v.payment_response].filter((x) => x !== undefined).length === 1, {
    message: 'Give exactly one of signature or payment_response',
    path: ['signature'],
  });
export type FinalizeInput = z.input<typeof FinalizeInput>;

export const FinalizeResult = z.object({
  /** false when the settlement already had its spend receipt (this call recorded nothing) */
  recorded: z.boolean(),
  receipt: StoredReceiptOutput,
});
export type FinalizeResult = z.infer<typeof FinalizeResult>;

/** POST /v1/buyer/receipt/verify: a stored receipt by hash, or a receipt body (checked against the stored chain). */
export const VerifyReceiptInput = z
  .strictObject({ receipt_hash: ReceiptHash.optional(), receipt: Receipt.optional() })
  .refine((v) => [v.receipt_hash, v.receipt].filter((x) => x !== undefined).length === 1, {
    message: 'Give exactly one of receipt_hash or receipt',
    path: ['receipt_hash'],
  });
export type VerifyReceiptInput = z.input<typeof VerifyReceiptInput>;

export const ReceiptCheckResult = z.object({ name: z.string(), ok: z.boolean(), detail: z.string() });

export const VerifyReceiptResult = z.object({
  /** every check passed */
  ok: z.boolean(),
  receipt_hash: z.string(),
  agent: z.string(),
  nonce: z.number().int(),
  /** hash: canonical hash matches · stored: on this network's chain · chain_position: prev link and next link agree · settlement: the ledger shows the money moved */
  checks: z.array(ReceiptCheckResult),
  /** verified | mismatch | pending | not_applicable: the ledger check of the settlement */
  settlement: z.enum(['verified', 'mismatch', 'pending', 'not_applicable']),
});
export type VerifyReceiptResult = z.infer<typeof VerifyReceiptResult>;

// ---- stored -------------------------------------------------------------------------------------------------------

/** A stored policy (buyer_policies, migrations/0016-buyer.ts). Amounts are atomic inside. */
export interface SpendPolicyRecord {
  network: Network;
  agent: string;
  limits: { currency: StableSymbol; perCall: bigint | null; daily: bigint | null }[];
  allowedSellers: string[] | null;
  allowedDomains: string[] | null;
  minIdentityVerdict: 'allow' | 'warn' | null;
  ownerPrincipal: string;
  updatedAt: Date;
}

/** A buyer payment prepared or submitted and not landed yet (prepared_transactions state <> 'done'). */
export interface InFlightPayment {
  asset: string;
  grossAtomic: bigint;
  state: 'prepared' | 'submitted';
  /** a prepared payment past this block height can no longer be submitted */
  lastValidBlockHeight: number;
}

/** One row of the daily spend rollup: gross atomic of `asset` spent by the agent on the UTC day. */
export interface DailySpend {
  asset: string;
  grossAtomic: bigint;
  receipts: number;
}
