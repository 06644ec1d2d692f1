import type { FastifyInstance, FastifyReply } from 'fastify';
import type { Services } from '../services.ts';
import { asset, FAVICON } from './assets.ts';
import { docsCsp, jsonScript } from './html.ts';

// GET /docs: the API reference, rendered in the browser by swagger-ui-dist from /openapi.json. Everything it loads is
// served by the gateway (assets.ts), and nothing in its settings reaches another host: no validator badge
// (validatorUrl null), no URL bar to load other documents, no config read from the query string.

/** SwaggerUIBundle's settings (web/docs.js applies them). */
const SETTINGS = {
  url: '/openapi.json',
  dom_id: '#swagger-ui',
  validatorUrl: null,
  queryConfigEnabled: false,
  deepLinking: true,
  displayRequestDuration: true,
  persistAuthorization: false,
  tryItOutEnabled: false,
};

export function registerDocsRoutes(app: FastifyInstance, deps: { services: Services }): void {
  const html = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>svc gateway — API reference</title>
<link rel="icon" type="image/svg+xml" href="${FAVICON}">
<link rel="stylesheet" href="${asset('swagger-ui-dist', 'swagger-ui.css')}">
</head>
<body>
<div id="swagger-ui"></div>
${jsonScript('docs-settings', SETTINGS)}
<script src="${asset('swagger-ui-dist', 'swagger-ui-bundle.js')}"></script>
<script src="${asset('pages', 'docs.js')}"></script>
</body>
</html>
`;
  const csp = docsCsp(deps.services.settings.baseUrl);
  const page = (_req: unknown, reply: FastifyReply) =>
    reply
      .type('text/html; charset=utf-8')
      .headers({ 'cache-control': 'no-cache', 'content-security-policy': csp, 'x-content-type-options': 'nosniff' })
      .send(html);
  app.get('/docs', page);
  app.get('/docs/', page);
}
