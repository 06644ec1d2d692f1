import { rateLimitedError, rateLimitHeaders, type Bucket } from '../../domain/policies/rate-limit.ts';
import type { Principal } from '../../domain/access/schema.ts';
import type { Services } from '../services.ts';

// hosted-api §8, DECISIONS "Wire conventions": the sliding window per (api key, bucket), shared by every process;
// requests without a valid key count against a per-client-IP bucket kept in memory. One policy for all doors.

export async function limitKey(services: Services, principal: Principal, bucket: Bucket, headers: Record<string, string>): Promise<void> {
  const decision = await services.rateLimiter.hit(`key:${principal.keyId}`, bucket);
  Object.assign(headers, rateLimitHeaders(decision));
  if (!decision.allowed) throw rateLimitedError(decision);
}

export function limitAnonymous(services: Services, clientIp: string, bucket: Bucket, headers: Record<string, string>): void {
  const decision = services.memoryLimiter.hit(`ip:${clientIp}`, bucket);
  Object.assign(headers, rateLimitHeaders(decision));
  if (!decision.allowed) throw rateLimitedError(decision);
}
