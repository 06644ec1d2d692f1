/** A task handler: payload is `unknown` until the task parses it (at-least-once delivery: handlers are idempotent). */
export type TaskHandler = (payload: unknown) => Promise<void>;

/** A recurring task: `schedule` in crontab syntax, e.g. "*\/5 * * * *"; fires once per tick across all processes. */
export interface Recurring {
  task: string;
  schedule: string;
}

/** A PostgreSQL-backed job queue: each job runs once across processes and survives restarts. */
export interface JobQueue {
  /** enqueue; a job with the same `jobKey` replaces a pending one (deduplication) */
  add(task: string, payload: unknown, options?: { jobKey?: string; runAt?: Date }): Promise<void>;
}

export interface JobRunner {
  stop(): Promise<void>;
}
