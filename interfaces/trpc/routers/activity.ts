import { DailyTransactions, DailyTransactionsInput } from '../../../domain/receipts/daily.ts';
import { keyedProcedure, router } from '../init.ts';

// An agent's settled receipts in UTC daily buckets (svc_daily_transactions, svc_transaction_history totals).
export const activityRouter = router({
  daily: keyedProcedure
    .meta({
      bucket: 'receipts.read',
      openapi: { method: 'GET', path: '/v1/receipts/{agent}/daily', tags: ['receipts'], summary: 'Settled receipts of the last N days (default 7) in UTC daily buckets, totals in USD' },
    })
    .input(DailyTransactionsInput)
    .output(DailyTransactions)
    .query(({ ctx, input }) => ctx.services.receipts.daily(ctx.principal, input)),
});
