import { z } from 'zod';
import { Health, Version } from '../../domain/meta/service.ts';
import { keyedProcedure, router } from './init.ts';
import { agentsRouter } from './routers/agents.ts';
import { eventsRouter } from './routers/events.ts';
import { paymentLinksRouter } from './routers/payment-links.ts';
import { sellerRouter } from './routers/seller.ts';
import { adminRouter } from './routers/admin.ts';
import { metricsRouter } from './routers/metrics.ts';
import { devRouter } from './routers/dev.ts';
import { receiptsRouter } from './routers/receipts.ts';
import { webhooksRouter } from './routers/webhooks.ts';
import { transactionsRouter } from './routers/transactions.ts';
import { prepareRouter } from './routers/prepare.ts';
import { indexerRouter } from './routers/indexer.ts';
import { identityRouter } from './routers/identity.ts';
import { buyerRouter } from './routers/buyer.ts';
import { activityRouter } from './routers/activity.ts';
import { discoveryRouter } from './routers/discovery.ts';
import { authRouter } from './routers/auth.ts';

export const appRouter = router({
  health: keyedProcedure
    .meta({
      bucket: 'meta',
      openapi: {
        method: 'GET',
        path: '/v1/health',
        tags: ['meta'],
        summary: 'Health and the protocol fee block',
        description:
          'The gateway is up: version, time, the ledger it reads and the protocol_fee block (bps, pct, authorities per network) buyers compare before signing (fee-facilitator-mpp-tools §2.4).',
      },
    })
    .input(z.void())
    .output(Health)
    .query(({ ctx }) => ctx.services.meta.health()),
  version: keyedProcedure
    .meta({
      bucket: 'meta',
      openapi: {
        method: 'GET',
        path: '/v1/version',
        tags: ['meta'],
        summary: 'Version of the API',
        description: 'The gateway\'s version and commit, the API version (v1) and the OpenAPI version of /openapi.json (DECISIONS "Wire conventions").',
      },
    })
    .input(z.void())
    .output(Version)
    .query(({ ctx }) => ctx.services.meta.version()),
  paymentLinks: paymentLinksRouter,
  events: eventsRouter,
  agents: agentsRouter,
  seller: sellerRouter,
  admin: adminRouter,
  metrics: metricsRouter,
  dev: devRouter,
  receipts: receiptsRouter,
  webhooks: webhooksRouter,
  transactions: transactionsRouter,
  prepare: prepareRouter,
  indexer: indexerRouter,
  identity: identityRouter,
  buyer: buyerRouter,
  activity: activityRouter,
  discovery: discoveryRouter,
  auth: authRouter,
});

/** Imported by TypeScript frontends through interfaces/client. */
export type AppRouter = typeof appRouter;
