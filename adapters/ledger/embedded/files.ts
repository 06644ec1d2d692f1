import { closeSync, fsyncSync, openSync, readFileSync, renameSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { join, resolve } from 'node:path';

// The files of one embedded ledger under `${dataDir}/ledger/<network>/`:
//   snapshot.bin        LiteSVM state (accounts, sysvars) + a JSON header; replaced atomically (write, fsync, rename)
//   history.log         landed transactions, one binary record each; also the write-ahead log (history.ts)
//   mint-authority.json, faucet.json   local keypairs
//   LOCK                pid of the process that has the ledger open
//   rpc.json            { url, pid } of that process's JSON-RPC server, while it serves one

export interface SnapshotHeader {
  format: 1;
  network: string;
  /** the last history record whose effects are in the state */
  seq: number;
  slot: number;
  /** slots added by advance() on top of wall-clock time */
  slotOffset: number;
  /** the slot clock: slot = floor((now - genesisMs) / slotMs) + slotOffset */
  genesisMs: number;
  /** hex seed the blockhash of each block height is derived from */
  blockhashSeed: string;
  savedAt: string;
}

const MAGIC = Buffer.from('SVCLEDG1');

export function snapshotPath(dir: string): string {
  return join(dir, 'snapshot.bin');
}

export function readSnapshot(dir: string): { header: SnapshotHeader; state: Uint8Array } | null {
  let bytes: Buffer;
  try {
    bytes = readFileSync(snapshotPath(dir));
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw e;
  }
  if (bytes.length < 12 || !bytes.subarray(0, 8).equals(MAGIC)) throw new Error(`${snapshotPath(dir)} is not a ledger snapshot`);
  const headerLength = bytes.readUInt32LE(8);
  const header = JSON.parse(bytes.toString('utf8', 12, 12 + headerLength)) as SnapshotHeader;
  return { header, state: new Uint8Array(bytes.buffer, bytes.byteOffset + 12 + headerLength, bytes.length - 12 - headerLength) };
}

function encode(header: SnapshotHeader, state: Uint8Array): Buffer[] {
  const json = Buffer.from(JSON.stringify(header));
  const prefix = Buffer.alloc(12);
  MAGIC.copy(prefix);
  prefix.writeUInt32LE(json.length, 8);
  return [prefix, json, Buffer.from(state.buffer, state.byteOffset, state.byteLength)];
}

export function writeSnapshotSync(dir: string, header: SnapshotHeader, state: Uint8Array): void {
  const tmp = `${snapshotPath(dir)}.tmp`;
  const fd = openSync(tmp, 'w', 0o600);
  try {
    for (const part of encode(header, state)) writeSync(fd, part);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, snapshotPath(dir));
  syncDir(dir);
}

/** Same, off the event loop (the state bytes were already taken). */
export async function writeSnapshot(dir: string, header: SnapshotHeader, state: Uint8Array): Promise<void> {
  const tmp = `${snapshotPath(dir)}.tmp`;
  const handle = await open(tmp, 'w', 0o600);
  try {
    await handle.writev(encode(header, state));
    await handle.datasync();
  } finally {
    await handle.close();
  }
  renameSync(tmp, snapshotPath(dir));
  syncDir(dir);
}

function syncDir(dir: string): void {
  try {
    const fd = openSync(dir, 'r');
    try {
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
  } catch {
    // not every file system lets a directory be fsynced
  }
}

export class LedgerLockedError extends Error {
  override readonly name = 'LedgerLockedError';
  constructor(
    readonly dir: string,
    readonly pid: number,
  ) {
    super(`the ledger in ${dir} is open in process ${pid}`);
  }
}

/** Directories this process holds: a LOCK naming our own pid but not in here was left by a previous process that
 * had the same pid (containers restart as pid 1). */
const held = new Set<string>();

function alive(pid: number, dir: string): boolean {
  if (pid === process.pid) return held.has(resolve(dir));
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** pid holding the ledger directory, or null (a lock left by a dead process does not count). */
export function lockHolder(dir: string): number | null {
  try {
    const pid = Number(readFileSync(join(dir, 'LOCK'), 'utf8').trim());
    return Number.isInteger(pid) && pid > 0 && alive(pid, dir) ? pid : null;
  } catch {
    return null;
  }
}

/**
 * One process at a time opens a ledger directory: a second LiteSVM on the same files would overwrite the first's
 * snapshot and interleave history lines. Returns the release function.
 */
export function acquireLock(dir: string): () => void {
  const path = join(dir, 'LOCK');
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      writeFileSync(path, String(process.pid), { flag: 'wx', mode: 0o600 });
      held.add(resolve(dir));
      let released = false;
      return () => {
        if (released) return;
        released = true;
        held.delete(resolve(dir));
        rmSync(path, { force: true });
      };
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      const holder = lockHolder(dir);
      if (holder !== null) throw new LedgerLockedError(dir, holder);
      rmSync(path, { force: true }); // stale: its process is gone
    }
  }
  throw new Error(`cannot lock ${path}`);
}

export interface RpcAnnouncement {
  url: string;
  pid: number;
}

export function announceRpc(dir: string, url: string): void {
  writeFileSync(join(dir, 'rpc.json'), JSON.stringify({ url, pid: process.pid } satisfies RpcAnnouncement), { mode: 0o600 });
}

export function withdrawRpc(dir: string): void {
  try {
    const current = JSON.parse(readFileSync(join(dir, 'rpc.json'), 'utf8')) as RpcAnnouncement;
    if (current.pid === process.pid) rmSync(join(dir, 'rpc.json'), { force: true });
  } catch {
    // nothing announced
  }
}

/** The JSON-RPC URL announced by the live process holding the ledger, if any. */
export function announcedRpc(dir: string): RpcAnnouncement | null {
  try {
    const a = JSON.parse(readFileSync(join(dir, 'rpc.json'), 'utf8')) as RpcAnnouncement;
    return typeof a.url === 'string' && Number.isInteger(a.pid) && alive(a.pid, dir) ? a : null;
  } catch {
    return null;
  }
}
