import { FaucetInput, FaucetOutput } from '../../../domain/dev/service.ts';
import { keyedProcedure, router } from '../init.ts';

export const devRouter = router({
  faucet: keyedProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/v1/dev/faucet',
        tags: ['dev'],
        summary: 'Fund an address on the embedded ledger (404 elsewhere)',
        description:
          'Development only: airdrops lamports or mints a curated stable to an address on the embedded ledger; on real networks the route answers 404.',
      },
    })
    .input(FaucetInput)
    .output(FaucetOutput)
    .mutation(({ ctx, input }) => ctx.services.dev.fund(ctx.principal.network, input)),
});
