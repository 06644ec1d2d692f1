import { z } from 'zod';
import { IndexerStatus } from '../../../domain/indexer/schema.ts';
import { keyedProcedure, router } from '../init.ts';

// The indexer's progress on the caller's network (IndexerService.status). Every key of the network reads it:
// it carries counts, slots and the last error, no owned data.

export const indexerRouter = router({
  status: keyedProcedure
    .meta({
      bucket: 'indexer.read',
      openapi: {
        method: 'GET',
        path: '/v1/indexer/status',
        tags: ['indexer'],
        summary: 'The indexer on your network: cursor slot, lag in slots, watched addresses, last run, last error',
        description:
          "What the background indexer has read on the key's network: the slot it reached, how far behind the ledger it is, how many addresses it watches, its last run and error.",
      },
    })
    .input(z.void())
    .output(IndexerStatus)
    .query(({ ctx }) => ctx.services.indexer.status(ctx.principal)),
});
