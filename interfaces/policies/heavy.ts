import type { ServerResponse } from 'node:http';
import type { Principal } from '../../domain/access/schema.ts';
import type { CancelSignal } from '../../domain/ports/store.ts';
import type { Context } from '../trpc/context.ts';

// No key can starve the others: every keyed procedure's database work runs as one request scope
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
export function scopedRequest<T>(ctx: Context, principal: Principal, procedure: { path: string; type: string }, next: () => Promise<T>): Promise<T> {
  const { path, type } = procedure;
  if (type !== 'query') return next();
  return ctx.services.requestScope(
    { tag: ctx.requestId, heavy: HEAVY_PROCEDURES.has(path), principal: `${principal.network} ${principal.owner}`, signal: ctx.signal },
    next,
  );
}

/**
 * Aborts when the connection closes before the response was sent (the client gave up). No AbortController
 * (an EventTarget) and no bookkeeping per request — it listens on the response only once a request scope asks, i.e. for
 * the requests whose statements it may cancel.
 */
export function clientSignal(res: ServerResponse): CancelSignal {
  return new ClientLeft(res);
}

class ClientLeft implements CancelSignal {
  readonly #res: ServerResponse;
  #listeners: (() => void)[] | undefined;
  #left = false;

  constructor(res: ServerResponse) {
    this.#res = res;
  }

  get aborted(): boolean {
    return this.#left || (this.#res.destroyed && !this.#res.writableFinished);
  }

  addEventListener(_type: 'abort', listener: () => void): void {
    if (!this.#listeners) {
      this.#listeners = [];
      this.#res.once('close', () => {
        if (this.#res.writableFinished) return;
        this.#left = true;
        for (const l of this.#listeners!.splice(0)) l();
      });
    }
    this.#listeners.push(listener);
  }

  removeEventListener(_type: 'abort', listener: () => void): void {
    const at = this.#listeners?.indexOf(listener) ?? -1;
    if (at >= 0) this.#listeners!.splice(at, 1);
  }
}
