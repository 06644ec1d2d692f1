// What the gateway's own HTML pages share: escaping, embedding JSON for a page's script, and their
// Content-Security-Policy. Every page loads its scripts, styles and icon from the gateway itself (interfaces/pages/
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
