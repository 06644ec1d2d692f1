import { DomainError } from '../../domain/shared/errors.ts';
import type { Credentials, Principal } from '../../domain/access/schema.ts';
import type { Services } from '../services.ts';

// API-key auth and network resolution: one policy for REST, tRPC and GraphQL (hosted-api §5).

export function authenticate(services: Services, authorization: Credentials): Promise<Principal> {
  return services.access.authenticate(authorization);
}

export function requireAdmin(principal: Principal): void {
  if (principal.role !== 'admin') throw new DomainError('forbidden', 'This route needs an admin API key.');
}
