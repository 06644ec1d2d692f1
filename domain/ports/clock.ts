/**
 * Time source; tests pass a movable clock. `now()` → e.g. new Date('2026-11-21T10:00:00.000Z'). Every wait in the
 * domain goes through `sleep`, so a test clock decides when a deadline passes instead of the test sleeping.
 */
export interface Clock {
  now(): Date;
  /** resolves once `ms` milliseconds of this clock's time have passed, e.g. sleep(100) */
  sleep(ms: number): Promise<void>;
}
