import type { PaymentLinkRecord } from '../payment-links/schema.ts';

// x402's `bazaar` extension (specs/extensions/bazaar.md, the shapes of @x402/extensions 2.27): what a discoverable
// link declares in its 402 (extensions.bazaar: info + the JSON Schema of info) and the service metadata on its
// `resource` (serviceName, tags, iconUrl), so bazaar crawlers and facilitators catalogue our sellers. Only what the
// seller published for buyers goes out: the label, metadata.capabilities, metadata.icon_url and
// metadata.expected_request_body — never the paid response, its upstream_url or the webhook — each held to the
// spec's soft-drop rules and bounded sizes. Pure.

export const BAZAAR_KEY = 'bazaar';

/** the spec's bounds on resource service metadata */
const MAX_SERVICE_NAME = 32;
const MAX_TAG = 32;
const MAX_TAGS = 5;
const MAX_ICON_URL = 2048;
/** a request body example larger than this is left out (the declaration rides in every 402 of the link) */
const MAX_BODY_EXAMPLE_BYTES = 4096;
const PRINTABLE_ASCII = /^[\x20-\x7e]+$/;
const LOOPBACK = new Set(['localhost', 'localhost.localdomain', 'ip6-localhost', 'ip6-loopback']);

const QUERY_METHODS = new Set(['GET', 'HEAD', 'DELETE']);

/** A method whose input is its query (the bazaar's QueryDiscoveryInfo), not a body. */
export function isQueryMethod(method: string): boolean {
  return QUERY_METHODS.has(method);
}

/** The fields of a link the declaration reads. */
export type DiscoverableLink = Pick<PaymentLinkRecord, 'label' | 'method' | 'metadata' | 'response'>;

/** A link is listed by discovery when its owner says so (fee-facilitator-mpp-tools §4.3: metadata.discoverable). */
export function isDiscoverable(link: Pick<PaymentLinkRecord, 'metadata'>): boolean {
  return link.metadata.discoverable === true;
}

export interface ServiceMetadata {
  serviceName?: string;
  tags?: string[];
  iconUrl?: string;
}

/** The bazaar's resource service metadata of a link: each field kept only when it passes the spec's rule. */
export function serviceMetadataOf(link: Pick<PaymentLinkRecord, 'label' | 'metadata'>): ServiceMetadata {
  const out: ServiceMetadata = {};
  // the label, cut to the spec's 32 characters; a label outside printable ASCII is dropped, as the spec drops it
  const name = link.label.trim().slice(0, MAX_SERVICE_NAME).trim();
  if (name.length > 0 && PRINTABLE_ASCII.test(name)) out.serviceName = name;
  const tags = sanitizeTags(link.metadata.capabilities);
  if (tags) out.tags = tags;
  const icon = link.metadata.icon_url;
  if (typeof icon === 'string' && isSafeIconUrl(icon)) out.iconUrl = icon;
  return out;
}

/** At most 5 printable-ASCII tags of at most 32 characters, deduplicated case-insensitively (first wins). */
export function sanitizeTags(value: unknown): string[] | undefined {
  if (!Array.isArray(value)) return undefined;
  const out: string[] = [];
  const seen = new Set<string>();
  for (const entry of value) {
    if (typeof entry !== 'string' || entry.length === 0 || entry.length > MAX_TAG || !PRINTABLE_ASCII.test(entry)) continue;
    if (seen.has(entry.toLowerCase())) continue;
    seen.add(entry.toLowerCase());
    out.push(entry);
    if (out.length === MAX_TAGS) break;
  }
  return out.length > 0 ? out : undefined;
}

/** An absolute http(s) URL without userinfo whose host is a name (no IP literal, no loopback name, no numeric host). */
export function isSafeIconUrl(value: string): boolean {
  if (value.length === 0 || value.length > MAX_ICON_URL || hasControlCharacter(value)) return false;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return false;
  }
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.username !== '' || url.password !== '' || url.host.startsWith('[')) return false;
  let host: string;
  try {
    // WHATWG URL already maps the host through IDNA (UTS #46); percent-decoding first catches encoded forms
    host = new URL(`http://${decodeURIComponent(url.hostname)}`).hostname.toLowerCase();
  } catch {
    return false;
  }
  return !LOOPBACK.has(host) && !/^\d{1,3}(\.\d{1,3}){3}$/.test(host) && !/^\d+$/.test(host) && !/^0x[0-9a-f]+$/i.test(host) && !host.startsWith('[');
}

function hasControlCharacter(value: string): boolean {
  for (let i = 0; i < value.length; i++) {
    const code = value.charCodeAt(i);
    if (code < 0x20 || code === 0x7f) return true;
  }
  return false;
}

/** The bazaar extension's JSON shape: the discovery info and the JSON Schema (draft 2020-12) it validates against. */
export interface BazaarDeclaration {
  info: { input: Record<string, unknown>; output?: Record<string, unknown> };
  schema: Record<string, unknown>;
}

/**
 * extensions.bazaar of a link's 402: how to call it (its method; for a body method the JSON body its seller described
 * in metadata.expected_request_body) and what it answers (the response's type, never the response itself).
 */
export function bazaarDeclaration(link: DiscoverableLink): BazaarDeclaration {
  const query = isQueryMethod(link.method);
  const input: Record<string, unknown> = { type: 'http', method: link.method };
  const inputSchema: Record<string, unknown> = {
    type: { type: 'string', const: 'http' },
    method: { type: 'string', enum: [link.method] },
  };
  const required = ['type', 'method'];
  if (!query) {
    input.bodyType = 'json';
    input.body = bodyExample(link.metadata.expected_request_body);
    inputSchema.bodyType = { type: 'string', enum: ['json', 'form-data', 'text'] };
    inputSchema.body = { type: 'object' };
    required.push('bodyType', 'body');
  }
  const mimeType = link.response.mimeType;
  const output = { type: /json/i.test(mimeType) ? 'json' : 'text', format: mimeType };
  return {
    info: { input, output },
    schema: {
      $schema: 'https://json-schema.org/draft/2020-12/schema',
      type: 'object',
      properties: {
        input: { type: 'object', properties: inputSchema, required, additionalProperties: false },
        output: { type: 'object', properties: { type: { type: 'string' }, format: { type: 'string' } }, required: ['type'] },
      },
      required: ['input'],
    },
  };
}

/** The seller's metadata.expected_request_body as a JSON object example: {} when it is none or too large to repeat. */
export function bodyExample(value: unknown): Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return {};
  return JSON.stringify(value).length <= MAX_BODY_EXAMPLE_BYTES ? (value as Record<string, unknown>) : {};
}

/** The 402's additions for a discoverable link (nothing for any other, whose 402 stays as it was). */
export function discoveryOf(link: DiscoverableLink): { resource: ServiceMetadata; extensions: Record<string, BazaarDeclaration> } | undefined {
  if (!isDiscoverable(link)) return undefined;
  return { resource: serviceMetadataOf(link), extensions: { [BAZAAR_KEY]: bazaarDeclaration(link) } };
}

/**
 * A link's x402 offer as its 402 states it: a discoverable link's adds extensions.bazaar and the service metadata on
 * `resource` (the gateway's own extensions win a clash); any other link's offer is returned as it is.
 */
export function withDiscovery<T extends { resource: object; extensions?: Record<string, unknown> | undefined }>(link: DiscoverableLink, offer: T): T {
  const discovery = discoveryOf(link);
  if (!discovery) return offer;
  return { ...offer, resource: { ...offer.resource, ...discovery.resource }, extensions: { ...discovery.extensions, ...offer.extensions } };
}
