import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Facilitator } from '../../domain/ports/facilitator.ts';
import {
  AcceptsRequest,
  type AcceptsResponse,
  type SettlementStatus,
  FacilitatorRequest,
  FacilitatorRequestV1,
  FacilitatorRequestV2,
  facilitatorRequestVersion,
} from '../../domain/facilitator/wire.ts';
import { DomainError } from '../../domain/shared/errors.ts';
import { invalidFromZod } from '../../domain/shared/validation.ts';
import { restAnswer } from '../errors.ts';
import { PrepareAccountsRequest } from '../../domain/treasury/accounts.ts';
import { MppSettleRequest } from '../../domain/facilitator/mpp.ts';
import { timingSafeEqual, createHash } from 'node:crypto';

// The x402 facilitator HTTP API (fee-facilitator-mpp-tools §4.1, DECISIONS "Facilitator"): the gateway mounts it at
// /facilitator, `npm run facilitator` at the root. A refused payment is a 200 with isValid/success false, as the x402
// facilitator API answers; only a body that is not a verify/settle request, or a facilitator that cannot answer,
// is an HTTP error, in the REST envelope.

export interface FacilitatorRoutesOptions {
  /** the port, and POST /accepts (faremeter's endpoint: no paywall calls it, so it is not on the port) */
  facilitator: Facilitator & { accepts(request: AcceptsRequest): Promise<AcceptsResponse>; status(query: unknown): Promise<SettlementStatus> };
  /** '' (standalone, at the root) or a path such as '/facilitator' */
  prefix: string;
  /**
   * SVC_FACILITATOR_ACCOUNTS_SECRET: POST /accounts spends the fee payer's rent for any owner named, so it answers only a caller
   * holding this bearer; unset, the route is closed (403) — the gateway's in-process facilitator needs no route.
   */
  accountsToken?: string | undefined;
}

export function registerFacilitatorRoutes(app: FastifyInstance, options: FacilitatorRoutesOptions): void {
  const { facilitator } = options;
  void app.register(
    async (scope) => {
      // Encapsulated: also catches what fastify refuses before a handler runs (bad JSON, wrong content type), so the
      // standalone server answers the same envelope as the gateway.
      scope.setErrorHandler((err, req, reply) => fail(err, req, reply));

      scope.post('/verify', async (req, reply) => reply.send(await facilitator.verify(parseRequest(req.body))));
      scope.post('/settle', async (req, reply) => reply.send(await facilitator.settle(parseRequest(req.body))));
      // fee-facilitator-mpp-tools §4.2, DECISIONS "MPP rail": { challenge, transaction } → { success, signature, slot }.
      scope.post('/mpp/settle', async (req, reply) => {
        const parsed = MppSettleRequest.safeParse(req.body);
        if (!parsed.success) throw invalidFromZod(parsed.error);
        return reply.send(await facilitator.mppSettle(parsed.data));
      });
      // faremeter's facilitator endpoint: @faremeter/middleware (facilitatorURL) completes its seller's offers here.
      scope.post('/accepts', async (req, reply) => {
        const parsed = AcceptsRequest.safeParse(req.body);
        if (!parsed.success) throw invalidFromZod(parsed.error);
        return reply.send(await facilitator.accepts(parsed.data));
      });
      scope.get('/supported', async (_req, reply) => reply.send(await facilitator.supported()));
      // x402 settlement_pending's question: what became of a payment (by signature, message hash or payment id), for
      // the seller that got the pending answer and for its buyer. Public facts only (what the ledger shows); open as
      // /settle is, under the same server bounds.
      scope.get('/status', async (req, reply) => reply.header('cache-control', 'no-store').send(await facilitator.status(req.query)));
      scope.get('/health', async (_req, reply) => reply.send(await facilitator.health()));
      // Not x402 (Solana Pay wallets): a co-signed transaction its buyer may still send failing, at the fee payer's
      // expense — behind the same bearer as /accounts.
      scope.post('/cosign', async (req, reply) => {
        requireToken(options.accountsToken, req.headers.authorization, '/cosign');
        return reply.send(await facilitator.cosign(parseRequest(req.body)));
      });
      scope.post('/accounts', async (req, reply) => {
        requireToken(options.accountsToken, req.headers.authorization, '/accounts');
        const parsed = PrepareAccountsRequest.safeParse(req.body);
        if (!parsed.success) throw invalidFromZod(parsed.error);
        return reply.send(await facilitator.prepareAccounts(parsed.data));
      });
    },
    { prefix: options.prefix.replace(/\/+$/, '') },
  );
}

/**
 * The body as a v2 or v1 request; the version is the top-level x402Version or, absent (the x402 v2 body, faremeter),
 * the payment payload's. A union failure alone says only "invalid input": the issues reported are those of the
 * version the body names, so a client learns which field is wrong.
 */
function parseRequest(body: unknown): FacilitatorRequest {
  const parsed = FacilitatorRequest.safeParse(body);
  if (parsed.success) return parsed.data;
  const version = facilitatorRequestVersion(body);
  const variant = version === 2 ? FacilitatorRequestV2 : version === 1 ? FacilitatorRequestV1 : undefined;
  if (!variant) {
    const message = 'expected 1 or 2 (x402Version, or else paymentPayload.x402Version)';
    throw DomainError.invalid([{ path: 'x402Version', message, code: 'invalid_value' }], `Invalid request at x402Version: ${message}`);
  }
  const issues = variant.safeParse({ ...(body as object), x402Version: version });
  throw issues.success ? invalidFromZod(parsed.error) : invalidFromZod(issues.error);
}

function requireToken(expected: string | undefined, authorization: string | undefined, route: string): void {
  if (!expected) throw new DomainError('forbidden', `POST ${route} is closed: the facilitator has no SVC_FACILITATOR_ACCOUNTS_SECRET.`);
  const given = /^Bearer (.+)$/.exec(authorization ?? '')?.[1] ?? '';
  const digest = (text: string) => createHash('sha256').update(text).digest();
  if (!timingSafeEqual(digest(given), digest(expected)))
    throw new DomainError('forbidden', `POST ${route} needs Authorization: Bearer <SVC_FACILITATOR_ACCOUNTS_SECRET>.`);
}

function fail(err: unknown, req: FastifyRequest, reply: FastifyReply): FastifyReply {
  const { status, body } = restAnswer(err, req);
  return reply.code(status).send(body);
}
