import { performance } from 'node:perf_hooks';
import { initTRPC, TRPCError } from '@trpc/server';
import { middlewareMarker } from '@trpc/server/unstable-core-do-not-import';
import type { OpenApiMeta } from 'trpc-to-openapi';
import { DomainError, ERROR_CODES } from '../../domain/shared/errors.ts';
import type { Bucket } from '../../domain/policies/rate-limit.ts';
import { refuseUnsafeInput } from '../../domain/shared/validation.ts';
import { notedRequestId, resolveError, toDomainError, trpcErrorData } from '../errors.ts';
import { authenticate, requireAdmin } from '../policies/auth.ts';
import { limitAnonymous, limitKey } from '../policies/rate-limit.ts';
import { idempotent } from '../policies/idempotency.ts';
import type { Context } from './context.ts';

/** `status` is the REST success status (DECISIONS "Wire conventions": 201 create, 204 delete). */
/** `secretFields`: result fields shown once and never stored for Idempotency-Key replays (e.g. a new API key). */
export type Meta = OpenApiMeta<{ status?: 200 | 201 | 202 | 204; bucket?: Bucket; secretFields?: readonly string[] }>;

const t = initTRPC
  .context<Context>()
  .meta<Meta>()
  .create({
    isDev: false,
    // One formatter: the snake_case code, HTTP status, details and request id travel in `data`.
    errorFormatter({ shape, error, ctx }) {
      const requestId = ctx?.requestId ?? notedRequestId(error) ?? 'unknown';
      const domain = resolveError(error, requestId, ctx?.log ?? console);
      return { message: domain.message, code: shape.code, data: trpcErrorData(domain, requestId, shape.data.path ?? null) };
    },
  });

export const router = t.router;
export const createCallerFactory = t.createCallerFactory;

/** DomainErrors leave every procedure as the TRPCError of the table, so /trpc answers with the right status. */
const base = t.procedure.use(async ({ next }) => {
  const result = await next();
  if (!result.ok && result.error.cause instanceof DomainError) {
    const cause = result.error.cause;
    return { ...result, error: new TRPCError({ code: ERROR_CODES[cause.code].trpc, message: cause.message, cause }) };
  }
  return result;
});

/**
 * Text no store can keep (NUL, lone surrogates) and hostile nesting, anywhere in the raw input (REST body, path and
 * query parameters; tRPC and GraphQL inputs), are `invalid_request` before the input schema runs (issue 17).
 */
const safeInput = t.middleware(async ({ getRawInput, next }) => {
  // keyedProcedure applies the same check itself, between its rate limit and Idempotency-Key.
  refuseUnsafeInput(await getRawInput());
  return next();
});

/** The allowed base procedures. A new kind of procedure is a visible decision made here. */
export const publicProcedure = base.use(safeInput);

/**
 * Keyed: API-key auth and network, the rate-limit bucket of the procedure, usage records, and Idempotency-Key on
 * mutations — the policies of hosted-api §5 and §8, applied once here for REST, tRPC and (through the caller) GraphQL.
 */
export const keyedProcedure = base.use(async ({ ctx, next, meta, path, type, getRawInput }) => {
  let principal;
  try {
    principal = await authenticate(ctx.services, ctx.authorization);
  } catch (e) {
    limitAnonymous(ctx.services, ctx.clientIp, 'default', ctx.responseHeaders);
    throw e;
  }
  const bucket = meta?.bucket ?? 'default';
  const started = performance.now();
  const keyed = { ...ctx, principal };
  let status: number = meta?.status ?? 200;
  try {
    await limitKey(ctx.services, principal, bucket, ctx.responseHeaders);
    // After the key is counted, before the input is hashed for Idempotency-Key (a hostile depth would overflow it).
    refuseUnsafeInput(await getRawInput());
    if (type !== 'mutation' || ctx.idempotencyKey === undefined) {
      const result = await next({ ctx: keyed });
      if (!result.ok) status = ERROR_CODES[toDomainError(result.error).error.code].status;
      return result;
    }
    // The stored outcome is the procedure's value or its domain error; unexpected faults are not stored.
    let data: unknown;
    try {
      data = await idempotent(
        keyed,
        path,
        await getRawInput(),
        async () => {
          const result = await next({ ctx: keyed });
          if (result.ok) return result.data;
          const mapped = toDomainError(result.error);
          throw mapped.expected ? mapped.error : result.error;
        },
        meta?.secretFields,
      );
    } finally {
      ctx.replay = keyed.replay;
    }
    return { ok: true as const, data, marker: middlewareMarker, ctx: keyed };
  } catch (e) {
    status = ERROR_CODES[toDomainError(e).error.code].status;
    throw e;
  } finally {
    ctx.services.recorder.record({
      keyId: principal.keyId,
      network: principal.network,
      bucket,
      method: ctx.transport,
      route: path,
      status,
      durationMs: Math.round(performance.now() - started),
    });
  }
});

export const adminProcedure = keyedProcedure.use(({ ctx, next }) => {
  requireAdmin(ctx.principal);
  return next({ ctx });
});

