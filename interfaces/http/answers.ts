import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { newRequestId } from '../../domain/shared/ids.ts';
import { DomainError } from '../../domain/shared/errors.ts';
import { resolveError, restAnswer, restError, trpcError } from '../errors.ts';
import { clientRequestId } from './logging.ts';

// What every answer of a fastify listener carries, whoever gives it: the error envelope in the shape of the door asked
// (DECISIONS "Wire conventions") and X-Svc-Request-Id — for the answers fastify and Node's parser give themselves too.

/**
 * Requests Node's HTTP parser refuses before fastify sees them (request line and headers over 16 KiB, malformed
 * request lines) and requests not complete within the listener's bounds (`RequestBounds`): the envelope and
 * X-Svc-Request-Id like every other answer, then the connection is closed. Shared by every fastify listener.
 */
export function clientErrorHandler(this: FastifyInstance, err: Error & { code?: string }, socket: Duplex): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const requestId = newRequestId();
  const error =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? new DomainError('headers_too_large', 'The request line and headers exceed 16 KiB.')
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? new DomainError('request_timeout', 'The request did not arrive in time: send its headers and body without pausing.')
        : DomainError.invalid([{ path: '', message: 'Malformed HTTP request', code: 'malformed' }], 'Malformed HTTP request.');
  const { status, body } = restError(error, requestId);
  const json = JSON.stringify(body);
  this.log.debug({ err, request_id: requestId }, 'client error');
  if (socket.writable && !answered(socket)) {
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(json)}\r\n` +
        `X-Svc-Request-Id: ${requestId}\r\nConnection: close\r\n\r\n${json}`,
    );
  }
  socket.destroy();
}

/**
 * Whether the request in progress on the socket already has its answer (started, or sent before its body finished —
 * Node then discards the rest of the body): a second answer would be read as the next request's.
 */
function answered(socket: Duplex): boolean {
  const s = socket as Duplex & {
    _httpMessage?: { headersSent?: boolean; req?: unknown } | null;
    parser?: { incoming?: { _dumped?: boolean; complete?: boolean } | null } | null;
  };
  // `parser.incoming` and `_httpMessage` stay the previous request's until the next one's head is parsed: an error in
  // that next head (a keep-alive connection's next request) has no answer yet, so only an incomplete request counts.
  const incoming = s.parser?.incoming;
  if (!incoming || incoming.complete === true) return false;
  return incoming._dumped === true || (s._httpMessage?.headersSent === true && s._httpMessage.req === incoming);
}

/** What fastify refuses itself is answered in the shape of the door asked: tRPC's under /trpc, the REST envelope elsewhere. */
export function errorAnswer(err: unknown, req: FastifyRequest): { status: number; body: unknown } {
  return req.url.startsWith('/trpc/') || req.url === '/trpc' ? trpcError(resolveError(err, req.id, req.log), req.id) : restAnswer(err, req);
}

/**
 * X-Svc-Request-Id on every response, written to the raw response so Yoga and tRPC replies carry it too; a client's
 * X-Request-Id joins the request's log lines. One callback hook, no promise (every request pays it).
 */
export function stampRequestId(req: FastifyRequest, reply: FastifyReply, done: () => void): void {
  reply.raw.setHeader('X-Svc-Request-Id', req.id);
  const clientId = clientRequestId(req.headers);
  if (clientId !== undefined) req.log = req.log.child({ client_request_id: clientId });
  done();
}
