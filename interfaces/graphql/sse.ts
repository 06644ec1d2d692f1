import { randomUUID } from 'node:crypto';
import type { FastifyBaseLogger, FastifyReply, FastifyRequest } from 'fastify';
import type { ExecutionResult, GraphQLError } from 'graphql';
import { createHandler, type Response as SseResponse } from 'graphql-sse';
import { isAsyncIterable, type YogaServerInstance } from 'graphql-yoga';
import type { Credentials } from '../../domain/access/schema.ts';
import { DomainError } from '../../domain/shared/errors.ts';
import { restAnswer, type ErrorLogger } from '../errors.ts';
import { subscriptionCredentials } from '../policies/rate-limit.ts';
import type { KeyWatch } from '../policies/revocation.ts';
import type { Services } from '../services.ts';
import type { GraphqlContext } from './builder.ts';
import { prepareOperation, type Enveloped } from './operation.ts';

// Browser subscriptions over SSE.
// - Every SSE request is authenticated before it is answered: by `?token=` (a stream token, spent here) or the
//   Authorization header. A refusal is the REST envelope with its status (401 invalid_api_key / missing_api_key), never
//   a 200 stream carrying an error event, so EventSource and graphql-sse clients stop instead of reconnecting forever.
// - graphql-sse's "single connection mode": PUT /graphql reserves a stream (authenticated as above; the answer is the
//   reservation token), GET with `X-GraphQL-Event-Stream-Token` opens it, POSTs with the header run operations on it
//   and DELETE ?operationId= completes one. The reservation holds the credentials it was made with, so the stream
//   token is spent once, at PUT. Reservations live in the node that made them (a client sends its stream's requests to
//   that node). Operations execute through Yoga's envelop pipeline like graphql-ws (ws.ts): same plugins, limits,
//   error mapping.

export const STREAM_TOKEN_HEADER = 'x-graphql-event-stream-token';
/** A reservation not opened within this long is forgotten. */
const RESERVATION_TTL_MS = 60_000;

/** `?token=` of an SSE request: the stream token (a string), or undefined when absent. */
export function tokenParam(url: string): string | undefined {
  const value = new URL(url, 'http://localhost').searchParams.get('token');
  return value === null ? undefined : value;
}

/** The credentials of an SSE subscription request: `?token=` or the Authorization header (subscriptionCredentials). */
export function streamCredentials(services: Services, req: FastifyRequest, headers: Record<string, string>): Promise<Credentials> {
  return subscriptionCredentials(services, { token: tokenParam(req.url), authorization: req.headers.authorization, clientIp: req.ip }, headers);
}

/**
 * What /graphql refuses at the HTTP level, before any GraphQL runs (Yoga: a media type it cannot read, an Accept it
 * cannot answer; graphql-sse's own protocol answers), as a GraphQL response: `{ errors }` with the extensions every
 * GraphQL error carries (code, status, details, request_id) and the status of the code's row, never a bare `null`.
 * `message` says what to send instead; the status picks the code (interfaces/errors.ts).
 */
export function refusedOverHttp(
  format: SseOptions['formatError'],
  req: { id: string; log: ErrorLogger },
  status: number,
  message: string,
): { status: number; body: string } {
  const error = format({ statusCode: status, message }, req.id, req.log);
  return { status: error.extensions.status as number, body: JSON.stringify({ errors: [error] }) };
}

/** What each of graphql-sse's bodiless refusals means for the client, by status. */
const SSE_REFUSALS: Record<number, string> = {
  404: 'No stream is reserved under this token on this node: PUT /graphql first.',
  406: "PUT /graphql reserves a stream for graphql-sse's single connection mode: send it with Accept: text/plain (or */*).",
};

/** Answers a refused request in the REST envelope (hosted-api §7) with the headers the policies set. */
export function refuse(reply: FastifyReply, req: FastifyRequest, err: unknown, headers: Record<string, string>): FastifyReply {
  const { status, body } = restAnswer(err, { id: req.id, log: req.log });
  return reply.headers(headers).status(status).send(body);
}

interface Reservation {
  credentials: Credentials;
  clientIp: string;
  /** the open stream's response, once GET opened it */
  stream?: FastifyReply;
  unwatch?: () => void;
  expiry?: NodeJS.Timeout;
}

export interface SseOptions {
  // biome-ignore lint/complexity/noBannedTypes: `{}` is the user context createYoga infers when none is declared
  yoga: YogaServerInstance<GraphqlContext, {}>;
  services: Services;
  keys: KeyWatch;
  context(input: { requestId: string; log: FastifyBaseLogger; authorization: Credentials; clientIp: string }): GraphqlContext;
  formatError(err: unknown, requestId: string, log: ErrorLogger): GraphQLError;
}

type Raw = { req: FastifyRequest; reply: FastifyReply };
type ReqContext = { reservation?: Reservation };

/** how a reservation token looks (randomUUID) */
const RESERVATION_SHAPE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** True for the requests of graphql-sse's single connection mode (the rest of /graphql is Yoga's). */
export function isSingleConnection(req: FastifyRequest): boolean {
  if (req.method === 'PUT' || req.method === 'DELETE' || req.headers[STREAM_TOKEN_HEADER] !== undefined) return true;
  // An EventSource cannot send the header: its GET names the reservation as `?token=`. A reservation is a UUID; any
  // other token (a stream token `svc_stream_…`, or garbage) is a plain SSE subscription's, refused there with 401.
  const token = (req.query as Record<string, unknown> | undefined)?.token;
  return req.method === 'GET' && typeof token === 'string' && RESERVATION_SHAPE.test(token);
}

/**
 * graphql-sse ends (DELETE, stream closed) only operations shaped like async generators. Not an `async function*`
 * wrapper: its return() would wait for the pending next(), i.e. for the subscription's next event; this one reaches the
 * subscription's own return() at once.
 */
function generatorLike<T>(source: AsyncIterable<T>): AsyncGenerator<T> {
  const it = source[Symbol.asyncIterator]();
  const finished = async (): Promise<IteratorResult<T>> => {
    await it.return?.();
    return { done: true, value: undefined };
  };
  const self: AsyncGenerator<T> = {
    [Symbol.asyncIterator]: () => self,
    next: () => it.next(),
    return: finished,
    throw: finished,
  };
  return self;
}

/** The message of a graphql-sse refusal body: `{ errors: [{ message }] }` or plain text; undefined when it has none. */
function sseMessage(body: string | null): string | undefined {
  if (!body) return undefined;
  try {
    const message = (JSON.parse(body) as { errors?: { message?: unknown }[] }).errors?.[0]?.message;
    return typeof message === 'string' ? message : undefined;
  } catch {
    return body;
  }
}

export function singleConnectionHandler(options: SseOptions): { handle(req: FastifyRequest, reply: FastifyReply): Promise<unknown>; close(): void } {
  const { services } = options;
  const reservations = new Map<string, Reservation>();

  const forget = (token: string) => {
    const r = reservations.get(token);
    if (!r) return;
    reservations.delete(token);
    clearTimeout(r.expiry);
    r.unwatch?.();
  };

  /** the answers made here; graphql-sse's own refusals are rewritten (refusedOverHttp) */
  const ours = new WeakSet<object>();
  const envelope = (err: unknown, req: FastifyRequest): SseResponse => {
    const { status, body } = restAnswer(err, { id: req.id, log: req.log });
    const init = { status, statusText: '', headers: { 'content-type': 'application/json; charset=utf-8' } };
    ours.add(init);
    return [JSON.stringify(body), init];
  };

  const handler = createHandler<Raw, ReqContext, GraphqlContext & Record<PropertyKey, unknown>>({
    authenticate: async (request) => {
      const { req } = request.raw;
      if (req.method === 'PUT') {
        const headers: Record<string, string> = {};
        let credentials: Credentials;
        try {
          credentials = await streamCredentials(services, req, headers);
        } catch (e) {
          return envelope(e, req);
        }
        const token = randomUUID();
        const reservation: Reservation = { credentials, clientIp: req.ip };
        reservation.expiry = setTimeout(() => {
          if (!reservation.stream) forget(token);
        }, RESERVATION_TTL_MS).unref();
        reservations.set(token, reservation);
        return token;
      }
      const token = request.headers.get(STREAM_TOKEN_HEADER) ?? new URL(request.url, 'http://localhost').searchParams.get('token') ?? '';
      const reservation = reservations.get(token);
      if (!reservation) return envelope(new DomainError('not_found', 'No stream is reserved under this token on this node: PUT /graphql first.'), req);
      request.context = { reservation };
      return token;
    },
    onConnect: (request) => {
      // The stream opens: it ends when its key stops authenticating (4403's counterpart: the connection closes).
      const reservation = request.context.reservation;
      if (!reservation) return;
      // one stream per reservation: a second GET must not take over the first one's watch and lifetime
      if (reservation.stream) return envelope(new DomainError('conflict', 'This stream is already open.'), request.raw.req);
      const token = request.headers.get(STREAM_TOKEN_HEADER) ?? '';
      const { reply } = request.raw;
      reservation.stream = reply;
      reservation.unwatch = options.keys.watch(reservation.credentials, () => reply.raw.destroy());
      reply.raw.once('close', () => forget(token));
    },
    onSubscribe: async (request, params) => {
      const { req } = request.raw;
      const reservation = request.context.reservation;
      const requestId = req.id;
      const log = req.log.child({ transport: 'graphql-sse' });
      const context = options.context({ requestId, log, authorization: reservation?.credentials, clientIp: reservation?.clientIp ?? req.ip });
      const enveloped = options.yoga.getEnveloped({ ...context, params });
      const refused = (errors: readonly unknown[]): ExecutionResult => ({ errors: errors.map((e) => options.formatError(e, requestId, log)) });
      const prepared = await prepareOperation(enveloped, params.query);
      if (prepared.errors) return refused(prepared.errors);
      const { document, contextValue } = prepared;
      return {
        schema: enveloped.schema,
        document,
        operationName: params.operationName ?? null,
        variableValues: params.variables ?? null,
        contextValue: contextValue as GraphqlContext & Record<PropertyKey, unknown>,
        rootValue: { execute: enveloped.execute, subscribe: enveloped.subscribe } satisfies Enveloped,
      };
    },
    execute: (args) => (args.rootValue as Enveloped).execute(args) as never,
    subscribe: async (args) => {
      const result = await ((args.rootValue as Enveloped).subscribe(args) as Promise<unknown>);
      return (isAsyncIterable(result) ? generatorLike(result as AsyncIterable<ExecutionResult>) : result) as never;
    },
  });

  return {
    async handle(req, reply) {
      const [body, init] = await handler({
        method: req.method,
        url: req.url,
        headers: { get: (key) => (Array.isArray(req.headers[key]) ? (req.headers[key] as string[]).join(', ') : (req.headers[key] as string | undefined)) },
        body: () => (req.body ?? null) as Record<string, unknown> | string | null,
        raw: { req, reply },
        context: {},
      });
      if (init.status >= 400 && !ours.has(init) && (body === null || typeof body === 'string')) {
        const refused = refusedOverHttp(options.formatError, req, init.status, sseMessage(body) ?? SSE_REFUSALS[init.status] ?? init.statusText);
        return reply.status(refused.status).type('application/json; charset=utf-8').send(refused.body);
      }
      void reply.status(init.status).headers(init.headers ?? {});
      if (body === null || typeof body === 'string') return reply.send(body ?? undefined);
      // The stream: written as it comes, ended when the client leaves or the server shuts down (close()).
      void reply.header('connection', 'close');
      reply.hijack();
      reply.raw.writeHead(init.status, reply.getHeaders() as Record<string, string>);
      reply.raw.once('close', () => void body.return(undefined));
      for await (const chunk of body) {
        if (!reply.raw.writable) break;
        reply.raw.write(chunk);
      }
      reply.raw.end();
      return reply;
    },
    /** Ends every open stream and forgets every reservation (shutdown). */
    close() {
      for (const [token, r] of [...reservations]) {
        r.stream?.raw.end();
        forget(token);
      }
    },
  };
}
