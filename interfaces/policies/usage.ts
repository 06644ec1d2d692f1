import { performance } from 'node:perf_hooks';
import type { Principal } from '../../domain/access/schema.ts';
import type { Bucket } from '../../domain/policies/rate-limit.ts';
import type { Services } from '../services.ts';

// hosted-api §8 usage records: one per keyed request, whichever door answered it (the keyed procedure, or REST's
// answer for a body the framework refused before the procedure ran).

export interface UsageScope {
  services: Services;
  /** "GET /v1/health", "trpc", "graphql" */
  transport: string;
}

/** Starts the clock of one keyed request; `end(status)` writes its usage record once. */
export function startUsage(scope: UsageScope, principal: Principal, what: { bucket: Bucket; route: string }): { end(status: number): void } {
  const started = performance.now();
  return {
    end(status) {
      scope.services.recorder.record({
        keyId: principal.keyId,
        network: principal.network,
        bucket: what.bucket,
        method: scope.transport,
        route: what.route,
        status,
        durationMs: Math.round(performance.now() - started),
      });
    },
  };
}
