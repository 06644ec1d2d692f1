import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { createLogger, flushLogger } from '../../../interfaces/log.ts';

// The gateway's own logger in a bench: what `npm start` makes when its standard output is not a terminal (JSON through
// the asynchronous destination, interfaces/log.ts) at the level asked, writing a file of its own instead of standard
// output so the bench's report stays readable. Same code, same cost per line; the file says how many lines came out.

export interface BenchLog {
  logger: Logger;
  /** the access lines written so far (flushed first) */
  accessLines(): Promise<number>;
  remove(): Promise<void>;
}

export async function benchLogger(level: string): Promise<BenchLog> {
  const dir = await mkdtemp(join(tmpdir(), 'bench-log-'));
  const file = join(dir, 'gateway.log');
  const logger = createLogger({ level, format: 'json', isTTY: false, destination: file });
  return {
    logger,
    async accessLines() {
      await flushLogger(logger);
      const text = await readFile(file, 'utf8').catch(() => '');
      return text.split('\n').filter((l) => l.includes('"msg":"request completed"')).length;
    },
    remove: () => rm(dir, { recursive: true, force: true }),
  };
}
