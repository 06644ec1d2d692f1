import type { GraphiQLOptions } from 'graphql-yoga';
import { asset, FAVICON } from './assets.ts';
import { escapeHtml, jsonScript } from './html.ts';

// GraphiQL at GET /graphql (Accept: text/html): Yoga's `renderGraphiQL` option with this page instead of its default,
// which loads GraphiQL from a CDN. The bundle of @graphql-yoga/render-graphiql is served by the gateway as separate
// files (assets.ts) rather than inlined, so a browser downloads its 9 MB once and keeps it; web/graphiql.js points
// Monaco's workers at the gateway's copies and starts GraphiQL with the options Yoga passes.

const WORKERS = {
  editorWorkerService: asset('render-graphiql', 'editor.worker.js'),
  json: asset('render-graphiql', 'json.worker.js'),
  graphql: asset('render-graphiql', 'graphql.worker.js'),
};

export function renderGraphiqlPage(options?: GraphiQLOptions): string {
  const title = options?.title ?? 'GraphiQL';
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}</title>
<link rel="icon" type="image/svg+xml" href="${FAVICON}">
<link rel="stylesheet" href="${asset('render-graphiql', 'graphiql.css')}">
</head>
<body id="body" class="no-focus-outline">
<noscript>GraphiQL needs JavaScript.</noscript>
<div id="root"></div>
${jsonScript('graphiql-settings', { options: options ?? {}, workers: WORKERS })}
<script src="${asset('pages', 'graphiql.js')}"></script>
<script src="${asset('render-graphiql', 'graphiql.js')}"></script>
</body>
</html>
`;
}
