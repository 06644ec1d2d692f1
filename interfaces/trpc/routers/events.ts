import { z } from 'zod';
import { Event, EventIdInput, EventList, ListEventsInput } from '../../../domain/events/schema.ts';
import { EventCatalogue, eventCatalogue } from '../../../domain/events/kinds.ts';
import { bounded } from '../../../domain/shared/pagination.ts';
import { keyedProcedure, router } from '../init.ts';

const tags = ['events'];

export const eventsRouter = router({
  list: keyedProcedure
    .meta({
      bucket: 'events.read',
      openapi: {
        method: 'GET',
        path: '/v1/events',
        tags,
        summary: 'List events, newest first (kind accepts wildcards such as payment_link.*)',
        description: 'Your events on the key’s network, newest first, in the list envelope; filter by kind patterns, agent or id (hosted-api §4.6).',
      },
    })
    .input(ListEventsInput)
    .output(EventList)
    .query(({ ctx, input }) => ctx.services.events.list(ctx.principal, input)),

  get: keyedProcedure
    .meta({
      bucket: 'events.read',
      openapi: {
        method: 'GET',
        path: '/v1/events/{id}',
        tags,
        summary: 'Get one event',
        description: 'One event with its phase history; poll about every 5 seconds until confirmed or failed, or subscribe (hosted-api §4.6).',
      },
    })
    .input(EventIdInput)
    .output(Event)
    .query(({ ctx, input }) => ctx.services.events.get(ctx.principal, input.id)),

  kinds: keyedProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/v1/event-kinds',
        tags,
        summary: 'The event catalogue: every kind, its phases and the JSON Schema of its metadata (also the webhook payload data)',
        description:
          'Every event kind the gateway writes, the phases it moves through and the JSON Schema of its metadata: what a webhook or subscription consumer can expect.',
      },
    })
    .input(z.object({}).optional())
    .output(EventCatalogue)
    .query(() => bounded(eventCatalogue())),
});
