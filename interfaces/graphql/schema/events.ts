import { Event, EventPhaseStep, ListEventsInput } from '../../../domain/events/schema.ts';
import { parseKinds } from '../../../domain/events/service.ts';
import { builder } from '../builder.ts';
import { fromZod, procedure } from '../describe.ts';
import { LiveEvents, StreamFailure } from '../fanout.ts';
import { EventPhaseEnum, NetworkEnum } from '../enums.ts';
import { given, pageRef } from './common.ts';
import { parseInput, refuseUnsafeInput } from '../../../domain/shared/validation.ts';

// hosted-api §6: the event stream. Queries read the table; the subscription replays after a cursor, then goes live
// (EventService.watch/replay through the fan-out registry: LISTEN/NOTIFY, deduplicated, no gap), over graphql-ws and SSE alike.

export { EventPhaseEnum };

const EventPhaseStepRef = builder.objectRef<Event['phases'][number]>('EventPhaseStep').implement({
  extensions: fromZod(Event.shape.phases.element),
  description: EventPhaseStep.description,
  fields: (t) => ({
    phase: t.expose('phase', { type: EventPhaseEnum }),
    at: t.exposeString('at', { description: EventPhaseStep.shape.at.description }),
    signature: t.exposeString('signature', { nullable: true, description: EventPhaseStep.shape.signature.description }),
  }),
});

export const EventRef = builder.objectRef<Event>('Event').implement({
  extensions: fromZod(Event),
  description: 'One event; `id` is the cursor to resume a subscription with `after`.',
  fields: (t) => ({
    id: t.exposeID('id'),
    kind: t.exposeString('kind'),
    phase: t.expose('phase', { type: EventPhaseEnum }),
    phases: t.expose('phases', { type: [EventPhaseStepRef], description: Event.shape.phases.description }),
    network: t.expose('network', { type: NetworkEnum }),
    agentAsset: t.exposeString('agent_asset', { nullable: true }),
    signature: t.exposeString('signature', { nullable: true }),
    // Float, not Int: GraphQL Int is 32-bit and slots (and unix seconds after 2038) outgrow it.
    blockTime: t.exposeFloat('block_time', { nullable: true }),
    confirmedAt: t.exposeString('confirmed_at', { nullable: true }),
    slot: t.exposeFloat('slot', { nullable: true }),
    errorCode: t.exposeString('error_code', { nullable: true }),
    errorLogs: t.exposeStringList('error_logs', { nullable: true }),
    metadata: t.expose('metadata', { type: 'JSON' }),
    clientReference: t.exposeString('client_reference', { nullable: true }),
    createdAt: t.exposeString('created_at'),
  }),
});

export const EventPageRef = pageRef('EventPage', EventRef);

builder.queryFields((t) => ({
  events: t.field({
    extensions: procedure('events.list'),
    type: EventPageRef,
    nullable: true,
    description: 'Newest first. kinds: exact kinds or wildcards such as payment_link.*; after: nextCursor; first: page size.',
    args: { kinds: t.arg.stringList(), agent: t.arg.string(), after: t.arg.string(), first: t.arg.int() },
    // The procedure's `kind` holds comma-separated patterns (checked by parseKinds in the service).
    resolve: (_root, args, ctx) =>
      ctx.api.events.list({ kind: args.kinds?.join(','), agent: given(args.agent), cursor: given(args.after), limit: given(args.first) }),
  }),
  event: t.field({
    extensions: procedure('events.get'),
    type: EventRef,
    nullable: true,
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, { id }, ctx) => ctx.api.events.get({ id }),
  }),
  eventKinds: t.field({
    extensions: procedure('events.kinds'),
    type: 'JSON',
    description: 'The event catalogue: [{ kind, description, phases, metadata_schema }] (as GET /v1/event-kinds).',
    resolve: async (_root, _args, ctx) => (await ctx.api.events.kinds()).data,
  }),
}));

builder.subscriptionFields((t) => ({
  events: t.field({
    type: EventRef,
    description: 'Live events of what you own (an admin key: its whole network). With `after` (an event id), first replays every matching event after it.',
    args: { kinds: t.arg.stringList(), agent: t.arg.string(), after: t.arg.id() },
    // No procedure streams: the same auth and rate-limit policies are applied here, then EventService.watch/replay
    // (through the fan-out registry), which apply the ownership filter. The principal is resolved once, here, and held for the subscription's life.
    subscribe: async (_root, args, ctx) => {
      const principal = await ctx.keyed('events.read');
      refuseUnsafeInput(args); // as the procedures do for their inputs: `after` is looked up in the store
      // The arguments are checked by the zod schema of GET /v1/events (ListEventsInput), as the queries are.
      const input = parseInput(ListEventsInput, { agent: given(args.agent), cursor: given(args.after) });
      const kinds = parseKinds(given(args.kinds), 'kinds');
      // Served by the fan-out registry (interfaces/graphql/fanout.ts): one execution per distinct subscription.
      return new LiveEvents(ctx.services, principal, { kinds, agent: input.agent, after: input.cursor });
    },
    resolve: (payload: Event | StreamFailure): Event => {
      if (payload instanceof StreamFailure) throw payload.error;
      return payload;
    },
  }),
}));
