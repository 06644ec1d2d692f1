import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { generateOpenApiDocument } from 'trpc-to-openapi';
import { z, ZodVoid } from 'zod';
import type { AnyProcedure } from '@trpc/server';
import type { Meta } from '../trpc/init.ts';
import { invokeProcedure } from '../trpc/init.ts';
import { appRouter } from '../trpc/router.ts';
import type { Context } from '../trpc/context.ts';
import { ErrorEnvelope, restAnswer } from '../errors.ts';
import { ERROR_CODES, type ErrorCode } from '../../domain/shared/errors.ts';
import { startUsage } from '../policies/usage.ts';
import type { Bucket } from '../../domain/policies/rate-limit.ts';
import { limitOutsideProcedure } from '../policies/rate-limit.ts';

/**
 * REST /v1: each tRPC procedure with `meta.openapi` becomes a fastify route that calls the procedure as tRPC's
 * server-side caller does (no Fetch Request/Response per call), with the error envelope of hosted-api §7 and the
 * success statuses of DECISIONS. The same metadata generates /openapi.json.
 */
export interface RestOptions {
  createContext(req: FastifyRequest, reply: FastifyReply, transport: string): Context;
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

export function registerRest(app: FastifyInstance, options: RestOptions): void {
  for (const { path, procedure, meta } of routes()) {
    const openapi = meta.openapi!;
    const inputs = (procedure._def as { inputs?: unknown[] }).inputs ?? [];
    const takesInput = inputs.length > 0 && !inputs.every((p) => p instanceof ZodVoid);
    const status = meta.status ?? 200;
    const bodyMethod = openapi.method === 'POST' || openapi.method === 'PATCH' || openapi.method === 'PUT';

    for (const restPath of [openapi.path, ...(meta.restAliases ?? [])]) {
      const transport = `${openapi.method} ${restPath}`;
      app.route({
        method: openapi.method,
        url: restPath.replace(/\{(\w+)\}/g, ':$1'),
        handler: async (req: FastifyRequest, reply: FastifyReply) => {
          const ctx = options.createContext(req, reply, transport);
          const params = (req.params ?? {}) as Record<string, string>;
          let input: unknown;
          if (takesInput) {
            // No body is an empty object; a JSON body that is not an object (`null`, `[]`, `"x"`) reaches the schema as it
            // is and is refused there (400 invalid_request), before any route looks at the ledger.
            const source = bodyMethod ? (req.body === undefined ? {} : req.body) : (req.query ?? {});
            input = isPlainObject(source) ? { ...source, ...params } : source;
          }
          try {
            const result = await invokeProcedure(procedure, ctx, path, input);
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
          answerOutsideProcedure(options.createContext(req, reply, transport), reply, { bucket: meta.bucket ?? 'default', route: path }, err),
      });
    }
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
  let usage: ReturnType<typeof startUsage> | undefined;
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

type OpenApiOperation = {
  tags?: string[];
  parameters?: { name: string; in: string; description?: string; schema?: { description?: string } }[];
  requestBody?: unknown;
  security?: Record<string, string[]>[];
  responses: Record<string, unknown>;
};

const MUTATING = new Set(['post', 'put', 'patch', 'delete']);

/** The resource's own 404 code, by the path parameter that names it (an `{id}` by the router's tag). */
const NOT_FOUND_BY_PARAM: Record<string, ErrorCode> = {
  mint: 'agent_not_found',
  agent: 'agent_not_found',
  agent_mint: 'agent_not_found',
  hash: 'receipt_not_found',
};
const NOT_FOUND_BY_TAG: Record<string, ErrorCode> = { 'payment-links': 'payment_link_not_found', events: 'event_not_found', webhooks: 'webhook_not_found' };

function resourceNotFound(path: string, op: OpenApiOperation): ErrorCode[] {
  const params = [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]!);
  const codes = params.map((p) => (p === 'id' ? NOT_FOUND_BY_TAG[op.tags?.[0] ?? ''] : NOT_FOUND_BY_PARAM[p]));
  return codes.filter((c): c is ErrorCode => c !== undefined);
}

/**
 * The error statuses an operation can answer, from the policies every procedure of its kind runs (trpc/init.ts) and
 * the codes its meta names (`errors`, for what its service refuses beyond them). Each status lists its codes.
 */
function errorCodesOf(method: string, path: string, op: OpenApiOperation, meta: Meta): Map<number, Set<ErrorCode>> {
  const keyed = (op.security ?? []).length > 0;
  const codes: ErrorCode[] = ['rate_limited', 'internal_error']; // keyed buckets, or the per-IP bucket of anonymous routes
  if ((op.parameters ?? []).length > 0 || op.requestBody !== undefined) codes.push('invalid_request');
  if (op.requestBody !== undefined) codes.push('payload_too_large');
  if (keyed) codes.push('missing_api_key', 'invalid_api_key', 'timeout'); // auth; the request class's budget
  if (keyed && MUTATING.has(method)) codes.push('idempotency_body_mismatch', 'idempotency_in_progress'); // Idempotency-Key
  if (path.includes('{')) codes.push('not_found', ...resourceNotFound(path, op)); // absent or another principal's
  codes.push(...(meta.errors ?? []));
  const byStatus = new Map<number, Set<ErrorCode>>();
  for (const code of codes) {
    const status = ERROR_CODES[code].status;
    byStatus.set(status, (byStatus.get(status) ?? new Set()).add(code));
  }
  return new Map([...byStatus].sort(([a], [b]) => a - b));
}

/**
 * OpenAPI forbids two path templates that differ only in parameter names (POST /v1/receipts/{agent_mint} beside
 * GET /v1/receipts/{agent}: the push's input names its path agent apart from the receipt's own `agent` field). A path
 * parameter's name is not on the REST wire, so the operations of one template join the other's under its names.
 */
function mergeIdenticalPaths(paths: Record<string, Record<string, OpenApiOperation>>): void {
  const seen = new Map<string, string>();
  for (const path of Object.keys(paths)) {
    const shape = path.replace(/\{\w+\}/g, '{}');
    const first = seen.get(shape);
    if (first === undefined) {
      seen.set(shape, path);
      continue;
    }
    // the names of the template with the GET (the resource's read) are kept
    const [kept, moved] = paths[path]!.get && !paths[first]!.get ? [path, first] : [first, path];
    seen.set(shape, kept);
    const names = [...kept.matchAll(/\{(\w+)\}/g)].map((m) => m[1]!);
    const renamed = new Map([...moved.matchAll(/\{(\w+)\}/g)].map((m, i) => [m[1]!, names[i]!]));
    for (const [method, op] of Object.entries(paths[moved]!)) {
      if (paths[kept]![method]) throw new Error(`${method.toUpperCase()} ${moved} and ${kept} are one route`);
      for (const param of op.parameters ?? []) if (param.in === 'path') param.name = renamed.get(param.name) ?? param.name;
      paths[kept]![method] = op;
    }
    delete paths[moved];
  }
}

/** The envelope's JSON Schema, registered once as components.schemas.Error. */
const { $schema: _, ...ERROR_SCHEMA } = z.toJSONSchema(ErrorEnvelope, { target: 'draft-2020-12', io: 'output' });
const ENVELOPE_CONTENT = { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } };

/** OpenAPI 3.1 from the procedures, with our statuses and error envelope put in. */
export function openApiDocument(baseUrl: string, version: string): Record<string, unknown> {
  const doc = generateOpenApiDocument(appRouter, {
    title: 'svc gateway API',
    description: 'Payment links (HTTP 402), receipts and events for agents on Solana.',
    version,
    openApiVersion: '3.1.0',
    baseUrl,
    securitySchemes: { Authorization: { type: 'http', scheme: 'bearer', description: 'svc_test_… (chain-devnet) or svc_live_… (chain-mainnet)' } },
  }) as unknown as { paths: Record<string, Record<string, OpenApiOperation>>; components?: Record<string, Record<string, unknown>> };

  const metaOf = new Map<string, Meta>();
  for (const { meta } of routes()) metaOf.set(`${meta.openapi!.method.toLowerCase()} ${meta.openapi!.path}`, meta);

  for (const [path, ops] of Object.entries(doc.paths ?? {})) {
    for (const [method, op] of Object.entries(ops)) {
      const meta = metaOf.get(`${method} ${path}`);
      if (!meta) throw new Error(`${method.toUpperCase()} ${path}: no procedure`);
      const success = op.responses['200'];
      const status = meta.status ?? 200;
      const responses: Record<string, unknown> = {};
      if (status === 204) responses['204'] = { description: 'No content' };
      else responses[String(status)] = success;
      if (meta.replayStatus !== undefined)
        responses[String(meta.replayStatus)] = { ...(success as object), description: 'An idempotent repeat (replayed: true)' };
      for (const [errorStatus, codes] of errorCodesOf(method, path, op, meta)) {
        responses[String(errorStatus)] = { description: [...codes].join(', '), content: ENVELOPE_CONTENT };
      }
      // Codes a service answers beyond those listed (the table of domain/shared/errors.ts), same envelope.
      responses.default = { description: 'Any other error code', content: ENVELOPE_CONTENT };
      op.responses = responses;
      // An anonymous route says so (the document has no root security): no key is needed.
      op.security ??= [];
      // A parameter shows its schema's description (written once, on the zod field) where renderers look for it.
      for (const param of op.parameters ?? []) param.description ??= param.schema?.description;
    }
  }
  for (const { meta } of routes()) {
    const method = meta.openapi!.method.toLowerCase();
    const op = doc.paths[meta.openapi!.path]?.[method] as (OpenApiOperation & { operationId?: string; description?: string }) | undefined;
    if (!op) continue;
    for (const alias of meta.restAliases ?? []) {
      const copy = structuredClone(op);
      if (copy.operationId) copy.operationId = `${copy.operationId}-alias-${alias.replace(/[^A-Za-z0-9]+/g, '-').replace(/^-|-$/g, '')}`;
      copy.description = [`The same operation as ${meta.openapi!.method} ${meta.openapi!.path}.`, op.description].filter(Boolean).join(' ');
      doc.paths[alias] ??= {};
      doc.paths[alias][method] = copy;
    }
  }
  mergeIdenticalPaths(doc.paths);
  // trpc-to-openapi's own error.* schemas (tRPC's shape, not this API's) answer nothing here: the envelope replaces them.
  const schemas = Object.fromEntries(Object.entries(doc.components?.schemas ?? {}).filter(([name]) => !name.startsWith('error.')));
  doc.components = { ...doc.components, schemas: { ...schemas, Error: ERROR_SCHEMA } };
  return doc as unknown as Record<string, unknown>;
}
