import { DiscoverInput, DiscoverResult, PublicDiscoverInput } from '../../../domain/discovery/schema.ts';
import { anonymousProcedure, keyedProcedure, router } from '../init.ts';

// svc_discover's two catalogues — the gateway's public payment links and the agents it knows.
export const discoveryRouter = router({
  discover: keyedProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/v1/discover',
        tags: ['discovery'],
        summary: 'Search paid services: public payment links (source svc) and agents’ registration documents (source registry)',
        description:
          "Paid services matching a capability, text or price: public payment links (source svc) and endpoints of agents' registration documents (source registry) (fee-facilitator-mpp-tools §4.3 svc_discover).",
      },
    })
    .input(DiscoverInput)
    .output(DiscoverResult)
    .query(({ ctx, input }) => ctx.services.discovery.discover(ctx.principal, input)),

  // fee-facilitator-mpp-tools §4.3: svc_discover is public — a tool server with no SVC_API_KEY searches here
  discoverPublic: anonymousProcedure
    .meta({
      bucket: 'public',
      openapi: {
        method: 'GET',
        path: '/v1/discover/public',
        tags: ['discovery'],
        protect: false,
        summary: 'The same search with no key (public), on ?network= (default chain-mainnet)',
        description: 'GET /v1/discover without a key, on the network named by ?network= (fee-facilitator-mpp-tools §4.3: discovery is public).',
      },
    })
    .input(PublicDiscoverInput)
    .output(DiscoverResult)
    .query(({ ctx, input }) => ctx.services.discovery.discoverPublic(input)),
});
