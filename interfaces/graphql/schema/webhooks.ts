import { CreateWebhookInput, WebhookDelivery, WebhookWithSecret } from '../../../domain/webhooks/schema.ts';
import { DeliveryStatus } from '../../../domain/webhooks/schema.ts';
import { builder } from '../builder.ts';
import { fromZod, procedure } from '../describe.ts';
import { EventPhaseEnum, graphqlEnum, NetworkEnum } from '../enums.ts';
import { given, pageRef, toDomainInput, type Assert, type SameKeys } from './common.ts';

// DECISIONS "Webhooks": subscriptions and their deliveries, through the same procedures as REST (ctx.api), which
// call WebhookService.

const DeliveryStatusEnum = graphqlEnum('WebhookDeliveryStatus', DeliveryStatus);

// One GraphQL type for reads and for the answers that carry a new secret (create, rotate).
export const WebhookRef = builder.objectRef<Omit<WebhookWithSecret, 'secret'> & { secret?: string }>('Webhook').implement({
  extensions: fromZod(WebhookWithSecret),
  description: 'A subscription: signed POSTs of the events it matches (DECISIONS "Webhooks").',
  fields: (t) => ({
    id: t.exposeID('id'),
    network: t.expose('network', { type: NetworkEnum }),
    url: t.exposeString('url'),
    events: t.exposeStringList('events', { description: 'Kind patterns: exact kinds, prefix.*, or *.' }),
    description: t.exposeString('description', { nullable: true }),
    disabled: t.exposeBoolean('disabled'),
    disabledReason: t.exposeString('disabled_reason', { nullable: true }),
    secret: t.string({
      nullable: true,
      description: 'whsec_…: verifies X-Svc-Signature and webhook-signature. Only in the answer of createWebhook and rotateWebhookSecret; null on reads.',
      resolve: (hook) => hook.secret ?? null,
    }),
    createdAt: t.exposeString('created_at'),
    updatedAt: t.exposeString('updated_at'),
  }),
});

const WebhookDeliveryRef = builder.objectRef<WebhookDelivery>('WebhookDelivery').implement({
  extensions: fromZod(WebhookDelivery),
  description: 'One (webhook, event, phase): attempted until delivered, then the retry schedule, then failed.',
  fields: (t) => ({
    id: t.exposeID('id'),
    webhookId: t.exposeString('webhook_id'),
    eventId: t.exposeString('event_id', { nullable: true }),
    type: t.exposeString('type'),
    phase: t.expose('phase', { type: EventPhaseEnum }),
    status: t.expose('status', { type: DeliveryStatusEnum }),
    attempts: t.exposeInt('attempts'),
    nextAttemptAt: t.exposeString('next_attempt_at', { nullable: true }),
    lastStatus: t.exposeInt('last_status', { nullable: true }),
    lastError: t.exposeString('last_error', { nullable: true }),
    deliveredAt: t.exposeString('delivered_at', { nullable: true }),
    createdAt: t.exposeString('created_at'),
  }),
});

const WebhookPageRef = pageRef('WebhookPage', WebhookRef);
const WebhookDeliveryPageRef = pageRef('WebhookDeliveryPage', WebhookDeliveryRef);

const CreateWebhookInputRef = builder.inputType('CreateWebhookInput', {
  extensions: fromZod(CreateWebhookInput),
  fields: (t) => ({
    url: t.string({ required: true, description: 'https to a public address' }),
    events: t.stringList({ description: 'kind patterns; default ["*"]' }),
    description: t.string(),
  }),
});

export type CreateWebhookInputInSync = Assert<SameKeys<typeof CreateWebhookInputRef.$inferInput, CreateWebhookInput>>;

builder.queryFields((t) => ({
  webhook: t.field({
    extensions: procedure('webhooks.get'),
    type: WebhookRef,
    nullable: true,
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, { id }, ctx) => ctx.api.webhooks.get({ id: String(id) }),
  }),
  webhooks: t.field({
    extensions: procedure('webhooks.list'),
    type: WebhookPageRef,
    nullable: true,
    description: 'Newest first; `after` is the nextCursor of the previous page, `first` the page size (default 50, max 200).',
    args: { after: t.arg.string(), first: t.arg.int() },
    resolve: (_root, args, ctx) => ctx.api.webhooks.list({ cursor: given(args.after), limit: given(args.first) }),
  }),
  webhookDeliveries: t.field({
    extensions: procedure('webhooks.deliveries'),
    type: WebhookDeliveryPageRef,
    nullable: true,
    description: 'The deliveries of a subscription, newest first.',
    args: { webhookId: t.arg.id({ required: true }), after: t.arg.string(), first: t.arg.int() },
    resolve: (_root, args, ctx) => ctx.api.webhooks.deliveries({ id: String(args.webhookId), cursor: given(args.after), limit: given(args.first) }),
  }),
}));

builder.mutationFields((t) => ({
  createWebhook: t.field({
    extensions: procedure('webhooks.create'),
    type: WebhookRef,
    nullable: true,
    description: 'A new subscription; its signing secret is answered once, in secret.',
    args: { input: t.arg({ type: CreateWebhookInputRef, required: true }) },
    // The procedure parses the input with CreateWebhookInput (zod).
    resolve: (_root, { input }, ctx) => ctx.api.webhooks.create(toDomainInput(input) as CreateWebhookInput),
  }),
  rotateWebhookSecret: t.field({
    extensions: procedure('webhooks.rotateSecret'),
    type: WebhookRef,
    nullable: true,
    description: 'A new signing secret, answered once in secret; the old one stops signing at once.',
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, { id }, ctx) => ctx.api.webhooks.rotateSecret({ id: String(id) }),
  }),
  deleteWebhook: t.boolean({
    extensions: procedure('webhooks.delete'),
    args: { id: t.arg.id({ required: true }) },
    resolve: async (_root, { id }, ctx) => {
      await ctx.api.webhooks.delete({ id: String(id) });
      return true;
    },
  }),
  retryWebhookDelivery: t.field({
    extensions: procedure('webhooks.retryDelivery'),
    type: WebhookDeliveryRef,
    nullable: true,
    description: 'Attempts a delivery again now; its retry schedule restarts.',
    args: { webhookId: t.arg.id({ required: true }), deliveryId: t.arg.id({ required: true }) },
    resolve: (_root, args, ctx) => ctx.api.webhooks.retryDelivery({ id: String(args.webhookId), delivery_id: String(args.deliveryId) }),
  }),
}));
