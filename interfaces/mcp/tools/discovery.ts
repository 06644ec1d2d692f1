import { z } from 'zod';
import { DiscoverInput } from '../../../domain/discovery/schema.ts';
import { networkFromX402 } from '../../../domain/facilitator/wire.ts';
import { Address } from '../../../domain/shared/address.ts';
import { atomicToDecimal } from '../../../domain/shared/money.ts';
import { STABLES } from '../../../domain/shared/network.ts';
import { defineTool, ToolError, type ToolContext } from '../context.ts';

// fee-facilitator-mpp-tools §4.3: discovery over the gateway's two catalogues (GET /v1/discover) and the expansion of a
// registry item — an agent's registration document (§2.7) — into its paid endpoints, each probed unpaid.

const FETCH_TIMEOUT_MS = 5_000;
const MAX_DOCUMENT_BYTES = 256 * 1024;
const MAX_ENDPOINTS = 16;

export const discover = defineTool({
  name: 'svc_discover',
  title: 'Discover paid services',
  description:
    "Search paid services by words, capability and price across two catalogues: the gateway's public payment links (source 'svc', payable with svc_pay_payment_link) and registration documents of agents it knows (source 'registry', expand with svc_registry_endpoints). No agent needed.",
  input: DiscoverInput,
  run: (ctx, input) => search(ctx, input),
});

/** GET /v1/discover with the key when one is set; public (fee-facilitator-mpp-tools §4.3) on this network otherwise. */
function search(ctx: ToolContext, input: DiscoverInput) {
  if (ctx.hasApiKey) return ctx.call((api) => api.discovery.discover.query(input));
  return ctx.callPublic((api) => api.discovery.discoverPublic.query({ ...input, network: ctx.network }));
}

const Service = z.looseObject({ name: z.string(), endpoint: z.string() });
const Registration = z.looseObject({ name: z.string().optional(), services: z.array(z.unknown()).optional() });

async function fetchLimited(ctx: ToolContext, url: string, init: RequestInit = {}): Promise<{ res: Response; text: string }> {
  const res = await ctx.fetch(url, { ...init, redirect: 'manual', signal: AbortSignal.timeout(FETCH_TIMEOUT_MS) });
  const buf = await res.arrayBuffer();
  if (buf.byteLength > MAX_DOCUMENT_BYTES) throw new Error(`more than ${MAX_DOCUMENT_BYTES} bytes`);
  return { res, text: Buffer.from(buf).toString('utf8') };
}

const json = (text: string): unknown => {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
};

async function probeEndpoint(ctx: ToolContext, name: string, url: string) {
  const base = { name, method: 'GET', url };
  let res: Response;
  let text: string;
  try {
    ({ res, text } = await fetchLimited(ctx, url));
  } catch (e) {
    return {
      ...base,
      pricing: null,
      protocol: null,
      supported_usd: false,
      probe_status: 'unreachable',
      probe_error: e instanceof Error ? e.message : String(e),
    };
  }
  if (res.status !== 402) {
    return {
      ...base,
      pricing: null,
      protocol: null,
      supported_usd: false,
      probe_status: res.status >= 200 && res.status < 300 ? 'free' : `http_${res.status}`,
    };
  }
  const header = res.headers.get('PAYMENT-REQUIRED');
  const offer = (header ? json(Buffer.from(header, 'base64').toString('utf8')) : null) ?? json(text);
  const accepts =
    offer && typeof offer === 'object' && Array.isArray((offer as { accepts?: unknown }).accepts)
      ? ((offer as { accepts: unknown[] }).accepts as Record<string, unknown>[])
      : null;
  if (!accepts) {
    const mpp = (res.headers.get('content-type') ?? '').includes('problem+json');
    return { ...base, pricing: null, protocol: mpp ? 'mpp' : null, supported_usd: false, probe_status: 'payment_required' };
  }
  const pricing = accepts.map((a) => {
    const network = networkFromX402(String(a.network ?? '')) ?? String(a.network ?? '');
    const stable = Object.values(STABLES)
      .flat()
      .find((s) => s.mint === a.asset);
    const atomic = String(a.amount ?? a.maxAmountRequired ?? '');
    return {
      network,
      asset: String(a.asset ?? ''),
      currency: stable?.symbol ?? null,
      amount_atomic: atomic,
      amount_usd: stable && /^\d+$/.test(atomic) ? atomicToDecimal(BigInt(atomic), stable.decimals) : null,
    };
  });
  return {
    ...base,
    pricing,
    protocol: 'x402',
    supported_usd: pricing.some((p) => p.currency !== null && p.network === ctx.network),
    probe_status: 'payment_required',
  };
}

export const registryEndpoints = defineTool({
  name: 'svc_registry_endpoints',
  title: 'Endpoints of a registry item',
  description:
    "Expand a svc_discover item whose source is 'registry' into its paid endpoints: fetches the agent's registration document and probes each service unpaid — method, url, pricing, protocol, supported_usd, probe_status.",
  input: z.object({
    id: Address.describe("the registry item's id (the agent mint)"),
    url: z
      .url({ protocol: /^https?$/ })
      .max(2048)
      .optional()
      .describe("the item's url (its registration document); default: looked up by id"),
  }),
  async run(ctx, input) {
    let url = input.url;
    if (!url) {
      const found = await search(ctx, { source: 'registry', limit: 100 });
      url = found.data.find((i) => i.id === input.id)?.url;
      if (!url) throw new ToolError('not_found', `No registry item ${input.id} on ${ctx.network}; pass its url.`, { id: input.id });
    }
    let document: z.infer<typeof Registration>;
    try {
      const { res, text } = await fetchLimited(ctx, url);
      if (res.status !== 200) throw new Error(`answered ${res.status}`);
      const parsed = Registration.safeParse(json(text));
      if (!parsed.success) throw new Error('not a registration document');
      document = parsed.data;
    } catch (e) {
      throw new ToolError('registration_unavailable', `The registration document ${url} could not be read: ${e instanceof Error ? e.message : String(e)}.`, {
        id: input.id,
        url,
      });
    }
    const services = (document.services ?? [])
      .map((s) => Service.safeParse(s))
      .filter((s) => s.success)
      .map((s) => s.data)
      .filter((s) => /^https?:\/\//.test(s.endpoint))
      .slice(0, MAX_ENDPOINTS);
    const endpoints = await Promise.all(services.map((s) => probeEndpoint(ctx, s.name, s.endpoint)));
    return { id: input.id, source: 'registry', registration_url: url, name: document.name ?? null, endpoints };
  },
});
