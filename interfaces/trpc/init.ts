import { initTRPC, TRPCError } from '@trpc/server';
import { middlewareMarker, type ProcedureCallOptions } from '@trpc/server/unstable-core-do-not-import';
import type { AnyProcedure } from '@trpc/server';
import type { OpenApiMeta } from 'trpc-to-openapi';
import { DomainError, ERROR_CODES, type ErrorCode } from '../../domain/shared/errors.ts';
import type { Bucket } from '../../domain/policies/rate-limit.ts';
import { refuseUnsafeInput } from '../../domain/shared/validation.ts';
import { notedRequestId, resolveError, toDomainError, trpcErrorData } from '../errors.ts';
import type { Principal } from '../../domain/access/schema.ts';
import { requireAdmin } from '../policies/auth.ts';
import { authenticateCounted, limitAnonymous, limitKey } from '../policies/rate-limit.ts';
import { startUsage } from '../policies/usage.ts';
import { idempotent } from '../policies/idempotency.ts';
import { scopedRequest } from '../policies/heavy.ts';
import type { Context } from './context.ts';

/** `status` is the REST success status (DECISIONS "Wire conventions": 201 create, 204 delete). */
/** `secretFields`: result fields shown once and never stored for Idempotency-Key replays (e.g. a new API key). */
/** `replayStatus`: the REST status of a result whose `replayed` is true (POST /v1/submit: 202 first, 200 on a repeat). */
/**
 * `errors`: the codes the procedure's service answers beyond those of its policies (auth, rate limit, input, ids in
 * the path, Idempotency-Key, request budget), documented per status in /openapi.json (rest/handler.ts).
 */
/**
 * `restAliases`: further REST paths (same method, same path parameters) served by the same procedure, e.g. a spelling
 * the spec gives beside the one DECISIONS settled on; /openapi.json lists each as its own operation.
 */
export type Meta = OpenApiMeta<{
  status?: 200 | 201 | 202 | 204;
  restAliases?: readonly string[];
  replayStatus?: 200;
  bucket?: Bucket;
  secretFields?: readonly string[];
  errors?: readonly ErrorCode[];
}>;

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

/** A DomainError (or tRPC's wrapping of one) as the TRPCError of the table, so /trpc answers with the right status. */
function tableError<E>(error: E): E | TRPCError {
  const cause = error instanceof TRPCError ? error.cause : error;
  return cause instanceof DomainError ? new TRPCError({ code: ERROR_CODES[cause.code].trpc, message: cause.message, cause }) : error;
}

/** DomainErrors leave every procedure as the TRPCError of the table, so /trpc answers with the right status. */
const base = t.procedure.use(async ({ next }) => {
  const result = await next();
  return result.ok ? result : { ...result, error: tableError(result.error) };
});

/**
 * Text no store can keep (NUL, lone surrogates) and hostile nesting, anywhere in the raw input (REST body, path and
 * query parameters; tRPC and GraphQL inputs), are `invalid_request` before the input schema runs.
 */
const safeInput = t.middleware(async ({ getRawInput, next }) => {
  // Keyed procedures run it after their rate limit counted the key and before Idempotency-Key hashes the input (a
  // hostile depth would overflow the hash).
  refuseUnsafeInput(await getRawInput());
  return next();
});

/** The allowed base procedures. A new kind of procedure is a visible decision made here. */
export const publicProcedure = base.use(safeInput);

/**
 * Routes public by nature, read with no key (a disclosure link is its own credential; a registration document is what
 * an agent's on-chain uri points at): counted per client IP in the `public` bucket, like the paywall's per-IP bucket.
 */
const limitClientIp = t.middleware(async ({ ctx, next }) => {
  await limitAnonymous(ctx.services, ctx.clientIp, 'public', ctx.responseHeaders);
  return next();
});
export const anonymousProcedure = base.use(limitClientIp).use(safeInput);

/**
 * The keyed policies of hosted-api §5 and §8, applied once here for REST, tRPC and (through the caller) GraphQL, in this
 * order, as one middleware (each tRPC middleware hop spreads its options and the context again and adds
 * promises; a read pays every hop), which also maps DomainErrors to the table's TRPCError as `base` does elsewhere:
 * 0. auth — API-key auth and network; a request without a valid key counts against the client IP;
 * 1. usage — one usage record per keyed call, with the status its door answers (rate-limited calls included);
 * 2. rate limit — the sliding window of the procedure's bucket for the key, counted before the input is checked or hashed;
 * 3. request class — the procedure's database work under its class's limits (interfaces/policies/heavy.ts);
 * 4. safe input — `refuseUnsafeInput` of the raw input (see safeInput), before Idempotency-Key hashes it;
 * 5. Idempotency-Key on mutations (hosted-api §5.7): the stored outcome is the procedure's value or its domain error;
 *    unexpected faults are not stored; a replay answers without running the procedure.
 */
const keyedPolicies = t.middleware(async ({ ctx, meta, path, type, getRawInput, next }) => {
  try {
    const principal = await authenticateCounted(ctx.services, ctx, ctx.responseHeaders);
    const bucket = meta?.bucket ?? 'default';
    const record = startUsage(ctx, principal, { bucket, route: path });
    let status: number = meta?.status ?? 200;
    try {
      await limitKey(ctx.services, principal, bucket, { headers: ctx.responseHeaders });
      return await scopedRequest(ctx, principal, { path, type }, async () => {
        const raw = await getRawInput();
        refuseUnsafeInput(raw);
        const withPrincipal = () => next({ ctx: { principal } });
        const result =
          type !== 'mutation' || ctx.idempotencyKey === undefined
            ? await withPrincipal()
            : await idempotentNext({ ...ctx, principal }, { path, raw, meta }, withPrincipal);
        // thrown, so the scope sees a statement it cancelled and answers `timeout` instead
        if (!result.ok) throw result.error;
        return result;
      });
    } catch (e) {
      status = ERROR_CODES[toDomainError(e).error.code].status;
      throw e;
    } finally {
      record.end(status);
    }
  } catch (e) {
    throw tableError(e);
  }
});

async function idempotentNext<R extends { ok: true; data: unknown } | { ok: false; error: unknown }>(
  scope: Context & { principal: Principal },
  call: { path: string; raw: unknown; meta: Meta | undefined },
  next: () => Promise<R>,
) {
  const { path, raw, meta } = call;
  const run = async () => {
    const result = await next();
    if (result.ok) return { data: result.data, result };
    const mapped = toDomainError(result.error);
    throw mapped.expected ? mapped.error : result.error;
  };
  let ran: Awaited<ReturnType<typeof run>> | undefined;
  const data = await idempotent(scope, { route: path, input: raw, secretFields: meta?.secretFields }, async () => {
    ran = await run();
    return ran.data;
  });
  // The first call's result passes on as tRPC made it; only a replay, whose procedure did not run, needs one made.
  return ran?.result ?? (replayedResult(data, scope) as unknown as R);
}

/**
 * The one middleware result built by hand: an Idempotency-Key replay answers the stored outcome without calling
 * `next()`, and tRPC v11 has no public way for a middleware to return a value of its own (trpc/trpc#4066), so the
 * result carries tRPC's internal marker. Deciding the replay in each transport instead would write the policy three
 * times (REST, /trpc, GraphQL) and authenticate outside the procedure.
 */
function replayedResult(data: unknown, ctx: Context) {
  return { ok: true as const, data, marker: middlewareMarker, ctx };
}

/** Keyed: auth, then the policies above in their order (the rate limit counts the key before the input is checked or hashed). */
export const keyedProcedure = t.procedure.use(keyedPolicies);

export const adminProcedure = keyedProcedure.meta({ errors: ['forbidden', 'wrong_network'] }).use(({ ctx, next }) => {
  requireAdmin(ctx.principal);
  return next({ ctx });
});

/**
 * Calls a procedure as tRPC's server-side caller does (`createCaller(ctx).a.b(input)` ends in exactly this call), without
 * the caller's per-request proxies, path lookup and promises: REST's routes know their procedure already.
 */
export function invokeProcedure(procedure: AnyProcedure, ctx: Context, path: string, input: unknown): Promise<unknown> {
  const raw = Promise.resolve(input);
  const call = procedure as unknown as (opts: ProcedureCallOptions<Context>) => Promise<unknown>;
  return call({ path, getRawInput: () => raw, ctx, type: procedure._def.type, signal: undefined, batchIndex: 0 });
}
