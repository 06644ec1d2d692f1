// What the gateway's own HTML pages share (the landing page, /docs, GraphiQL, the paywall page): who gets HTML,
// escaping, embedding JSON for a page's script, and their Content-Security-Policy. Every page loads its scripts, styles and icon from the gateway itself (interfaces/pages/
// assets.ts); the policies say so, so a page that tried to reach another host would be refused by the browser.

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Text or an attribute value in HTML. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c]!);
}

/**
 * A JSON value inside `<script type="application/json">` (a data block the browser never runs, so script-src 'self'
 * holds): `<` is escaped so no string in it can close the element.
 */
export function jsonScript(id: string, value: unknown): string {
  return `<script id="${escapeHtml(id)}" type="application/json">${JSON.stringify(value).replace(/</g, '\\u003c')}</script>`;
}

/** q of the most specific range of `accept` matching `type` (RFC 9110 §12.5.1); 0 when none matches. */
function qualityOf(ranges: { type: string; sub: string; q: number }[], type: string): number {
  const [main, sub] = type.split('/') as [string, string];
  let best = -1;
  let q = 0;
  for (const r of ranges) {
    const specificity = r.type === main && r.sub === sub ? 2 : r.type === main && r.sub === '*' ? 1 : r.type === '*' && r.sub === '*' ? 0 : -1;
    if (specificity > best) {
      best = specificity;
      q = r.q;
    }
  }
  return q;
}

/**
 * Whether a request's Accept prefers HTML to JSON: a browser's navigation (text/html first, JSON only through the
 * trailing * / *) does; no Accept, `* / *`, application/json and any tie do not — API clients keep their JSON answer.
 */
export function prefersHtml(accept: string | undefined): boolean {
  if (accept === undefined || !accept.includes('text/')) return false;
  const ranges = accept.split(',').map((part) => {
    const [range = '', ...params] = part.split(';');
    const [type = '', sub = ''] = range.trim().toLowerCase().split('/');
    const qParam = params.map((p) => p.trim()).find((p) => p.startsWith('q='));
    const q = qParam ? Number(qParam.slice(2)) : 1;
    return { type, sub, q: Number.isFinite(q) ? q : 0 };
  });
  return qualityOf(ranges, 'text/html') > qualityOf(ranges, 'application/json');
}

const CLOSED = "object-src 'none'; base-uri 'none'; frame-ancestors 'none'";

/** The landing page: its stylesheet and icon, nothing else. */
export const PAGE_CSP = `default-src 'none'; style-src 'self'; img-src 'self'; form-action 'none'; ${CLOSED}`;

/**
 * The API reference (swagger-ui-dist): its script and stylesheet, the inline images of its stylesheet, and requests
 * to the gateway (`/openapi.json`, and "Try it out" against the document's server, the configured base URL).
 */
export function docsCsp(baseUrl: string): string {
  return `default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self' data:; connect-src 'self' ${originOf(baseUrl)}; form-action 'self'; ${CLOSED}`;
}

/**
 * GraphiQL: Monaco writes <style> elements and starts its workers from blob: URLs that import the worker scripts
 * (same origin); queries go over fetch and subscriptions over SSE to /graphql.
 */
export const GRAPHIQL_CSP = `default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; worker-src 'self' blob:; connect-src 'self'; form-action 'none'; ${CLOSED}`;

function originOf(url: string): string {
  try {
    return new URL(url).origin;
  } catch {
    return '';
  }
}
