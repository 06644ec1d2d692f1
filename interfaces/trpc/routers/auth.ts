import { StreamToken, StreamTokenInput } from '../../../domain/access/schema.ts';
import { keyedProcedure, router } from '../init.ts';

const tags = ['auth'];

export const authRouter = router({
  // EventSource cannot send Authorization; a page asks its backend (or the user's key) for this token and
  // subscribes with `?token=` (SSE) or graphql-ws `connectionParams.token`.
  streamToken: keyedProcedure
    .meta({
      status: 201,
      secretFields: ['token'],
      openapi: {
        method: 'POST',
        path: '/v1/auth/stream-token',
        tags,
        summary: 'A subscription token for browsers: valid 60 s, used once, for this key’s principal and network',
        description:
          'Browsers cannot send an Authorization header on a WebSocket or EventSource: this short-lived, single-use token stands in for the key on a GraphQL subscription.',
      },
    })
    .input(StreamTokenInput)
    .output(StreamToken)
    .mutation(({ ctx }) => ctx.services.access.issueStreamToken(ctx.principal)),
});
