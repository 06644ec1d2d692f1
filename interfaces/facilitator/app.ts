import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { newId } from '../../domain/shared/ids.ts';
import type { Clock } from '../../domain/ports/clock.ts';
import type { FacilitatorService } from '../../domain/facilitator/service.ts';
import type { Network } from '../../domain/shared/network.ts';
import type { Config } from '../config.ts';
import { openFacilitatorCore } from '../core.ts';
import { boundedServerOptions } from '../../domain/shared/request-bounds.ts';
import { BODY_LIMIT } from '../http.ts';
import { clientErrorHandler, stampRequestId } from '../http/answers.ts';
import { registerFacilitatorRoutes } from './routes.ts';
import { listenFailure } from '../listeners.ts';

export interface FacilitatorApp {
  url: string;
  service: FacilitatorService;
  rpcUrls: Partial<Record<Network, string>>;
  close(): Promise<void>;
}

/**
 * `npm run facilitator`: the facilitator alone (fee-facilitator-mpp-tools §2.5) on SVC_FACILITATOR_PORT, with the
 * same database (duplicate guard, rent sponsorship) and ledgers as the installation: SVC_FACILITATOR_RPC_URL, or the
 * embedded ledgers under SVC_DATA_DIR (through the gateway's JSON-RPC when it runs).
 */
export async function createFacilitatorApp(
  config: Config,
  options: { logger?: Logger; clock?: Clock; pgSettings?: Record<string, string> } = {},
): Promise<FacilitatorApp> {
  const core = await openFacilitatorCore(config, options);
  const { service, log } = core;
  let fastify: FastifyInstance | undefined;
  try {
    fastify = Fastify({
      loggerInstance: log as unknown as FastifyBaseLogger,
      bodyLimit: BODY_LIMIT,
      genReqId: () => newId(),
      requestIdHeader: false,
      // the gateway's bounds on slow clients and its envelope for what is refused before a route (http.ts)
      http: boundedServerOptions(config.http),
      requestTimeout: config.http.requestMs,
      clientErrorHandler,
    });
    fastify.addHook('onRequest', stampRequestId);
    registerFacilitatorRoutes(fastify, { facilitator: service, prefix: '', accountsToken: config.facilitator.accountsSecret });
    await fastify.listen({ port: config.facilitator.port, host: config.facilitator.host }).catch((e: unknown) => {
      const { port, host } = config.facilitator;
      throw listenFailure(e, {
        portVariable: 'SVC_FACILITATOR_PORT',
        portValue: port,
        hostVariable: 'SVC_FACILITATOR_HOST',
        host,
        usual: 'another facilitator',
      });
    });
    const address = fastify.server.address();
    const port = typeof address === 'object' && address ? address.port : config.facilitator.port;
    const server = fastify;
    return {
      url: `http://127.0.0.1:${port}`,
      service,
      rpcUrls: core.rpcUrls,
      async close() {
        await server.close();
        await core.close();
      },
    };
  } catch (e) {
    await fastify?.close().catch(() => {});
    await core.close();
    throw e;
  }
}
