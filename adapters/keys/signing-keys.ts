import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { type KeyRing, newSigningKey } from '../../domain/receipts/signing.ts';

// The offer-receipt signing key ring as a file (domain/receipts/signing.ts): JSON, owner-only, created on first use like
// the other generated secrets under the data directory. Its content is never logged.

/** Reads the ring at `path`, or creates one with a first key (a racing creator's file wins). */
export async function ensureSigningKeyRing(path: string, now: Date): Promise<KeyRing> {
  try {
    return parseRing(path, await readFile(path, 'utf8'));
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
  }
  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  await writeFile(path, JSON.stringify({ keys: [newSigningKey(now)] }), { mode: 0o600, flag: 'wx' }).catch((e: NodeJS.ErrnoException) => {
    if (e.code !== 'EEXIST') throw e;
  });
  return parseRing(path, await readFile(path, 'utf8'));
}

/** Replaces the ring at `path` whole (written beside it, then renamed: a reader sees the old ring or the new one). */
export async function saveSigningKeyRing(path: string, ring: KeyRing): Promise<void> {
  const next = `${path}.${process.pid}.next`;
  await writeFile(next, JSON.stringify(ring), { mode: 0o600 });
  await rename(next, path);
}

function parseRing(path: string, text: string): KeyRing {
  let ring: KeyRing;
  try {
    ring = JSON.parse(text) as KeyRing;
  } catch {
    throw new Error(`The signing key ring ${path} is not JSON.`);
  }
  if (!Array.isArray(ring.keys) || !ring.keys.some((k) => k.retired_at === null))
    throw new Error(`The signing key ring ${path} has no active key ({ keys: [{ id, created_at, retired_at: null, jwk }] }).`);
  return ring;
}
