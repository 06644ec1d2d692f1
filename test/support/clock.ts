import type { Clock } from '../../domain/ports/clock.ts';

/**
 * A movable clock for tests: `startTestApp({ appOptions: { clock } })` makes every policy (rate-limit windows,
 * idempotency expiry, request-record retention) read this time. It stands still until moved.
 */
export class TestClock implements Clock {
  private ms: number;

  constructor(start: Date | string | number = Date.now()) {
    this.ms = new Date(start).getTime();
    if (!Number.isFinite(this.ms)) throw new Error(`TestClock: invalid start ${String(start)}`);
  }

  now(): Date {
    return new Date(this.ms);
  }

  /** moves forward (or back, with a negative value) by `ms` milliseconds; returns the new time */
  advance(ms: number): Date {
    this.ms += ms;
    return this.now();
  }

  set(date: Date | string | number): Date {
    const ms = new Date(date).getTime();
    if (!Number.isFinite(ms)) throw new Error(`TestClock: invalid date ${String(date)}`);
    this.ms = ms;
    return this.now();
  }
}
