import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

// A webhook receiver on loopback for tests (DECISIONS "Webhooks"): records every request with its raw body and
// answers what the test says. Open it before the app starts and pass `allow` in SVC_OUTBOUND_ALLOW (outbound calls
// reach only its targets).

export interface ReceivedHook {
  url: string;
  headers: IncomingHttpHeaders;
  /** the raw body as received */
  body: string;
  at: number;
}

export type Answer = { status: number; delayMs?: number } | 'hang';

export interface Receiver {
  url: string;
  /** host:port for SVC_OUTBOUND_ALLOW */
  allow: string;
  received: ReceivedHook[];
  /** what the next requests get (default 204) */
  answer: (hook: ReceivedHook) => Answer;
  /** resolves once `count` requests arrived */
  waitFor(count: number): Promise<ReceivedHook[]>;
  close(): Promise<void>;
}

export async function startReceiver(answer: (hook: ReceivedHook) => Answer = () => ({ status: 204 })): Promise<Receiver> {
  const received: ReceivedHook[] = [];
  const waiters = new Set<() => void>();
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const hook: ReceivedHook = { url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), at: Date.now() };
      received.push(hook);
      for (const wake of waiters) wake();
      const out = receiver.answer(hook);
      if (out === 'hang') return; // never answers: the sender's timeout (or its death) ends it
      const send = () => res.writeHead(out.status).end();
      if (out.delayMs) setTimeout(send, out.delayMs);
      else send();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  const receiver: Receiver = {
    url: `http://127.0.0.1:${port}`,
    allow: `127.0.0.1:${port}`,
    received,
    answer,
    // no deadline of its own: requests that never come are AVA's timeout to report (./until.ts says why)
    waitFor: (count) =>
      new Promise((resolve) => {
        const check = () => {
          if (received.length < count) return;
          waiters.delete(check);
          resolve(received.slice());
        };
        waiters.add(check);
        check();
      }),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  return receiver;
}
