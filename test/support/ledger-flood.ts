import { randomBytes } from 'node:crypto';
import WebSocket from 'ws';
import { encodeBase58 } from '../../domain/shared/base58.ts';

// Child process of the PubSub flood test (200 sockets × 100 accountSubscribe): opens SOCKETS WebSockets
// to WS_URL at once, sends SUBS accountSubscribe on each as fast as it can (to random accounts, or all to HOT),
// waits for every answer (or the socket's refusal) and reports one JSON line. With HOT it then counts the
// notifications of ROUNDS changes of that account and reports a second line when all arrived.
// Usage: node scripts/run.mjs test/support/ledger-flood.ts WS_URL SOCKETS SUBS [HOT ROUNDS]

const [url, sockets, subs] = [process.argv[2]!, Number(process.argv[3] ?? 200), Number(process.argv[4] ?? 100)];
const hot = process.argv[5];
const rounds = Number(process.argv[6] ?? 0);
let notified = 0;
let notifiedAll: () => void = () => {};
const started = performance.now();
const result = { sockets: 0, refusedSockets: 0, subscribed: 0, refusedSubscriptions: 0, ms: 0 };

await Promise.all(
  Array.from(
    { length: sockets },
    () =>
      new Promise<void>((resolve) => {
        const socket = new WebSocket(url);
        let answered = 0;
        socket.on('error', () => resolve());
        socket.on('close', () => resolve());
        socket.on('open', () => {
          result.sockets++;
          for (let i = 0; i < subs; i++) {
            socket.send(
              JSON.stringify({ jsonrpc: '2.0', id: i + 1, method: 'accountSubscribe', params: [hot ?? encodeBase58(randomBytes(32)), { encoding: 'base64' }] }),
            );
          }
        });
        socket.on('message', (raw) => {
          const message = JSON.parse(raw.toString()) as { id: unknown; method?: string; result?: unknown; error?: unknown };
          if (message.method === 'accountNotification') {
            if (++notified === rounds * result.subscribed) notifiedAll();
            return;
          }
          if (message.id === null) {
            result.refusedSockets++; // the sockets-per-client cap answers, then closes
            result.sockets--;
            return;
          }
          if (message.error) result.refusedSubscriptions++;
          else result.subscribed++;
          if (++answered === subs) resolve();
        });
      }),
  ),
);
result.ms = Math.round(performance.now() - started);
process.stdout.write(`${JSON.stringify(result)}\n`);
if (hot && rounds > 0) {
  if (notified < rounds * result.subscribed) await new Promise<void>((resolve) => (notifiedAll = resolve));
  process.stdout.write(`${JSON.stringify({ notified })}\n`);
}
process.exit(0);
