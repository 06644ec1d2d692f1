import { DailyTransactions, DailyTransactionsInput } from '../../../domain/receipts/daily.ts';
import { keyedProcedure, router } from '../init.ts';

// An agent's settled receipts in UTC daily buckets (svc_daily_transactions, svc_transaction_history totals).
export const activityRouter = router({
  daily: keyedProcedure
    .meta({
      bucket: 'receipts.read',
      openapi: {
        method: 'GET',
        path: '/v1/receipts/{agent}/daily',
        tags: ['receipts'],
        summary: 'Settled receipts of the last N days (default 7) in UTC daily buckets, totals in USD',
        description:
          'Settled earn and spend receipts of the agent per UTC day, empty days included, with totals in US dollars (fee-facilitator-mpp-tools §4.3 svc_daily_transactions).',
      },
    })
    .input(DailyTransactionsInput)
    .output(DailyTransactions)
    .query(({ ctx, input }) => ctx.services.receipts.daily(ctx.principal, input)),
});
