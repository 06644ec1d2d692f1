import { PreparedEnvelope, PreparedTransaction, SubmitInput, SubmitResult } from '../../../domain/transactions/schema.ts';
import { PREPARE_ROUTES, type PrepareRouteName } from '../../../domain/agents/build/index.ts';
import { builder } from '../builder.ts';
import { fromZod, procedure } from '../describe.ts';
import { EventPhaseEnum, graphqlEnum, NetworkEnum } from '../enums.ts';
import { JsonScalar, toDomainInput, type Assert, type SameKeys } from './common.ts';

// Prepare → sign → submit through the same procedures as REST (ctx.api), which call TransactionService.
// The event's phases are read with the `event` query and followed on the `events` subscription.

const PreparedTransactionRef = builder.objectRef<PreparedTransaction>('PreparedTransaction').implement({
  extensions: fromZod(PreparedTransaction),
  description: 'hosted-api §2.5: the unsigned transaction of a prepare route.',
  fields: (t) => ({
    base64: t.exposeString('base64', { description: 'the transaction with empty signature slots' }),
    messageBase64: t.exposeString('message_base64', { description: 'the message to sign' }),
    messageHash: t.exposeString('message_hash', { description: 'hex SHA-256 of the message' }),
    recentBlockhash: t.exposeString('recent_blockhash'),
    lastValidBlockHeight: t.exposeInt('last_valid_block_height'),
    feePayer: t.exposeString('fee_payer'),
    signers: t.exposeStringList('signers', { description: 'ordered public keys whose signatures submit expects' }),
  }),
});

const PreparedIdentityEnum = graphqlEnum('PreparedIdentity', PreparedEnvelope.shape.identity.unwrap(), {
  description: 'Whether the agent the route prepares for is registered (identity).',
});

export const PreparedEnvelopeRef = builder.objectRef<PreparedEnvelope>('PreparedEnvelope').implement({
  extensions: fromZod(PreparedEnvelope),
  description: 'hosted-api §2.5: the answer of every prepare route; a no-op has no event and no transaction.',
  fields: (t) => ({
    eventId: t.exposeString('event_id', { nullable: true }),
    network: t.expose('network', { type: NetworkEnum }),
    transaction: t.field({ type: PreparedTransactionRef, nullable: true, resolve: (e) => e.transaction }),
    echo: t.field({ type: JsonScalar, resolve: (e) => e.echo }),
    noOp: t.boolean({ resolve: (e) => e.no_op === true }),
    willCreateDestinationAta: t.boolean({ nullable: true, resolve: (e) => e.will_create_destination_ata ?? null }),
    feePaddingAtoms: t.string({ nullable: true, resolve: (e) => e.fee_padding_atoms ?? null }),
    identity: t.field({ type: PreparedIdentityEnum, nullable: true, resolve: (e) => e.identity ?? null }),
    warnings: t.stringList({ nullable: true, resolve: (e) => e.warnings ?? null }),
  }),
});

const SubmitResultRef = builder.objectRef<SubmitResult>('SubmitResult').implement({
  extensions: fromZod(SubmitResult),
  description: 'hosted-api §2.6: the event is submitted; confirmation follows on the event.',
  fields: (t) => ({
    eventId: t.exposeString('event_id'),
    signature: t.exposeString('signature'),
    phase: t.expose('phase', { type: EventPhaseEnum }),
    network: t.expose('network', { type: NetworkEnum }),
    replayed: t.exposeBoolean('replayed'),
  }),
});

const SubmitTransactionInputRef = builder.inputType('SubmitTransactionInput', {
  extensions: fromZod(SubmitInput),
  fields: (t) => ({
    eventId: t.string({ required: true }),
    transactionBase64: t.string({ required: true, description: 'the full signed transaction' }),
    clientReference: t.string(),
  }),
});

export type SubmitTransactionInputInSync = Assert<SameKeys<typeof SubmitTransactionInputRef.$inferInput, SubmitInput>>;

const routeNames = Object.keys(PREPARE_ROUTES) as PrepareRouteName[];
const PrepareRouteEnum = graphqlEnum('PrepareRoute', routeNames, {
  description: 'The 14 prepare routes of hosted-api §4.3 (REST path in each value’s description).',
  valueDescriptions: Object.fromEntries(routeNames.map((name) => [name, `POST ${PREPARE_ROUTES[name].path}: ${PREPARE_ROUTES[name].summary}`])),
});

builder.mutationFields((t) => ({
  prepareTransaction: t.field({
    type: PreparedEnvelopeRef,
    nullable: true,
    description:
      'Any prepare route: `input` is the route’s REST body (snake_case, with `mint` for the agent routes), checked by the same schema; answers the envelope of hosted-api §2.5.',
    args: { route: t.arg({ type: PrepareRouteEnum, required: true }), input: t.arg({ type: JsonScalar, required: true }) },
    resolve: (_root, { route, input }, ctx) => (ctx.api.prepare[route] as (i: unknown) => Promise<PreparedEnvelope>)(input),
  }),
  submitTransaction: t.field({
    extensions: procedure('transactions.submit'),
    type: SubmitResultRef,
    nullable: true,
    description: 'POST /v1/submit: broadcasts the signed transaction of a prepared event.',
    args: { input: t.arg({ type: SubmitTransactionInputRef, required: true }) },
    resolve: (_root, { input }, ctx) => ctx.api.transactions.submit(toDomainInput(input) as SubmitInput),
  }),
}));
