import { newRequestId } from '../shared/ids.ts';
import type { Clock } from '../ports/clock.ts';
import type { RequestRecord, RequestRecordStore } from '../ports/policy-store.ts';

const FLUSH_AT = 500;

/**
 * Buffers request records and writes them in batches (one statement per flush), so recording usage adds no
 * database round trip to a request. The composition root flushes it on a timer and at shutdown.
 */
export class RequestRecorder {
  private buffer: RequestRecord[] = [];
  private flushing: Promise<void> | undefined;

  constructor(private readonly deps: { store: RequestRecordStore; clock: Clock; onError?: (e: unknown) => void }) {}

  record(r: Omit<RequestRecord, 'id' | 'at'> & { at?: Date }): void {
    const at = r.at ?? this.deps.clock.now();
    this.buffer.push({ ...r, at, id: newRequestId(at.getTime()) });
    if (this.buffer.length >= FLUSH_AT) void this.flush();
  }

  async flush(): Promise<void> {
    while (this.flushing) await this.flushing;
    if (!this.buffer.length) return;
    const batch = this.buffer;
    this.buffer = [];
    this.flushing = this.deps.store
      .insertMany(batch)
      .catch((e) => {
        // keep the rows for the next flush rather than lose them
        this.buffer = batch.concat(this.buffer);
        this.deps.onError?.(e);
      })
      .finally(() => (this.flushing = undefined));
    await this.flushing;
  }
}
