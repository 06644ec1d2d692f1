import type { FastifyInstance } from 'fastify';
import type { Network } from '../../domain/shared/network.ts';
import type { Services } from '../services.ts';
import { registerAssetRoutes } from './assets.ts';
import { registerDocsRoutes } from './docs.ts';
import { registerLandingRoutes } from './landing.ts';

// The pages a browser opens besides the explorer: / (what runs, where each door is), /docs (the API reference) and
// the files they and GraphiQL load (/assets, /favicon.ico). GraphiQL itself is Yoga's (graphql/yoga.ts).

export function registerPages(app: FastifyInstance, deps: { services: Services; rpcUrls: Partial<Record<Network, string>> }): void {
  registerAssetRoutes(app);
  registerLandingRoutes(app, deps);
  registerDocsRoutes(app, deps);
}
