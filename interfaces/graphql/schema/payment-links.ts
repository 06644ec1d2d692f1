import {
  AcceptEntry as AcceptEntrySchema,
  Counters,
  CreatePaymentLinkInput as CreatePaymentLinkInputSchema,
  LinkResponse,
  PaymentLinkWithSecret as PaymentLinkSchema,
  SettlePolicy,
  RequestBinding,
  UpdatePaymentLinkInput as UpdatePaymentLinkInputSchema,
  type AcceptEntry,
  type CreatePaymentLinkInput,
  type PaymentLink,
  type PaymentLinkWithSecret,
  type UpdatePaymentLinkInput,
} from '../../../domain/payment-links/schema.ts';
import { builder } from '../builder.ts';
import { graphqlEnum, HttpMethodEnum, NetworkEnum, ProtocolEnum, StableSymbolEnum } from '../enums.ts';
import { fromZod, procedure } from '../describe.ts';
import { pageRef, toDomainInput, given, type Assert, type KeysMatch, type SameKeys } from './common.ts';

// hosted-api §2: payment links. Fields mirror the PaymentLink wire type in camelCase; every resolver calls the same
// procedure as the REST route (ctx.api), which calls PaymentLinkService.

export { HttpMethodEnum, ProtocolEnum };
export const SettlePolicyEnum = graphqlEnum('SettlePolicy', SettlePolicy);
export const RequestBindingEnum = graphqlEnum('RequestBinding', RequestBinding);

const LinkResponseRef = builder.objectRef<PaymentLink['response']>('LinkResponse').implement({
  description: 'What the link answers once paid (hosted-api §2.1).',
  extensions: fromZod(PaymentLinkSchema.shape.response),
  fields: (t) => ({
    status: t.exposeInt('status'),
    mimeType: t.exposeString('mimeType'),
    body: t.expose('body', { type: 'JSON' }),
  }),
});

const AcceptEntryRef = builder.objectRef<AcceptEntry>('AcceptEntry').implement({
  description: 'One x402 payment option (hosted-api §2.3). Amounts are atomic decimal strings.',
  extensions: fromZod(AcceptEntrySchema),
  fields: (t) => ({
    scheme: t.exposeString('scheme'),
    network: t.exposeString('network', { description: 'The x402 network id as the offer carries it (CAIP-2), not a Network.' }),
    payTo: t.exposeString('pay_to', { description: 'The x402 payTo: the owner agent’s treasury.' }),
    payToTokenAccount: t.exposeString('pay_to_token_account', { description: 'The account the seller leg credits: ATA(payTo, asset).' }),
    payToReady: t.exposeBoolean('pay_to_ready', {
      nullable: true,
      description: 'Whether payToTokenAccount exists (stock x402 clients need it): set by the call that prepared it, null on reads.',
    }),
    asset: t.exposeString('asset'),
    amount: t.exposeString('amount'),
    currency: t.expose('currency', { type: StableSymbolEnum }),
  }),
});

const CountersRef = builder.objectRef<PaymentLink['counters']>('PaymentLinkCounters').implement({
  extensions: fromZod(Counters),
  fields: (t) => ({
    callCount: t.exposeInt('call_count'),
    settledCount: t.exposeInt('settled_count'),
    lastCalledAt: t.exposeString('last_called_at', { nullable: true }),
    lastSettledAt: t.exposeString('last_settled_at', { nullable: true }),
    lastTxSig: t.exposeString('last_tx_sig', { nullable: true }),
  }),
});

// One GraphQL type for reads and for the answers that may carry a new secret (create, update, rotate).
export const PaymentLinkRef = builder.objectRef<PaymentLinkWithSecret>('PaymentLink').implement({
  description: 'A paid HTTP endpoint answering 402 until paid (hosted-api §2.2).',
  extensions: fromZod(PaymentLinkSchema),
  fields: (t) => ({
    id: t.exposeID('id'),
    network: t.expose('network', { type: NetworkEnum }),
    label: t.exposeString('label'),
    ownerAgent: t.exposeString('owner_agent'),
    payTo: t.exposeString('pay_to', { description: 'The x402 payTo: the owner agent’s treasury (as in accepts).' }),
    payToTokenAccount: t.exposeString('pay_to_token_account', { description: 'The account the primary currency’s seller leg credits: ATA(payTo, asset).' }),
    method: t.expose('method', { type: HttpMethodEnum }),
    path: t.exposeString('path'),
    price: t.exposeString('price'),
    currency: t.expose('currency', { type: StableSymbolEnum }),
    acceptsCurrencies: t.expose('accepts_currencies', { type: [StableSymbolEnum] }),
    protocol: t.expose('protocol', { type: ProtocolEnum }),
    response: t.expose('response', { type: LinkResponseRef }),
    webhookUrl: t.exposeString('webhook_url', { nullable: true }),
    webhookSecretSet: t.exposeBoolean('webhook_secret_set', { description: 'A webhook signing secret exists (it is shown once, when made).' }),
    webhookSecret: t.string({
      nullable: true,
      description:
        'whsec_…: verifies the X-Svc-Signature of this link’s webhook POSTs. Only in the answer of the mutation that made it ' +
        '(createPaymentLink, an updatePaymentLink setting a first webhookUrl, rotatePaymentLinkWebhookSecret); null on reads.',
      resolve: (link) => link.webhook_secret ?? null,
    }),
    wrapReceipt: t.exposeBoolean('wrap_receipt'),
    settlePolicy: t.expose('settle_policy', { type: SettlePolicyEnum }),
    accessWindow: t.exposeString('access_window', { nullable: true }),
    requestBinding: t.expose('request_binding', { type: RequestBindingEnum }),
    disabled: t.exposeBoolean('disabled'),
    facilitator: t.exposeString('facilitator'),
    shareUrl: t.exposeString('share_url'),
    accepts: t.expose('accepts', { type: [AcceptEntryRef] }),
    counters: t.expose('counters', { type: CountersRef }),
    metadata: t.expose('metadata', { type: 'JSON' }),
    createdAt: t.exposeString('created_at'),
    updatedAt: t.exposeString('updated_at'),
  }),
});

const PaymentLinkPageRef = pageRef('PaymentLinkPage', PaymentLinkRef);

// Inputs are declared (Pothos does not derive them from zod) and checked against the domain inputs below; the values
// are validated once, by the procedure's zod input schema, as for REST and tRPC.

const LinkResponseInput = builder.inputType('LinkResponseInput', {
  extensions: fromZod(LinkResponse),
  fields: (t) => ({
    status: t.int({ description: '200–299; default 200' }),
    mimeType: t.string({ description: 'default application/json' }),
    body: t.field({ type: 'JSON', required: true, description: 'a string, an object or an array' }),
  }),
});

const CreatePaymentLinkInputRef = builder.inputType('CreatePaymentLinkInput', {
  extensions: fromZod(CreatePaymentLinkInputSchema),
  fields: (t) => ({
    id: t.string({ description: 'slug; a ULID when omitted' }),
    label: t.string({ required: true }),
    ownerAgent: t.string({ required: true, description: 'mint of a recorded agent on your network' }),
    method: t.field({ type: HttpMethodEnum, required: true }),
    price: t.string({ required: true, description: '$0.01, 0.01, 0.01 USDC, 1.5 usdt' }),
    currency: t.field({ type: StableSymbolEnum }),
    acceptsCurrencies: t.field({ type: [StableSymbolEnum] }),
    protocol: t.field({ type: ProtocolEnum }),
    response: t.field({ type: LinkResponseInput, required: true }),
    webhookUrl: t.string(),
    wrapReceipt: t.boolean(),
    settlePolicy: t.field({ type: SettlePolicyEnum }),
    accessWindow: t.string({ description: '"<n><s|m|h|d>", 1m–30d: how long a paid call grants its wallet access by signing in' }),
    requestBinding: t.field({ type: RequestBindingEnum }),
    metadata: t.field({ type: 'JSON' }),
  }),
});

const UpdatePaymentLinkInputRef = builder.inputType('UpdatePaymentLinkInput', {
  description: 'Any subset of the create-time fields plus disabled. webhookUrl: null clears the webhook.',
  extensions: fromZod(UpdatePaymentLinkInputSchema),
  fields: (t) => ({
    label: t.string(),
    ownerAgent: t.string(),
    method: t.field({ type: HttpMethodEnum }),
    price: t.string(),
    currency: t.field({ type: StableSymbolEnum }),
    acceptsCurrencies: t.field({ type: [StableSymbolEnum] }),
    protocol: t.field({ type: ProtocolEnum }),
    response: t.field({ type: LinkResponseInput }),
    webhookUrl: t.string(),
    wrapReceipt: t.boolean(),
    settlePolicy: t.field({ type: SettlePolicyEnum }),
    accessWindow: t.string({ description: 'null clears it: every call pays' }),
    requestBinding: t.field({ type: RequestBindingEnum }),
    metadata: t.field({ type: 'JSON' }),
    disabled: t.boolean(),
  }),
});

// A field added to the domain inputs and not here (or the reverse) fails to compile.
export type CreateInputInSync = Assert<SameKeys<typeof CreatePaymentLinkInputRef.$inferInput, CreatePaymentLinkInput>>;
export type UpdateInputInSync = Assert<SameKeys<typeof UpdatePaymentLinkInputRef.$inferInput & { id: string }, UpdatePaymentLinkInput>>;
// response keeps its camelCase keys on the wire (mimeType), so it is compared as is.
export type ResponseInputInSync = Assert<KeysMatch<typeof LinkResponseInput.$inferInput, CreatePaymentLinkInput['response']>>;

const linkInput = (input: object, keepNull: readonly string[] = []) => toDomainInput(input, { keepNull, stripNested: ['response'] });

builder.queryFields((t) => ({
  paymentLink: t.field({
    type: PaymentLinkRef,
    nullable: true,
    extensions: procedure('paymentLinks.get'),
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, { id }, ctx) => ctx.api.paymentLinks.get({ id }),
  }),
  paymentLinks: t.field({
    type: PaymentLinkPageRef,
    nullable: true,
    description: 'Newest first; `after` is the nextCursor of the previous page, `first` the page size (default 50, max 200).',
    extensions: procedure('paymentLinks.list'),
    args: { ownerAgent: t.arg.string(), after: t.arg.string(), first: t.arg.int() },
    resolve: (_root, args, ctx) => ctx.api.paymentLinks.list({ owner_agent: given(args.ownerAgent), cursor: given(args.after), limit: given(args.first) }),
  }),
}));

builder.mutationFields((t) => ({
  createPaymentLink: t.field({
    type: PaymentLinkRef,
    nullable: true,
    extensions: procedure('paymentLinks.create'),
    args: { input: t.arg({ type: CreatePaymentLinkInputRef, required: true }) },
    // The procedure parses the input with CreatePaymentLinkInput (zod).
    resolve: (_root, { input }, ctx) => ctx.api.paymentLinks.create(linkInput(input) as CreatePaymentLinkInput),
  }),
  updatePaymentLink: t.field({
    type: PaymentLinkRef,
    nullable: true,
    extensions: procedure('paymentLinks.update'),
    args: { id: t.arg.id({ required: true }), input: t.arg({ type: UpdatePaymentLinkInputRef, required: true }) },
    resolve: (_root, { id, input }, ctx) => ctx.api.paymentLinks.update({ ...linkInput(input, ['webhookUrl', 'accessWindow']), id } as UpdatePaymentLinkInput),
  }),
  rotatePaymentLinkWebhookSecret: t.field({
    type: PaymentLinkRef,
    nullable: true,
    description: 'A new webhook signing secret, answered once in webhookSecret; the old one stops signing at once.',
    extensions: procedure('paymentLinks.rotateWebhookSecret'),
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, { id }, ctx) => ctx.api.paymentLinks.rotateWebhookSecret({ id }),
  }),
  deletePaymentLink: t.boolean({
    extensions: procedure('paymentLinks.delete'),
    args: { id: t.arg.id({ required: true }) },
    resolve: async (_root, { id }, ctx) => {
      await ctx.api.paymentLinks.delete({ id });
      return true;
    },
  }),
}));
