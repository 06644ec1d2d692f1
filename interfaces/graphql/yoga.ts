import { AsyncLocalStorage } from 'node:async_hooks';
import type { FastifyBaseLogger, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { getOperationAST, GraphQLError, type ExecutionArgs, type ExecutionResult } from 'graphql';
import { createGraphQLError, createYoga, handleStreamOrSingleExecutionResult, isAsyncIterable, type Plugin, type YogaLogger } from 'graphql-yoga';
import type { Logger } from 'pino';
import { DomainError, ERROR_CODES } from '../../domain/shared/errors.ts';
import { resolveError, type ErrorLogger } from '../errors.ts';
import { checkOperation, GRAPHQL_LIMITS, parseLimited, responseTooLarge } from '../policies/graphql-limits.ts';
import { KeyWatch } from '../policies/revocation.ts';
import type { Services } from '../services.ts';
import { graphqlContext, type GraphqlContext } from './builder.ts';
import { schema } from './schema/index.ts';
import { FanOut, isPreSerialised, useFanOut } from './fanout.ts';
import { mountGraphqlWs } from './ws.ts';
import { isSingleConnection, refuse, refusedOverHttp, singleConnectionHandler, streamCredentials } from './sse.ts';
import type { Credentials } from '../../domain/access/schema.ts';
import { clientSignal } from '../policies/heavy.ts';
import { renderGraphiqlPage } from '../pages/graphiql.ts';
import { GRAPHIQL_CSP } from '../pages/html.ts';

// GraphQL front door: Yoga over fastify at /graphql (GET/POST, SSE subscriptions, GraphiQL in a browser) and
// graphql-ws on the same path (ws.ts), both executing through Yoga's envelop pipeline with the same context,
// auth policy and error mapping as REST and tRPC.

export const GRAPHQL_PATH = '/graphql';

// ---------------------------------------------------------------------------------------------------------------
// Errors: every error leaving GraphQL carries extensions { code, status, details?, request_id } (hosted-api §7).

const formatted = new WeakSet<GraphQLError>();
/** Only where no request is at hand; HTTP responses still carry X-Svc-Request-Id. */
const UNKNOWN_REQUEST = 'unknown';

/**
 * Parse, validation and variable-coercion errors: raised by GraphQL itself before any resolver ran (no path), with
 * no cause other than GraphQL's own errors. These are the client's mistakes: invalid_request.
 */
function isRequestError(err: unknown): err is GraphQLError {
  if (!(err instanceof GraphQLError) || err.path !== undefined) return false;
  let cause: unknown = err.originalError;
  while (cause instanceof GraphQLError) cause = cause.originalError;
  return cause === undefined || cause === null;
}

function requestError(err: GraphQLError): DomainError {
  const status = (err.extensions.http as { status?: number } | undefined)?.status;
  if (status === 405) return new DomainError('method_not_allowed', err.message);
  if (status === 413) return new DomainError('payload_too_large', err.message);
  return DomainError.invalid([{ path: '', message: err.message, code: 'invalid_graphql' }], err.message);
}

/**
 * Any error → a GraphQLError with our extensions, keeping its location and path. Unexpected faults are masked to
 * internal_error and logged once, with the request id, by `resolveError` (the same function REST and tRPC use).
 */
export function toGraphqlError(err: unknown, requestId: string, log: ErrorLogger): GraphQLError {
  if (err instanceof GraphQLError && formatted.has(err)) {
    // Yoga caches validation results per document: re-issue a cached error under this request's id.
    if (err.extensions.request_id === requestId || requestId === UNKNOWN_REQUEST) return err;
    return issue(err, { ...err.extensions, request_id: requestId });
  }
  const domain = isRequestError(err) ? requestError(err) : resolveError(err, requestId, log);
  const extensions: Record<string, unknown> = { code: domain.code, status: ERROR_CODES[domain.code].status };
  if (domain.details !== undefined) extensions.details = domain.details;
  extensions.request_id = requestId;
  // Yoga's HTTP status hint for request errors; it is stripped from the JSON it sends.
  if (err instanceof GraphQLError && err.extensions.http) extensions.http = err.extensions.http;
  return issue(err instanceof GraphQLError ? err : undefined, extensions, domain.message);
}

function issue(from: GraphQLError | undefined, extensions: Record<string, unknown>, message = from?.message ?? ''): GraphQLError {
  const out = new GraphQLError(message, {
    nodes: from?.nodes,
    source: from?.source,
    positions: from?.positions,
    path: from?.path,
    extensions,
  });
  formatted.add(out);
  return out;
}

function isAbortError(error: unknown): boolean {
  return error instanceof Error && (error.name === 'AbortError' || error.name === 'TimeoutError');
}

interface ErrorScope {
  requestId?: string;
  log?: ErrorLogger;
}

/**
 * Formats errors where the request id is known: parse, validation, execution and subscription results. Registered
 * before Yoga's masking, which then finds them already formatted and leaves them be.
 */
function useDomainErrors(fallbackLog: ErrorLogger): Plugin<ErrorScope> {
  const format = (scope: ErrorScope | undefined) => (err: unknown) => toGraphqlError(err, scope?.requestId ?? UNKNOWN_REQUEST, scope?.log ?? fallbackLog);
  const onResult =
    (scope: ErrorScope | undefined) =>
    ({ result, setResult }: { result: ExecutionResult; setResult: (r: ExecutionResult) => void }) => {
      if (result.errors?.length) setResult({ ...result, errors: result.errors.map(format(scope)) });
    };
  return {
    onParse:
      ({ context }) =>
      ({ result, replaceParseResult }) => {
        if (result instanceof Error) replaceParseResult(format(context)(result));
      },
    onValidate:
      ({ context }) =>
      ({ result, setResult }) => {
        if (result.length) setResult(result.map(format(context)));
      },
    onExecute: ({ args }) => ({
      onExecuteDone: (payload) => handleStreamOrSingleExecutionResult(payload, onResult(args.contextValue as ErrorScope)),
    }),
    onSubscribe: ({ args }) => ({
      onSubscribeResult: (payload) => handleStreamOrSingleExecutionResult(payload, onResult(args.contextValue as ErrorScope)),
      onSubscribeError: ({ error, setError }) => {
        if (!isAbortError(error)) setError(format(args.contextValue as ErrorScope)(error));
      },
    }),
  };
}

/**
 * Yoga parses the `variables` and `extensions` of a GET or form request with a bare JSON.parse: malformed text is the
 * client's mistake (invalid_request, 400), not a fault to mask.
 */
function useMalformedParams(): Plugin {
  return {
    onRequestParse: ({ requestParser, setRequestParser }) => {
      if (!requestParser) return;
      setRequestParser(async (request) => {
        try {
          return await requestParser(request);
        } catch (e) {
          if (!(e instanceof SyntaxError)) throw e;
          throw createGraphQLError(`variables and extensions must be JSON: ${e.message}`, { extensions: { http: { status: 400 } } });
        }
      });
    },
  };
}

// ---------------------------------------------------------------------------------------------------------------
// Limits (interfaces/policies/graphql-limits.ts): the token limit at parse; aliases, depth and estimated cost after
// validation and before execution, then the cost counted against the key's `graphql` bucket; the size of every result
// (HTTP answer, SSE or graphql-ws payload) before it is sent. The same pipeline serves HTTP, SSE and graphql-ws.

type LimitedContext = GraphqlContext & { req?: unknown };

/**
 * A refusal before execution: the error of the table, with Yoga's HTTP status hint when the request is HTTP. A
 * document over a limit is a GraphQL request error like a syntax error, so its status follows graphql-over-http as
 * theirs does (`spec`): 400 under application/graphql-response+json, 200 under application/json — whichever limit
 * refused it (the token limit refuses while parsing, the others after validation).
 */
function refusal(err: unknown, ctx: LimitedContext): ExecutionResult {
  const error = toGraphqlError(err, ctx.requestId, ctx.log);
  if (!ctx.req) return { errors: [error] };
  const spec = error.extensions.code === 'query_too_complex';
  return { errors: [issue(error, { ...error.extensions, http: { status: error.extensions.status, ...(spec ? { spec } : {}) } }, error.message)] };
}

/** Results over the byte cap are replaced by query_too_complex (the estimate missed: large JSON values, say). */
function capped(result: ExecutionResult, ctx: LimitedContext): ExecutionResult {
  // A fan-out result shared by a group of subscriptions was measured once, when it was serialised (fanout.ts).
  if (isPreSerialised(result)) return result;
  const bytes = Buffer.byteLength(JSON.stringify(result));
  return bytes > GRAPHQL_LIMITS.maxResponseBytes ? refusal(responseTooLarge(bytes), ctx) : result;
}

/** Ends an SSE subscription with the key's error once the key stops authenticating (the socket's own watch ends graphql-ws). */
function endOnRevocation(source: AsyncIterable<ExecutionResult>, ctx: LimitedContext, keys: KeyWatch): AsyncIterableIterator<ExecutionResult> {
  const iterator = source[Symbol.asyncIterator]();
  let revoke!: (error: unknown) => void;
  const revoked = new Promise<{ revoked: unknown }>((resolve) => (revoke = (error) => resolve({ revoked: error })));
  const unwatch = keys.watch(ctx.authorization, revoke);
  let done = false;
  const finish = async (): Promise<IteratorResult<ExecutionResult>> => {
    done = true;
    unwatch();
    await iterator.return?.();
    return { done: true, value: undefined };
  };
  return {
    [Symbol.asyncIterator]() {
      return this;
    },
    async next() {
      if (done) return { done: true, value: undefined };
      const item = await Promise.race([iterator.next(), revoked]);
      if ('revoked' in item) {
        await finish();
        return { done: false, value: refusal(item.revoked, ctx) };
      }
      if (item.done) return finish();
      return item;
    },
    return: finish,
  };
}

function useQueryLimits(keys: KeyWatch): Plugin<GraphqlContext> {
  /** Charges the operation's cost; the context when admitted, else null after answering the refusal instead. */
  const admit = async (args: ExecutionArgs, stop: (result: ExecutionResult) => void): Promise<LimitedContext | null> => {
    const ctx = args.contextValue as LimitedContext;
    try {
      const { cost } = checkOperation({
        schema: args.schema,
        document: args.document,
        variables: args.variableValues,
        operationName: args.operationName,
        context: ctx,
      });
      await ctx.chargeCost(cost);
      return ctx;
    } catch (e) {
      stop(refusal(e, ctx));
      return null;
    }
  };
  return {
    onParse: ({ setParseFn }) => setParseFn(parseLimited),
    onExecute: async ({ args, setResultAndStopExecution }) => {
      // A stream token is a subscription credential for browsers: the connection it opened may subscribe, nothing more
      // (queries and mutations take the API key). Subscriptions go through onSubscribe, never here.
      const grant = (args.contextValue as GraphqlContext).authorization;
      if (typeof grant === 'object' && grant !== null) {
        const err = new DomainError('forbidden', 'A stream token opens subscriptions only; queries and mutations need the API key.', {
          operation: operationKind(args),
        });
        setResultAndStopExecution(refusal(err, args.contextValue as LimitedContext));
        return;
      }
      const ctx = await admit(args, setResultAndStopExecution);
      if (!ctx) return;
      return {
        onExecuteDone: (payload) => handleStreamOrSingleExecutionResult(payload, ({ result, setResult }) => setResult(capped(result, ctx))),
      };
    },
    onSubscribe: async ({ args, setResultAndStopExecution }) => {
      const ctx = await admit(args, setResultAndStopExecution);
      if (!ctx) return;
      return {
        onSubscribeResult: ({ result, setResult }) => {
          if (ctx.req && isAsyncIterable(result)) setResult(endOnRevocation(result, ctx, keys));
          return { onNext: ({ result: next, setResult: setNext }) => setNext(capped(next, ctx)) };
        },
      };
    },
  };
}

/** The kind of the operation ExecutionArgs will run (query or mutation here). */
function operationKind(args: ExecutionArgs): string {
  return getOperationAST(args.document, args.operationName ?? undefined)?.operation ?? 'query';
}

/** Yoga's own log lines go to pino. Its error lines are dropped: resolveError already logged each fault once. */
function yogaLogger(log: Logger): YogaLogger {
  const line =
    (level: 'debug' | 'info' | 'warn') =>
    (...args: unknown[]) =>
      log[level]({ yoga: args.slice(1) }, String(args[0]));
  return { debug: () => {}, info: line('info'), warn: line('warn'), error: () => {} };
}

// ---------------------------------------------------------------------------------------------------------------

type ServerContext = GraphqlContext & { req?: FastifyRequest; reply?: FastifyReply };

/** What each of Yoga's bodiless refusals means for the client, by status (415 takes the REST wording, errors.ts). */
const YOGA_REFUSALS: Record<number, string> = {
  406:
    'No answer in a media type the Accept header allows: queries and mutations answer application/json or ' +
    'application/graphql-response+json; a subscription streams text/event-stream (or subscribe over graphql-ws on this path).',
};

export function mountGraphql(app: FastifyInstance, deps: { services: Services; log: Logger }): void {
  const { services, log } = deps;
  const shutdown = new AbortController();
  const httpRequest = new AsyncLocalStorage<ErrorScope>();
  const keys = new KeyWatch(services);
  const fanOut = new FanOut();

  const yoga = createYoga<ServerContext>({
    schema,
    graphqlEndpoint: GRAPHQL_PATH,
    logging: yogaLogger(log),
    landingPage: false,
    multipart: false,
    // Subscriptions in GraphiQL use SSE, so the Authorization header typed in its headers editor applies to them too.
    graphiql: { title: 'svc gateway GraphQL', headers: JSON.stringify({ Authorization: 'Bearer svc_test_…' }) },
    // GraphiQL from the gateway's own copy of its files, not a CDN: it works offline and behind a firewall.
    renderGraphiQL: renderGraphiqlPage,
    plugins: [useDomainErrors(log), useMalformedParams(), useQueryLimits(keys), useFanOut(fanOut)],
    // Parse errors are not cached: a cached one would be answered as thrown, with the request id it was formatted for.
    parserAndValidationCache: { errorCache: { get: () => undefined, set: () => {} } },
    // Errors raised by Yoga itself, outside the plugin's reach (e.g. a mutation over GET): same mapping, and the
    // request id from the HTTP request being handled.
    maskedErrors: {
      maskError: (error) => {
        const scope = httpRequest.getStore();
        const masked = toGraphqlError(error, scope?.requestId ?? UNKNOWN_REQUEST, scope?.log ?? log);
        // Yoga never masks an error object twice, and its parse cache throws the same object for every request with
        // that document: a copy keeps the cached one maskable, so the next request gets its own request id.
        return masked === error ? issue(masked, { ...masked.extensions }) : masked;
      },
    },
  });

  const singleConnection = singleConnectionHandler({
    yoga,
    services,
    keys,
    context: (input) => graphqlContext({ ...input, services, idempotencyKey: undefined, shutdown: shutdown.signal }),
    formatError: toGraphqlError,
  });

  app.route({
    method: ['GET', 'POST', 'OPTIONS', 'PUT', 'DELETE'],
    url: GRAPHQL_PATH,
    handler: async (req, reply) => {
      // graphql-sse's single connection mode (PUT reserves a stream; the header names it afterwards).
      if (isSingleConnection(req)) return singleConnection.handle(req, reply);
      const idempotencyKey = req.headers['idempotency-key'];
      // An SSE subscription is authenticated before it starts (`?token=` or the key): a refusal is an HTTP 401 in the
      // envelope, not a 200 stream that EventSource would reconnect to forever.
      const sse = req.headers.accept?.includes('text/event-stream') === true;
      let authorization: Credentials = req.headers.authorization;
      if (sse) {
        const headers: Record<string, string> = {};
        try {
          authorization = await streamCredentials(services, req, headers);
        } catch (e) {
          return refuse(reply, req, e, headers);
        }
      }
      const context = graphqlContext({
        services,
        requestId: req.id,
        log: req.log,
        authorization,
        // As for REST: only a POST carries an Idempotency-Key (and then covers the mutation fields of the request).
        idempotencyKey: req.method === 'POST' && typeof idempotencyKey === 'string' ? idempotencyKey : undefined,
        clientIp: req.ip,
        shutdown: shutdown.signal,
        // a query's statements are cancelled when its client leaves; an SSE subscription's context may serve a whole
        // fan-out group (interfaces/graphql/fanout.ts), which must not end when its first member leaves
        signal: sse ? undefined : clientSignal(reply.raw),
      });
      const response = await httpRequest.run({ requestId: req.id, log: req.log }, () =>
        yoga.handleNodeRequestAndResponse(req, reply, { req, reply, ...context }),
      );
      // Headers the policies set while the operation ran (RateLimit-*, Idempotent-Replayed); for SSE, those of the
      // subscribe step, which ran before the response started.
      void reply.headers(context.responseHeaders);
      response.headers.forEach((value, key) => void reply.header(key, value));
      if (response.headers.get('content-type')?.startsWith('text/html'))
        void reply.headers({ 'content-security-policy': GRAPHIQL_CSP, 'x-content-type-options': 'nosniff' });
      // Yoga's bodiless refusals (415 a body it cannot read, 406 an Accept it cannot answer, e.g. a subscription over a
      // plain POST) answer `{ errors }` like every other GraphQL refusal.
      if (response.body === null && response.status >= 400) {
        const refused = refusedOverHttp(toGraphqlError, req, response.status, YOGA_REFUSALS[response.status] ?? (response.statusText || 'Refused.'));
        return reply.status(refused.status).type('application/json; charset=utf-8').send(refused.body);
      }
      // A live SSE stream ends only at unsubscribe or shutdown; its connection is not reused, so closing the server
      // does not wait for the client's keep-alive to expire.
      if (response.headers.get('content-type')?.startsWith('text/event-stream')) void reply.header('connection', 'close');
      void reply.status(response.status);
      return reply.send(response.body);
    },
  });

  const ws = mountGraphqlWs(app, {
    path: GRAPHQL_PATH,
    yoga,
    services,
    log: log as unknown as FastifyBaseLogger,
    keys,
    context: (input) => graphqlContext({ ...input, services, idempotencyKey: undefined, shutdown: shutdown.signal }),
    formatError: toGraphqlError,
  });

  // Live subscriptions (SSE responses, graphql-ws operations) end first, so closing the server does not wait on them;
  // then the WebSocket clients and server, which app.close() would not close.
  app.addHook('preClose', async () => {
    shutdown.abort();
    fanOut.close();
    singleConnection.close();
  });
  app.addHook('onClose', async () => {
    keys.close();
    await ws.close();
  });
}
