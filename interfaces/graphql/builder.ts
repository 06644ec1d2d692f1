import SchemaBuilder from '@pothos/core';
import ComplexityPlugin from '@pothos/plugin-complexity';
import type { FastifyBaseLogger } from 'fastify';
import type { Bucket } from '../../domain/policies/rate-limit.ts';
import type { Credentials, Principal } from '../../domain/access/schema.ts';
import { DomainError } from '../../domain/shared/errors.ts';
import { authenticate } from '../policies/auth.ts';
import { fieldCost, hitsForCost } from '../policies/graphql-limits.ts';
import { authenticateCounted, limitKey } from '../policies/rate-limit.ts';
import type { Services } from '../services.ts';
import type { Context } from '../trpc/context.ts';
import type { CancelSignal } from '../../domain/ports/store.ts';
import { createCallerFactory } from '../trpc/init.ts';
import { appRouter } from '../trpc/router.ts';

// The one Pothos builder and the GraphQL context. Types live in schema/<module>.ts.

const createCaller = createCallerFactory(appRouter);

/**
 * The tRPC procedures, called in-process: a resolver for an action the procedures cover calls the procedure, so the
 * keyed policies (API key and network, rate-limit bucket, Idempotency-Key, usage record) and the zod input schema
 * apply to GraphQL exactly as to REST and tRPC, and the procedure calls the domain service.
 */
export type Api = ReturnType<typeof createCaller>;

/** Per operation, for HTTP (Yoga) and graphql-ws alike. */
export interface GraphqlContext {
  services: Services;
  requestId: string;
  log: FastifyBaseLogger;
  api: Api;
  /**
   * For work outside the procedures (subscriptions): the key checked with the shared auth policy (missing_api_key,
   * invalid_api_key; a failed attempt counts against the client IP) and one hit on `bucket`.
   */
  keyed(bucket: Bucket): Promise<Principal>;
  /**
   * Counts an operation's estimated cost against the key's `graphql` bucket (hitsForCost), before it runs; throws
   * rate_limited. Without a valid key nothing is counted here: each field then answers the key error and counts
   * against the client IP, as in the procedures.
   */
  chargeCost(cost: number): Promise<void>;
  /** the credentials the operation runs with: live subscriptions are ended when they stop being valid */
  authorization: Credentials;
  /** RateLimit-* and Idempotent-Replayed, copied onto the HTTP response */
  responseHeaders: Record<string, string>;
  /** aborted when the server shuts down: live subscriptions end so the process can close */
  shutdown: AbortSignal;
}

export interface ContextInput {
  services: Services;
  requestId: string;
  log: FastifyBaseLogger;
  authorization: Credentials;
  idempotencyKey: string | undefined;
  clientIp: string;
  shutdown: AbortSignal;
  /** aborted when the HTTP client leaves before the answer: its running statement is cancelled */
  signal?: CancelSignal | undefined;
}

/** The one way a GraphQL context is built, for HTTP and graphql-ws. */
export function graphqlContext(input: ContextInput): GraphqlContext {
  const { services, requestId, log, shutdown } = input;
  const procedureContext: Context = {
    services,
    log,
    requestId,
    authorization: input.authorization,
    idempotencyKey: input.idempotencyKey,
    clientIp: input.clientIp,
    transport: 'graphql',
    responseHeaders: {},
    replay: {},
    signal: input.signal,
  };
  return {
    services,
    requestId,
    log,
    api: createCaller(procedureContext),
    responseHeaders: procedureContext.responseHeaders,
    shutdown,
    async keyed(bucket) {
      const principal = await authenticateCounted(services, input, procedureContext.responseHeaders);
      await limitKey(services, principal, bucket, { headers: procedureContext.responseHeaders });
      return principal;
    },
    async chargeCost(cost) {
      let principal: Principal;
      try {
        principal = await authenticate(services, input.authorization);
      } catch (e) {
        if (e instanceof DomainError) return;
        throw e;
      }
      await limitKey(services, principal, 'graphql', { headers: procedureContext.responseHeaders, hits: hitsForCost(cost) });
    },
    authorization: input.authorization,
  };
}

export const builder = new SchemaBuilder<{
  Context: GraphqlContext;
  // Fields are non-null unless they say otherwise, like the zod wire types they mirror.
  DefaultFieldNullability: false;
  Scalars: {
    ID: { Input: string; Output: string };
    // Input `NonNullable<unknown>` (`{}`): any JSON value but null, so a `required: true` JSON field is a required key of the inferred input.
    JSON: { Input: NonNullable<unknown>; Output: unknown };
  };
}>({
  defaultFieldNullability: false,
  plugins: [ComplexityPlugin],
  // Only the cost model here; the limits are checked before execution by interfaces/policies/graphql-limits.ts.
  complexity: { fieldComplexity: fieldCost },
});

builder.queryType({});
builder.mutationType({});
builder.subscriptionType({});
