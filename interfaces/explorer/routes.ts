import { readFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { DomainError } from '../../domain/shared/errors.ts';
import { restAnswer } from '../errors.ts';

// The explorer page at /explorer, served from the build directory (build.ts writes it; `npm start` builds it
// first). No key is needed to load the page: it holds no data; the key pasted into it stays in the browser and goes
// to the API in Authorization headers, and live events use single-use stream tokens.

/** <repository>/dist/explorer */
export const EXPLORER_DIST = resolve(dirname(fileURLToPath(import.meta.url)), '../../dist/explorer');

const FILES: Record<string, string> = {
  'index.html': 'text/html; charset=utf-8',
  'explorer.js': 'text/javascript; charset=utf-8',
  'explorer.css': 'text/css; charset=utf-8',
};

// The page talks to its own origin only (REST, graphql-ws, the /x/{id} offers).
const CSP = "default-src 'self'; connect-src 'self' ws: wss:; img-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'";

export function registerExplorerRoutes(app: FastifyInstance, options: { dir?: string } = {}): void {
  const dir = options.dir ?? EXPLORER_DIST;
  const cache = new Map<string, Buffer>();

  const serve = async (req: FastifyRequest, reply: FastifyReply, file: string) => {
    const type = FILES[file];
    if (!type) {
      const { status, body } = restAnswer(new DomainError('not_found', `No explorer asset ${file}.`), req);
      return reply.code(status).send(body);
    }
    let content = cache.get(file);
    if (!content) {
      try {
        content = await readFile(join(dir, file));
      } catch {
        const missing = new DomainError('service_unavailable', 'The explorer is not built: run `npm run build:explorer` (npm start does it first).');
        const { status, body } = restAnswer(missing, req);
        return reply.code(status).send(body);
      }
      cache.set(file, content);
    }
    return reply.type(type).headers({ 'cache-control': 'no-cache', 'content-security-policy': CSP, 'x-content-type-options': 'nosniff' }).send(content);
  };

  app.get('/explorer', (req, reply) => serve(req, reply, 'index.html'));
  app.get('/explorer/', (req, reply) => serve(req, reply, 'index.html'));
  app.get<{ Params: { file: string } }>('/explorer/assets/:file', (req, reply) => serve(req, reply, req.params.file));
}
