import type { IncomingMessage } from 'node:http';
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import { GraphQLError, type ExecutionArgs } from 'graphql';
import { useServer } from 'graphql-ws/use/ws';
import type { YogaServerInstance } from 'graphql-yoga';
import { WebSocket, WebSocketServer } from 'ws';
import { ERROR_CODES } from '../../domain/shared/errors.ts';
import { newId } from '../../domain/shared/ids.ts';
import { resolveError, type ErrorLogger } from '../errors.ts';
import type { Credentials } from '../../domain/access/schema.ts';
import { subscriptionCredentials } from '../policies/rate-limit.ts';
import type { KeyWatch } from '../policies/revocation.ts';
import type { Services } from '../services.ts';
import type { GraphqlContext } from './builder.ts';
import type { DirectSink, LiveArgs } from './fanout.ts';
import { prepareOperation, type Enveloped } from './operation.ts';

// graphql-ws (graphql-transport-ws protocol) on the HTTP server's upgrade event, executing through Yoga's envelop
// pipeline (yoga.getEnveloped) so WebSocket operations get the same plugins, context and error mapping as HTTP.
// The API key (or a browser's stream token, `connectionParams.token`, spent here) is checked at connection_init: a missing or bad key closes the socket with 4401 and the error code
// (missing_api_key, invalid_api_key) as the reason; graphql-ws clients do not retry 4401. Operations then run with
// that key through the same policies as over HTTP.

const MAX_MESSAGE_BYTES = 1024 * 1024;

export interface WsOptions {
  path: string;
  // biome-ignore lint/complexity/noBannedTypes: `{}` is the user context createYoga infers when none is declared
  yoga: YogaServerInstance<GraphqlContext, {}>;
  services: Services;
  log: FastifyBaseLogger;
  /** re-authenticates the key of every open socket: a disabled key closes it with 4403 */
  keys: KeyWatch;
  context(input: { requestId: string; log: FastifyBaseLogger; authorization: Credentials; clientIp: string; signal?: AbortSignal | undefined }): GraphqlContext;
  /** the HTTP transport's error mapping, for errors raised before execution (it returns formatted errors as they are) */
  formatError(err: unknown, requestId: string, log: ErrorLogger): GraphQLError;
}

type ConnectionExtra = {
  connectionId: string;
  authorization: Credentials;
  clientIp: string;
  unwatch?: () => void;
  /** queries and mutations executing now: aborted when the socket closes, which cancels their running statement */
  executing?: Set<AbortController>;
};

interface SocketEnveloped extends Enveloped {
  /** the operation's client signal (its context has it), and the connection's executing set */
  operation: AbortController;
  executing: Set<AbortController>;
  socket: WebSocket;
}

/**
 * Executes a query or mutation with its signal aborted if the socket closes meanwhile (as over HTTP, the
 * running statement is cancelled). Subscriptions get no such signal: a subscription's context may serve a whole
 * fan-out group, which must outlive its first member (fanout.ts cancels a member's own replay when it ends).
 */
async function executeOperation(args: ExecutionArgs): Promise<unknown> {
  const root = args.rootValue as SocketEnveloped;
  if (root.socket.readyState !== WebSocket.OPEN) root.operation.abort();
  root.executing.add(root.operation);
  try {
    return await root.execute(args);
  } finally {
    root.executing.delete(root.operation);
  }
}

/** connectionParams.authorization: "Bearer <key>" or the bare key; else the upgrade request's Authorization header. */
export function wsAuthorization(params: Record<string, unknown> | undefined, request: IncomingMessage): string | undefined {
  const value = params?.authorization ?? params?.Authorization;
  if (typeof value === 'string' && value.trim()) return /^bearer\s/i.test(value.trim()) ? value.trim() : `Bearer ${value.trim()}`;
  return request.headers.authorization;
}

function closeCodeFor(status: number): number {
  if (status === 401) return 4401;
  if (status === 403) return 4403;
  if (status === 429) return 4429;
  return 4500;
}

/** Validation errors carry Yoga's HTTP status hint, which only the HTTP transport strips. */
function withoutHttpHint(error: GraphQLError): GraphQLError {
  if (!error.extensions.http) return error;
  const { http: _http, ...extensions } = error.extensions;
  return new GraphQLError(error.message, { nodes: error.nodes, source: error.source, positions: error.positions, path: error.path, extensions });
}

/** A socket this far behind (bytes queued, not yet written) has its live subscriptions ended: reconnect with after. */
const MAX_SOCKET_BACKLOG = 16 * 1024 * 1024;

/**
 * Fan-out (fanout.ts): a group's serialised payload goes straight to the socket in this operation's envelope, the
 * message graphql-ws itself would send (`next` with the operation id).
 */
function directSink(socket: WebSocket, id: string): DirectSink {
  const head = `{"id":${JSON.stringify(id)},"type":"next","payload":`;
  return {
    send(json) {
      if (socket.readyState !== WebSocket.OPEN) return true;
      if (socket.bufferedAmount > MAX_SOCKET_BACKLOG) return false;
      socket.send(`${head}${json}}`);
      return true;
    },
  };
}

export function mountGraphqlWs(app: FastifyInstance, options: WsOptions): { close(): Promise<void> } {
  const { path, yoga, services, log } = options;
  const wss = new WebSocketServer({ noServer: true, maxPayload: MAX_MESSAGE_BYTES });

  app.server.on('upgrade', (request, socket, head) => {
    const pathname = new URL(request.url ?? '/', 'http://localhost').pathname;
    if (pathname === path) {
      wss.handleUpgrade(request, socket, head, (client) => wss.emit('connection', client, request));
    } else if (app.server.listenerCount('upgrade') === 1) {
      // Nobody else serves upgrades: answer instead of leaving the socket hanging.
      socket.end('HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
    }
  });

  useServer<Record<string, unknown> | undefined, ConnectionExtra>(
    {
      onConnect: async (ctx) => {
        const connectionId = newId();
        ctx.extra.connectionId = connectionId;
        const clientIp = ctx.extra.request.socket.remoteAddress ?? 'unknown';
        try {
          const token = ctx.connectionParams?.token;
          const authorization = await subscriptionCredentials(
            services,
            { token: typeof token === 'string' ? token : undefined, authorization: wsAuthorization(ctx.connectionParams, ctx.extra.request), clientIp },
            {},
          );
          // The client may have gone while the token and the key were checked: onClose has run already, so nothing
          // would ever remove a watch made now.
          if (ctx.extra.socket.readyState !== WebSocket.OPEN) return false;
          ctx.extra.authorization = authorization;
          ctx.extra.clientIp = clientIp;
          // A key disabled while the socket is open (on any node) closes it, ending its subscriptions: 4403 and the
          // error code as the reason, which graphql-ws clients do not retry.
          ctx.extra.unwatch = options.keys.watch(authorization, (error) => ctx.extra.socket.close(4403, error.code));
          return true;
        } catch (err) {
          const error = resolveError(err, connectionId, log);
          ctx.extra.socket.close(closeCodeFor(ERROR_CODES[error.code].status), error.code);
          return false;
        }
      },

      onSubscribe: async (ctx, id, payload) => {
        const requestId = newId();
        const operation = new AbortController();
        const opLog = log.child({ request_id: requestId, connection_id: ctx.extra.connectionId, transport: 'graphql-ws' });
        // Each operation re-checks the key through the same policies as HTTP (a key disabled since connect stops working).
        const context = options.context({
          requestId,
          log: opLog,
          authorization: ctx.extra.authorization,
          clientIp: ctx.extra.clientIp ?? 'unknown',
          signal: operation.signal,
        });
        // No `request` in the context: Yoga would read the upgrade's GET as the operation's method and refuse mutations.
        const enveloped = yoga.getEnveloped({ ...context, params: payload, socket: ctx.extra.socket });
        const refuse = (errors: readonly unknown[]) => errors.map((e) => withoutHttpHint(options.formatError(e, requestId, opLog)));
        const prepared = await prepareOperation(enveloped, payload.query);
        if (prepared.errors) return refuse(prepared.errors);
        const { document, contextValue } = prepared;
        ctx.extra.executing ??= new Set();
        // the fan-out writes a live event's shared JSON straight to this operation's socket (fanout.ts)
        const args: LiveArgs = {
          schema: enveloped.schema,
          document,
          operationName: payload.operationName,
          variableValues: payload.variables,
          contextValue,
          rootValue: {
            execute: enveloped.execute,
            subscribe: enveloped.subscribe,
            operation,
            executing: ctx.extra.executing,
            socket: ctx.extra.socket,
          } satisfies SocketEnveloped,
          directSink: directSink(ctx.extra.socket, id),
        };
        return args;
      },
      onClose: (ctx) => {
        ctx.extra.unwatch?.();
        for (const operation of ctx.extra.executing ?? []) operation.abort();
      },
      execute: (args) => executeOperation(args) as never,
      subscribe: (args) => (args.rootValue as SocketEnveloped).subscribe(args) as never,
    },
    wss,
  );

  return {
    /** Closes every client ("going away"), terminating any that does not finish the close handshake within 1 s. */
    async close() {
      for (const client of wss.clients) client.close(1001, 'Server shutting down');
      const stragglers = setTimeout(() => {
        for (const client of wss.clients) client.terminate();
      }, 1000);
      await new Promise<void>((resolve) => wss.close(() => resolve()));
      clearTimeout(stragglers);
    },
  };
}
