import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { gzip } from 'node:zlib';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { DomainError } from '../../domain/shared/errors.ts';
import { restAnswer } from '../errors.ts';

// The browser pages' files (GraphiQL, the API reference, the pages' own scripts and icon), served by the gateway
// itself from its npm packages and interfaces/pages/web: the pages work offline and behind a firewall, with no CDN.
// A package's files live under its name and version (`/assets/swagger-ui-dist@5.35.0/…`), so a browser keeps them
// for a year and an upgrade changes the URL; the pages' own files are revalidated (ETag) on every load.

const require = createRequire(import.meta.url);
const WEB = join(dirname(fileURLToPath(import.meta.url)), 'web');

function packageDir(name: string): { dir: string; version: string } {
  const manifest = require.resolve(`${name}/package.json`);
  return { dir: dirname(manifest), version: (require(manifest) as { version: string }).version };
}

const swagger = packageDir('swagger-ui-dist');
const graphiql = packageDir('@graphql-yoga/render-graphiql');

const TYPES = { js: 'text/javascript; charset=utf-8', css: 'text/css; charset=utf-8', svg: 'image/svg+xml' } as const;

interface Asset {
  type: string;
  /** served with a year's max-age: its URL changes when its bytes do */
  immutable: boolean;
  load(): Promise<Buffer>;
}

/** GraphiQL's bundle as @graphql-yoga/render-graphiql ships it: strings in one 9 MB module, loaded on first use. */
type GraphiqlPart = 'js' | 'css' | 'editorWorkerService' | 'jsonWorker' | 'graphqlWorker';
const graphiqlPart = (part: GraphiqlPart) => async () => Buffer.from((await import('@graphql-yoga/render-graphiql/graphiql'))[part]);

const fromFile = (path: string) => () => readFile(path);

/** URL path under /assets → what it serves */
const ASSETS = new Map<string, Asset>([
  [`swagger-ui-dist@${swagger.version}/swagger-ui-bundle.js`, { type: TYPES.js, immutable: true, load: fromFile(join(swagger.dir, 'swagger-ui-bundle.js')) }],
  [`swagger-ui-dist@${swagger.version}/swagger-ui.css`, { type: TYPES.css, immutable: true, load: fromFile(join(swagger.dir, 'swagger-ui.css')) }],
  [`render-graphiql@${graphiql.version}/graphiql.js`, { type: TYPES.js, immutable: true, load: graphiqlPart('js') }],
  [`render-graphiql@${graphiql.version}/graphiql.css`, { type: TYPES.css, immutable: true, load: graphiqlPart('css') }],
  [`render-graphiql@${graphiql.version}/editor.worker.js`, { type: TYPES.js, immutable: true, load: graphiqlPart('editorWorkerService') }],
  [`render-graphiql@${graphiql.version}/json.worker.js`, { type: TYPES.js, immutable: true, load: graphiqlPart('jsonWorker') }],
  [`render-graphiql@${graphiql.version}/graphql.worker.js`, { type: TYPES.js, immutable: true, load: graphiqlPart('graphqlWorker') }],
  ['pages/graphiql.js', { type: TYPES.js, immutable: false, load: fromFile(join(WEB, 'graphiql.js')) }],
  ['pages/docs.js', { type: TYPES.js, immutable: false, load: fromFile(join(WEB, 'docs.js')) }],
  ['pages/pages.css', { type: TYPES.css, immutable: false, load: fromFile(join(WEB, 'pages.css')) }],
  ['pages/favicon.svg', { type: TYPES.svg, immutable: false, load: fromFile(join(WEB, 'favicon.svg')) }],
]);

/** The URL of an asset, e.g. asset('swagger-ui-dist', 'swagger-ui.css') → "/assets/swagger-ui-dist@5.35.0/swagger-ui.css". */
export function asset(from: 'swagger-ui-dist' | 'render-graphiql' | 'pages', file: string): string {
  const path = from === 'pages' ? `pages/${file}` : `${from}@${from === 'swagger-ui-dist' ? swagger.version : graphiql.version}/${file}`;
  if (!ASSETS.has(path)) throw new Error(`no asset ${path}`);
  return `/assets/${path}`;
}

export const FAVICON = asset('pages', 'favicon.svg');

interface Loaded {
  body: Buffer;
  /** the body gzipped, made on first use (GraphiQL's script is 5 MB, about a quarter of that gzipped) */
  gzipped: () => Promise<Buffer>;
  etag: string;
}

const gzipAsync = promisify(gzip);

function once<T>(make: () => Promise<T>): () => Promise<T> {
  let made: Promise<T> | undefined;
  return () => {
    made ??= make();
    return made;
  };
}

/** whether the request's Accept-Encoding takes gzip (not refused with q=0) */
function acceptsGzip(req: FastifyRequest): boolean {
  const header = req.headers['accept-encoding'];
  const gz = typeof header === 'string' ? /(?:^|,)\s*gzip\s*(?:;\s*q=([0-9.]+))?/i.exec(header) : null;
  return gz !== null && (gz[1] === undefined || Number(gz[1]) > 0);
}

export function registerAssetRoutes(app: FastifyInstance): void {
  const loaded = new Map<string, Promise<Loaded>>();
  const load = (path: string, entry: Asset): Promise<Loaded> => {
    let pending = loaded.get(path);
    if (!pending) {
      pending = entry.load().then((body) => ({
        body,
        gzipped: once(() => gzipAsync(body)),
        // weak: the gzipped and the plain answer are the same file
        etag: `W/"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`,
      }));
      // a failed read is tried again by the next request
      pending.catch(() => loaded.delete(path));
      loaded.set(path, pending);
    }
    return pending;
  };

  const serve = async (req: FastifyRequest, reply: FastifyReply, path: string) => {
    const entry = ASSETS.get(path);
    if (!entry) {
      const { status, body } = restAnswer(new DomainError('not_found', `No asset ${path}.`), req);
      return reply.code(status).send(body);
    }
    const { body, gzipped, etag } = await load(path, entry);
    void reply.headers({
      'cache-control': entry.immutable ? 'public, max-age=31536000, immutable' : 'no-cache',
      etag,
      vary: 'Accept-Encoding',
      'x-content-type-options': 'nosniff',
    });
    if (req.headers['if-none-match'] === etag) return reply.code(304).send();
    if (body.length > 1024 && acceptsGzip(req))
      return reply
        .type(entry.type)
        .header('content-encoding', 'gzip')
        .send(await gzipped());
    return reply.type(entry.type).send(body);
  };

  app.get<{ Params: { '*': string } }>('/assets/*', (req, reply) => serve(req, reply, req.params['*']));
  // What a browser asks for when a page names no icon (the pages name the SVG).
  app.get('/favicon.ico', (req, reply) => serve(req, reply, 'pages/favicon.svg'));
}
