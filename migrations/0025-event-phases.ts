import type { MigrationSteps } from './steps.ts';

// An event that moves through phases (prepared → submitted → confirmed | failed, hosted-api §6) keeps each transition:
// `phases` is [{ phase, at, signature }] in order, appended by the same statement that moves the row on, so a reader
// that sees only the newest state (a late subscriber, a replay, a webhook sent after the next transition) still knows
// every step and when it happened. Additive and instant (no rewrite): a row written before this has an empty array,
// which the store reads as its one known phase (its current one, at its last update).
export const migration0025EventPhases: MigrationSteps = {
  up(addSql) {
    addSql(`alter table events add column phases jsonb not null default '[]'::jsonb;`);
  },
};
