import { StreamToken } from '../../../domain/access/schema.ts';
import { builder } from '../builder.ts';
import { fromZod, procedure } from '../describe.ts';
import { NetworkEnum } from '../enums.ts';

// POST /v1/auth/stream-token through the same procedure as REST (ctx.api).

const StreamTokenRef = builder.objectRef<StreamToken>('StreamToken').implement({
  extensions: fromZod(StreamToken),
  description: 'A subscription token for browsers: `?token=` on the SSE endpoint or graphql-ws connectionParams.token.',
  fields: (t) => ({
    token: t.exposeString('token', { description: 'Used once, within expiresIn seconds.' }),
    network: t.expose('network', { type: NetworkEnum }),
    expiresAt: t.exposeString('expires_at'),
    expiresIn: t.exposeInt('expires_in'),
  }),
});

builder.mutationFields((t) => ({
  createStreamToken: t.field({
    extensions: procedure('auth.streamToken'),
    type: StreamTokenRef,
    description: 'A token valid 60 s, used once, for this key’s principal and network.',
    resolve: (_root, _args, ctx) => ctx.api.auth.streamToken(),
  }),
}));
