import { SubmitInput, SubmitResult } from '../../../domain/transactions/schema.ts';
import { keyedProcedure, router } from '../init.ts';

// hosted-api §4.5: the signed transaction of a prepared event (the prepare routes are in prepare.ts).

export const transactionsRouter = router({
  submit: keyedProcedure
    .meta({
      bucket: 'submit',
      status: 202,
      replayStatus: 200,
      errors: ['event_not_found', 'event_already_submitted', 'transaction_expired', 'transaction_invalid', 'transaction_rejected', 'rpc_unavailable', 'service_unavailable', 'submit_timeout'],
      openapi: { method: 'POST', path: '/v1/submit', tags: ['transactions'], summary: 'Submit the signed transaction of a prepared event' },
    })
    .input(SubmitInput)
    .output(SubmitResult)
    .mutation(({ ctx, input }) => ctx.services.transactions.submit(ctx.principal, input)),
});
