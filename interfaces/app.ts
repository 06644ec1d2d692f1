import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { JobRunner } from '../domain/ports/job-queue.ts';
import type { Config } from './config.ts';
import type { Services } from './services.ts';
import { openCore, refuseOwnListener, startJobRunner, type AppOptions, type Core, type CoreLedgers, type Database } from './core.ts';
import { buildHttp } from './http.ts';

// The gateway: core wiring (core.ts) → HTTP server (http.ts) → listen, and the job runner inline. Tests build the app
// through here too. The names other modules imported from here stay importable from here.
export * from './core.ts';
export { BODY_LIMIT } from './http.ts';
export { createFacilitatorApp, type FacilitatorApp } from './facilitator/app.ts';

export interface App {
  url: string;
  ledgers: CoreLedgers;
  config: Config;
  services: Services;
  /** the outbound HTTP the services call through (issue 17: tests ask it which listeners it refuses) */
  outbound: Core['outbound'];
  fastify: FastifyInstance;
  database: Database;
  log: Logger;
  close(): Promise<void>;
}

export async function createApp(config: Config, options: AppOptions = {}): Promise<App> {
  const core = await openCore(config, options);
  const { services, settings, database, log } = core;
  let fastify: FastifyInstance | undefined;
  let runner: JobRunner | undefined;
  try {
    fastify = buildHttp({ services, log, accountsSecret: config.facilitator.accountsSecret });
    await fastify.listen({ port: config.port, host: config.host });
    const address = fastify.server.address();
    const port = typeof address === 'object' && address ? address.port : config.port;
    refuseOwnListener(core.outbound, config.host, port);
    // With PORT=0 the real port is known only now.
    if (!config.baseUrl) settings.baseUrl = `http://localhost:${port}`;
    if (!config.facilitatorUrl) settings.facilitatorUrl = `${settings.baseUrl}/facilitator`;
    runner = config.jobs === 'inline' ? await startJobRunner(database.url, services, log) : undefined;
    return {
      url: `http://127.0.0.1:${port}`,
      ledgers: core.ledgers,
      config,
      services,
      outbound: core.outbound,
      fastify,
      database,
      log,
      async close() {
        // In-flight requests get a short grace period; then lingering sockets (an aborted streaming client's
        // never-used keep-alive connection, say) are cut so shutdown does not wait for the headers timeout.
        const closing = fastify!.close();
        const cut = setTimeout(() => fastify!.server.closeAllConnections(), 2000);
        await closing;
        clearTimeout(cut);
        await runner?.stop();
        await core.close();
      },
    };
  } catch (e) {
    await runner?.stop().catch(() => {});
    await fastify?.close().catch(() => {});
    await core.close();
    throw e;
  }
}
