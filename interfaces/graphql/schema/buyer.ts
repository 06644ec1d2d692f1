import {
  Evaluation,
  SellerIdentity,
  SpendLimit,
  QuoteOption,
  Quote,
  SpendPolicy,
  BuyerCurrencies,
  NetworkCatalogue,
  type EvaluateInput,
  type ExecuteInput,
  ExecuteResult,
  FacilitatorInfo,
  FinalizeInput,
  FinalizeResult,
  PutPolicyInput,
  RuleResult,
  StableInfo,
  VerifyReceiptResult,
} from '../../../domain/buyer/schema.ts';
import { builder } from '../builder.ts';
import { fromZod, procedure } from '../describe.ts';
import { HttpMethod } from '../../../domain/payment-links/schema.ts';
import { TokenProgram } from '../../../domain/treasury/schema.ts';
import {
  graphqlEnum,
  HttpMethodEnum,
  IdentityVerdictEnum,
  NetworkEnum,
  StableSymbolEnum,
  TokenProgramEnum,
  VerificationStatusEnum,
  wireValue,
} from '../enums.ts';
import { given, JsonScalar, toDomainInput, type Assert, type SameKeys } from './common.ts';
import { ReceiptRef } from './receipts.ts';
import { PreparedEnvelopeRef } from './transactions.ts';

// hosted-api §4.8 "Buyer": the same procedures as REST (ctx.api.buyer.*, ctx.api.seller.facilitator).
// Amounts are decimal strings; bodies that are a REST body (execute, a quote given back) travel as JSON, checked by the
// same zod schemas.

const QuoteOptionKindEnum = graphqlEnum('QuoteOptionKind', QuoteOption.shape.kind);
const QuoteSourceEnum = graphqlEnum('QuoteSource', Quote.shape.source, {
  description: 'URL (probed), PAYMENT_LINK (resolved locally), DIRECT (execute’s payTo, amount, currency)',
});
const SpendDecisionEnum = graphqlEnum('SpendDecision', Evaluation.shape.decision);
const MinIdentityVerdictEnum = graphqlEnum('MinIdentityVerdict', SpendPolicy.shape.min_identity_verdict.unwrap(), {
  description: 'The seller identity verdict a spend needs at least (WARN admits WARN and ALLOW).',
});

const StableRef = builder.objectRef<StableInfo>('BuyerStable').implement({
  extensions: fromZod(StableInfo),
  fields: (t) => ({
    symbol: t.expose('symbol', { type: StableSymbolEnum }),
    mint: t.exposeString('mint'),
    decimals: t.exposeInt('decimals'),
    tokenProgram: t.field({ type: TokenProgramEnum, resolve: (s) => wireValue(TokenProgram, s.token_program) }),
    tokenProgramId: t.exposeString('token_program_id'),
  }),
});

type CatalogueNetwork = NetworkCatalogue['data'][number];
const ProtocolFeeRef = builder.objectRef<CatalogueNetwork['protocol_fee']>('BuyerProtocolFee').implement({
  extensions: fromZod(NetworkCatalogue.shape.data.element.shape.protocol_fee),
  fields: (t) => ({ bps: t.exposeInt('bps'), pct: t.exposeString('pct'), authority: t.exposeString('authority') }),
});

const BuyerNetworkRef = builder.objectRef<CatalogueNetwork>('BuyerNetwork').implement({
  extensions: fromZod(NetworkCatalogue.shape.data.element),
  fields: (t) => ({
    network: t.expose('network', { type: NetworkEnum }),
    caip2: t.exposeString('caip2'),
    x402Network: t.exposeString('x402_network'),
    current: t.exposeBoolean('current'),
    rails: t.exposeStringList('rails'),
    facilitator: t.exposeString('facilitator'),
    protocolFee: t.expose('protocol_fee', { type: ProtocolFeeRef }),
    stables: t.expose('stables', { type: [StableRef] }),
  }),
});

const BuyerCurrenciesRef = builder.objectRef<BuyerCurrencies>('BuyerCurrencies').implement({
  extensions: fromZod(BuyerCurrencies),
  fields: (t) => ({ network: t.expose('network', { type: NetworkEnum }), data: t.expose('data', { type: [StableRef] }) }),
});

type FacilitatorNetwork = FacilitatorInfo['networks'][number];
const FacilitatorNetworkRef = builder.objectRef<FacilitatorNetwork>('FacilitatorNetwork').implement({
  extensions: fromZod(FacilitatorInfo.shape.networks.element),
  fields: (t) => ({
    network: t.expose('network', { type: NetworkEnum }),
    caip2: t.exposeString('caip2'),
    feePayer: t.exposeString('fee_payer', { nullable: true }),
    supported: t.exposeBoolean('supported'),
  }),
});

const FacilitatorInfoRef = builder.objectRef<FacilitatorInfo>('FacilitatorInfo').implement({
  extensions: fromZod(FacilitatorInfo),
  description: 'GET /v1/seller/facilitator',
  fields: (t) => ({
    url: t.exposeString('url'),
    networks: t.expose('networks', { type: [FacilitatorNetworkRef] }),
    health: t.expose('health', { type: JsonScalar, nullable: true, description: 'the facilitator’s GET /health; null when it did not answer' }),
    healthError: t.exposeString('health_error', { nullable: true }),
  }),
});

const QuoteOptionRef = builder.objectRef<QuoteOption>('QuoteOption').implement({
  extensions: fromZod(QuoteOption),
  description: 'One way to pay (kind x402 or mpp); net + fee = gross, decimal strings and atomic strings.',
  fields: (t) => ({
    kind: t.expose('kind', { type: QuoteOptionKindEnum }),
    x402Version: t.exposeInt('x402_version', { nullable: true }),
    scheme: t.exposeString('scheme'),
    network: t.expose('network', { type: NetworkEnum, nullable: true }),
    networkId: t.exposeString('network_id'),
    currency: t.expose('currency', { type: StableSymbolEnum, nullable: true }),
    asset: t.exposeString('asset'),
    decimals: t.exposeInt('decimals', { nullable: true }),
    payTo: t.exposeString('pay_to'),
    net: t.exposeString('net', { nullable: true }),
    netAtomic: t.exposeString('net_atomic'),
    fee: t.exposeString('fee', { nullable: true }),
    feeAtomic: t.exposeString('fee_atomic'),
    gross: t.exposeString('gross', { nullable: true }),
    grossAtomic: t.exposeString('gross_atomic'),
    feeBps: t.exposeInt('fee_bps'),
    feeAuthority: t.exposeString('fee_authority', { nullable: true }),
    feePayer: t.exposeString('fee_payer', { nullable: true }),
    maxTimeoutSeconds: t.exposeInt('max_timeout_seconds', { nullable: true }),
    payable: t.exposeBoolean('payable'),
    mppChallengeId: t.string({
      nullable: true,
      description: 'kind mpp: the challenge id (null when resolved without a probe)',
      resolve: (o) => o.mpp?.challenge_id ?? null,
    }),
    mppExpires: t.string({ nullable: true, description: 'kind mpp: when the challenge expires', resolve: (o) => o.mpp?.expires ?? null }),
  }),
});

type Seller = Quote['seller'];
const SellerIdentityRef = builder.objectRef<NonNullable<Seller['identity']>>('QuoteSellerIdentity').implement({
  extensions: fromZod(SellerIdentity),
  fields: (t) => ({
    verdict: t.expose('verdict', { type: IdentityVerdictEnum }),
    score: t.exposeInt('score'),
    checks: t.field({ type: 'JSON', resolve: (i) => i.checks }),
  }),
});

const SellerRef = builder.objectRef<Seller>('QuoteSeller').implement({
  extensions: fromZod(Quote.shape.seller),
  fields: (t) => ({
    payTo: t.exposeString('pay_to', { nullable: true }),
    agent: t.exposeString('agent', { nullable: true }),
    identity: t.expose('identity', { type: SellerIdentityRef, nullable: true }),
  }),
});

const QuoteRef = builder.objectRef<Quote>('Quote').implement({
  extensions: fromZod(Quote),
  description: 'POST /v1/buyer/quote',
  fields: (t) => ({
    source: t.expose('source', { type: QuoteSourceEnum }),
    url: t.exposeString('url', { nullable: true }),
    method: t.field({ type: HttpMethodEnum, resolve: (q) => wireValue(HttpMethod, q.method) }),
    domain: t.exposeString('domain', { nullable: true }),
    paymentLink: t.exposeString('payment_link', { nullable: true }),
    resource: t.expose('resource', { type: JsonScalar, nullable: true }),
    options: t.expose('options', { type: [QuoteOptionRef] }),
    seller: t.expose('seller', { type: SellerRef }),
    quotedAt: t.exposeString('quoted_at'),
    raw: t.field({ type: JsonScalar, description: 'the quote as REST answers it: give it back to evaluateSpendPolicy(quote:)', resolve: (q) => q }),
  }),
});

const RuleResultRef = builder.objectRef<RuleResult>('SpendRuleResult').implement({
  extensions: fromZod(RuleResult),
  fields: (t) => ({
    rule: t.exposeString('rule'),
    ok: t.exposeBoolean('ok'),
    detail: t.exposeString('detail'),
    currency: t.expose('currency', { type: StableSymbolEnum, nullable: true }),
  }),
});

type Limit = SpendPolicy['limits'][number];
const LimitRef = builder.objectRef<Limit>('SpendLimit').implement({
  extensions: fromZod(SpendPolicy.shape.limits.element),
  fields: (t) => ({
    currency: t.expose('currency', { type: StableSymbolEnum }),
    perCall: t.exposeString('per_call', { nullable: true }),
    daily: t.exposeString('daily', { nullable: true }),
  }),
});

const SpendPolicyRef = builder.objectRef<SpendPolicy>('SpendPolicy').implement({
  extensions: fromZod(SpendPolicy),
  description: 'GET /v1/buyer/policy',
  fields: (t) => ({
    agent: t.exposeString('agent'),
    network: t.expose('network', { type: NetworkEnum }),
    limits: t.expose('limits', { type: [LimitRef] }),
    allowedSellers: t.exposeStringList('allowed_sellers', { nullable: true }),
    allowedDomains: t.exposeStringList('allowed_domains', { nullable: true }),
    minIdentityVerdict: t.expose('min_identity_verdict', { type: MinIdentityVerdictEnum, nullable: true }),
    updatedAt: t.exposeString('updated_at'),
  }),
});

type Spent = Evaluation['spent_today'][number];
const SpentRef = builder.objectRef<Spent>('SpentToday').implement({
  extensions: fromZod(Evaluation.shape.spent_today.element),
  fields: (t) => ({ currency: t.expose('currency', { type: StableSymbolEnum }), grossAtomic: t.exposeString('gross_atomic') }),
});

const EvaluationRef = builder.objectRef<Evaluation>('SpendEvaluation').implement({
  extensions: fromZod(Evaluation),
  description: 'POST /v1/buyer/policy/evaluate',
  fields: (t) => ({
    decision: t.expose('decision', { type: SpendDecisionEnum }),
    reasons: t.exposeStringList('reasons'),
    checks: t.expose('checks', { type: [RuleResultRef] }),
    option: t.expose('option', { type: QuoteOptionRef, nullable: true }),
    spentToday: t.expose('spent_today', { type: [SpentRef] }),
    inFlight: t.expose('in_flight', { type: [SpentRef], description: 'payments prepared or submitted, not landed yet: the daily cap counts them' }),
    quote: t.expose('quote', { type: QuoteRef }),
  }),
});

const ExecuteResultRef = builder.objectRef<ExecuteResult>('BuyerExecuteResult').implement({
  extensions: fromZod(ExecuteResult),
  description: 'POST /v1/buyer/payment/execute',
  fields: (t) => ({
    decision: t.expose('decision', { type: SpendDecisionEnum }),
    checks: t.expose('checks', { type: [RuleResultRef] }),
    prepared: t.expose('prepared', { type: PreparedEnvelopeRef }),
  }),
});

const FinalizeResultRef = builder.objectRef<FinalizeResult>('BuyerFinalizeResult').implement({
  extensions: fromZod(FinalizeResult),
  description: 'POST /v1/buyer/receipt/finalize',
  fields: (t) => ({ recorded: t.exposeBoolean('recorded'), receipt: t.expose('receipt', { type: ReceiptRef }) }),
});

type ReceiptCheck = VerifyReceiptResult['checks'][number];
const ReceiptCheckRef = builder.objectRef<ReceiptCheck>('BuyerReceiptCheck').implement({
  extensions: fromZod(VerifyReceiptResult.shape.checks.element),
  fields: (t) => ({ name: t.exposeString('name'), ok: t.exposeBoolean('ok'), detail: t.exposeString('detail') }),
});

const VerifyReceiptResultRef = builder.objectRef<VerifyReceiptResult>('BuyerReceiptVerification').implement({
  extensions: fromZod(VerifyReceiptResult),
  description: 'POST /v1/buyer/receipt/verify',
  fields: (t) => ({
    ok: t.exposeBoolean('ok'),
    receiptHash: t.exposeString('receipt_hash'),
    agent: t.exposeString('agent'),
    nonce: t.exposeInt('nonce'),
    checks: t.expose('checks', { type: [ReceiptCheckRef] }),
    settlement: t.expose('settlement', { type: VerificationStatusEnum }),
  }),
});

const LimitInputRef = builder.inputType('SpendLimitInput', {
  extensions: fromZod(SpendLimit),
  fields: (t) => ({ currency: t.field({ type: StableSymbolEnum, required: true }), perCall: t.string(), daily: t.string() }),
});

const PolicyInputRef = builder.inputType('SpendPolicyInput', {
  extensions: fromZod(PutPolicyInput),
  fields: (t) => ({
    agent: t.string({ required: true }),
    limits: t.field({ type: [LimitInputRef] }),
    allowedSellers: t.stringList(),
    allowedDomains: t.stringList(),
    minIdentityVerdict: t.field({ type: MinIdentityVerdictEnum }),
  }),
});
export type PolicyInputInSync = Assert<SameKeys<typeof PolicyInputRef.$inferInput, PutPolicyInput>>;

const FinalizeInputRef = builder.inputType('BuyerFinalizeInput', {
  extensions: fromZod(FinalizeInput),
  fields: (t) => ({
    agent: t.string({ required: true }),
    signature: t.string(),
    paymentResponse: t.string(),
    request: t.field({ type: JsonScalar }),
    response: t.field({ type: JsonScalar }),
  }),
});
export type FinalizeInputInSync = Assert<SameKeys<typeof FinalizeInputRef.$inferInput, FinalizeInput>>;

builder.queryFields((t) => ({
  buyerNetworks: t.field({
    extensions: procedure('buyer.networks'),
    type: [BuyerNetworkRef],
    description: 'GET /v1/buyer/networks',
    resolve: async (_root, _args, ctx) => (await ctx.api.buyer.networks()).data,
  }),
  buyerCurrencies: t.field({
    extensions: procedure('buyer.currency'),
    type: BuyerCurrenciesRef,
    description: 'GET /v1/buyer/currency',
    resolve: (_root, _args, ctx) => ctx.api.buyer.currency(),
  }),
  spendPolicy: t.field({
    extensions: procedure('buyer.policy'),
    type: SpendPolicyRef,
    nullable: true,
    description: 'GET /v1/buyer/policy',
    args: { agent: t.arg.string({ required: true }) },
    resolve: (_root, args, ctx) => ctx.api.buyer.policy({ agent: args.agent }),
  }),
  sellerFacilitator: t.field({
    extensions: procedure('seller.facilitator'),
    type: FacilitatorInfoRef,
    description: 'GET /v1/seller/facilitator',
    resolve: (_root, _args, ctx) => ctx.api.seller.facilitator(),
  }),
}));

builder.mutationFields((t) => ({
  buyerQuote: t.field({
    extensions: procedure('buyer.quote'),
    type: QuoteRef,
    nullable: true,
    description: 'POST /v1/buyer/quote: exactly one of url, paymentLink',
    args: { url: t.arg.string(), paymentLink: t.arg.string(), method: t.arg({ type: HttpMethodEnum }) },
    resolve: (_root, args, ctx) => ctx.api.buyer.quote({ url: given(args.url), payment_link: given(args.paymentLink), method: given(args.method) }),
  }),
  setSpendPolicy: t.field({
    extensions: procedure('buyer.putPolicy'),
    type: SpendPolicyRef,
    nullable: true,
    description: 'PUT /v1/buyer/policy',
    args: { input: t.arg({ type: PolicyInputRef, required: true }) },
    resolve: (_root, { input }, ctx) => {
      const body = toDomainInput(input);
      if (Array.isArray(body.limits)) body.limits = body.limits.map((l: Record<string, unknown>) => toDomainInput(l));
      return ctx.api.buyer.putPolicy(body as PutPolicyInput);
    },
  }),
  evaluateSpendPolicy: t.field({
    extensions: procedure('buyer.evaluate'),
    type: EvaluationRef,
    nullable: true,
    description: 'POST /v1/buyer/policy/evaluate: exactly one of quote (as REST answers it: Quote.raw), url, paymentLink',
    args: {
      agent: t.arg.string({ required: true }),
      quote: t.arg({ type: JsonScalar }),
      url: t.arg.string(),
      paymentLink: t.arg.string(),
      currency: t.arg({ type: StableSymbolEnum }),
    },
    resolve: (_root, args, ctx) =>
      ctx.api.buyer.evaluate({
        agent: args.agent,
        quote: given(args.quote) as EvaluateInput['quote'],
        url: given(args.url),
        payment_link: given(args.paymentLink),
        currency: given(args.currency),
      }),
  }),
  executeBuyerPayment: t.field({
    extensions: procedure('buyer.execute'),
    type: ExecuteResultRef,
    nullable: true,
    description: 'POST /v1/buyer/payment/execute: `input` is the REST body (snake_case), checked by the same schema',
    args: { input: t.arg({ type: JsonScalar, required: true }) },
    resolve: (_root, { input }, ctx) => ctx.api.buyer.execute(input as ExecuteInput),
  }),
  finalizeBuyerReceipt: t.field({
    extensions: procedure('buyer.finalize'),
    type: FinalizeResultRef,
    nullable: true,
    description: 'POST /v1/buyer/receipt/finalize',
    args: { input: t.arg({ type: FinalizeInputRef, required: true }) },
    resolve: (_root, { input }, ctx) => ctx.api.buyer.finalize(toDomainInput(input) as FinalizeInput),
  }),
  verifyBuyerReceipt: t.field({
    extensions: procedure('buyer.verifyReceipt'),
    type: VerifyReceiptResultRef,
    nullable: true,
    description: 'POST /v1/buyer/receipt/verify: exactly one of receiptHash, receipt',
    args: { receiptHash: t.arg.string(), receipt: t.arg({ type: JsonScalar }) },
    resolve: (_root, args, ctx) => ctx.api.buyer.verifyReceipt({ receipt_hash: given(args.receiptHash), receipt: given(args.receipt) as never }),
  }),
}));
