import { copyFile, mkdir } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { EXPLORER_DIST } from './routes.ts';

// The explorer page's assets. web/explorer.js (Preact + htm + the graphql-ws client) is bundled by esbuild
// into dist/explorer/ with index.html and the stylesheet; the gateway serves that directory at /explorer (routes.ts).
// `npm start` runs this first (prestart); `npm run build:explorer` runs it alone; the browser test builds before it opens
// the page.

const HERE = dirname(fileURLToPath(import.meta.url));
const WEB = join(HERE, 'web');

/** Bundles the page into `outdir`; answers the bundle's size in bytes. */
export async function buildExplorer(outdir = EXPLORER_DIST): Promise<{ bytes: number }> {
  // esbuild is a development dependency: imported only when building.
  const { build } = await import('esbuild');
  await mkdir(outdir, { recursive: true });
  const result = await build({
    entryPoints: [join(WEB, 'explorer.js')],
    outfile: join(outdir, 'explorer.js'),
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: ['es2022'],
    minify: true,
    sourcemap: false,
    metafile: true,
    logLevel: 'warning',
  });
  await copyFile(join(WEB, 'index.html'), join(outdir, 'index.html'));
  await copyFile(join(WEB, 'explorer.css'), join(outdir, 'explorer.css'));
  const bytes = Object.values(result.metafile.outputs).reduce((sum, o) => sum + o.bytes, 0);
  return { bytes };
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    const { bytes } = await buildExplorer();
    console.log(`explorer built into ${EXPLORER_DIST} (${(bytes / 1024).toFixed(1)} KiB of script)`);
  } catch (e) {
    // An install without development dependencies has no esbuild: the gateway still starts (prestart), and /explorer
    // answers 503 naming this command until it is built where esbuild is installed.
    if ((e as { code?: string }).code !== 'ERR_MODULE_NOT_FOUND') throw e;
    console.warn(`explorer not built: esbuild is not installed (${(e as Error).message})`);
  }
}
