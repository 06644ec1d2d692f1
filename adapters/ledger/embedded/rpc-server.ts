import { timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import { boundedServerOptions, DEFAULT_REQUEST_BOUNDS, type RequestBounds } from '../../../domain/shared/request-bounds.ts';
import { announceRpc, withdrawRpc } from './files.ts';
import { ADMIN_HEADER } from './keys.ts';
import { toJson } from './json.ts';
import type { EmbeddedLedger } from './ledger.ts';
import { DEFAULT_LIMITS, PubSub, type PubSubLimits } from './pubsub.ts';
import { RpcError } from './rpc-encode.ts';
import { dispatch, errorObject, rpcMethods, type Endpoints } from './rpc-methods.ts';

export { ADMIN_REFUSED, API_VERSION } from './rpc-methods.ts';
export { LIMIT_REACHED, type PubSubLimits } from './pubsub.ts';

// The standard Solana JSON-RPC (HTTP POST, batches) and PubSub (WebSocket on the same port and on port + 1, as
// agave does) for one embedded ledger, so wallets, @solana/web3.js, @solana/kit and x402 clients work unchanged.
// Commitment: a transaction is processed when it executes, confirmed once its history record is written and
// finalized once that is on disk (ledger.ts, history.ts) — a turn of the event loop and one fdatasync later.
// Signature subscriptions notify at the level asked; reads answer from the latest state whatever level is asked.

const MAX_BODY = 256 * 1024;

export interface LedgerRpcServerOptions {
  ledger: EmbeddedLedger;
  /** 0 = any free port (with a free port + 1 for the WebSocket, when one is found) */
  port: number;
  host?: string;
  /** WebSocket port besides the HTTP port's own upgrade; default port + 1; false = only the HTTP port */
  wsPort?: number | false;
  /** write `rpc.json` in the ledger directory so the faucet CLI finds this server (default true) */
  announce?: boolean;
  /**
   * the ledger-admin secret (`SVC_DATA_DIR/keys/ledger-admin.secret`, keys.ts) callers send in the
   * `x-svc-ledger-admin` header; unset, or a listener not bound to loopback: the admin methods do not exist
   */
  adminSecret?: string | null | undefined;
  limits?: PubSubLimits | undefined;
  /**
   * bounds on slow clients (default 10 s for the headers, 30 s for the whole request): past one the connection is
   * closed, with a 408 JSON-RPC error once the head has arrived
   */
  bounds?: RequestBounds | undefined;
}

export interface LedgerRpcServer {
  /** e.g. http://127.0.0.1:8899 */
  url: string;
  /** e.g. ws://127.0.0.1:8900 (the HTTP port accepts WebSocket upgrades too) */
  wsUrl: string;
  close(): Promise<void>;
}

/**
 * A port the JSON-RPC server could not bind — its own (`json-rpc`) or the next one (`websocket`) — and the system's
 * reason (`EADDRINUSE`, `EACCES`, `EADDRNOTAVAIL`, …); the process starting it names the setting to change.
 */
export class RpcListenError extends Error {
  override readonly name = 'RpcListenError';
  constructor(
    readonly listener: { network: string; host: string; port: number; role: 'json-rpc' | 'websocket'; code: string },
    message: string,
  ) {
    super(message);
  }

  static from(e: unknown, listener: Omit<RpcListenError['listener'], 'code'>): RpcListenError {
    const code = (e as NodeJS.ErrnoException).code ?? 'EUNKNOWN';
    const what = listener.role === 'websocket' ? 'WebSocket' : 'JSON-RPC';
    return new RpcListenError(
      { ...listener, code },
      `the ${listener.network} ledger's ${what} server cannot listen on ${listener.host}:${listener.port}: ${(e as Error).message}`,
    );
  }
}

export async function startLedgerRpcServer(options: LedgerRpcServerOptions): Promise<LedgerRpcServer> {
  const { ledger } = options;
  const host = options.host ?? '127.0.0.1';
  const pubsub = new PubSub(ledger, {
    subscriptionsPerSocket: options.limits?.subscriptionsPerSocket ?? DEFAULT_LIMITS.subscriptionsPerSocket,
    socketsPerClient: options.limits?.socketsPerClient ?? DEFAULT_LIMITS.socketsPerClient,
  });

  // Ledger-admin methods (svc_mintStable; requestAirdrop on mainnet) exist only on a loopback listener that was
  // given the admin secret, and answer only loopback callers presenting it (header ADMIN_HEADER).
  const adminSecret = options.adminSecret && isLoopbackHost(host) ? Buffer.from(options.adminSecret) : null;
  const isAdmin = (req: IncomingMessage) => {
    if (!adminSecret || !isLoopback(req.socket.remoteAddress)) return false;
    const given = req.headers[ADMIN_HEADER];
    return typeof given === 'string' && given.length === adminSecret.length && timingSafeEqual(Buffer.from(given), adminSecret);
  };
  const endpoints: Endpoints = { rpc: null, pubsub: null };
  const methods = rpcMethods(ledger, { admin: adminSecret !== null, endpoints });

  const handle = (req: IncomingMessage, res: ServerResponse) => {
    // last resort: nothing a client sends may throw out of this listener (the process serves others)
    req.on('error', () => res.destroy());
    res.on('error', () => res.destroy());
    if (req.method === 'GET' && (req.url === '/health' || req.url === '/health/')) return void res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
    if (req.method !== 'POST') return void res.writeHead(405, { allow: 'POST' }).end();
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY) {
        if (!res.headersSent) res.writeHead(413).end();
        req.destroy();
      } else chunks.push(c);
    });
    req.on('end', () => {
      if (res.writableEnded) return;
      let body: string;
      try {
        body = dispatch(methods, Buffer.concat(chunks).toString('utf8'), { admin: isAdmin(req) });
      } catch {
        body = toJson(errorObject(null, new RpcError(-32603, 'Internal error')));
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end(body);
    });
  };

  /** Node's answers to a refused request, with the JSON-RPC error object a Solana client can read where one fits */
  const clientError = (err: Error & { code?: string }, socket: Duplex) => {
    if (socket.destroyed) return;
    const s = socket as Duplex & { _httpMessage?: { headersSent?: boolean } | null; parser?: { incoming?: { _dumped?: boolean } | null } | null };
    const answered = s._httpMessage?.headersSent === true || s.parser?.incoming?._dumped === true;
    if (socket.writable && !answered) {
      const [status, text, message] =
        err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
          ? [408, 'Request Timeout', 'the request did not arrive in time']
          : err.code === 'HPE_HEADER_OVERFLOW'
            ? [431, 'Request Header Fields Too Large', 'the request line and headers are too large']
            : [400, 'Bad Request', 'malformed HTTP request'];
      const body = toJson(errorObject(null, new RpcError(-32600, message)));
      socket.write(
        `HTTP/1.1 ${status} ${text}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
      );
    }
    socket.destroy();
  };

  const wss = new WebSocketServer({ noServer: true, maxPayload: MAX_BODY });
  wss.on('error', () => {});
  wss.on('connection', (socket: WebSocket, req: IncomingMessage) => pubsub.attach(socket, req.socket.remoteAddress ?? ''));
  const upgrade = (req: IncomingMessage, socket: Duplex, head: Buffer) => wss.handleUpgrade(req, socket, head, (ws) => wss.emit('connection', ws, req));

  const listen = (server: Server, port: number) =>
    new Promise<number>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => {
        server.off('error', reject);
        resolve((server.address() as AddressInfo).port);
      });
    });
  const close = (server: Server) =>
    new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  const bounded = boundedServerOptions(options.bounds ?? DEFAULT_REQUEST_BOUNDS);
  const newServer = () => {
    const s = createServer({ keepAliveTimeout: 60_000, ...bounded }, handle);
    s.on('upgrade', upgrade);
    s.on('clientError', clientError);
    return s;
  };

  let http: Server | undefined;
  let ws: Server | undefined;
  let port = 0;
  let wsPort = 0;
  for (let attempt = 0; ; attempt++) {
    http = newServer();
    try {
      port = await listen(http, options.port);
    } catch (e) {
      throw RpcListenError.from(e, { network: ledger.network, host, port: options.port, role: 'json-rpc' });
    }
    if (options.wsPort === false) break;
    const wanted = options.wsPort ?? port + 1;
    ws = newServer();
    try {
      wsPort = await listen(ws, wanted);
      break;
    } catch (e) {
      ws = undefined;
      await close(http);
      // a random port whose neighbour is taken: try another pair
      if (options.port === 0 && options.wsPort === undefined && attempt < 20) continue;
      // A fixed port whose neighbour is taken is a start-up error, never a quiet WebSocket on the HTTP port alone:
      // Solana clients (web3.js Connection, the CLI) look for PubSub on port + 1, where another program answers.
      throw RpcListenError.from(e, { network: ledger.network, host, port: wanted, role: 'websocket' });
    }
  }
  const shownHost = host.includes(':') ? `[${host}]` : host === '0.0.0.0' ? '127.0.0.1' : host;
  const url = `http://${shownHost}:${port}`;
  const wsUrl = `ws://${shownHost}:${ws ? wsPort : port}`;
  // getClusterNodes names them as agave does: host:port, no scheme
  endpoints.rpc = `${shownHost}:${port}`;
  endpoints.pubsub = `${shownHost}:${ws ? wsPort : port}`;
  if (options.announce !== false) announceRpc(ledger.dir, url);

  return {
    url,
    wsUrl,
    async close() {
      if (options.announce !== false) withdrawRpc(ledger.dir);
      pubsub.close();
      for (const client of wss.clients) client.terminate();
      wss.close();
      await Promise.all([close(http!), ws ? close(ws) : Promise.resolve()]);
    },
  };
}

function isLoopback(address: string | undefined): boolean {
  return address === '127.0.0.1' || address === '::1' || address === '::ffff:127.0.0.1';
}

/** A bind address only this machine can reach. */
export function isLoopbackHost(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}
