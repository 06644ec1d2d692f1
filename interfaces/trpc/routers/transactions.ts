import { SubmitInput, SubmitResult } from '../../../domain/transactions/schema.ts';
import { keyedProcedure, router } from '../init.ts';

// hosted-api §4.5: the signed transaction of a prepared event (the prepare routes are in prepare.ts).

export const transactionsRouter = router({
  submit: keyedProcedure
    .meta({
      bucket: 'submit',
      status: 202,
      replayStatus: 200,
      errors: [
        'event_not_found',
        'event_already_submitted',
        'event_failed',
        'transaction_expired',
        'transaction_invalid',
        'transaction_rejected',
        'rpc_unavailable',
        'service_unavailable',
        'submit_timeout',
      ],
      openapi: {
        method: 'POST',
        path: '/v1/submit',
        tags: ['transactions'],
        summary: 'Submit the signed transaction of a prepared event',
        description: [
          'Sign the prepared transaction by adding signatures, never clearing those already there (an agents/prepare transaction carries the gateway’s signature for the new asset): web3.js `VersionedTransaction.deserialize(bytes).sign([key])` or `Transaction.from(bytes).partialSign(key)`, not `Transaction.sign()`; @solana/kit `partiallySignTransaction`.',
          '',
          'What a refusal does to the event:',
          '- 422 `transaction_invalid` (before the event is submitted: bytes that do not parse, another message, a missing or invalid signature): nothing is written; the event stays `prepared`. `details.signers` names each missing key with its `roles` (fee_payer, owner, new_asset, executive, authority) and `details.hint` says how to fix it: sign the same event again and resubmit.',
          '- 422 `transaction_rejected` (the ledger refused the fully signed transaction in preflight: a program error, missing funds, an expired blockhash): nothing landed and nothing was charged; the event is `failed` with `error_code` and `error_logs` (a hint, the error, the last program log lines), as GET /v1/events/{id}, subscriptions and webhooks show. Prepare a new transaction.',
          '- 409 `event_failed`: the event already failed that way; it cannot be submitted again. 409 `transaction_expired`: it expired unsubmitted. 409 `event_already_submitted`: it was submitted already and these bytes are not that transaction (any other bytes, another message included; `details.signature` is the submitted one). The same bytes again are 200 `replayed: true`.',
        ].join('\n'),
      },
    })
    .input(SubmitInput)
    .output(SubmitResult)
    .mutation(({ ctx, input }) => ctx.services.transactions.submit(ctx.principal, input)),
});
