import { checkIdempotencyKey, outcomeError } from '../../domain/policies/idempotency.ts';
import type { Principal } from '../../domain/access/schema.ts';
import type { Services } from '../services.ts';

// hosted-api §5.7: the same Idempotency-Key policy for REST POSTs, tRPC mutations and GraphQL mutations. The route is
// the operation (procedure path), so one key covers one operation whichever door it came through.

export interface IdempotencyScope {
  services: Services;
  principal: Principal;
  requestId: string;
  idempotencyKey: string | undefined;
  responseHeaders: Record<string, string>;
  /** filled on a replay: the request id of the first call, so REST can replay its error envelope byte for byte */
  replay: { requestId?: string };
}

/** `secretFields`: top-level fields of the result never written to the idempotency store (replays omit them). */
export async function idempotent<T>(
  scope: IdempotencyScope,
  request: { route: string; input: unknown; secretFields?: readonly string[] },
  exec: () => Promise<T>,
): Promise<T> {
  const { route, input, secretFields = [] } = request;
  const idemKey = checkIdempotencyKey(scope.idempotencyKey);
  if (idemKey === undefined) return exec();
  const redact = secretFields.length
    ? (data: unknown) =>
        typeof data === 'object' && data !== null ? Object.fromEntries(Object.entries(data).filter(([k]) => !secretFields.includes(k))) : data
    : undefined;
  const { outcome, replayed } = await scope.services.idempotency.run(
    { keyId: scope.principal.keyId, route, idemKey, input, requestId: scope.requestId, redact },
    exec,
  );
  if (replayed) {
    scope.responseHeaders['Idempotent-Replayed'] = 'true';
    scope.replay.requestId = outcome.requestId;
  }
  if (!outcome.ok) throw outcomeError(outcome);
  return outcome.data as T;
}
