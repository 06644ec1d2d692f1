import { z } from 'zod';
import { WholeUnits } from '../../../domain/agents/prepare-schema.ts';
import { networkFromX402 } from '../../../domain/facilitator/wire.ts';
import { challengeNetwork, decodeReceipt, solanaCharges } from '../../../domain/facilitator/mpp.ts';
import { CreatePaymentLinkInput, HttpMethod, Slug } from '../../../domain/payment-links/schema.ts';
import { decimalToAtomic } from '../../../domain/shared/money.ts';
import { createPayingFetch, decodePaymentResponse, PaymentError } from '../../client/paying-fetch.ts';
import { defineTool, ToolError, type ToolContext } from '../context.ts';

// fee-facilitator-mpp-tools §4.3: pay a payment link (x402 or MPP, from the agent treasury with the executive as the
// SPL delegate, through the buyer kit) and create one. An MPP offer is a Solana charge challenge (WWW-Authenticate:
// Payment, §4.2): paid with a credential, settled into a v0.2 receipt; an offer only on the other network is refused
// with wrong_network.

const MAX_BODY_CHARS = 16_384;

const PayInput = z.object({
  url: z
    .url({ protocol: /^https?$/ })
    .max(2048)
    .optional()
    .describe('the paid URL, e.g. a payment link share_url'),
  payment_link: Slug.optional().describe('a payment link id on this gateway (instead of url)'),
  method: HttpMethod.optional().describe('default GET'),
  body: z.string().max(65_536).optional().describe('request body (sent with content-type application/json when it parses as JSON)'),
  max_amount_usd: WholeUnits.optional().describe('refuse offers whose gross (price + protocol fee) is above this'),
});

function linkUrl(ctx: ToolContext, id: string): string {
  const base = `${ctx.env.apiUrl}/x/${encodeURIComponent(id)}`;
  return ctx.network === 'chain-devnet' ? `${base}?network=chain-devnet` : base;
}

async function bodyOf(res: Response): Promise<unknown> {
  const text = (await res.text()).slice(0, MAX_BODY_CHARS);
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** A 402 to a paid retry that says why the payment was refused; null when it names no reason beyond "pay". */
function refusalOf(status: number, body: unknown): { error: string; message: string; details: Record<string, unknown> } | null {
  if (status !== 402 || typeof body !== 'object' || body === null) return null;
  const { error, message, details } = body as { error?: unknown; message?: unknown; details?: unknown };
  if (typeof error !== 'string' || !/^[a-z][a-z0-9_]*$/.test(error) || error === 'payment_required') return null;
  return {
    error,
    message: typeof message === 'string' ? message : `The payment was refused: ${error}.`,
    details: typeof details === 'object' && details !== null ? (details as Record<string, unknown>) : {},
  };
}

/** The offer of an unpaid request: its networks and protocol, without paying. */
async function probe(ctx: ToolContext, url: string, init: RequestInit) {
  let res: Response;
  try {
    res = await ctx.fetch(url, init);
  } catch (e) {
    throw new ToolError('probe_failed', `${url} could not be reached: ${e instanceof Error ? e.message : String(e)}.`, { url });
  }
  if (res.status !== 402) {
    const body = await bodyOf(res);
    const code = body && typeof body === 'object' ? (body as { error?: unknown }).error : undefined;
    if (res.status === 403 && code === 'wrong_network') {
      throw new ToolError('wrong_network', `The link is on another network than this agent's (${ctx.network}).`, { network: ctx.network, answer: body });
    }
    return { kind: 'not_payable' as const, status: res.status, body };
  }
  const header = res.headers.get('PAYMENT-REQUIRED');
  let accepts: unknown[] | undefined;
  if (header) {
    try {
      accepts = (JSON.parse(Buffer.from(header, 'base64').toString('utf8')) as { accepts?: unknown[] }).accepts;
    } catch {
      accepts = undefined;
    }
  }
  const contentType = res.headers.get('content-type') ?? '';
  const body = await bodyOf(res);
  if (!accepts && body && typeof body === 'object' && Array.isArray((body as { accepts?: unknown }).accepts))
    accepts = (body as { accepts: unknown[] }).accepts;
  if (!accepts) {
    const charges = solanaCharges(res.headers.get('www-authenticate'));
    if (charges.length > 0) {
      const offered = [...new Set(charges.map((c) => challengeNetwork(c)).map((n) => n.network ?? n.wire))];
      if (!offered.includes(ctx.network)) {
        throw new ToolError('wrong_network', `The offer is on ${offered.join(', ') || 'no known network'}, not on this agent's network ${ctx.network}.`, {
          network: ctx.network,
          offered,
        });
      }
      return { kind: 'mpp' as const };
    }
    if (contentType.includes('application/problem+json') || (body && typeof body === 'object' && 'challengeId' in body)) {
      throw new ToolError(
        'unsupported_offer',
        'The offer is MPP but carries no Solana charge challenge (WWW-Authenticate: Payment method="solana" intent="charge") this tool server can pay.',
        { url },
      );
    }
    throw new ToolError('unsupported_offer', 'The 402 carries no x402 offer (no PAYMENT-REQUIRED header or accepts) and no MPP challenge.', { url });
  }
  const networks = accepts
    .map((a) => (a && typeof a === 'object' ? String((a as { network?: unknown }).network ?? '') : ''))
    .map((n) => networkFromX402(n) ?? n);
  if (!networks.includes(ctx.network)) {
    throw new ToolError(
      'wrong_network',
      `The offer is on ${[...new Set(networks)].join(', ') || 'no known network'}, not on this agent's network ${ctx.network}.`,
      {
        network: ctx.network,
        offered: [...new Set(networks)],
      },
    );
  }
  return { kind: 'x402' as const };
}

export const payPaymentLink = defineTool({
  name: 'svc_pay_payment_link',
  title: 'Pay a payment link',
  description:
    'Probe a paid URL (or a payment link id), sign the payment (x402, or an MPP Solana charge) locally from the agent treasury (the executive is its spend delegate) and settle it; answers the response with the receipt (tx_signature, receipt_hash, protocol). Refuses a link on the other network with wrong_network.',
  input: PayInput,
  async run(ctx, input) {
    const agent = ctx.requireAgent();
    if ((input.url === undefined) === (input.payment_link === undefined)) {
      throw new ToolError('invalid_request', 'Give exactly one of url or payment_link.', { path: 'url' });
    }
    const url = input.url ?? linkUrl(ctx, input.payment_link!);
    const isJson =
      input.body !== undefined &&
      (() => {
        try {
          JSON.parse(input.body!);
          return true;
        } catch {
          return false;
        }
      })();
    const init: RequestInit = {
      method: input.method ?? 'GET',
      ...(input.body !== undefined ? { body: input.body, headers: isJson ? { 'content-type': 'application/json' } : {} } : {}),
    };
    const probed = await probe(ctx, url, init);
    if (probed.kind === 'not_payable') {
      if (probed.status >= 200 && probed.status < 300) return { status: 'free', http_status: probed.status, response: probed.body };
      throw new ToolError('probe_failed', `${url} answered ${probed.status}, not a payment offer.`, { http_status: probed.status, response: probed.body });
    }
    let maxAmountAtomic: bigint | undefined;
    if (input.max_amount_usd !== undefined) maxAmountAtomic = decimalToAtomic(input.max_amount_usd, 6) ?? undefined;
    const pay = createPayingFetch({
      signer: agent.executive,
      rpcUrl: ctx.rpcUrl,
      agent: agent.mint,
      network: ctx.network,
      fetch: ctx.fetch,
      ...(maxAmountAtomic !== undefined ? { maxAmountAtomic } : {}),
    });
    let res: Response;
    try {
      res = await pay(url, init);
    } catch (e) {
      if (e instanceof PaymentError) throw new ToolError(e.code, e.message, e.details);
      throw e;
    }
    const settledHeader = res.headers.get('PAYMENT-RESPONSE') ?? res.headers.get('X-PAYMENT-RESPONSE');
    const mppReceipt = res.headers.get('Payment-Receipt');
    const response = await bodyOf(res);
    let signature: string | undefined;
    if (probed.kind === 'mpp') {
      signature = decodeReceipt(mppReceipt)?.reference;
    } else if (settledHeader) {
      signature = decodePaymentResponse(settledHeader).transaction;
    }
    if (!signature) {
      // The paywall's refusal names its reason (x402 `error`, MPP problem `error`) and what it needs: surfaced as the
      // tool's code, e.g. insufficient_allowance with allowance_atomic and required_atomic (fee-facilitator-mpp-tools §7).
      const refusal = refusalOf(res.status, response);
      if (refusal) throw new ToolError(refusal.error, refusal.message, { http_status: res.status, ...refusal.details });
      throw new ToolError('payment_failed', `The payment was not settled: ${url} answered ${res.status}.`, { http_status: res.status, response });
    }
    // The gateway's paywall records the buyer agent's spend receipt in the payment's own transaction.
    let receiptHash: string | null = null;
    try {
      const recent = await ctx.api.receipts.list.query({ agent: agent.mint, kind: 'spend', limit: 20 });
      receiptHash = recent.data.find((r) => r.tx_sig === signature)?.receipt_hash ?? null;
    } catch {
      receiptHash = null; // a third-party paywall: no receipt on this gateway
    }
    return {
      status: 'paid',
      protocol: probed.kind,
      http_status: res.status,
      network: ctx.network,
      tx_signature: signature,
      receipt_hash: receiptHash,
      explorer_url: ctx.explorerTx(signature),
      response,
    };
  },
});

const CreateLinkInput = CreatePaymentLinkInput.extend({
  owner_agent: CreatePaymentLinkInput.shape.owner_agent.optional().describe('default: this agent'),
});

export const createPaymentLink = defineTool({
  name: 'svc_create_payment_link',
  title: 'Create a payment link',
  description:
    'Create a payment link (a paid HTTP endpoint answering 402 until paid) owned by this agent through the API; needs SVC_API_KEY. Set metadata.discoverable = true to list it in svc_discover.',
  input: CreateLinkInput,
  async run(ctx, input) {
    const owner = input.owner_agent ?? ctx.requireAgent().mint;
    // as the API answers it (a webhook_secret, when a webhook_url is set, is shown here once)
    return ctx.call((api) => api.paymentLinks.create.mutate({ ...input, owner_agent: owner }));
  },
});
