import { DailyBucket, DailyTransactions } from '../../../domain/receipts/daily.ts';
import { builder } from '../builder.ts';
import { fromZod, procedure } from '../describe.ts';
import { NetworkEnum, networkOf } from '../enums.ts';
import { given } from './common.ts';

// GET /v1/receipts/{agent}/daily through the same procedure as REST (ctx.api).

type Totals = DailyTransactions['totals'];

const DailyBucketRef = builder.objectRef<DailyBucket>('DailyTransactionBucket').implement({
  extensions: fromZod(DailyBucket),
  description: 'Settled receipts of one UTC day: sent (spend receipts, gross) and received (earn receipts) in US dollars.',
  fields: (t) => ({
    date: t.exposeString('date'),
    sentUsd: t.exposeString('sent_usd'),
    receivedUsd: t.exposeString('received_usd'),
    netUsd: t.exposeString('net_usd'),
    sentCount: t.exposeInt('sent_count'),
    receivedCount: t.exposeInt('received_count'),
  }),
});

const TotalsRef = builder.objectRef<Totals>('DailyTransactionTotals').implement({
  extensions: fromZod(DailyTransactions.shape.totals),
  fields: (t) => ({
    sentUsd: t.exposeString('sent_usd'),
    receivedUsd: t.exposeString('received_usd'),
    netUsd: t.exposeString('net_usd'),
    sentCount: t.exposeInt('sent_count'),
    receivedCount: t.exposeInt('received_count'),
  }),
});

const DailyTransactionsRef = builder.objectRef<DailyTransactions>('DailyTransactions').implement({
  extensions: fromZod(DailyTransactions),
  fields: (t) => ({
    agent: t.exposeString('agent'),
    network: t.field({ type: NetworkEnum, resolve: (r) => networkOf(r.network) }),
    days: t.exposeInt('days'),
    since: t.exposeString('since'),
    buckets: t.expose('buckets', { type: [DailyBucketRef] }),
    totals: t.expose('totals', { type: TotalsRef }),
  }),
});

builder.queryFields((t) => ({
  dailyTransactions: t.field({
    extensions: procedure('activity.daily'),
    type: DailyTransactionsRef,
    nullable: true,
    description: 'An agent’s settled receipts of the last `days` days (default 7) in UTC daily buckets.',
    args: { agent: t.arg.string({ required: true }), days: t.arg.int() },
    resolve: (_root, a, ctx) => ctx.api.activity.daily({ agent: a.agent, days: given(a.days) }),
  }),
}));
