import { type IncomingHttpHeaders, type IncomingMessage, request } from 'node:http';

// The tests' one Server-Sent Events reader: GraphQL subscriptions over SSE (Yoga's distinct-connections mode, H§4.7),
// by POST with a key or by GET with a stream token. Over node:http without keep-alive: an aborted fetch() leaves
// undici holding a fresh, unused connection to the server, which then delays the server's close until its headers
// timeout. No wait here has a deadline of its own: a stream that never delivers is AVA's timeout to report.

/** One message: its `event:` field (`message` when absent) and its `data:` lines, parsed as JSON when they are. */
export interface SseMessage {
  event: string;
  data: any;
}

export interface SseStream {
  /** resolves once the answer's head arrived (for a refused request, once its whole body did) */
  opened: Promise<void>;
  /** 0 until `opened` */
  status: number;
  headers: IncomingHttpHeaders;
  /** everything received, as text: a refused request's error body */
  body: string;
  /** every message so far, keep-alive comments aside */
  messages: SseMessage[];
  /** the stream ended (the server closed it, or close() did) */
  ended: boolean;
  /** the first message so far or to come that matches; rejects if the stream ends without one */
  waitFor(match: (message: SseMessage) => boolean): Promise<SseMessage>;
  /** the next message not yet taken by next(); undefined once the stream ended without one */
  next(): Promise<SseMessage | undefined>;
  /** resolves once the stream ended */
  closed: Promise<void>;
  close(): void;
}

export interface SseRequest {
  method?: 'GET' | 'POST';
  /** sent as `Authorization: Bearer <key>` */
  key?: string | null;
  headers?: Record<string, string>;
  /** a JSON body (POST) */
  body?: unknown;
  /** called with each message as it arrives */
  onMessage?: (message: SseMessage) => void;
}

/** The messages complete in `buffer` and what is left of it. */
function parseBlocks(buffer: string): { messages: SseMessage[]; rest: string } {
  const blocks = buffer.split('\n\n');
  const rest = blocks.pop() ?? '';
  const messages: SseMessage[] = [];
  for (const block of blocks) {
    const lines = block.split('\n').filter((l) => l && !l.startsWith(':'));
    if (lines.length === 0) continue; // a keep-alive comment
    const event =
      lines
        .find((l) => l.startsWith('event:'))
        ?.slice(6)
        .trim() ?? 'message';
    const text = lines
      .filter((l) => l.startsWith('data:'))
      .map((l) => l.slice(5).trim())
      .join('\n');
    let data: unknown = null;
    try {
      data = text ? JSON.parse(text) : null;
    } catch {
      data = text;
    }
    messages.push({ event, data });
  }
  return { messages, rest };
}

/** Starts an SSE request to `url`; the stream fills as messages arrive (await `opened` for its status). */
export function startSse(url: string, options: SseRequest = {}): SseStream {
  const headers: Record<string, string> = { accept: 'text/event-stream', ...options.headers };
  if (options.key) headers.authorization = `Bearer ${options.key}`;
  if (options.body !== undefined) headers['content-type'] ??= 'application/json';
  const req = request(url, { method: options.method ?? (options.body === undefined ? 'GET' : 'POST'), headers, agent: false });
  const waiters = new Set<() => void>();
  const wake = () => {
    for (const w of [...waiters]) w();
  };
  let taken = 0;
  let buffer = '';
  let markClosed: () => void = () => {};
  const closed = new Promise<void>((resolve) => (markClosed = resolve));
  const end = () => {
    stream.ended = true;
    markClosed();
    wake();
  };
  /** resolves with `pick()` once it answers something, or with `onEnd()` when the stream ended */
  const until = <T>(pick: () => T | undefined, onEnd: () => T | Promise<T>): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      const check = () => {
        const found = pick();
        if (found === undefined && !stream.ended) return;
        waiters.delete(check);
        if (found !== undefined) resolve(found);
        else Promise.resolve().then(onEnd).then(resolve, reject);
      };
      waiters.add(check);
      check();
    });
  const opened = new Promise<void>((resolve, reject) => {
    req.on('error', (e) => {
      end();
      reject(e);
    });
    req.once('response', (res: IncomingMessage) => {
      stream.status = res.statusCode ?? 0;
      stream.headers = res.headers;
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        stream.body += chunk;
        const parsed = parseBlocks(buffer + chunk);
        buffer = parsed.rest;
        for (const message of parsed.messages) {
          stream.messages.push(message);
          options.onMessage?.(message);
        }
        wake();
      });
      res.once('close', end);
      if (stream.status === 200) resolve();
      else closed.then(() => resolve());
    });
  });
  opened.catch(() => {}); // a caller of startSse that never awaits `opened` sees the failure as an ended stream
  const stream: SseStream = {
    opened,
    status: 0,
    headers: {},
    body: '',
    messages: [],
    ended: false,
    closed,
    waitFor: (match) =>
      until(
        () => stream.messages.find(match),
        () => {
          throw new Error(`the stream ended without a matching message; got ${JSON.stringify(stream.messages)}`);
        },
      ),
    next: () =>
      until(
        () => (taken < stream.messages.length ? stream.messages[taken++] : undefined),
        () => undefined,
      ),
    close: () => {
      req.destroy();
      end();
    },
  };
  req.end(options.body === undefined ? undefined : JSON.stringify(options.body));
  return stream;
}

/** An SSE request to `url`, answered once its head arrived (a refused one once its whole body did). */
export async function openSse(url: string, options: SseRequest = {}): Promise<SseStream> {
  const stream = startSse(url, options);
  await stream.opened;
  return stream;
}

/** A GraphQL subscription over SSE: POST /graphql with the document and its variables, the key as a bearer. */
export function graphqlSse(
  app: { url: string },
  request: { key: string | null; query: string; variables?: Record<string, unknown>; onMessage?: (message: SseMessage) => void },
): SseStream {
  const body = { query: request.query, variables: request.variables ?? {} };
  return startSse(`${app.url}/graphql`, { method: 'POST', key: request.key, body, ...(request.onMessage ? { onMessage: request.onMessage } : {}) });
}
