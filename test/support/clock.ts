import type { Clock } from '../../domain/ports/clock.ts';

/**
 * A movable clock for tests: `startTestApp({ appOptions: { clock } })` makes every policy (rate-limit windows,
 * idempotency expiry, request-record retention) read this time. It stands still until moved, and so do the waits
 * that go through it (`sleep`): they end when the clock is moved past their end, like fake timers.
 */
export class TestClock implements Clock {
  private ms: number;
  private sleepers: { until: number; wake: () => void }[] = [];

  constructor(start: Date | string | number = Date.now()) {
    this.ms = new Date(start).getTime();
    if (!Number.isFinite(this.ms)) throw new Error(`TestClock: invalid start ${String(start)}`);
  }

  now(): Date {
    return new Date(this.ms);
  }

  sleep(ms: number): Promise<void> {
    return new Promise((wake) => {
      this.sleepers.push({ until: this.ms + ms, wake });
      this.wakeDue();
    });
  }

  /** waits in progress (sleeps not yet ended) */
  get waiting(): number {
    return this.sleepers.length;
  }

  /** moves forward (or back, with a negative value) by `ms` milliseconds; returns the new time */
  advance(ms: number): Date {
    this.ms += ms;
    this.wakeDue();
    return this.now();
  }

  private wakeDue(): void {
    const due = this.sleepers.filter((s) => s.until <= this.ms);
    this.sleepers = this.sleepers.filter((s) => s.until > this.ms);
    for (const s of due) s.wake();
  }

  set(date: Date | string | number): Date {
    const ms = new Date(date).getTime();
    if (!Number.isFinite(ms)) throw new Error(`TestClock: invalid date ${String(date)}`);
    this.ms = ms;
    this.wakeDue();
    return this.now();
  }
}
