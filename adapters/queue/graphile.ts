import pg from 'pg';
import { Logger as GraphileLogger, run, quickAddJob, runMigrations, type Runner, type TaskList } from 'graphile-worker';
import type { JobQueue, JobRunner, Recurring, TaskHandler } from '../../domain/ports/job-queue.ts';

export interface QueueLogger {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
  debug(obj: object, msg: string): void;
}

function graphileLogger(log: QueueLogger): GraphileLogger {
  return new GraphileLogger(() => (level, message, meta) => {
    const obj = { ...(meta ?? {}), component: 'jobs' };
    if (level === 'error') log.error(obj, message);
    else if (level === 'warning') log.warn(obj, message);
    else if (level === 'info') log.debug(obj, message);
    else log.debug(obj, message);
  });
}

/** Starts graphile-worker on the database: tasks by name, recurring ones through its crontab (once per tick across nodes). */
export async function startGraphileRunner(options: {
  connectionString: string;
  tasks: Record<string, TaskHandler>;
  recurring: Recurring[];
  concurrency?: number;
  log: QueueLogger;
}): Promise<JobRunner> {
  const taskList: TaskList = {};
  for (const [name, handler] of Object.entries(options.tasks)) taskList[name] = (payload) => handler(payload);
  const concurrency = options.concurrency ?? 2;
  // Our own pool, so an idle connection dropped by the server (restart, shutdown) is logged, not an uncaught error.
  const pgPool = new pg.Pool({ connectionString: options.connectionString, max: concurrency + 2 });
  pgPool.on('error', (err) => options.log.warn({ err: err.message }, 'job queue connection lost'));
  let runner: Runner;
  try {
    runner = await run({
      pgPool,
      concurrency,
      noHandleSignals: true,
      pollInterval: 2000,
      taskList,
      crontab: options.recurring.map((r) => `${r.schedule} ${r.task}`).join('\n'),
      logger: graphileLogger(options.log),
    });
  } catch (e) {
    await pgPool.end();
    throw e;
  }
  return {
    async stop() {
      await runner.stop();
      await pgPool.end();
    },
  };
}

export function graphileQueue(connectionString: string, log: QueueLogger): JobQueue {
  return {
    async add(task, payload, opts) {
      await quickAddJob({ connectionString, logger: graphileLogger(log) }, task, payload as object, {
        ...(opts?.jobKey ? { jobKey: opts.jobKey } : {}),
        ...(opts?.runAt ? { runAt: opts.runAt } : {}),
      });
    },
  };
}

/**
 * Installs or upgrades graphile-worker's schema (idempotent, serialised by graphile-worker itself). Done when the
 * database opens, before anything can enqueue inside a transaction (graphile_worker.add_job), not only when a runner
 * starts: a gateway with SVC_JOBS=off enqueues webhook deliveries before any runner ever ran.
 */
export async function migrateQueue(connectionString: string): Promise<void> {
  const pgPool = new pg.Pool({ connectionString, max: 1 });
  pgPool.on('error', () => {});
  const logger = new GraphileLogger(() => () => {});
  try {
    // Two processes installing the schema at once: the loser's `create schema` may fail; the second pass finds it.
    await runMigrations({ pgPool, logger }).catch(() => runMigrations({ pgPool, logger }));
  } finally {
    await pgPool.end();
  }
}
