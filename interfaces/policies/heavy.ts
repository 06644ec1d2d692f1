import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Principal } from '../../domain/access/schema.ts';
import type { Context } from '../trpc/context.ts';

// Issue 21 item 3, "no key can starve the others": every keyed procedure's database work runs as one request scope
// (Store.scoped): a statement timeout by request class, the running statement cancelled when the client leaves, and
// for the heavy class — the lists and aggregates whose cost grows with what a principal holds — at most
// SVC_DB_HEAVY_PER_PRINCIPAL at once per principal (429 rate_limited with retry_after_ms beyond) on their own share of
// the connection pool (SVC_DB_HEAVY_POOL), so point reads of every other key always find a connection.

/** tRPC paths of the heavy class (REST and GraphQL call the same procedures). */
export const HEAVY_PROCEDURES: ReadonlySet<string> = new Set([
  'events.list',
  'metrics.events',
  'metrics.usage',
  'paymentLinks.list',
  'receipts.list',
  'receipts.listPullTargets',
  'webhooks.list',
  'webhooks.deliveries',
  'admin.listApiKeys',
  'identity.history',
  'identity.listClaims',
  // the reputation summary aggregates the agent's earn receipts
  'identity.get',
  'identity.resolve',
  'identity.verify',
]);

/**
 * Runs a query procedure (`next`) in its request scope. Mutations run as they are: one may wait for the ledger between
 * its statements, and cancelling its transaction after a submit would lose the record of a transaction already sent.
 */
export function scopedRequest<T>(ctx: Context, principal: Principal, path: string, type: string, next: () => Promise<T>): Promise<T> {
  if (type !== 'query') return next();
  return ctx.services.requestScope(
    { tag: ctx.requestId, heavy: HEAVY_PROCEDURES.has(path), principal: `${principal.network} ${principal.owner}`, signal: ctx.signal },
    next,
  );
}

const responses = new WeakMap<IncomingMessage, ServerResponse>();

/** Remembers a request's response (fastify onRequest), so `clientSignal` can tell when its client left. */
export function noteResponse(req: IncomingMessage, res: ServerResponse): void {
  responses.set(req, res);
}

/** Aborts when the connection closes before the response was sent (the client gave up). */
export function clientSignal(req: IncomingMessage): AbortSignal | undefined {
  const res = responses.get(req);
  if (!res) return undefined;
  const controller = new AbortController();
  if (res.destroyed) {
    if (!res.writableFinished) controller.abort();
  } else {
    res.once('close', () => {
      if (!res.writableFinished) controller.abort();
    });
  }
  return controller.signal;
}
