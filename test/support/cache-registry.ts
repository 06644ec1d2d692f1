import { readdir, readFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';

// A registry on 127.0.0.1 (port 0) that serves only the package tarballs already in npm's cache, so a test can run a
// real `npm install` that resolves ranges without a lock file and never reaches the public registry (common rules:
// no traffic to a public address). A CI machine that ran `npm ci` holds every tarball of the root's lock file; the
// packuments it may also hold list every published version, whose tarballs it lacks (an offline install picks the
// newest and fails), so the packuments are built here from the tarballs themselves: one version per cached tarball,
// its manifest read from the tarball's package.json, `latest` the highest release among them.
//
// Read-only: the cache is npm's content-addressed store (cacache), read through its index (index-v5: one JSON entry
// per line, keyed by request URL or `pacote:tarball:name@version`) and its content files (content-v2/<algo>/<hex>).

export interface CacheRegistry {
  /** http://127.0.0.1:<port>/, for `--registry` */
  url: string;
  /** the package names npm asked for that the cache has no tarball of (an install then fails with E404) */
  missing: ReadonlySet<string>;
  close(): Promise<void>;
}

interface Version {
  integrity: string;
  manifest: Record<string, unknown> & { name: string; version: string };
}

const TARBALL_URL = /^make-fetch-happen:request-cache:.+?\/((?:@[^/]+\/)?[^/@][^/]*)\/-\/[^/]+\.tgz$/;
const TARBALL_SPEC = /^pacote:tarball:((?:@[^/@]+\/)?[^/@]+)@(\d+\.\d+\.\d+[-+.\w]*)$/;

/** name → integrities of the cached tarballs of that name, from the cache index. */
async function indexTarballs(cacheDir: string): Promise<Map<string, Set<string>>> {
  const byName = new Map<string, Set<string>>();
  const indexDir = path.join(cacheDir, '_cacache', 'index-v5');
  for (const file of await readdir(indexDir, { recursive: true, withFileTypes: true })) {
    if (!file.isFile()) continue;
    for (const line of (await readFile(path.join(file.parentPath, file.name), 'utf8')).split('\n')) {
      const json = line.slice(line.indexOf('\t') + 1);
      if (!json.startsWith('{')) continue;
      let entry: { key?: string; integrity?: string | null };
      try {
        entry = JSON.parse(json) as typeof entry;
      } catch {
        continue; // a torn line (cacache appends; a killed npm may leave half a line)
      }
      if (!entry.key || !entry.integrity) continue; // integrity null: a deleted entry
      const name = TARBALL_URL.exec(entry.key)?.[1] ?? TARBALL_SPEC.exec(entry.key)?.[1];
      if (!name) continue;
      const decoded = decodeURIComponent(name);
      byName.set(decoded, (byName.get(decoded) ?? new Set()).add(entry.integrity));
    }
  }
  return byName;
}

function contentPath(cacheDir: string, integrity: string): string | undefined {
  const m = /^(sha\d+)-([A-Za-z0-9+/=]+)$/.exec(integrity.split(/\s+/)[0]!);
  if (!m) return undefined;
  const hex = Buffer.from(m[2]!, 'base64').toString('hex');
  return path.join(cacheDir, '_cacache', 'content-v2', m[1]!, hex.slice(0, 2), hex.slice(2, 4), hex.slice(4));
}

/** The package.json of an npm tarball (gzip'd ustar; the first `<dir>/package.json` at the top level). */
function manifestOf(tgz: Buffer): Record<string, unknown> | undefined {
  const tar = gunzipSync(tgz);
  let longName: string | undefined;
  for (let offset = 0; offset + 512 <= tar.length; ) {
    const header = tar.subarray(offset, offset + 512);
    if (header.every((b) => b === 0)) break;
    const field = (start: number, length: number) =>
      header
        .subarray(start, start + length)
        .toString('utf8')
        .replace(/\0.*$/s, '');
    const size = Number.parseInt(field(124, 12).trim() || '0', 8);
    const type = field(156, 1);
    const body = tar.subarray(offset + 512, offset + 512 + size);
    offset += 512 + Math.ceil(size / 512) * 512;
    if (type === 'x') {
      longName = /\d+ path=([^\n]*)\n/.exec(body.toString('utf8'))?.[1];
      continue;
    }
    const prefix = field(345, 155);
    const name = longName ?? (prefix ? `${prefix}/${field(0, 100)}` : field(0, 100));
    longName = undefined;
    if ((type === '0' || type === '') && /^[^/]+\/package\.json$/.test(name)) return JSON.parse(body.toString('utf8')) as Record<string, unknown>;
  }
  return undefined;
}

/** The highest release (no prerelease tag) among `versions`, else any: the packument's `latest`. */
function latestOf(versions: string[]): string {
  const releases = versions
    .map((version) => ({ version, parts: /^(\d+)\.(\d+)\.(\d+)$/.exec(version)?.slice(1).map(Number) }))
    .filter((v): v is { version: string; parts: number[] } => v.parts !== undefined)
    .sort((a, b) => a.parts[0]! - b.parts[0]! || a.parts[1]! - b.parts[1]! || a.parts[2]! - b.parts[2]!);
  return releases.at(-1)?.version ?? versions[0]!;
}

export async function startCacheRegistry(options: { cacheDir: string }): Promise<CacheRegistry> {
  const { cacheDir } = options;
  const tarballs = await indexTarballs(cacheDir);
  const versions = new Map<string, Promise<Map<string, Version>>>();
  const missing = new Set<string>();

  const versionsOf = (name: string) => {
    let found = versions.get(name);
    if (!found) {
      found = (async () => {
        const byVersion = new Map<string, Version>();
        for (const integrity of tarballs.get(name) ?? []) {
          const file = contentPath(cacheDir, integrity);
          const tgz = file ? await readFile(file).catch(() => undefined) : undefined;
          const manifest = tgz ? manifestOf(tgz) : undefined;
          if (manifest?.name === name && typeof manifest.version === 'string') {
            byVersion.set(manifest.version, { integrity, manifest: manifest as Version['manifest'] });
          }
        }
        return byVersion;
      })();
      versions.set(name, found);
    }
    return found;
  };

  let base = '';
  const server: Server = createServer((req, res) => {
    void (async () => {
      const url = new URL(req.url ?? '/', base);
      const pathname = decodeURIComponent(url.pathname).replace(/^\//, '');
      const tarball = /^((?:@[^/]+\/)?[^/]+)\/-\/(.+)-(\d+\.\d+\.\d+[^/]*)\.tgz$/.exec(pathname);
      const name = tarball ? tarball[1]! : pathname;
      const known = await versionsOf(name);
      if (known.size === 0) {
        missing.add(name);
        res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"not in the npm cache"}');
        return;
      }
      if (tarball) {
        const version = known.get(tarball[3]!);
        const file = version && contentPath(cacheDir, version.integrity);
        if (!file) {
          res.writeHead(404).end();
          return;
        }
        res.writeHead(200, { 'content-type': 'application/octet-stream' }).end(await readFile(file));
        return;
      }
      const doc: Record<string, unknown> = { name, 'dist-tags': { latest: latestOf([...known.keys()]) }, versions: {} };
      for (const [version, { integrity, manifest }] of known) {
        const file = `${name.split('/').pop()}-${version}.tgz`;
        (doc.versions as Record<string, unknown>)[version] = { ...manifest, dist: { tarball: `${base}${name}/-/${file}`, integrity } };
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(doc));
    })().catch((err: unknown) => {
      res.writeHead(500).end(String(err));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  return {
    url: base,
    missing,
    close: () => new Promise<void>((resolve, reject) => server.close((err) => (err ? reject(err) : resolve()))),
  };
}
