import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { DomainError } from '../../domain/shared/errors.ts';
import { Slug } from '../../domain/payment-links/schema.ts';
import type { PaywallService } from '../../domain/paywall/service.ts';
import { sessionQuery } from '../../domain/paywall/solana-pay.ts';
import { limitAnonymous } from '../policies/rate-limit.ts';
import type { Services } from '../services.ts';
import { restAnswer } from '../errors.ts';
import { renderPaywallPage } from './page.ts';
import { splitQuery } from '../../domain/paywall/http.ts';

// The paywall page and its wallet payment (docs/paywall.md "In a browser"): the page for a browser's GET /x/{id},
// and the Solana Pay transaction request at /x/{id}/solana-pay. Thin like routes.ts: the same per-IP window as the
// paywall (DECISIONS "Wire conventions"), one PaywallService call, its answer or the error envelope.

/** The page runs its one inline script by nonce, talks to its own origin only, and draws its QR code inline. */
const csp = (nonce: string): string =>
  `default-src 'none'; script-src 'nonce-${nonce}'; style-src 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'`;

export interface PageDeps {
  services: Services;
  paywall: PaywallService;
}

const pathId = (id: string): string => encodeURIComponent(id);

/** GET /x/{id} from a browser (routes.ts decides by Accept): 402 and the page. */
export async function servePage(
  req: FastifyRequest<{ Params: { id: string } }>,
  reply: FastifyReply,
  deps: PageDeps & { headers: Record<string, string> },
): Promise<FastifyReply> {
  const { services, paywall, headers } = deps;
  try {
    await limitAnonymous(services, req.ip, 'paywall', headers);
    if (!Slug.safeParse(req.params.id).success) throw new DomainError('payment_link_not_found', 'No payment link with that id.', { id: req.params.id });
    const { network } = splitQuery(req.url);
    const { model, session } = await paywall.page({ id: req.params.id, network });
    const base = services.settings.baseUrl;
    const { html, nonce } = await renderPaywallPage(model, session, {
      transactionRequest: `${base}/x/${pathId(model.id)}/solana-pay?${sessionQuery(model.network, session)}`,
      status: `/x/${pathId(model.id)}/solana-pay/${session.reference}?network=${model.network}`,
    });
    return reply
      .code(402)
      .headers(headers)
      .headers({
        'content-type': 'text/html; charset=utf-8',
        'cache-control': 'no-store',
        vary: 'Accept',
        'content-security-policy': csp(nonce),
        'x-content-type-options': 'nosniff',
        'referrer-policy': 'no-referrer',
      })
      .send(html);
  } catch (err) {
    const { status, body } = restAnswer(err, req);
    return reply.code(status).headers(headers).send(body);
  }
}

export function registerSolanaPayRoutes(app: FastifyInstance, deps: PageDeps): void {
  const { services, paywall } = deps;

  /** Each answer: the window's headers, CORS open (wallets fetch from anywhere, Solana Pay), the envelope on errors. */
  const handle =
    <R extends FastifyRequest>(work: (req: R) => Promise<{ status: number; body: unknown; type?: string }>) =>
    async (req: R, reply: FastifyReply) => {
      const headers: Record<string, string> = { 'access-control-allow-origin': '*', 'cache-control': 'no-store' };
      try {
        await limitAnonymous(services, req.ip, 'paywall', headers);
        const out = await work(req);
        if (out.type) headers['content-type'] = out.type;
        return reply.code(out.status).headers(headers).send(out.body);
      } catch (err) {
        const { status, body } = restAnswer(err, req);
        return reply.code(status).headers(headers).send(body);
      }
    };

  const linkOf = (req: FastifyRequest<{ Params: { id: string } }>) => {
    if (!Slug.safeParse(req.params.id).success) throw new DomainError('payment_link_not_found', 'No payment link with that id.', { id: req.params.id });
    return { id: req.params.id, network: splitQuery(req.url).network };
  };

  // Solana Pay transaction request, GET: what the wallet shows before asking for the transaction.
  app.get<{ Params: { id: string } }>(
    '/x/:id/solana-pay',
    handle(async (req) => {
      const { model } = await paywall.page(linkOf(req));
      const price = model.prices[0];
      const label = `${model.label}${price ? ` · ${price.gross} ${price.currency}` : ''}`.slice(0, 120);
      return { status: 200, body: { label, icon: `${services.settings.baseUrl}/x/${pathId(model.id)}/solana-pay/icon.svg?network=${model.network}` } };
    }),
  );

  // Solana Pay transaction request, POST { account }: the settlement for that wallet, co-signed by the facilitator.
  app.post<{ Params: { id: string }; Querystring: Record<string, string>; Body: unknown }>(
    '/x/:id/solana-pay',
    handle(async (req) => {
      const q = req.query;
      const body = req.body as { account?: unknown } | null | undefined;
      const answer = await paywall.walletTransaction({
        ...linkOf(req),
        account: body?.account,
        session: { reference: q.reference, expires: q.expires, sig: q.sig },
      });
      return { status: 200, body: answer };
    }),
  );

  // The page's payment status, keyed by its reference; only the page's secret may read it (and collect the response).
  app.get<{ Params: { id: string; reference: string } }>(
    '/x/:id/solana-pay/:reference',
    handle(async (req) => {
      const secret = req.headers['x-svc-page-secret'];
      if (typeof secret !== 'string' || secret === '') throw new DomainError('forbidden', "X-Svc-Page-Secret (the page's secret) is required.");
      const status = await paywall.walletStatus({ ...linkOf(req), reference: req.params.reference, secret });
      // the console's paid-call line (interfaces/log.ts), once per recorded payment, as for /x/{id}
      if (status.state === 'paid' && status.paid) req.log.info({ evt: 'paid_call', ...status.paid }, 'paid call');
      const { paid: _paid, ...wire } = status as typeof status & { paid?: unknown };
      return { status: 200, body: wire };
    }),
  );

  // The icon a wallet shows beside the label (Solana Pay: an SVG, PNG or WebP URL).
  app.get<{ Params: { id: string } }>(
    '/x/:id/solana-pay/icon.svg',
    handle(async () => ({ status: 200, type: 'image/svg+xml', body: ICON })),
  );
}

const ICON =
  '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 64 64"><rect width="64" height="64" rx="14" fill="#1b1b1f"/>' +
  '<text x="32" y="42" font-family="sans-serif" font-size="26" font-weight="700" fill="#fff" text-anchor="middle">402</text></svg>';
