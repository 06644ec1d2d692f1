import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { FastifyInstance } from 'fastify';
import { boundedServerOptions, type RequestBounds } from '../../domain/shared/request-bounds.ts';

// The gateway's port, bound before the app exists (see `bindListener`).

export type RequestHandler = (req: IncomingMessage, res: ServerResponse) => void;

export interface Listener {
  server: Server;
  /** the bound port (PORT=0: the one the system assigned) */
  port: number;
  /** fastify's `serverFactory`: the app answers on this server */
  factory(handler: RequestHandler, options: { keepAliveTimeout?: number; requestTimeout?: number; connectionTimeout?: number }): Server;
  /** once the app is ready: it answers from now on, the requests that waited first */
  serve(app: FastifyInstance): Promise<void>;
  /** stops accepting and waits for open requests (the caller cuts lingering sockets) */
  close(): Promise<void>;
}

/**
 * The gateway's port, bound before the services are built so their settings (the base URL with PORT=0) are final
 * when made, never patched after listen. Requests arriving while the app starts wait for it.
 */
export async function bindListener(port: number, host: string, bounds: RequestBounds): Promise<Listener> {
  const server = createServer(boundedServerOptions(bounds));
  const waiting: [IncomingMessage, ServerResponse][] = [];
  const hold: RequestHandler = (req, res) => void waiting.push([req, res]);
  let handler: RequestHandler | undefined;
  server.on('request', hold);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ port, host }, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address();
  return {
    server,
    port: typeof address === 'object' && address ? address.port : port,
    factory(appHandler, options) {
      // What fastify sets on a server it makes itself (fastify/lib/server.js).
      if (options.keepAliveTimeout !== undefined) server.keepAliveTimeout = options.keepAliveTimeout;
      if (options.requestTimeout !== undefined) server.requestTimeout = options.requestTimeout;
      if (options.connectionTimeout !== undefined) server.setTimeout(options.connectionTimeout);
      handler = appHandler;
      return server;
    },
    async serve(app) {
      await app.ready();
      if (!handler) throw new Error('the app was not built on this listener (factory unused)');
      server.off('request', hold);
      server.on('request', handler);
      for (const [req, res] of waiting.splice(0)) handler(req, res);
    },
    close() {
      return new Promise((resolve) => {
        server.close(() => resolve());
        if (!handler) server.closeAllConnections(); // requests held for an app that never came
      });
    },
  };
}
