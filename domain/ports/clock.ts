/** Time source; tests pass a movable clock. `now()` → e.g. new Date('2026-11-21T10:00:00.000Z'). */
export interface Clock {
  now(): Date;
}
