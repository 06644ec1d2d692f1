import { DiscoverySource, DiscoverItem } from '../../../domain/discovery/schema.ts';
import { builder } from '../builder.ts';
import { fromZod, procedure } from '../describe.ts';
import { HttpMethod } from '../../../domain/payment-links/schema.ts';
import { graphqlEnum, HttpMethodEnum, NetworkEnum, networkOf, ProtocolEnum, wireValue } from '../enums.ts';

const DiscoverySourceEnum = graphqlEnum('DiscoverySource', DiscoverySource, {
  description: 'SVC: a public payment link of this gateway; REGISTRY: an agent’s registration document.',
});
import { given } from './common.ts';

// GET /v1/discover through the same procedure as REST (ctx.api).

const DiscoverItemRef = builder.objectRef<DiscoverItem>('DiscoverItem').implement({
  extensions: fromZod(DiscoverItem),
  description: 'A paid service: a public payment link (source svc) or an agent’s registration document (source registry).',
  fields: (t) => ({
    source: t.expose('source', { type: DiscoverySourceEnum }),
    id: t.exposeString('id'),
    network: t.field({ type: NetworkEnum, resolve: (r) => networkOf(r.network) }),
    name: t.exposeString('name'),
    description: t.exposeString('description', { nullable: true }),
    capabilities: t.exposeStringList('capabilities'),
    agent: t.exposeString('agent'),
    url: t.exposeString('url'),
    method: t.field({ type: HttpMethodEnum, nullable: true, resolve: (i) => (i.method === null ? null : wireValue(HttpMethod, i.method)) }),
    priceUsd: t.exposeString('price_usd', { nullable: true }),
    currencies: t.exposeStringList('currencies'),
    protocol: t.expose('protocol', { type: ProtocolEnum, nullable: true }),
    settledCalls: t.exposeInt('settled_calls', { nullable: true }),
  }),
});

builder.queryFields((t) => ({
  discover: t.field({
    extensions: procedure('discovery.discover'),
    type: [DiscoverItemRef],
    nullable: true,
    description: 'Search paid services across the gateway’s public links and the agents it knows.',
    args: { q: t.arg.string(), capability: t.arg.string(), maxPriceUsd: t.arg.string(), source: t.arg({ type: DiscoverySourceEnum }), first: t.arg.int() },
    resolve: async (_root, a, ctx) =>
      (
        await ctx.api.discovery.discover({
          q: given(a.q),
          capability: given(a.capability),
          max_price_usd: given(a.maxPriceUsd),
          source: given(a.source),
          limit: given(a.first),
        })
      ).data,
  }),
}));
