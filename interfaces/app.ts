import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { JobRunner } from '../domain/ports/job-queue.ts';
import type { Config } from './config.ts';
import type { Services } from './services.ts';
import type { Network } from '../domain/shared/network.ts';
import { openCore, startJobRunner, type AppOptions, type Core, type CoreLedgers, type Database } from './core.ts';
import { buildHttp } from './http.ts';
import { bindListener } from './http/listener.ts';
import { listenFailure } from './listeners.ts';
import { flushLogger } from './log.ts';

// The gateway: bind the port → core wiring (core.ts) → HTTP server (http.ts) → serve, and the job runner inline. Tests build the app
// through here too. The names other modules imported from here stay importable from here.
export * from './core.ts';
export { BODY_LIMIT } from './http.ts';
export { createFacilitatorApp, type FacilitatorApp } from './facilitator/app.ts';

export interface App {
  url: string;
  ledgers: CoreLedgers;
  config: Config;
  services: Services;
  /** the outbound HTTP the services call through (tests ask it which listeners it refuses) */
  outbound: Core['outbound'];
  fastify: FastifyInstance;
  database: Database;
  log: Logger;
  close(): Promise<void>;
}

export async function createApp(config: Config, options: AppOptions = {}): Promise<App> {
  let listener: Awaited<ReturnType<typeof bindListener>>;
  try {
    listener = await bindListener(config.port, config.host, config.http);
  } catch (e) {
    throw listenFailure(e, { portVariable: 'PORT', portValue: config.port, hostVariable: 'HOST', host: config.host, usual: 'another gateway' });
  }
  let core: Core | undefined;
  let fastify: FastifyInstance | undefined;
  let runner: JobRunner | undefined;
  try {
    core = await openCore(config, { ...options, listenPort: listener.port });
    const { services, database, log, ledgers } = core;
    // only the embedded ledgers' JSON-RPC: a configured node's URL may carry its provider's key
    const ledgerRpcUrls: Partial<Record<Network, string>> = {};
    for (const network of Object.keys(ledgers.embedded) as Network[]) ledgerRpcUrls[network] = ledgers.rpcUrls[network];
    fastify = buildHttp({ services, log, accountsSecret: config.facilitator.accountsSecret, listener, bounds: config.http, ledgerRpcUrls });
    await listener.serve(fastify);
    runner = config.jobs === 'inline' ? await startJobRunner(database.url, services, log) : undefined;
    const opened = core;
    const server = fastify;
    return {
      url: `http://127.0.0.1:${listener.port}`,
      ledgers: opened.ledgers,
      config,
      services,
      outbound: opened.outbound,
      fastify: server,
      database,
      log,
      async close() {
        // In-flight requests get a short grace period; then lingering sockets (an aborted streaming client's
        // never-used keep-alive connection, say) are cut so shutdown does not wait for the headers timeout.
        await server.close(); // fastify's close hooks (GraphQL subscriptions and sockets); later requests answer 503
        const cut = setTimeout(() => listener.server.closeAllConnections(), 2000);
        await listener.close();
        clearTimeout(cut);
        await runner?.stop();
        await opened.close();
        await flushLogger(log); // the last lines, shutdown's included, written before the process goes
      },
    };
  } catch (e) {
    await runner?.stop().catch(() => {});
    await fastify?.close().catch(() => {});
    await listener.close();
    await core?.close();
    throw e;
  }
}
