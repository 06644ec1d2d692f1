import { existsSync, readFileSync, unlinkSync } from 'node:fs';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { z } from 'zod';
import { ConfigSchema } from './config.ts';

// The running gateway announces itself in its data directory, so the commands that work on that directory
// (npm run keys, npm run demo, npm run pay) can say whether a gateway serves it and reach it without being told a URL.
// `<SVC_DATA_DIR>/gateway.json` is written atomically once the port serves and removed on close; a file left by a
// process that died (its pid is gone) counts as "not running".

export const ANNOUNCEMENT_FILE = 'gateway.json';

export const GatewayAnnouncement = z.object({
  pid: z.number().int().positive(),
  /** base URL reachable from this machine, e.g. "http://127.0.0.1:8080" */
  url: z.string(),
  started_at: z.string(),
  /** JSON-RPC of each embedded ledger, e.g. { "chain-devnet": "http://127.0.0.1:8899" }: wallets and the buyer kit need it */
  rpc_urls: z.record(z.string(), z.string()).default({}),
});
export type GatewayAnnouncement = z.infer<typeof GatewayAnnouncement>;

/** Where a command's data directory came from: SVC_DATA_DIR, or the default `.data` of config.ts. */
export interface DataDirChoice {
  /** absolute */
  dir: string;
  source: 'SVC_DATA_DIR' | 'default';
}

export function dataDirOf(env: Record<string, string | undefined> = process.env): DataDirChoice {
  const set = env.SVC_DATA_DIR?.trim() || undefined;
  return { dir: resolve(ConfigSchema.shape.SVC_DATA_DIR.parse(set)), source: set ? 'SVC_DATA_DIR' : 'default' };
}

/**
 * The URL a local client reaches a listener on: a wildcard bind (0.0.0.0, ::) is reached on loopback; an IPv6
 * address is bracketed.
 */
export function localUrl(host: string, port: number): string {
  const h = host === '0.0.0.0' || host === '::' || host === '' ? '127.0.0.1' : host;
  return `http://${h.includes(':') ? `[${h}]` : h}:${port}`;
}

export interface Announcement {
  file: string;
  /** removes the file if it still names this process (a later gateway on the same directory keeps its own) */
  remove(): Promise<void>;
}

/** Writes gateway.json (temporary file + rename, so a reader never sees half of it). */
export async function announceGateway(
  dataDir: string,
  fields: { url: string; rpcUrls?: Partial<Record<string, string>>; pid?: number; startedAt?: Date },
): Promise<Announcement> {
  const file = join(resolve(dataDir), ANNOUNCEMENT_FILE);
  const pid = fields.pid ?? process.pid;
  const body: GatewayAnnouncement = {
    pid,
    url: fields.url,
    started_at: (fields.startedAt ?? new Date()).toISOString(),
    rpc_urls: Object.fromEntries(Object.entries(fields.rpcUrls ?? {}).filter((e): e is [string, string] => typeof e[1] === 'string')),
  };
  await mkdir(resolve(dataDir), { recursive: true });
  const temporary = `${file}.${pid}.tmp`;
  await writeFile(temporary, `${JSON.stringify(body, null, 2)}\n`);
  await rename(temporary, file);
  // A crash that skips close still removes it where Node can (an uncaught exception, process.exit).
  const onExit = () => removeIfOurs(file, pid);
  process.once('exit', onExit);
  return {
    file,
    async remove() {
      process.off('exit', onExit);
      removeIfOurs(file, pid);
    },
  };
}

function removeIfOurs(file: string, pid: number): void {
  try {
    const current = JSON.parse(readFileSync(file, 'utf8')) as { pid?: unknown };
    if (current.pid === pid) unlinkSync(file);
  } catch {
    // already gone, or not ours to judge
  }
}

export type GatewayLookup =
  | { state: 'running'; file: string; gateway: GatewayAnnouncement }
  | { state: 'stale'; file: string; gateway: GatewayAnnouncement }
  | { state: 'absent'; file: string };

/** Is a gateway serving this data directory? Reads gateway.json and checks that its process is alive. */
export async function findGateway(dataDir: string): Promise<GatewayLookup> {
  const file = join(resolve(dataDir), ANNOUNCEMENT_FILE);
  if (!existsSync(file)) return { state: 'absent', file };
  let parsed: ReturnType<typeof GatewayAnnouncement.safeParse>;
  try {
    parsed = GatewayAnnouncement.safeParse(JSON.parse(await readFile(file, 'utf8')));
  } catch {
    return { state: 'absent', file };
  }
  if (!parsed.success) return { state: 'absent', file };
  return { state: processAlive(parsed.data.pid) ? 'running' : 'stale', file, gateway: parsed.data };
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    // EPERM: it exists but belongs to another user.
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}
