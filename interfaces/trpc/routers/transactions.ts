import { SubmitInput, SubmitResult } from '../../../domain/transactions/schema.ts';
import { keyedProcedure, router } from '../init.ts';

// Issue 10, hosted-api §4.5: the signed transaction of a prepared event (the prepare routes are in prepare.ts).

export const transactionsRouter = router({
  submit: keyedProcedure
    .meta({
      bucket: 'submit',
      status: 202,
      replayStatus: 200,
      openapi: { method: 'POST', path: '/v1/submit', tags: ['transactions'], summary: 'Submit the signed transaction of a prepared event' },
    })
    .input(SubmitInput)
    .output(SubmitResult)
    .mutation(({ ctx, input }) => ctx.services.transactions.submit(ctx.principal, input)),
});
