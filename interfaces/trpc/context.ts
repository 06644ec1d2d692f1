import type { FastifyBaseLogger } from 'fastify';
import type { Credentials, Principal } from '../../domain/access/schema.ts';
import type { CancelSignal } from '../../domain/ports/store.ts';
import type { Services } from '../services.ts';

/** Built once from the services: what tests, jobs, MCP and server-side callers share. */
export interface InnerContext {
  services: Services;
  log: FastifyBaseLogger;
}

/** Per request: adds the request id, the caller's credentials and what the policies report back. */
export interface Context extends InnerContext {
  requestId: string;
  /** the Authorization header, or the grant of a stream token redeemed by the connection */
  authorization: Credentials;
  idempotencyKey: string | undefined;
  clientIp: string;
  /** "GET /v1/health", "trpc", "graphql": recorded with usage */
  transport: string;
  /** headers the policies add (RateLimit-*, Idempotent-Replayed); every transport copies them to its response */
  responseHeaders: Record<string, string>;
  /**
   * filled by the idempotency policy on a replay with the first call's request id; one object per request, shared by
   * reference, so the transport sees it through the copies tRPC makes of the context
   */
  replay: { requestId?: string };
  /** set by the keyed middleware */
  principal?: Principal;
  /** aborts when the client disconnects before the answer (its running statement is cancelled) */
  signal?: CancelSignal | undefined;
}
