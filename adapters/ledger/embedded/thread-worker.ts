import { parentPort, workerData } from 'node:worker_threads';
import type { ActivityFeed, AddressActivity } from '../../../domain/ports/ledger.ts';
import { EmbeddedLedger } from './ledger.ts';
import { startLedgerRpcServer, type LedgerRpcServer } from './rpc-server.ts';
import { serializeError, THREAD_METHODS, type FromThread, type LedgerThreadData, type Reply, type ThreadMethod, type ToThread } from './thread-protocol.ts';

// Worker thread of one embedded ledger (ledger-thread.ts starts it): LiteSVM, its files and its JSON-RPC/PubSub
// server live here, so neither a flood of subscriptions nor a long execution holds up the gateway's event loop.

const port = parentPort!;
const data = workerData as LedgerThreadData;
const post = (message: FromThread) => port.postMessage(message);
const allowed = new Set<string>(THREAD_METHODS);

async function open(): Promise<{ ledger: EmbeddedLedger; server: LedgerRpcServer | undefined }> {
  const ledger = await EmbeddedLedger.open({
    network: data.network,
    dir: data.dir,
    slotMs: data.slotMs,
    lockHeld: data.lockHeld,
    programs: data.programs,
    onWarning: (message) => post({ type: 'warning', message }),
  });
  try {
    const server = data.rpc
      ? await startLedgerRpcServer({
          ledger,
          port: data.rpc.port,
          host: data.rpc.host,
          adminSecret: data.rpc.adminSecret,
          limits: data.rpc.limits,
          bounds: data.rpc.bounds,
        })
      : undefined;
    return { ledger, server };
  } catch (e) {
    await ledger.close();
    throw e;
  }
}

/** replies ready in this turn of the event loop, sent together at its end (thread-protocol.ts) */
let outbox: Reply[] = [];
function reply(r: Reply): void {
  if (outbox.length === 0) setImmediate(flush);
  outbox.push(r);
}
function flush(): void {
  const replies = outbox;
  outbox = [];
  if (replies.length) post({ type: 'replies', replies });
}

/** The one feed of the main thread's followers (their union); activities of one commit go out as one message. */
function follower(ledger: EmbeddedLedger): ActivityFeed {
  let batch: AddressActivity[] = [];
  const flushActivity = () => {
    const activities = batch;
    batch = [];
    if (activities.length) post({ type: 'activity', activities });
  };
  return ledger.followAddresses({
    onActivity: (activity) => {
      if (batch.length === 0) queueMicrotask(flushActivity);
      batch.push(activity);
    },
    onLive: () => {}, // the main thread's feeds go live on the reply to their follow
    onGap: () => {},
  });
}

function serve({ ledger, server }: { ledger: EmbeddedLedger; server: LedgerRpcServer | undefined }): void {
  let feed: ActivityFeed | undefined;
  port.on('message', (calls: ToThread) => {
    for (const message of calls) {
      void (async () => {
        try {
          if (message.method === 'close') {
            feed?.close();
            await server?.close();
            await ledger.close();
            reply({ type: 'reply', id: message.id, ok: true, value: undefined });
            flush();
            port.close(); // nothing else keeps the thread: it ends
            return;
          }
          if (message.method === 'follow') {
            feed ??= follower(ledger);
            feed.follow(message.args[0]);
            reply({ type: 'reply', id: message.id, ok: true, value: undefined });
            return;
          }
          if (!allowed.has(message.method)) throw new Error(`no method ${message.method}`);
          const method = ledger[message.method as ThreadMethod] as (...args: unknown[]) => unknown;
          reply({ type: 'reply', id: message.id, ok: true, value: await method.apply(ledger, message.args) });
        } catch (e) {
          reply({ type: 'reply', id: message.id, ok: false, error: serializeError(e) });
        }
      })();
    }
  });
  post({ type: 'ready', url: server?.url ?? null, wsUrl: server?.wsUrl ?? null });
}

open().then(serve, (e: unknown) => {
  post({ type: 'failed', error: serializeError(e) });
  port.close();
});
