import { TRPCError } from '@trpc/server';
import { TRPC_ERROR_CODES_BY_KEY } from '@trpc/server/rpc';
import { z, ZodError } from 'zod';
import { DomainError, ERROR_CODES, isErrorCode, type ErrorCode } from '../domain/shared/errors.ts';
import { invalidFromZod, toIssues } from '../domain/shared/validation.ts';

// The one place where any thrown value becomes a DomainError, and a DomainError becomes each transport's shape.

export interface ErrorLogger {
  error(obj: object, msg: string): void;
}

interface StandardIssue {
  message: string;
  path?: ReadonlyArray<PropertyKey | { key: PropertyKey }>;
  code?: string;
}

function fromStandardIssues(issues: readonly StandardIssue[]): DomainError {
  const list = issues.map((i) => ({
    path: (i.path ?? []).map((p) => String(typeof p === 'object' ? p.key : p)).join('.'),
    message: i.message,
    code: i.code ?? 'invalid',
  }));
  const first = list[0];
  return DomainError.invalid(list, `Invalid request${first?.path ? ` at ${first.path}` : ''}: ${first?.message ?? 'schema mismatch'}`);
}

/** Errors raised by the HTTP framework itself (fastify), by status. */
function fromHttpStatus(status: number, message: string): DomainError | undefined {
  if (status === 413) return new DomainError('payload_too_large', 'The request body exceeds 1 MiB.');
  if (status === 415) return DomainError.invalid([{ path: '', message, code: 'unsupported_media_type' }], 'Send JSON with Content-Type: application/json.');
  if (status === 404) return new DomainError('not_found', 'No such route.');
  if (status === 405) return new DomainError('method_not_allowed', message);
  if (status === 406) return DomainError.invalid([{ path: '', message, code: 'not_acceptable' }], message);
  if (status === 409) return new DomainError('conflict', message);
  if (status >= 400 && status < 500) return DomainError.invalid([{ path: '', message, code: 'malformed' }], message);
  return undefined;
}

const TRPC_FALLBACK: Partial<Record<TRPCError['code'], ErrorCode>> = {
  PARSE_ERROR: 'invalid_request',
  BAD_REQUEST: 'invalid_request',
  NOT_FOUND: 'not_found',
  METHOD_NOT_SUPPORTED: 'method_not_allowed',
  PAYLOAD_TOO_LARGE: 'payload_too_large',
  UNAUTHORIZED: 'invalid_api_key',
  FORBIDDEN: 'forbidden',
  TOO_MANY_REQUESTS: 'rate_limited',
  CONFLICT: 'conflict',
};

/** Anything thrown → DomainError; `expected` is false for faults that must be masked and logged. */
export function toDomainError(err: unknown): { error: DomainError; expected: boolean } {
  if (err instanceof DomainError) return { error: err, expected: true };
  if (err instanceof ZodError) return { error: invalidFromZod(err), expected: true };
  if (err instanceof TRPCError) {
    const cause = err.cause;
    if (cause instanceof DomainError) return { error: cause, expected: true };
    if (cause instanceof ZodError) return { error: invalidFromZod(cause), expected: true };
    if (cause && Array.isArray((cause as { issues?: unknown }).issues)) {
      return { error: fromStandardIssues((cause as unknown as { issues: StandardIssue[] }).issues), expected: true };
    }
    // tRPC refuses a body that is not JSON (e.g. text/plain) before any context exists: the same answer as REST's 415.
    if (err.code === 'UNSUPPORTED_MEDIA_TYPE') return { error: fromHttpStatus(415, err.message)!, expected: true };
    const code = TRPC_FALLBACK[err.code];
    if (code === 'invalid_request') {
      return { error: DomainError.invalid([{ path: '', message: err.message, code: 'malformed' }], err.message), expected: true };
    }
    if (code) return { error: new DomainError(code, err.message), expected: true };
    return toDomainError(cause ?? new Error(err.message));
  }
  const e = err as { statusCode?: unknown; code?: unknown; message?: unknown; extensions?: { code?: unknown }; originalError?: unknown };
  if (e && typeof e === 'object') {
    if (e.originalError) return toDomainError(e.originalError);
    if (isErrorCode(e.extensions?.code) && typeof e.message === 'string') {
      return { error: new DomainError(e.extensions.code, e.message), expected: true };
    }
    if (typeof e.statusCode === 'number' && e.statusCode < 500) {
      const mapped = fromHttpStatus(e.statusCode, typeof e.message === 'string' ? e.message : 'Bad request');
      if (mapped) return { error: mapped, expected: true };
    }
  }
  return { error: new DomainError('internal_error', 'An unexpected error occurred. Quote the request_id when reporting it.'), expected: false };
}

const requestIds = new WeakMap<object, string>();

/**
 * tRPC reports an error to `onError`, which sees the HTTP request, before its errorFormatter, which sees only the
 * context — absent when the request failed before one was made (an unsupported content type, a bad batch). The
 * request id travels from one to the other on the error itself.
 */
export function noteRequestId(error: object, requestId: string): void {
  requestIds.set(error, requestId);
}

export function notedRequestId(error: object): string | undefined {
  return requestIds.get(error);
}

/** Maps and logs once: unexpected faults are logged with the request id and masked. */
export function resolveError(err: unknown, requestId: string, log: ErrorLogger): DomainError {
  const { error, expected } = toDomainError(err);
  if (!expected) log.error({ err, request_id: requestId }, 'unexpected error');
  return error;
}

/**
 * The REST error envelope of hosted-api §7, the one definition: restError builds it and /openapi.json documents every
 * error response with it (components.schemas.Error).
 */
export const ErrorEnvelope = z
  .object({
    error: z.enum(Object.keys(ERROR_CODES) as [ErrorCode, ...ErrorCode[]]).describe('stable snake_case code; branch on this'),
    message: z.string().describe('for people; may change'),
    details: z
      .looseObject({
        issues: z
          .array(
            z.object({
              path: z.string().describe('the invalid field, dotted'),
              message: z.string().describe('what is wrong, for people'),
              code: z.string().describe('machine-readable reason'),
            }),
          )
          .optional()
          .describe('invalid_request: one entry per invalid field'),
      })
      .optional()
      .describe('machine-readable context of the code (absent when there is none)'),
    retry_after_ms: z.number().int().optional().describe('rate_limited only: how long to wait, also under details'),
    request_id: z.string().describe('quote it when reporting a problem'),
  })
  .describe('The error envelope of every non-2xx answer');
export type RestErrorBody = z.infer<typeof ErrorEnvelope>;

/** REST envelope of hosted-api §7. */
export function restError(error: DomainError, requestId: string): { status: number; body: RestErrorBody } {
  const body: RestErrorBody = { error: error.code, message: error.message, request_id: requestId };
  if (error.details !== undefined) body.details = error.details as RestErrorBody['details'];
  const retryAfterMs = error.details?.retry_after_ms;
  if (error.code === 'rate_limited' && typeof retryAfterMs === 'number') body.retry_after_ms = retryAfterMs;
  return { status: ERROR_CODES[error.code].status, body };
}

/**
 * REST's answer to anything thrown: mapped and logged once (resolveError), rendered in the envelope (restError).
 * `answerId`: the request id the envelope names (an Idempotency-Key replay names the first call's).
 */
export function restAnswer(
  err: unknown,
  request: { id: string; log: ErrorLogger },
  answerId = request.id,
): { status: number; body: RestErrorBody; error: DomainError } {
  const error = resolveError(err, request.id, request.log);
  return { ...restError(error, answerId), error };
}

/** The `data` of every tRPC error (the errorFormatter of trpc/init.ts): code, status, details and request id. */
export function trpcErrorData(error: DomainError, requestId: string, path: string | null) {
  return { code: error.code, httpStatus: ERROR_CODES[error.code].status, details: error.details ?? null, request_id: requestId, path };
}

/** A tRPC error response for what the HTTP framework refuses under /trpc before tRPC runs (415, a malformed URL). */
export function trpcError(
  error: DomainError,
  requestId: string,
): { status: number; body: { error: { message: string; code: number; data: ReturnType<typeof trpcErrorData> } } } {
  const code = TRPC_ERROR_CODES_BY_KEY[ERROR_CODES[error.code].trpc];
  return { status: ERROR_CODES[error.code].status, body: { error: { message: error.message, code, data: trpcErrorData(error, requestId, null) } } };
}

export { toIssues };
