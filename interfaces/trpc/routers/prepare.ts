import { PREPARE_ROUTES, type PrepareRouteName } from '../../../domain/agents/build/index.ts';
import { PreparedEnvelope } from '../../../domain/transactions/schema.ts';
import type { ErrorCode } from '../../../domain/shared/errors.ts';
import { keyedProcedure, router } from '../init.ts';

// hosted-api §4.3: the 14 prepare routes, each generated from its entry of PREPARE_ROUTES (path, input
// schema, summary) and answered by TransactionService.prepareRoute with the envelope of §2.5.

/** codes a route's builder answers beyond the shared ones, listed in its OpenAPI responses */
const ROUTE_ERRORS: Partial<Record<PrepareRouteName, readonly ErrorCode[]>> = {
  // fee-facilitator-mpp-tools §2.2.6, §7: the executive's allowance is short of the gross (details.allowance_atomic, required_atomic)
  buyerPayment: ['insufficient_allowance'],
};

function prepareProcedure<N extends PrepareRouteName>(name: N) {
  const route = PREPARE_ROUTES[name];
  const errors = ROUTE_ERRORS[name];
  return keyedProcedure
    .meta({
      bucket: 'prepare',
      ...(errors ? { errors } : {}),
      openapi: {
        method: 'POST',
        path: route.path as `/${string}`,
        tags: ['prepare'],
        summary: route.summary,
        // hosted-api §1 and §4.3: prepare → sign locally → submit → track
        description: `Builds the unsigned transaction and records a \`${route.kind}\` event in phase prepared; sign it locally and POST it to /v1/submit, then follow the event. The same Idempotency-Key answers the same event and bytes (hosted-api §4.3).`,
      },
    })
    .input(route.input as (typeof PREPARE_ROUTES)[N]['input'])
    .output(PreparedEnvelope)
    .mutation(({ ctx, input }) => ctx.services.transactions.prepareRoute(ctx.principal, name, input as Record<string, unknown>));
}

export const prepareRouter = router({
  agentCreate: prepareProcedure('agentCreate'),
  identityRegister: prepareProcedure('identityRegister'),
  executiveRegister: prepareProcedure('executiveRegister'),
  executiveDelegate: prepareProcedure('executiveDelegate'),
  executiveRevoke: prepareProcedure('executiveRevoke'),
  delegationSet: prepareProcedure('delegationSet'),
  delegationRevoke: prepareProcedure('delegationRevoke'),
  tokenSet: prepareProcedure('tokenSet'),
  provision: prepareProcedure('provision'),
  withdraw: prepareProcedure('withdraw'),
  withdrawAll: prepareProcedure('withdrawAll'),
  withdrawSol: prepareProcedure('withdrawSol'),
  withdrawSolAll: prepareProcedure('withdrawSolAll'),
  buyerPayment: prepareProcedure('buyerPayment'),
});
