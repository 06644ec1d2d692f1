import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { Services } from '../services.ts';

// Placeholder while the GraphQL layer is written.
export function mountGraphql(_app: FastifyInstance, _deps: { services: Services; log: Logger }): void {}
