import type { Clock } from '../../domain/ports/clock.ts';

/**
 * A movable clock for tests: `startTestApp({ appOptions: { clock } })` makes every policy (rate-limit windows,
 * idempotency expiry and waits, request-record retention) read this time. It stands still until moved; a `sleep`
 * on it ends when the clock is moved past its end, so a test moves time instead of waiting for it.
 */
export class TestClock implements Clock {
  private ms: number;
  private sleepers: { until: number; wake: () => void }[] = [];
  private watchers: { count: number; wake: () => void }[] = [];

  constructor(start: Date | string | number = Date.now()) {
    this.ms = new Date(start).getTime();
    if (!Number.isFinite(this.ms)) throw new Error(`TestClock: invalid start ${String(start)}`);
  }

  now(): Date {
    return new Date(this.ms);
  }

  sleep(ms: number): Promise<void> {
    if (ms <= 0) return Promise.resolve();
    return new Promise<void>((wake) => {
      this.sleepers.push({ until: this.ms + ms, wake });
      for (const w of this.watchers.filter((w) => this.sleepers.length >= w.count)) {
        this.watchers.splice(this.watchers.indexOf(w), 1);
        w.wake();
      }
    });
  }

  /** how many sleeps are waiting for this clock to move */
  get waiting(): number {
    return this.sleepers.length;
  }

  /** resolves once at least `count` sleeps wait on this clock (something is now waiting for time to pass) */
  untilSleeping(count = 1): Promise<void> {
    if (this.sleepers.length >= count) return Promise.resolve();
    return new Promise<void>((wake) => this.watchers.push({ count, wake }));
  }

  /**
   * Settles `work` while moving this clock: whenever something sleeps on it, time jumps to the earliest wake-up.
   * For setup steps that poll on the clock (the facilitator confirming a transaction) in a test that is not about
   * their timing.
   */
  async drive<T>(work: Promise<T>): Promise<T> {
    let settled = false;
    const done = work.then(
      () => (settled = true),
      () => (settled = true),
    );
    while (!settled) {
      let watcher: { count: number; wake: () => void } | undefined;
      const sleeping =
        this.sleepers.length > 0
          ? Promise.resolve()
          : new Promise<void>((wake) => {
              watcher = { count: 1, wake };
              this.watchers.push(watcher);
            });
      await Promise.race([sleeping, done]);
      if (watcher && this.watchers.includes(watcher)) this.watchers.splice(this.watchers.indexOf(watcher), 1);
      if (settled) break;
      const next = Math.min(...this.sleepers.map((s) => s.until));
      this.set(Math.max(next, this.ms));
      await new Promise((r) => setImmediate(r));
    }
    return work;
  }

  /** moves forward (or back, with a negative value) by `ms` milliseconds; returns the new time */
  advance(ms: number): Date {
    return this.set(this.ms + ms);
  }

  set(date: Date | string | number): Date {
    const ms = new Date(date).getTime();
    if (!Number.isFinite(ms)) throw new Error(`TestClock: invalid date ${String(date)}`);
    this.ms = ms;
    const due = this.sleepers.filter((s) => s.until <= ms);
    this.sleepers = this.sleepers.filter((s) => s.until > ms);
    for (const s of due) s.wake();
    return this.now();
  }
}
