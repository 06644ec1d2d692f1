import type { FastifyBaseLogger } from 'fastify';
import type { Principal } from '../../domain/access/schema.ts';
import type { Services } from '../services.ts';

/** Built once from the services: what tests, jobs, MCP and server-side callers share. */
export interface InnerContext {
  services: Services;
  log: FastifyBaseLogger;
}

/** Per request: adds the request id and the caller's credentials. `principal` is set by the keyed middleware. */
export interface Context extends InnerContext {
  requestId: string;
  authorization: string | undefined;
  principal?: Principal;
}
