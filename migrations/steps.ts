/**
 * One migration: its statements in order, hand-written SQL. A plain object rather than a subclass of MikroORM's
 * `Migration`, so that a start whose database is current never loads @mikro-orm/migrations (umzug and its command-line
 * parser): migrations/index.ts wraps these in that class only when one is pending.
 */
export interface MigrationSteps {
  up(addSql: (sql: string) => void): void;
}
