import { rateLimitedError, rateLimitHeaders, type Bucket } from '../../domain/policies/rate-limit.ts';
import { DomainError } from '../../domain/shared/errors.ts';
import type { Credentials, Principal, StreamGrant } from '../../domain/access/schema.ts';
import type { Services } from '../services.ts';
import { authenticate } from './auth.ts';

// hosted-api §8, DECISIONS "Wire conventions": the sliding window per (api key, bucket) or, for requests without a
// valid key (the paywall, public reads, failed authentications), per (client IP, bucket) — shared by every process on
// the database either way. One policy for all doors.

/** `hits`: slots the request takes (a GraphQL operation: one per started unit of its cost, graphql-limits.ts). */
export async function limitKey(
  services: Services,
  principal: Principal,
  bucket: Bucket,
  into: { headers: Record<string, string>; hits?: number },
): Promise<void> {
  const { headers, hits = 1 } = into;
  const decision = await services.rateLimiter.hit(`key:${principal.keyId}`, bucket, hits);
  Object.assign(headers, rateLimitHeaders(decision));
  if (!decision.allowed) throw rateLimitedError(decision);
}

export async function limitAnonymous(services: Services, clientIp: string, bucket: Bucket, headers: Record<string, string>): Promise<void> {
  const decision = await services.rateLimiter.hit(`ip:${clientIp}`, bucket);
  Object.assign(headers, rateLimitHeaders(decision));
  if (!decision.allowed) throw rateLimitedError(decision);
}

/**
 * API-key auth where a failed authentication counts against the client IP (hosted-api §8): the keyed procedures,
 * GraphQL's keyed fields and graphql-ws connections all authenticate through here. Throws the auth error, or
 * rate_limited when the client IP is over its limit.
 */
export async function authenticateCounted(
  services: Services,
  request: { authorization: Credentials; clientIp: string },
  headers: Record<string, string>,
): Promise<Principal> {
  try {
    return await authenticate(services, request.authorization);
  } catch (e) {
    await limitAnonymous(services, request.clientIp, 'default', headers);
    throw e;
  }
}

/**
 * Spends a browser's stream token (SSE `?token=`, graphql-ws `connectionParams.token`); a refused token counts
 * against the client IP like a bad key.
 */
export async function redeemCounted(services: Services, request: { token: string; clientIp: string }, headers: Record<string, string>): Promise<StreamGrant> {
  try {
    return await services.access.redeemStreamToken(request.token);
  } catch (e) {
    await limitAnonymous(services, request.clientIp, 'default', headers);
    throw e;
  }
}

/**
 * The credentials of a subscription, the one reader for both of its doors (SSE: `?token=` and the Authorization header;
 * graphql-ws: `connectionParams.token` and `connectionParams.authorization` or the upgrade's header): a browser's stream
 * token when given, spent here (a browser cannot set headers on an EventSource or a WebSocket), else the API key;
 * checked with the shared auth policy, failures counting against the client IP (hosted-api §8). Throws the auth error.
 */
export async function subscriptionCredentials(
  services: Services,
  request: { token: string | undefined; authorization: Credentials; clientIp: string },
  headers: Record<string, string>,
): Promise<Credentials> {
  const { token, clientIp } = request;
  const credentials: Credentials = token !== undefined ? await redeemCounted(services, { token, clientIp }, headers) : request.authorization;
  await authenticateCounted(services, { authorization: credentials, clientIp }, headers);
  return credentials;
}

/**
 * For a known route answered outside its procedure (a body the HTTP framework refused: malformed JSON, over 1 MiB,
 * wrong content type): the window the procedure would have used — the key's bucket, or the client IP's when the key
 * is missing or not valid — so these responses carry the RateLimit-* headers too. A failed authentication does not
 * change the answer; a refused hit throws rate_limited. Returns the principal when the key was valid.
 */
export async function limitOutsideProcedure(
  services: Services,
  request: { authorization: Credentials; clientIp: string },
  bucket: Bucket,
  headers: Record<string, string>,
): Promise<Principal | undefined> {
  let principal: Principal;
  try {
    principal = await authenticateCounted(services, request, headers);
  } catch (e) {
    // The auth failure does not change the answer; the client IP's rate_limited does.
    if (e instanceof DomainError && e.code !== 'rate_limited') return undefined;
    throw e;
  }
  await limitKey(services, principal, bucket, { headers });
  return principal;
}
