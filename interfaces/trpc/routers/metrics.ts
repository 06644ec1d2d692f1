import { EventCounters, EventsInput, SettlementInput, SettlementLatency, Usage, UsageInput } from '../../../domain/metrics/service.ts';
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

  settlement: keyedProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/v1/metrics/settlement',
        tags,
        summary: 'Settlement latency (p50, p95) of the gateway facilitator on your network',
        description:
          "From a settle's claim to the confirmation it saw, over the newest settlements (at most `sample_limit`) of the last `hours`; the same network figure for every key.",
      },
    })
    .input(SettlementInput)
    .output(SettlementLatency)
    .query(({ ctx, input }) => ctx.services.metrics.settlement(ctx.principal, input)),
});
