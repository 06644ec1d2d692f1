import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { generateOpenApiDocument } from 'trpc-to-openapi';
import { ZodVoid } from 'zod';
import type { AnyProcedure } from '@trpc/server';
import type { Meta } from '../trpc/init.ts';
import { createCallerFactory } from '../trpc/init.ts';
import { appRouter } from '../trpc/router.ts';
import type { Context } from '../trpc/context.ts';
import { restAnswer } from '../errors.ts';
import { startUsage } from '../policies/usage.ts';
import type { Bucket } from '../../domain/policies/rate-limit.ts';
import { limitOutsideProcedure } from '../policies/rate-limit.ts';

/**
 * REST /v1: each tRPC procedure with `meta.openapi` becomes a fastify route that calls the procedure through a
 * server-side caller (no Fetch Request/Response per call), with the error envelope of hosted-api §7 and the
 * success statuses of DECISIONS. The same metadata generates /openapi.json.
 */
export interface RestOptions {
  createContext(req: FastifyRequest, transport: string): Context;
  baseUrl: () => string;
  version: string;
}

interface Route {
  path: string;
  procedure: AnyProcedure;
  meta: Meta;
}

function routes(): Route[] {
  const out: Route[] = [];
  for (const [path, procedure] of Object.entries(appRouter._def.procedures) as [string, AnyProcedure][]) {
    const meta = procedure._def.meta as Meta | undefined;
    if (meta?.openapi && meta.openapi.enabled !== false) out.push({ path, procedure, meta });
  }
  return out;
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

const createCaller = createCallerFactory(appRouter);

function callAt(ctx: Context, path: string, input: unknown): Promise<unknown> {
  let target: unknown = createCaller(ctx);
  for (const part of path.split('.')) target = (target as Record<string, unknown>)[part];
  return (target as (i: unknown) => Promise<unknown>)(input);
}

export function registerRest(app: FastifyInstance, options: RestOptions): void {
  for (const { path, procedure, meta } of routes()) {
    const openapi = meta.openapi!;
    const inputs = (procedure._def as { inputs?: unknown[] }).inputs ?? [];
    const takesInput = inputs.length > 0 && !inputs.every((p) => p instanceof ZodVoid);
    const status = meta.status ?? 200;
    const bodyMethod = openapi.method === 'POST' || openapi.method === 'PATCH' || openapi.method === 'PUT';

    const transport = `${openapi.method} ${openapi.path}`;
    app.route({
      method: openapi.method,
      url: openapi.path.replace(/\{(\w+)\}/g, ':$1'),
      handler: async (req: FastifyRequest, reply: FastifyReply) => {
        const ctx = options.createContext(req, transport);
        const params = (req.params ?? {}) as Record<string, string>;
        let input: unknown;
        if (takesInput) {
          const source = bodyMethod ? (req.body ?? {}) : (req.query ?? {});
          input = isPlainObject(source) ? { ...source, ...params } : source;
        }
        try {
          const result = await callAt(ctx, path, input);
          reply.headers(ctx.responseHeaders);
          if (status === 204) return reply.code(204).send();
          const code = meta.replayStatus !== undefined && isPlainObject(result) && result.replayed === true ? meta.replayStatus : status;
          // Serialised here so a replayed Idempotency-Key answer is the same bytes as the first one.
          return reply.code(code).type('application/json; charset=utf-8').send(JSON.stringify(result));
        } catch (err) {
          // A replayed error keeps the request id of the call that produced it.
          const { status: code, body } = restAnswer(err, req, ctx.replay.requestId ?? ctx.requestId);
          reply.headers(ctx.responseHeaders);
          return reply.code(code).send(body);
        }
      },
      // Errors fastify raises before the handler (malformed JSON, 413, unsupported content type) still pass the
      // rate-limit policy of the route, so they carry the RateLimit-* headers like every /v1 response.
      errorHandler: (err, req, reply) =>
        answerOutsideProcedure(options.createContext(req, transport), reply, { bucket: meta.bucket ?? 'default', route: path }, err),
    });
  }
}

/** Answers an error fastify raised for a known route after the key (or client IP) has been counted in the route's window. */
async function answerOutsideProcedure(
  ctx: Context,
  reply: FastifyReply,
  { bucket, route }: { bucket: Bucket; route: string },
  error: unknown,
): Promise<FastifyReply> {
  let answer = error;
  let usage;
  try {
    const principal = await limitOutsideProcedure(ctx.services, ctx, bucket, ctx.responseHeaders);
    if (principal) usage = startUsage(ctx, principal, { bucket, route });
  } catch (e) {
    answer = e;
  }
  const { status, body } = restAnswer(answer, { id: ctx.requestId, log: reply.log });
  usage?.end(status);
  reply.headers(ctx.responseHeaders);
  return reply.code(status).send(body);
}

const ErrorSchema = {
  type: 'object',
  required: ['error', 'message', 'request_id'],
  properties: {
    error: { type: 'string', description: 'stable snake_case code; branch on this' },
    message: { type: 'string' },
    details: {
      type: 'object',
      properties: {
        issues: {
          type: 'array',
          items: {
            type: 'object',
            required: ['path', 'message', 'code'],
            properties: { path: { type: 'string' }, message: { type: 'string' }, code: { type: 'string' } },
          },
        },
      },
      additionalProperties: true,
    },
    retry_after_ms: { type: 'integer', description: 'rate_limited only: how long to wait, also under details' },
    request_id: { type: 'string' },
  },
};

/** OpenAPI 3.1 from the procedures, with our statuses and error envelope put in. */
export function openApiDocument(baseUrl: string, version: string): Record<string, unknown> {
  const doc = generateOpenApiDocument(appRouter, {
    title: 'svc gateway API',
    description: 'Payment links (HTTP 402), receipts and events for agents on Solana.',
    version,
    openApiVersion: '3.1.0',
    baseUrl,
    securitySchemes: { Authorization: { type: 'http', scheme: 'bearer', description: 'svc_test_… (chain-devnet) or svc_live_… (chain-mainnet)' } },
  }) as unknown as { paths: Record<string, Record<string, { responses: Record<string, unknown> }>>; components?: Record<string, Record<string, unknown>> };

  const statusOf = new Map<string, number>();
  const replayStatusOf = new Map<string, number>();
  for (const { meta } of routes()) {
    const key = `${meta.openapi!.method.toLowerCase()} ${meta.openapi!.path}`;
    statusOf.set(key, meta.status ?? 200);
    if (meta.replayStatus !== undefined) replayStatusOf.set(key, meta.replayStatus);
  }

  for (const [path, ops] of Object.entries(doc.paths ?? {})) {
    for (const [method, op] of Object.entries(ops)) {
      const success = op.responses['200'];
      const status = statusOf.get(`${method} ${path}`) ?? 200;
      const responses: Record<string, unknown> = {};
      if (status === 204) responses['204'] = { description: 'No content' };
      else responses[String(status)] = success;
      const replay = replayStatusOf.get(`${method} ${path}`);
      if (replay !== undefined) responses[String(replay)] = { ...(success as object), description: 'An idempotent repeat (replayed: true)' };
      responses.default = { description: 'Error envelope', content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } };
      op.responses = responses;
    }
  }
  doc.components = { ...doc.components, schemas: { ...(doc.components?.schemas ?? {}), Error: ErrorSchema } };
  return doc as unknown as Record<string, unknown>;
}
