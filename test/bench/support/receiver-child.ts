// A webhook receiver in a process of its own (forked by test/bench/support/receiver.ts): answers every POST 204 and
// notes when each event (body.data.id) arrived, in epoch milliseconds with sub-millisecond precision
// (performance.timeOrigin + performance.now(), comparable with the bench process's same clock). Over IPC: 'count' →
// deliveries so far; 'arrivals' → event id → arrival times; 'close'.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

const now = () => performance.timeOrigin + performance.now();
const arrivals = new Map<string, number[]>();
let received = 0;

const server = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const at = now();
    received++;
    try {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { data?: { id?: string } };
      const id = body.data?.id;
      if (id) arrivals.set(id, [...(arrivals.get(id) ?? []), at]);
    } catch {
      // the baseline's bodies are not events
    }
    res.writeHead(204).end();
  });
});

server.listen(0, '127.0.0.1', () => process.send!({ port: (server.address() as AddressInfo).port }));

process.on('message', (m: { id: number; cmd: 'count' | 'arrivals' | 'close' }) => {
  if (m.cmd === 'count') process.send!({ id: m.id, count: received });
  else if (m.cmd === 'arrivals') process.send!({ id: m.id, arrivals: Object.fromEntries(arrivals) });
  else {
    server.closeAllConnections();
    server.close(() => process.send!({ id: m.id }, () => process.exit(0)));
  }
});
