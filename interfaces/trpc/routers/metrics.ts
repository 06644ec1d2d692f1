import { EventCounters, EventsInput, Usage, UsageInput } from '../../../domain/metrics/service.ts';
import { keyedProcedure, router } from '../init.ts';

const tags = ['metrics'];

export const metricsRouter = router({
  usage: keyedProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/v1/metrics/usage',
        tags,
        summary: 'Requests per key, bucket and day (admin: every key)',
        description:
          'Newest day first, then key and bucket, in pages of the list envelope (`cursor`, `limit`; `next_cursor` while `has_more`); `since` is the first day of the window.',
      },
    })
    .input(UsageInput)
    .output(Usage)
    .query(({ ctx, input }) => ctx.services.metrics.usage(ctx.principal, input)),

  events: keyedProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/v1/metrics/events',
        tags,
        summary: 'Counters by kind of the events you can read (admin: the network)',
        description: "Per event kind and phase, how many events you can read exist on the key's network, from rollups.",
      },
    })
    .input(EventsInput)
    .output(EventCounters)
    .query(({ ctx, input }) => ctx.services.metrics.events(ctx.principal, input)),
});
