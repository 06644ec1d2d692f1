import { DiscoverInput, DiscoverResult } from '../../../domain/discovery/schema.ts';
import { keyedProcedure, router } from '../init.ts';

// svc_discover's two catalogues — the gateway's public payment links and the agents it knows.
export const discoveryRouter = router({
  discover: keyedProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/v1/discover',
        tags: ['discovery'],
        summary: 'Search paid services: public payment links (source svc) and agents’ registration documents (source registry)',
      },
    })
    .input(DiscoverInput)
    .output(DiscoverResult)
    .query(({ ctx, input }) => ctx.services.discovery.discover(ctx.principal, input)),
});
