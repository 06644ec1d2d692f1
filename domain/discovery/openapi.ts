import type { PaymentLinkRecord } from '../payment-links/schema.ts';
import { chargeRequestFor, MPP_INTENT, MPP_METHOD } from '../facilitator/mpp.ts';
import type { X402RequirementsV2 } from '../facilitator/wire.ts';
import { STABLES, type Network } from '../shared/network.ts';
import { bodyExample, isQueryMethod, sanitizeTags } from './bazaar.ts';

// MPP discovery (mppx/discovery 0.11: an OpenAPI 3.1 document whose paid operations carry `x-payment-info`, the
// document root `x-service-info`): the gateway's public MPP links as operations of the paywall, so mppx's discovery
// (and its `validate`, which reads `<url>/openapi.json`) lists the sellers behind them. The paths are relative to the
// paywall (`servers`: {base_url}/x), one per link, each with the offers its MPP 402 makes — the same gross amount and
// mint as its challenge's request (chargeRequestFor), intent "charge", method "solana". Discovery is advisory: the
// 402's challenge stays authoritative. Only what the seller published for buyers goes out (bazaar.ts's rules). Pure.

/** One offer of `x-payment-info` (mppx's PaymentInfo offers[]): amount in base units, currency the mint. */
export interface PaymentOffer {
  amount: string;
  currency: string;
  description: string;
  intent: string;
  method: string;
}

/** The fields of a link the document reads. */
export type DocumentedLink = Pick<PaymentLinkRecord, 'id' | 'network' | 'label' | 'method' | 'metadata' | 'response'>;

/** The MPP offers of a link: one per accepted currency, as its 402's challenges state them. */
export function paymentOffers(link: DocumentedLink, accepts: X402RequirementsV2[]): PaymentOffer[] {
  return accepts.flatMap((accept) => {
    const stable = STABLES[link.network].find((s) => s.mint === accept.asset);
    if (!stable) return [];
    const request = chargeRequestFor(accept, { decimals: stable.decimals, tokenProgram: stable.tokenProgramId, symbol: stable.symbol, resource: '' });
    return [{ amount: request.amount, currency: request.currency, description: link.label, intent: MPP_INTENT, method: MPP_METHOD }];
  });
}

/** The operation of one link: its method, the paywall's network parameter, its request body example, its answers. */
function operationOf(link: DocumentedLink, offers: PaymentOffer[]): Record<string, unknown> {
  const description = typeof link.metadata.description === 'string' ? link.metadata.description.slice(0, 1000) : undefined;
  const tags = sanitizeTags(link.metadata.capabilities);
  const operation: Record<string, unknown> = {
    operationId: `pay_${link.id}`,
    summary: link.label,
    ...(description ? { description } : {}),
    ...(tags ? { tags } : {}),
    // hosted-api §4.2 rule 2: a link off chain-mainnet is reached with ?network=
    ...(link.network === 'chain-mainnet'
      ? {}
      : {
          parameters: [
            { name: 'network', in: 'query', required: true, description: 'the network of this link', schema: { type: 'string', enum: [link.network] } },
          ],
        }),
    'x-payment-info': { offers },
    responses: {
      // the answer of a settled call: the link's own status and type, or an upstream's (any 2xx)
      [link.metadata.upstream_url === undefined ? String(link.response.status) : '2XX']: {
        description: 'The paid answer',
        content: { [link.response.mimeType]: {} },
      },
      '402': { description: 'Payment Required: an MPP challenge (WWW-Authenticate: Payment, method solana, intent charge)' },
    },
  };
  if (!isQueryMethod(link.method)) {
    operation.requestBody = { content: { 'application/json': { schema: { type: 'object' }, example: bodyExample(link.metadata.expected_request_body) } } };
  }
  return operation;
}

/** The document of a network's public MPP links, newest first (their `offers` computed by the caller). */
export function paymentDocument(input: {
  baseUrl: string;
  version: string;
  network: Network;
  links: Array<{ link: DocumentedLink; offers: PaymentOffer[] }>;
}): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const { link, offers } of input.links) {
    if (offers.length === 0) continue;
    paths[`/${encodeURIComponent(link.id)}`] = { [link.method.toLowerCase()]: operationOf(link, offers) };
  }
  return {
    openapi: '3.1.0',
    info: {
      title: `${new URL(input.baseUrl).host} paid services (${input.network})`,
      version: input.version,
      description:
        'The public payment links paid on the MPP rail: each operation is a paywall URL and its x-payment-info the offers of its 402. x402 links are listed by the bazaar routes (GET /discovery/resources).',
    },
    servers: [{ url: `${input.baseUrl}/x` }],
    'x-service-info': { docs: { homepage: input.baseUrl, apiReference: `${input.baseUrl}/docs` } },
    paths,
  };
}
