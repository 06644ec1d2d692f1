import { mkdirSync, readdirSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { decodeAddress, encodeBase58 } from '../../../domain/shared/base58.ts';
import { programName, WELL_KNOWN_PROGRAMS, type LoadedProgram, type ProgramSource } from '../../../domain/ledger/programs.ts';

// The programs every embedded ledger loads at start, besides LiteSVM's built-ins.
// - SVC_LEDGER_PROGRAMS: a directory of `<program-id>.so` or gzip-compressed `<program-id>.so.gz` ELF files (the layout
//   of `solana-test-validator --bpf-program`); every such file is loaded.
// - SVC_LEDGER_CLONE_URL: a Solana JSON-RPC the well-known programs (domain/ledger/programs.ts) the directory lacks
//   are copied from at first start: the program account, and for the upgradeable loader its programdata account,
//   whose ELF is cached under SVC_DATA_DIR/ledger/programs/<id>.so; later starts read the cache, not the network.
// Resolved once on the main thread before any ledger opens (a bad directory or file is a start-up error naming the
// setting); the images go to each ledger's worker, which adds them to LiteSVM (addProgram: upgradeable loader).

/** Solana's largest program account (MAX_PERMITTED_DATA_LENGTH, 10 MiB): an ELF never exceeds it */
export const MAX_PROGRAM_BYTES = 10 * 1024 * 1024;
/** a getAccountInfo answer carries the account base64-encoded (4/3) plus its JSON envelope */
const MAX_RESPONSE_BYTES = Math.ceil((MAX_PROGRAM_BYTES * 4) / 3) + 64 * 1024;
const CLONE_TIMEOUT_MS = 30_000;

const UPGRADEABLE_LOADER = 'BPFLoaderUpgradeab1e11111111111111111111111';
const LOADER_V2 = 'BPFLoader2111111111111111111111111111111111';
const LOADER_V1 = 'BPFLoader1111111111111111111111111111111111';
/** UpgradeableLoaderState::ProgramData: tag u32, slot u64, Option<Pubkey> authority (always 33 bytes) */
const PROGRAMDATA_HEADER = 45;

/** The node answered, but what it holds at a program's address cannot be copied (not a program, no ELF, too large). */
class NotCopyable extends Error {}

/** A start-up error of the programs settings: the message names the setting and the file. */
export class ProgramsError extends Error {
  override readonly name = 'ProgramsError';
}

/** a program ready to load: its ELF and where it came from */
export interface ProgramImage extends LoadedProgram {
  elf: Uint8Array;
}

export interface MissingProgram {
  id: string;
  name: string | null;
  /** why it is not loaded, e.g. "not on http://…" or "SVC_LEDGER_CLONE_URL is not set" */
  reason: string;
}

export interface ResolvedPrograms {
  images: ProgramImage[];
  /** well-known programs no source had: reported, not fatal */
  missing: MissingProgram[];
}

export interface ResolveProgramsOptions {
  /** SVC_LEDGER_PROGRAMS */
  dir?: string | undefined;
  /** SVC_LEDGER_CLONE_URL */
  cloneUrl?: string | undefined;
  /** where cloned programs are cached: `${dataDir}/ledger/programs` */
  cacheDir: string;
  /** the well-known list (tests may narrow it) */
  wellKnown?: readonly { id: string; name: string }[];
  onWarning?: ((message: string) => void) | undefined;
  timeoutMs?: number;
}

function isElf(bytes: Uint8Array): boolean {
  return bytes.length >= 4 && bytes[0] === 0x7f && bytes[1] === 0x45 && bytes[2] === 0x4c && bytes[3] === 0x46;
}

/** `<id>.so` / `<id>.so.gz` → id and whether it is compressed; null for any other file name */
function programFileName(file: string): { stem: string; gz: boolean } | null {
  if (file.endsWith('.so.gz')) return { stem: file.slice(0, -'.so.gz'.length), gz: true };
  if (file.endsWith('.so')) return { stem: file.slice(0, -'.so'.length), gz: false };
  return null;
}

function isAddress(text: string): boolean {
  const bytes = decodeAddress(text);
  return bytes !== null && encodeBase58(bytes) === text;
}

/** Reads one program file: gunzipped when `.gz`, at most 10 MiB, an ELF; throws ProgramsError naming `label`. */
export function readProgramFile(path: string, label: string): Uint8Array {
  let raw: Buffer;
  try {
    raw = readFileSync(path);
  } catch (e) {
    throw new ProgramsError(`${label}: cannot read ${path}: ${(e as Error).message}`);
  }
  let elf: Uint8Array = raw;
  if (path.endsWith('.gz')) {
    try {
      elf = gunzipSync(raw, { maxOutputLength: MAX_PROGRAM_BYTES });
    } catch (e) {
      throw new ProgramsError(`${label}: ${path} is not a gzip file of at most ${MAX_PROGRAM_BYTES} bytes: ${(e as Error).message}`);
    }
  }
  if (elf.length > MAX_PROGRAM_BYTES) throw new ProgramsError(`${label}: ${path} is larger than a program can be (${MAX_PROGRAM_BYTES} bytes)`);
  if (!isElf(elf)) throw new ProgramsError(`${label}: ${path} is not an ELF program (a solana program dump .so)`);
  return elf;
}

/** The `<program-id>.so(.gz)` files of a directory; other files (a README) are ignored. Throws ProgramsError. */
export function listProgramsDir(dir: string, label = 'SVC_LEDGER_PROGRAMS'): { id: string; path: string }[] {
  let files: string[];
  try {
    if (!statSync(dir).isDirectory()) throw new Error('not a directory');
    files = readdirSync(dir).sort();
  } catch (e) {
    const why = (e as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such directory' : (e as Error).message;
    throw new ProgramsError(`${label}=${dir}: ${why} (it must be a directory of <program-id>.so or <program-id>.so.gz files)`);
  }
  const found = new Map<string, string>();
  for (const file of files) {
    const name = programFileName(file);
    if (!name) continue;
    if (!isAddress(name.stem))
      throw new ProgramsError(`${label}=${dir}: ${file} is not named <program-id>.so(.gz): ${JSON.stringify(name.stem)} is not a base58 address`);
    if (found.has(name.stem)) throw new ProgramsError(`${label}=${dir}: ${name.stem} is there twice (${found.get(name.stem)} and ${file}); keep one`);
    found.set(name.stem, file);
  }
  return [...found].map(([id, file]) => ({ id, path: join(dir, file) }));
}

/**
 * A JSON-RPC call with a deadline and a cap on the answer's size. A plain fetch, not the outbound guard: the URL is
 * the operator's SVC_LEDGER_CLONE_URL (like SVC_DEVNET_LEDGER), never a user's, so it may be a local node — the
 * guard's refusal of loopback/private targets protects against URLs that users supply.
 */
async function rpcCall(url: string, method: string, params: unknown[], timeoutMs: number): Promise<unknown> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
    signal: AbortSignal.timeout(timeoutMs),
    redirect: 'error',
  });
  if (!res.ok) throw new Error(`${method} answered HTTP ${res.status}`);
  const length = Number(res.headers.get('content-length') ?? 0);
  if (length > MAX_RESPONSE_BYTES) throw new Error(`${method} answer is ${length} bytes, more than ${MAX_RESPONSE_BYTES}`);
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    size += chunk.length;
    if (size > MAX_RESPONSE_BYTES) throw new Error(`${method} answer is more than ${MAX_RESPONSE_BYTES} bytes`);
    chunks.push(chunk);
  }
  const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { result?: unknown; error?: { message?: string } };
  if (body.error) throw new Error(`${method}: ${body.error.message ?? JSON.stringify(body.error)}`);
  return body.result;
}

async function accountInfo(url: string, address: string, timeoutMs: number): Promise<{ owner: string; data: Buffer } | null> {
  const result = (await rpcCall(url, 'getAccountInfo', [address, { encoding: 'base64', commitment: 'confirmed' }], timeoutMs)) as {
    value?: { owner?: string; data?: [string, string] } | null;
  } | null;
  const value = result?.value;
  if (!value) return null;
  if (typeof value.owner !== 'string' || !Array.isArray(value.data) || value.data[1] !== 'base64')
    throw new Error(`getAccountInfo ${address}: not a base64 account`);
  return { owner: value.owner, data: Buffer.from(value.data[0], 'base64') };
}

/**
 * Copies a program's ELF from a Solana JSON-RPC: the program account, and for the upgradeable loader its programdata
 * account (the ELF after its 45-byte header, as `solana program dump` writes it). null when the node has no such program.
 */
export async function cloneProgram(url: string, id: string, timeoutMs = CLONE_TIMEOUT_MS): Promise<Uint8Array | null> {
  const program = await accountInfo(url, id, timeoutMs);
  if (!program) return null;
  let elf: Uint8Array;
  if (program.owner === UPGRADEABLE_LOADER) {
    if (program.data.length < 36 || program.data.readUInt32LE(0) !== 2) throw new NotCopyable(`${id} is not an upgradeable program account`);
    const programdata = encodeBase58(program.data.subarray(4, 36));
    const data = await accountInfo(url, programdata, timeoutMs);
    if (!data) throw new NotCopyable(`${id}: its programdata account ${programdata} is missing`);
    if (data.data.length < PROGRAMDATA_HEADER || data.data.readUInt32LE(0) !== 3) throw new NotCopyable(`${id}: ${programdata} is not a programdata account`);
    elf = data.data.subarray(PROGRAMDATA_HEADER);
  } else if (program.owner === LOADER_V2 || program.owner === LOADER_V1) {
    elf = program.data;
  } else {
    throw new NotCopyable(`${id} is owned by ${program.owner}, not a BPF loader this ledger can copy from`);
  }
  if (elf.length > MAX_PROGRAM_BYTES) throw new NotCopyable(`${id} is larger than a program can be`);
  if (!isElf(elf)) throw new NotCopyable(`${id} holds no ELF program`);
  return elf;
}

/** the clone source as logs may show it: an RPC provider's key often rides in the path or query, so only the origin */
export function origin(url: string): string {
  try {
    return new URL(url).origin;
  } catch {
    return '(the clone URL)';
  }
}

function writeAtomically(path: string, bytes: Uint8Array): void {
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, bytes, { mode: 0o644 });
  renameSync(tmp, path);
}

/** where the copy of a well-known program is cached: `<cacheDir>/<id>.so`, the ELF as `solana program dump` writes it */
export const cachedProgramPath = (cacheDir: string, id: string): string => join(cacheDir, `${id}.so`);

/** the system's reason a request failed (fetch's "fetch failed" hides it in `cause`: ECONNREFUSED, ENOTFOUND, …) */
function failure(e: unknown): string {
  const cause = (e as { cause?: { code?: string; message?: string } }).cause;
  const detail = cause?.code ?? cause?.message;
  return `${(e as Error).message}${detail ? ` (${detail})` : ''}`;
}

/**
 * Copies one program from a Solana JSON-RPC into the cache (atomically: a start never reads half a file): the one
 * path by which cloned programs reach the cache, for SVC_LEDGER_CLONE_URL at start and for `npm run programs`.
 * `reachable: false` when the request itself failed (refused, timed out, not JSON-RPC), so a caller can tell a source
 * it cannot reach from one that lacks the program.
 */
export async function cloneIntoCache(
  url: string,
  program: { id: string; name: string },
  cacheDir: string,
  timeoutMs?: number,
): Promise<{ id: string; elf: Uint8Array; path: string } | (MissingProgram & { reachable: boolean; failure?: string })> {
  const { id, name } = program;
  try {
    const elf = await cloneProgram(url, id, timeoutMs);
    if (!elf) return { id, name, reason: `not on ${origin(url)}`, reachable: true };
    mkdirSync(cacheDir, { recursive: true, mode: 0o700 });
    const path = cachedProgramPath(cacheDir, id);
    writeAtomically(path, elf);
    return { id, elf, path };
  } catch (e) {
    const reachable = e instanceof NotCopyable;
    return { id, name, reason: `cloning from ${origin(url)} failed: ${failure(e)}`, reachable, failure: failure(e) };
  }
}

/**
 * The programs to load: every file of SVC_LEDGER_PROGRAMS, then each well-known program the directory lacks from the
 * clone cache, else cloned from SVC_LEDGER_CLONE_URL (and cached). Throws ProgramsError on a bad directory or file;
 * a well-known program nobody has is returned as missing (and warned about when a clone source was asked).
 */
export async function resolvePrograms(options: ResolveProgramsOptions): Promise<ResolvedPrograms> {
  const images: ProgramImage[] = [];
  const add = (id: string, source: ProgramSource, elf: Uint8Array) => images.push({ id, name: programName(id), source, elf });
  if (options.dir !== undefined) {
    for (const { id, path } of listProgramsDir(options.dir)) add(id, 'directory', readProgramFile(path, 'SVC_LEDGER_PROGRAMS'));
  }
  const warn = options.onWarning ?? (() => {});
  // Each well-known program the directory lacks: from the cache, else cloned (all at once: a slow source delays start
  // by one deadline, not one per program); in the list's order.
  const wanted = (options.wellKnown ?? WELL_KNOWN_PROGRAMS).filter(({ id }) => !images.some((i) => i.id === id));
  const found = await Promise.all(
    wanted.map(async ({ id, name }): Promise<{ id: string; elf: Uint8Array } | MissingProgram> => {
      const cached = cachedProgramPath(options.cacheDir, id);
      try {
        statSync(cached);
        return { id, elf: readProgramFile(cached, 'the program cache') };
      } catch (e) {
        if (e instanceof ProgramsError) warn(`${e.message}; ignored`);
      }
      if (!options.cloneUrl) {
        return {
          id,
          name,
          reason:
            options.dir !== undefined
              ? 'not in SVC_LEDGER_PROGRAMS and SVC_LEDGER_CLONE_URL is not set'
              : 'neither SVC_LEDGER_PROGRAMS nor SVC_LEDGER_CLONE_URL is set',
        };
      }
      const cloned = await cloneIntoCache(options.cloneUrl, { id, name }, options.cacheDir, options.timeoutMs);
      if ('elf' in cloned) return { id, elf: cloned.elf };
      warn(`program ${name} (${id}) not cloned: ${cloned.reason}`);
      return cloned;
    }),
  );
  const missing: MissingProgram[] = [];
  for (const result of found) {
    if ('elf' in result) add(result.id, 'clone', result.elf);
    else missing.push(result);
  }
  return { images, missing };
}
