import { createLogger } from '../../interfaces/log.ts';
import { onShutdownSignal } from '../../interfaces/shutdown.ts';

// Child process for the log test: the logger `npm start` makes when standard output is not a terminal (JSON, the
// asynchronous destination), COUNT lines written, then the process ends as HOW says — `crash`: an uncaught exception;
// `signal`: SIGTERM through the gateway's own shutdown handler (interfaces/shutdown.ts), which exits the process.
// Usage: node scripts/run.mjs test/support/log-child.ts crash|signal COUNT

const [how, count] = [process.argv[2], Number(process.argv[3] ?? 1000)];
const log = createLogger({ level: 'info', format: 'json' });
for (let n = 0; n < count; n++) log.info({ n }, 'line');
if (how === 'crash') throw new Error('a crash right after logging');
onShutdownSignal(async () => {});
process.kill(process.pid, 'SIGTERM');
