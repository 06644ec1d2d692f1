import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { limitAnonymous } from '../policies/rate-limit.ts';
import { restAnswer } from '../errors.ts';
import type { Services } from '../services.ts';
import type { BazaarListInput, BazaarSearchInput, PaymentDocumentInput } from '../../domain/discovery/schema.ts';

// Discovery others can read, over the catalogue of GET /v1/discover (domain/discovery/service.ts):
// - x402's bazaar routes (specs/extensions/bazaar.md "Optional Discovery Endpoints"), read by @x402/extensions'
//   withBazaar client at `${facilitator url}/discovery/…`: served at the root and, where this process mounts its
//   facilitator, under /facilitator too, so a client pointed at either finds them;
// - the MPP links' OpenAPI document with x-payment-info at /x/openapi.json, which mppx discovery reads at
//   `<url>/openapi.json` when given the paywall's {base_url}/x.
// Public, like GET /v1/discover/public (fee-facilitator-mpp-tools §4.3), on the per-IP public bucket; each route calls
// one DiscoveryService method; bad input is the standard 400 envelope.

export function registerDiscoveryRoutes(app: FastifyInstance, deps: { services: Services }): void {
  const { services } = deps;
  const prefixes = services.facilitator ? ['', '/facilitator'] : [''];
  const answer = (work: (query: unknown) => Promise<unknown>) => async (req: FastifyRequest, reply: FastifyReply) => {
    const headers: Record<string, string> = {};
    try {
      await limitAnonymous(services, req.ip, 'public', headers);
      const body = await work(req.query);
      return reply.headers(headers).header('access-control-allow-origin', '*').type('application/json').send(body);
    } catch (error) {
      const { status, body } = restAnswer(error, req);
      return reply.code(status).headers(headers).send(body);
    }
  };
  // mppx discovery reads `<url>/openapi.json`: the paywall's document, beside /x/{id} (a link id has no dot)
  if (services.paywall) {
    app.get(
      '/x/openapi.json',
      answer((query) => services.discovery.paymentDocument(query as PaymentDocumentInput)),
    );
  }
  for (const prefix of prefixes) {
    app.get(
      `${prefix}/discovery/resources`,
      answer((query) => services.discovery.bazaarResources(query as BazaarListInput)),
    );
    app.get(
      `${prefix}/discovery/search`,
      answer((query) => services.discovery.bazaarSearch(query as BazaarSearchInput)),
    );
  }
}
