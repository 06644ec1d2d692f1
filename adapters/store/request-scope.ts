import { AsyncLocalStorage } from 'node:async_hooks';
import { DomainError } from '../../domain/shared/errors.ts';
import type { RequestScope } from '../../domain/ports/store.ts';

// A request's database work runs under its class's limits. The scope travels with the request's
// async calls (AsyncLocalStorage), so repositories need no parameter: the store picks the pool of the class, every
// statement carries the request's tag as a leading comment, and a timeout or a client that left cancels the running
// statement by that tag (pg_cancel_backend from another connection: node-postgres cannot abort a query in flight).

interface Active extends RequestScope {
  timeoutMs: number;
  /** set once the request timed out or its client left: no further statement starts */
  stopped?: 'timeout' | 'aborted';
}

const scopes = new AsyncLocalStorage<Active>();

/** The request scope of the running call, if any. */
export const currentScope = (): Active | undefined => scopes.getStore();

const TAG = /^[0-9A-Za-z_-]{1,64}$/;
const prefix = (tag: string) => `/* svc:${tag} */ `;

/** Runs `work` outside any request scope (its statements untagged, under no request's timeout). */
export const outsideScope = <T>(work: () => Promise<T>): Promise<T> => scopes.exit(work);

/** MikroORM `onQuery`: tags each statement of a scoped request, and refuses to start one after the request stopped. */
export function tagQuery(sql: string): string {
  const scope = scopes.getStore();
  if (!scope) return sql;
  if (scope.stopped) throw stoppedError(scope);
  return TAG.test(scope.tag) ? prefix(scope.tag) + sql : sql;
}

function stoppedError(scope: Active): DomainError {
  return scope.stopped === 'aborted'
    ? new DomainError('timeout', 'The request was cancelled: its client disconnected.', { reason: 'client_disconnected' })
    : new DomainError('timeout', `The request took longer than its ${scope.timeoutMs} ms database budget.`, {
        timeout_ms: scope.timeoutMs,
        class: scope.heavy ? 'heavy' : 'default',
      });
}

/** The error or one of its causes (a procedure's error wraps the driver's). */
function someCause(e: unknown, test: (e: { code?: unknown; message?: unknown }) => boolean): boolean {
  for (
    let c = e as { code?: unknown; message?: unknown; cause?: unknown } | undefined, i = 0;
    c && typeof c === 'object' && i < 5;
    c = c.cause as typeof c, i++
  ) {
    if (test(c)) return true;
  }
  return false;
}
/** PostgreSQL's query_canceled (a statement timeout or pg_cancel_backend) */
const isCancelled = (e: unknown) => someCause(e, (c) => c.code === '57014' || /canceling statement due to/.test(String(c.message)));
const isAcquireTimeout = (e: unknown) => someCause(e, (c) => /Timeout acquiring a connection/.test(String(c.message)));
/** a DomainError thrown by tagQuery after the request stopped, possibly wrapped by the procedure's error */
const stoppedCause = (e: unknown): DomainError | undefined => {
  for (let c = e as { cause?: unknown } | undefined, i = 0; c && typeof c === 'object' && i < 5; c = c.cause as typeof c, i++) {
    if (c instanceof DomainError && c.code === 'timeout') return c;
  }
  return undefined;
};

/**
 * Runs `work` in `scope`: after `scope.timeoutMs`, or when `scope.signal` aborts, the request's running statement is
 * cancelled through `cancel(tag)` and no further one starts; the request answers `timeout`.
 */
export async function runScoped<T>(
  scope: RequestScope & { timeoutMs: number },
  cancel: (tagPrefix: string) => Promise<void>,
  work: () => Promise<T>,
): Promise<T> {
  const active: Active = { ...scope };
  const stop = (why: 'timeout' | 'aborted') => {
    if (active.stopped) return;
    active.stopped = why;
    if (TAG.test(scope.tag)) void scopes.exit(() => cancel(prefix(scope.tag))).catch(() => {});
  };
  const onAbort = () => stop('aborted');
  const timer = setTimeout(() => stop('timeout'), scope.timeoutMs);
  timer.unref?.();
  scope.signal?.addEventListener('abort', onAbort, { once: true });
  try {
    if (scope.signal?.aborted) stop('aborted');
    return await scopes.run(active, work);
  } catch (e) {
    const stopped = stoppedCause(e);
    if (stopped) throw stopped;
    if (isCancelled(e) || isAcquireTimeout(e)) throw stoppedError(active.stopped ? active : { ...active, stopped: 'timeout' });
    throw e;
  } finally {
    clearTimeout(timer);
    scope.signal?.removeEventListener('abort', onAbort);
  }
}
