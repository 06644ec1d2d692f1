import { z } from 'zod';
import { DailyTransactionsInput, MAX_DAYS } from '../../../domain/receipts/daily.ts';
import { ListReceiptsInput, ReceiptHash } from '../../../domain/receipts/schema.ts';
import { atomicToDecimal } from '../../../domain/shared/money.ts';
import { STABLES } from '../../../domain/shared/network.ts';
import { defineTool } from '../context.ts';

// fee-facilitator-mpp-tools §4.3: the agent's receipts, one receipt, and its activity of the last N days. Totals come
// from GET /v1/receipts/{agent}/daily (bigint sums on the server, USD strings on the wire).

/** History lists at most this many receipts of the window (the totals cover all of them). */
const HISTORY_MAX = 200;

export const receipts = defineTool({
  name: 'svc_receipts',
  title: 'Receipts of this agent',
  description:
    'Paginated receipts (earn and spend) of the active agent, newest first; filters kind, decision, since; pass next_cursor as cursor for the next page.',
  input: ListReceiptsInput.omit({ agent: true }),
  async run(ctx, input) {
    const agent = ctx.requireAgent();
    return ctx.call((api) => api.receipts.list.query({ ...input, agent: agent.mint }));
  },
});

export const getReceipt = defineTool({
  name: 'svc_get_receipt',
  title: 'One receipt',
  description: 'One receipt by its receipt_hash, with its ledger verification.',
  input: z.object({ receipt_hash: ReceiptHash.describe('the receipt’s receipt_hash (lowercase hex SHA-256)') }),
  run: (ctx, input) => ctx.call((api) => api.receipts.byHash.query({ hash: input.receipt_hash })),
});

const WindowInput = DailyTransactionsInput.omit({ agent: true });

export const transactionHistory = defineTool({
  name: 'svc_transaction_history',
  title: 'Transaction history',
  description: `Earn and spend receipts of the last N days (default 7, at most ${MAX_DAYS}) with totals sent_usd, received_usd and net_usd (totals count settled receipts: decision allow; spends at their gross).`,
  input: WindowInput,
  async run(ctx, input) {
    const agent = ctx.requireAgent();
    const daily = await ctx.call((api) => api.activity.daily.query({ agent: agent.mint, days: input.days }));
    const items = [];
    let cursor: string | undefined;
    let truncated = false;
    for (;;) {
      const page = await ctx.call((api) => api.receipts.list.query({ agent: agent.mint, since: daily.since, limit: 100, ...(cursor ? { cursor } : {}) }));
      for (const r of page.data) {
        const price = r.price;
        const stable = STABLES[ctx.network].find((s) => s.mint === price.asset);
        const atomic = BigInt(r.kind === 'spend' ? price.gross : price.amount_atomic);
        items.push({
          kind: r.kind,
          ts: r.ts,
          decision: r.decision,
          amount_usd: stable ? atomicToDecimal(atomic, stable.decimals) : null,
          currency: price.currency,
          amount_atomic: atomic.toString(),
          url: r.request.url,
          tx_sig: r.tx_sig ?? null,
          receipt_hash: r.receipt_hash,
          verification: r.verification.status,
        });
      }
      if (!page.has_more || !page.next_cursor) break;
      if (items.length >= HISTORY_MAX) {
        truncated = true;
        break;
      }
      cursor = page.next_cursor;
    }
    return {
      agent: agent.mint,
      network: ctx.network,
      days: daily.days,
      since: daily.since,
      ...daily.totals,
      receipts: items.slice(0, HISTORY_MAX),
      truncated: truncated || items.length > HISTORY_MAX,
    };
  },
});

export const dailyTransactions = defineTool({
  name: 'svc_daily_transactions',
  title: 'Daily transactions',
  description: 'The same window as svc_transaction_history in UTC daily buckets: date, sent_usd, received_usd, net_usd, sent_count, received_count.',
  input: WindowInput,
  async run(ctx, input) {
    const agent = ctx.requireAgent();
    return ctx.call((api) => api.activity.daily.query({ agent: agent.mint, days: input.days }));
  },
});
