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
export const StableInfo = z
  .object({
    symbol: StableSymbol,
    mint: z.string().describe('the stable’s mint address'),
    decimals: z.number().int().describe('the mint’s decimals'),
    token_program: z.string().describe('"spl" | "token-2022"'),
    token_program_id: z.string().describe('the token program’s address'),
  })
  .describe('A curated stable of a network.');
export type StableInfo = z.infer<typeof StableInfo>;

/**
 * GET /v1/buyer/networks and GET /v1/seller/networks: the network catalogue, one list for both sides (catalog.ts
 * `networks` builds it), the same on REST, tRPC, GraphQL and MCP.
 */
export const NetworkCatalogue = listEnvelope(
  z
    .object({
      network: Network,
      caip2: z.string().describe('CAIP-2 network id (x402 v2)'),
      x402_network: z.string().describe('x402 v1 network name, e.g. solana-devnet'),
      current: z.boolean().describe("the caller's key's network: the only one it can pay on and its links can sell on"),
      rails: z.array(z.string()).describe('the payment rails the gateway speaks, e.g. ["x402", "mpp"]'),
      facilitator: z.string().describe('URL of the facilitator that settles payments (GET /v1/seller/facilitator)'),
      protocol_fee: z
        .object({
          bps: z.number().int().describe('fee rate in basis points'),
          pct: z.string().describe('the same rate in percent, decimal string'),
          authority: z.string().describe('the fee authority (owner of the fee token accounts)'),
        })
        .describe('the protocol fee a buyer pays on top of the price (fee-facilitator-mpp-tools §2.2)'),
      stables: z.array(StableInfo).describe('the curated stables of the network: what a link can price in and a buyer pay with'),
    })
    .describe('A network the gateway pays and sells on.'),
);
export type NetworkCatalogue = z.infer<typeof NetworkCatalogue>;

/** GET /v1/buyer/currency: the curated stables of the caller's network. */
export const BuyerCurrencies = z.object({ network: Network, ...listEnvelope(StableInfo).shape });
export type BuyerCurrencies = z.infer<typeof BuyerCurrencies>;

/** GET /v1/seller/facilitator */
export const FacilitatorInfo = z
  .object({
    url: z.string().describe('the facilitator links advertise, e.g. "http://localhost:8080/facilitator"'),
    networks: z
      .array(
        z.object({
          network: Network,
          caip2: z.string().describe('CAIP-2 network id'),
          fee_payer: z.string().nullable().describe('the address that pays transaction fees (x402 extra.feePayer); null when the facilitator did not say'),
          supported: z.boolean().describe('whether the facilitator settles on this network'),
        }),
      )
      .describe('per network: the facilitator’s fee payer and support'),
    /** the facilitator's own GET /health; null when it did not answer (health_error says why) */
    health: z
      .object({
        ok: z.boolean().describe('the facilitator answers'),
        fee_payer: z.string().describe('its fee-payer address'),
        networks: z.array(Network).describe('the networks it serves'),
        protocol_fee: z
          .object({
            bps: z.number().int().describe('fee rate in basis points'),
            enforcement: z.string().describe('enforce, warn or off (SVC_FEE_ENFORCE)'),
            authority: z.string().describe('the fee authority'),
            authorities: z.record(z.string(), z.string()).describe('fee authority per network'),
          })
          .describe('the fee block of GET /health (fee-facilitator-mpp-tools §2.4)'),
      })
      .nullable()
      .describe('the facilitator’s GET /health; null when it did not answer'),
    health_error: z.string().nullable().describe('why the health check failed; null when it answered'),
  })
  .describe('The facilitator payment links use.');
export type FacilitatorInfo = z.infer<typeof FacilitatorInfo>;

// ---- quote --------------------------------------------------------------------------------------------------------

/** A URL to probe (any x402 v1/v2 seller) or a payment link of this gateway (resolved locally). */
const QuoteTarget = {
  url: z
    .url({ protocol: /^https?$/ })
    .max(2048)
    .describe('the paid resource: probed once, its 402 read')
    .optional(),
  payment_link: z.string().min(1).max(128).describe('a payment link id of this gateway (no network round trip)').optional(),
};

const oneTarget = (v: { url?: string | undefined; payment_link?: string | undefined }) => [v.url, v.payment_link].filter((x) => x !== undefined).length === 1;
const ONE_TARGET = { message: 'Give exactly one of url or payment_link', path: ['url'] };

export const QuoteInput = z
  .strictObject({
    ...QuoteTarget,
    method: z.enum(['GET', 'POST', 'PUT', 'PATCH', 'DELETE']).describe('the method the resource is called with; default GET').optional(),
  })
  .refine(oneTarget, ONE_TARGET);
export type QuoteInput = z.input<typeof QuoteInput>;

/** The MPP side of an option (kind "mpp"): the challenge a buyer answers; null fields for a link resolved locally. */
export const MppOfferInfo = z
  .object({
    method: z.string().describe('MPP method, e.g. solana'),
    intent: z.string().describe('MPP intent, e.g. charge'),
    challenge_id: z.string().nullable().describe('the challenge id (HMAC-bound, valid until expires); null when the offer was resolved without a probe'),
    realm: z.string().nullable().describe('the challenge realm; null when not probed'),
    expires: z.string().nullable().describe('ISO 8601 expiry of the challenge; null when not probed'),
  })
  .describe('The MPP challenge of an mpp option.');

/** One way to pay: kind "x402" (v1 or v2, scheme "exact") or "mpp" (a Solana charge challenge, fee-facilitator-mpp-tools §4.2). */
export const QuoteOption = z
  .object({
    kind: z.enum(['x402', 'mpp']).describe('x402 or mpp'),
    x402_version: z.number().int().nullable().describe('x402 only; null for an MPP offer'),
    scheme: z.string().describe("the x402 scheme, 'exact'"),
    network: Network.nullable().describe('our network name; null for a network the gateway does not serve'),
    network_id: z.string().describe('the network as offered, e.g. "solana:EtWT…" or "solana-devnet"'),
    currency: StableSymbol.nullable().describe("the curated stable's symbol; null for another mint"),
    asset: z.string().describe('the token mint'),
    decimals: z.number().int().nullable().describe('the mint’s decimals; null for an unknown mint'),
    pay_to: z.string().describe('the seller’s payTo'),
    net: z.string().nullable().describe('what the seller receives (the seller leg), decimal and atomic'),
    net_atomic: z.string().describe('the price in atomic units, decimal string'),
    fee: z.string().nullable().describe('the protocol fee leg the offer asks for on top (extra["svc.fee"]); "0" without one'),
    fee_atomic: z.string().describe('the protocol fee in atomic units, decimal string'),
    gross: z.string().nullable().describe('what the buyer pays: net + fee'),
    gross_atomic: z.string().describe('net + fee in atomic units: what the buyer signs'),
    fee_bps: z.number().int().describe('fee rate in basis points'),
    fee_authority: z.string().nullable().describe('the fee authority; null without a fee'),
    fee_payer: z.string().nullable().describe("the facilitator's fee payer (extra.feePayer)"),
    max_timeout_seconds: z.number().int().nullable().describe('seconds the offer stays valid; null when not said'),
    payable: z.boolean().describe("this gateway can pay it for the caller: on the caller's network, a curated stable"),
    mpp: MppOfferInfo.nullable().default(null).describe('kind "mpp": the challenge; null for x402'),
  })
  .describe('One way to pay the resource (fee-facilitator-mpp-tools §4.2).');
export type QuoteOption = z.infer<typeof QuoteOption>;

export const SellerIdentity = z
  .object({
    verdict: Verdict.describe('allow, warn or deny'),
    score: z.number().int().describe('0–100'),
    checks: z.array(IdentityCheck).describe('the identity checks'),
  })
  .describe('The seller agent’s identity verdict.');
export type SellerIdentity = z.infer<typeof SellerIdentity>;

export const Quote = z
  .object({
    source: z
      .enum(['url', 'payment_link', 'direct'])
      .describe('where the quote came from: "url" (probed), "payment_link" (resolved locally), "direct" (execute\'s pay_to, amount, currency)'),
    url: z.string().nullable().describe('null for a direct payment (no resource)'),
    method: z.string().describe('the HTTP method'),
    domain: z.string().nullable().describe('the host of url, what allowed_domains is matched against; null without a url'),
    payment_link: z.string().nullable().describe('the payment link id; null otherwise'),
    resource: z
      .object({
        url: z.string().describe('the resource URL the offer names'),
        description: z.string().nullable().describe('the offer’s description; null when none'),
        mime_type: z.string().nullable().describe('the offer’s MIME type; null when none'),
      })
      .nullable()
      .describe('the resource as the 402 offer describes it; null without one'),
    options: z.array(QuoteOption).max(64).describe('the ways to pay'),
    seller: z
      .object({
        pay_to: z.string().nullable().describe('the pay_to of the payable options (an agent treasury for a gateway seller)'),
        agent: z.string().nullable().describe("the recorded agent whose treasury pay_to is; null when pay_to is nobody's treasury here"),
        identity: SellerIdentity.nullable().describe('POST /v1/identity/verify of that agent; null without one'),
      })
      .describe('who is paid'),
    quoted_at: z.string().describe('ISO 8601 time of the quote'),
  })
  .describe('What paying a URL or payment link costs.');
export type Quote = z.infer<typeof Quote>;

// ---- spend policy -------------------------------------------------------------------------------------------------

export const VERDICT_RANK: Record<Verdict, number> = { deny: 0, warn: 1, allow: 2 };

export const SpendLimit = z
  .strictObject({
    currency: StableSymbol,
    per_call: WholeUnits.describe('the most one call may cost (gross: net + fee), whole units, e.g. "0.50"').optional(),
    daily: WholeUnits.describe('the most the agent may spend per UTC day (gross), whole units').optional(),
  })
  .describe('A per-currency spend limit.');
export type SpendLimit = z.infer<typeof SpendLimit>;

/** PUT /v1/buyer/policy: the whole policy of a buyer agent (a field left out means "no rule"). */
export const PutPolicyInput = z
  .strictObject({
    agent: Address.describe('the buyer agent’s mint'),
    limits: z.array(SpendLimit).max(8).describe('per stable; a stable not listed is not limited by amount').optional(),
    allowed_sellers: z.array(Address).max(256).describe('agent mints or pay_to addresses the agent may pay; absent: any').optional(),
    allowed_domains: z
      .array(
        z
          .string()
          .min(1)
          .max(260)
          .regex(/^(\*\.)?[a-z0-9.:-]+$/, 'Expected a lower-case host, optionally "*." first'),
      )
      .max(256)
      .describe('hosts the agent may pay (exact, or "*.example.com" for subdomains); absent: any')
      .optional(),
    min_identity_verdict: z
      .enum(['allow', 'warn'])
      .describe('the seller\'s identity verdict must be at least this ("warn" admits warn and allow); absent: any')
      .optional(),
  })
  .superRefine((p, ctx) => {
    const seen = new Set<string>();
    for (const [i, l] of (p.limits ?? []).entries()) {
      if (seen.has(l.currency)) ctx.addIssue({ code: 'custom', path: ['limits', i, 'currency'], message: `${l.currency} is listed twice` });
      seen.add(l.currency);
    }
  })
  .describe('The whole spend policy of a buyer agent: limits, allowed sellers and domains, minimum seller identity verdict.');
export type PutPolicyInput = z.input<typeof PutPolicyInput>;

export const SpendPolicy = z
  .object({
    agent: z.string().describe('the buyer agent’s mint'),
    network: Network,
    limits: z
      .array(
        z.object({
          currency: StableSymbol,
          per_call: z.string().nullable().describe('largest gross per payment, whole units; null: none'),
          daily: z.string().nullable().describe('largest gross per UTC day, whole units; null: none'),
        }),
      )
      .describe('per-currency limits'),
    allowed_sellers: z.array(z.string()).nullable().describe('only these payTo addresses; null: any'),
    allowed_domains: z.array(z.string()).nullable().describe('only these hosts; null: any'),
    min_identity_verdict: z.enum(['allow', 'warn']).nullable().describe('the lowest seller identity verdict accepted; null: any'),
    updated_at: z.string().describe('ISO 8601 time of the last change'),
  })
  .describe('A buyer agent’s spend policy.');
export type SpendPolicy = z.infer<typeof SpendPolicy>;

export const AgentInput = z.object({ agent: Address.describe('the buyer agent’s mint') });
export type AgentInput = z.input<typeof AgentInput>;

/** POST /v1/buyer/policy/evaluate: a quote already made, or a target to quote now. */
export const EvaluateInput = z
  .strictObject({
    agent: Address.describe('the buyer agent’s mint'),
    quote: Quote.describe('a quote from POST /v1/buyer/quote; else url or payment_link is quoted first').optional(),
    ...QuoteTarget,
    currency: StableSymbol.describe('evaluate only the option in this stable; default every payable option, the first allowed one is chosen').optional(),
  })
  .refine((v) => [v.quote, v.url, v.payment_link].filter((x) => x !== undefined).length === 1, {
    message: 'Give exactly one of quote, url or payment_link',
    path: ['quote'],
  });
export type EvaluateInput = z.input<typeof EvaluateInput>;

export const RuleResult = z
  .object({
    rule: z.string().describe('per_call_max | daily_cap | allowed_sellers | allowed_domains | min_identity_verdict | payable_option | policy'),
    ok: z.boolean().describe('whether it passed'),
    detail: z.string().describe('the finding in words'),
    currency: StableSymbol.nullable().describe('the currency it is about; null when none'),
  })
  .describe('One rule of a spend policy evaluation.');
export type RuleResult = z.infer<typeof RuleResult>;

export const Evaluation = z
  .object({
    decision: z.enum(['allow', 'deny']).describe('allow or deny'),
    reasons: z.array(z.string()).describe("why it was denied (each failed rule's detail); empty when allowed"),
    checks: z.array(RuleResult).describe('each rule and its outcome'),
    option: QuoteOption.nullable().describe('the option the decision is about: the first allowed one, else the first evaluated; null without a payable one'),
    spent_today: z
      .array(z.object({ currency: StableSymbol, gross_atomic: z.string().describe('atomic units, decimal string') }))
      .describe('what the agent spent today per stable, gross atomic, as the daily cap read it'),
    in_flight: z
      .array(z.object({ currency: StableSymbol, gross_atomic: z.string().describe('atomic units, decimal string') }))
      .describe('payments of the agent prepared or submitted and not landed yet, per stable, gross atomic: the daily cap counts them too'),
    quote: Quote.describe('the quote evaluated'),
  })
  .describe('The spend policy’s answer for one payment.');
export type Evaluation = z.infer<typeof Evaluation>;

// ---- execute ------------------------------------------------------------------------------------------------------

/** POST /v1/buyer/payment/execute: the body of buyer/payment/prepare, evaluated against the agent's policy first. */
export const ExecuteInput = PrepareBuyerPaymentInput;
export type ExecuteInput = z.input<typeof ExecuteInput>;

export const ExecuteResult = z
  .object({
    decision: z.literal('allow').describe("'allow': a refusal is an error instead"),
    checks: z.array(RuleResult).describe('each rule and its outcome'),
    prepared: PreparedEnvelope.describe('sign it client-side and send it to POST /v1/submit'),
  })
  .describe('The allowed payment, prepared.');
export type ExecuteResult = z.infer<typeof ExecuteResult>;

// ---- receipts -----------------------------------------------------------------------------------------------------

const Signature = z.string().regex(/^[1-9A-HJ-NP-Za-km-z]{64,88}$/, 'Expected a base58 transaction signature');

/** POST /v1/buyer/receipt/finalize: the paid response's settlement, recorded as the agent's spend receipt. */
export const FinalizeInput = z
  .strictObject({
    agent: Address.describe('the buyer agent’s mint'),
    signature: Signature.describe("the settlement transaction's signature").optional(),
    payment_response: z
      .string()
      .min(1)
      .max(4096)
      .describe('or the PAYMENT-RESPONSE / X-PAYMENT-RESPONSE header of the paid response as received (base64 JSON)')
      .optional(),
    request: z
      .strictObject({
        method: z.string().min(1).max(16).describe('HTTP method'),
        url: z.string().min(1).max(4096).describe('URL'),
        body_hash: ReceiptHash.describe('lowercase hex SHA-256 of the body').optional(),
      })
      .describe('the paid request, for the receipt')
      .optional(),
    response: z
      .strictObject({
        status: z.number().int().min(100).max(599).describe('HTTP status'),
        body_hash: ReceiptHash.describe('lowercase hex SHA-256 of the body').optional(),
      })
      .describe('the paid response, for the receipt')
      .optional(),
  })
  .refine((v) => [v.signature, v.payment_response].filter((x) => x !== undefined).length === 1, {
    message: 'Give exactly one of signature or payment_response',
    path: ['signature'],
  })
  .describe('A paid response to record as the buyer agent’s spend receipt: its settlement signature or PAYMENT-RESPONSE header.');
export type FinalizeInput = z.input<typeof FinalizeInput>;

export const FinalizeResult = z
  .object({
    recorded: z.boolean().describe('false when the settlement already had its spend receipt (this call recorded nothing)'),
    receipt: StoredReceiptOutput.describe('the spend receipt'),
  })
  .describe('The buyer’s spend receipt.');
export type FinalizeResult = z.infer<typeof FinalizeResult>;

/** POST /v1/buyer/receipt/verify: a stored receipt by hash, or a receipt body (checked against the stored chain). */
export const VerifyReceiptInput = z
  .strictObject({
    receipt_hash: ReceiptHash.describe('a stored receipt’s hash').optional(),
    receipt: Receipt.describe('a receipt document to check').optional(),
  })
  .refine((v) => [v.receipt_hash, v.receipt].filter((x) => x !== undefined).length === 1, {
    message: 'Give exactly one of receipt_hash or receipt',
    path: ['receipt_hash'],
  });
export type VerifyReceiptInput = z.input<typeof VerifyReceiptInput>;

export const ReceiptCheckResult = z.object({
  name: z.string().describe('what was checked'),
  ok: z.boolean().describe('whether it passed'),
  detail: z.string().describe('the finding in words'),
});

export const VerifyReceiptResult = z
  .object({
    ok: z.boolean().describe('every check passed'),
    receipt_hash: z.string().describe('the receipt’s hash'),
    agent: z.string().describe('the receipt’s agent'),
    nonce: z.number().int().describe('the receipt’s nonce'),
    checks: z
      .array(ReceiptCheckResult)
      .describe(
        "hash: canonical hash matches · stored: on this network's chain · chain_position: prev link and next link agree · settlement: the ledger shows the money moved",
      ),
    settlement: z
      .enum(['verified', 'mismatch', 'pending', 'not_applicable'])
      .describe('verified | mismatch | pending | not_applicable: the ledger check of the settlement'),
  })
  .describe('The checks of one receipt.');
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
