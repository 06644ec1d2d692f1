import { IndexerNetworkStatus } from '../../../domain/indexer/schema.ts';
import { builder } from '../builder.ts';
import { fromZod, procedure } from '../describe.ts';
import { NetworkEnum } from '../enums.ts';

// GET /v1/indexer/status through the same procedure as REST (ctx.api), which calls IndexerService.status.

const IndexerNetworkStatusRef = builder.objectRef<IndexerNetworkStatus>('IndexerNetworkStatus').implement({
  extensions: fromZod(IndexerNetworkStatus),
  description: 'The indexer on one network: how far it scanned the watched addresses and its last run.',
  fields: (t) => ({
    network: t.expose('network', { type: NetworkEnum }),
    ledgerSlot: t.exposeInt('ledger_slot', { nullable: true, description: 'the ledger’s slot now; null when it could not be read' }),
    cursorSlot: t.exposeInt('cursor_slot', { nullable: true, description: 'every watched address was scanned up to this slot by the last complete run' }),
    newestCursorSlot: t.exposeInt('newest_cursor_slot', { nullable: true, description: 'the newest slot of a transaction processed for a watched address' }),
    lagSlots: t.exposeInt('lag_slots', { nullable: true, description: 'ledgerSlot − cursorSlot' }),
    watchedAddresses: t.exposeInt('watched_addresses'),
    lastRunAt: t.exposeString('last_run_at', { nullable: true }),
    lastError: t.exposeString('last_error', { nullable: true }),
    lastErrorAt: t.exposeString('last_error_at', { nullable: true }),
  }),
});

builder.queryFields((t) => ({
  indexerStatus: t.field({
    extensions: procedure('indexer.status'),
    type: [IndexerNetworkStatusRef],
    description: 'GET /v1/indexer/status: the indexer on your network (every key of the network reads it).',
    resolve: async (_root, _args, ctx) => (await ctx.api.indexer.status()).data,
  }),
}));
