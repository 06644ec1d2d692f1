/**
 * Time source; tests pass a movable clock. `now()` → e.g. new Date('2026-11-21T10:00:00.000Z'). Every wait of the
 * domain (polling a ledger, waiting for another request) goes through `sleep`, so a test clock decides when it ends.
 */
export interface Clock {
  now(): Date;
  /** resolves once `ms` milliseconds of this clock's time have passed */
  sleep(ms: number): Promise<void>;
}
