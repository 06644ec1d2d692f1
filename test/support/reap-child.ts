import { spawnChild } from './children.ts';

// Child process for the children test: stands in for a test worker. It starts a `bash` child through spawnChild, which
// starts a `sleep` of its own (a grandchild, as `npm start` has), prints both pids as one JSON line, then ends as HOW
// says — `signal`: it waits for the SIGTERM AVA's timeout sends; `exit`: it calls process.exit at once.
// Usage: node scripts/run.mjs test/support/reap-child.ts signal|exit

const how = process.argv[2];
const child = spawnChild('bash', ['-c', 'sleep 600 & echo $!; wait'], { stdio: ['ignore', 'pipe', 'inherit'] });
child.stdout.setEncoding('utf8').once('data', (line: string) => {
  process.stdout.write(`${JSON.stringify({ child: child.pid, grandchild: Number(line.trim()) })}\n`);
  if (how === 'exit') process.exit(0);
});
