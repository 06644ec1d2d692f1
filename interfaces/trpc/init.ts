import { initTRPC, TRPCError } from '@trpc/server';
import type { OpenApiMeta } from 'trpc-to-openapi';
import { DomainError, ERROR_CODES } from '../../domain/shared/errors.ts';
import { resolveError } from '../errors.ts';
import { authenticate, requireAdmin } from '../policies/auth.ts';
import type { Context } from './context.ts';

/** `status` is the REST success status (DECISIONS "Wire conventions": 201 create, 204 delete). */
export type Meta = OpenApiMeta<{ status?: 200 | 201 | 202 | 204 }>;

const t = initTRPC
  .context<Context>()
  .meta<Meta>()
  .create({
    isDev: false,
    // One formatter: the snake_case code, HTTP status, details and request id travel in `data`.
    errorFormatter({ shape, error, ctx }) {
      const requestId = ctx?.requestId ?? 'unknown';
      const domain = resolveError(error, requestId, ctx?.log ?? console);
      return {
        message: domain.message,
        code: shape.code,
        data: {
          code: domain.code,
          httpStatus: ERROR_CODES[domain.code].status,
          details: domain.details ?? null,
          request_id: requestId,
          path: shape.data.path ?? null,
        },
      };
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

/** The allowed base procedures. A new kind of procedure is a visible decision made here. */
export const publicProcedure = base;

export const keyedProcedure = base.use(async ({ ctx, next }) => {
  const principal = await authenticate(ctx.services, ctx.authorization);
  return next({ ctx: { ...ctx, principal } });
});

export const adminProcedure = keyedProcedure.use(({ ctx, next }) => {
  requireAdmin(ctx.principal);
  return next({ ctx });
});

