import { writeSnapshot, writeSnapshotSync, type SnapshotHeader } from './files.ts';

// When the embedded ledger writes its state: a snapshot every `every` transactions, or `intervalMs` after the
// first unsaved change, and a final one on close; one write at a time, in the background, the history up to it
// fsynced first (the history log is the write-ahead log: a snapshot never runs ahead of it).

export interface SnapshotsOptions {
  dir: string;
  /** snapshot after this many changes … */
  every: number;
  /** … or this long after the first unsaved one */
  intervalMs: number;
  /** the header and the state bytes now */
  take(): { header: SnapshotHeader; state: Uint8Array };
  /** before a background write: the history up to the snapshot on disk */
  beforeWrite(): Promise<void>;
  /** before a synchronous write */
  beforeWriteSync(): void;
  /** a background snapshot is on disk */
  written(header: SnapshotHeader): void;
  isClosed(): boolean;
  warn(message: string): void;
}

export class Snapshots {
  private unsaved = 0;
  private firstUnsavedAt = 0;
  private saving: Promise<void> | null = null;
  private saveAgain = false;

  constructor(private readonly options: SnapshotsOptions) {}

  /** `count` changes (a transaction, a clock move, a replayed history) are not in the last snapshot yet. */
  markUnsaved(count = 1): void {
    this.unsaved += count;
    this.firstUnsavedAt ||= Date.now();
    if (this.unsaved >= this.options.every) setImmediate(() => void this.save());
  }

  /** `count` replayed history records are not in the snapshot opened: the next tick saves them */
  replayed(count: number): void {
    this.unsaved = count;
  }

  /** the once-a-second check: an old unsaved change is saved */
  tick(): void {
    if (this.unsaved && Date.now() - this.firstUnsavedAt >= this.options.intervalMs) void this.save();
  }

  /** Writes a snapshot in the background (one at a time); history up to it is fsynced first. */
  save(): Promise<void> {
    if (this.options.isClosed()) return Promise.resolve();
    if (this.saving) {
      this.saveAgain = true;
      return this.saving;
    }
    if (!this.unsaved) return Promise.resolve();
    const { header, state } = this.options.take();
    this.unsaved = 0;
    this.firstUnsavedAt = 0;
    this.saving = (async () => {
      try {
        await this.options.beforeWrite();
        await writeSnapshot(this.options.dir, header, state);
        this.options.written(header);
      } catch (e) {
        this.options.warn(`snapshot failed: ${(e as Error).message}`);
        this.unsaved ||= 1;
      } finally {
        this.saving = null;
        if (this.saveAgain && !this.options.isClosed()) {
          this.saveAgain = false;
          void this.save();
        }
      }
    })();
    return this.saving;
  }

  /** Writes a snapshot now (open, close). */
  saveSync(): void {
    this.options.beforeWriteSync();
    const { header, state } = this.options.take();
    writeSnapshotSync(this.options.dir, header, state);
    this.unsaved = 0;
    this.firstUnsavedAt = 0;
  }

  /** Waits for a background write and cancels a queued one (close). */
  async settle(): Promise<void> {
    this.saveAgain = false;
    await this.saving;
  }
}
