import WebSocket from 'ws';

// A Solana PubSub client (signatureSubscribe, logsSubscribe, …) over one or more WebSockets to a node: subscriptions
// are spread over sockets of at most `perSocket` each (nodes cap them per socket), a socket opens on first use and
// closes once idle. A socket that closes, errs or stops answering pings drops every subscription on it (each is told
// once, onDrop); the caller decides whether to subscribe again. No reconnect happens here: the caller owns what a drop
// means. Nothing is printed, and every timer is unref'd and cleared when its socket ends: after close() nothing keeps
// the process alive.

export interface PubSubHandlers {
  /** the subscription's notifications (`params.result`) */
  onNotification(result: unknown): void;
  /** the node answered the subscribe: notifications follow from here on */
  onSubscribed?(): void;
  /** the subscription ended without being closed by its owner: socket closed, connect failed, subscribe refused */
  onDrop(reason: string): void;
}

export interface PubSubSubscription {
  close(): void;
}

/** a node's per-socket cap is commonly a few hundred; the embedded ledger's is 256 */
const PER_SOCKET = 200;
/** an idle socket is kept this long for the next subscription */
const IDLE_MS = 30_000;
/** a connect unanswered this long drops its subscriptions (the caller falls back to polling) */
const ANSWER_MS = 5_000;
/**
 * A socket is pinged this often and dropped when the previous ping got no pong: a half-open connection (a node or a
 * middlebox gone without a FIN) would otherwise look live forever while nothing is notified.
 */
const PING_MS = 10_000;

interface Sub {
  method: string;
  params: unknown[];
  unsubscribe: string;
  handlers: PubSubHandlers;
  /** the node's id once subscribed */
  id: number | null;
  closed: boolean;
}

class Socket {
  readonly ws: WebSocket;
  readonly subs = new Set<Sub>();
  private readonly byRequest = new Map<number, Sub>();
  private readonly byId = new Map<number, Sub>();
  private nextRequest = 1;
  private open = false;
  dead = false;
  private idle: NodeJS.Timeout | undefined;
  private readonly answerTimer: NodeJS.Timeout;
  private heartbeat: NodeJS.Timeout | undefined;
  private ponged = true;

  constructor(
    url: string,
    private readonly onDead: (socket: Socket) => void,
  ) {
    this.ws = new WebSocket(url, { handshakeTimeout: ANSWER_MS });
    this.answerTimer = setTimeout(() => this.die('no answer from the node'), ANSWER_MS);
    this.answerTimer.unref();
    this.ws.on('open', () => {
      this.open = true;
      clearTimeout(this.answerTimer);
      this.heartbeat = setInterval(() => {
        if (!this.ponged) return this.die('no pong from the node');
        this.ponged = false;
        if (this.ws.readyState === WebSocket.OPEN) this.ws.ping();
      }, PING_MS);
      this.heartbeat.unref();
      for (const sub of this.subs) this.request(sub);
    });
    this.ws.on('pong', () => {
      this.ponged = true;
    });
    this.ws.on('message', (raw) => this.onMessage(raw.toString()));
    this.ws.on('error', (e) => this.die(e.message));
    this.ws.on('close', (code) => this.die(`socket closed (${code})`));
  }

  add(sub: Sub): void {
    if (this.idle) clearTimeout(this.idle);
    this.idle = undefined;
    this.subs.add(sub);
    if (this.open) this.request(sub);
  }

  remove(sub: Sub): void {
    if (!this.subs.delete(sub)) return;
    if (sub.id !== null) {
      this.byId.delete(sub.id);
      if (this.open) this.send({ jsonrpc: '2.0', id: this.nextRequest++, method: sub.unsubscribe, params: [sub.id] });
    }
    this.idleIfEmpty();
  }

  private idleIfEmpty(): void {
    if (this.subs.size > 0 || this.dead || this.idle) return;
    this.idle = setTimeout(() => this.die('idle'), IDLE_MS);
    this.idle.unref();
  }

  private request(sub: Sub): void {
    const id = this.nextRequest++;
    this.byRequest.set(id, sub);
    this.send({ jsonrpc: '2.0', id, method: sub.method, params: sub.params });
  }

  private send(message: unknown): void {
    if (this.ws.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(message));
  }

  private onMessage(text: string): void {
    let message: { id?: number; result?: unknown; error?: { message?: string }; method?: string; params?: { subscription?: number; result?: unknown } };
    try {
      message = JSON.parse(text);
    } catch {
      return;
    }
    if (typeof message.id === 'number') {
      const sub = this.byRequest.get(message.id);
      if (!sub) return;
      this.byRequest.delete(message.id);
      if (sub.closed || !this.subs.has(sub)) {
        if (typeof message.result === 'number') this.send({ jsonrpc: '2.0', id: this.nextRequest++, method: sub.unsubscribe, params: [message.result] });
        return;
      }
      if (typeof message.result !== 'number') {
        this.subs.delete(sub);
        this.idleIfEmpty();
        drop(sub, `subscription refused: ${message.error?.message ?? 'no id'}`);
        return;
      }
      sub.id = message.result;
      this.byId.set(sub.id, sub);
      call(() => sub.handlers.onSubscribed?.());
      return;
    }
    const subscription = message.params?.subscription;
    if (typeof subscription !== 'number') return;
    const sub = this.byId.get(subscription);
    if (!sub || sub.closed) return;
    // a signature subscription ends with its notification (the node removes it)
    if (message.method === 'signatureNotification') {
      this.byId.delete(subscription);
      this.subs.delete(sub);
      sub.closed = true;
      this.idleIfEmpty();
    }
    call(() => sub.handlers.onNotification(message.params!.result));
  }

  die(reason: string): void {
    if (this.dead) return;
    this.dead = true;
    clearTimeout(this.answerTimer);
    clearInterval(this.heartbeat);
    if (this.idle) clearTimeout(this.idle);
    this.onDead(this);
    const subs = [...this.subs];
    this.subs.clear();
    this.byId.clear();
    this.byRequest.clear();
    this.ws.terminate();
    for (const sub of subs) drop(sub, reason);
  }
}

function call(f: () => void): void {
  try {
    f();
  } catch {
    // a handler's fault stays the handler's
  }
}

function drop(sub: Sub, reason: string): void {
  if (sub.closed) return;
  sub.closed = true;
  call(() => sub.handlers.onDrop(reason));
}

export class PubSubClient {
  private readonly sockets = new Set<Socket>();
  private closed = false;

  constructor(
    readonly url: string,
    private readonly perSocket = PER_SOCKET,
  ) {}

  /** e.g. subscribe('signatureSubscribe', [signature, { commitment: 'confirmed' }], 'signatureUnsubscribe', handlers) */
  subscribe(method: string, params: unknown[], unsubscribe: string, handlers: PubSubHandlers): PubSubSubscription {
    const sub: Sub = { method, params, unsubscribe, handlers, id: null, closed: false };
    if (this.closed) {
      queueMicrotask(() => drop(sub, 'client closed'));
      return {
        close: () => {
          sub.closed = true;
        },
      };
    }
    let socket = [...this.sockets].find((s) => s.subs.size < this.perSocket);
    if (!socket) {
      socket = new Socket(this.url, (dead) => this.sockets.delete(dead));
      this.sockets.add(socket);
    }
    socket.add(sub);
    const owner = socket;
    return {
      close: () => {
        if (sub.closed) return;
        sub.closed = true;
        owner.remove(sub);
      },
    };
  }

  /** Ends every socket; their subscriptions are dropped ("client closed"). */
  close(): void {
    this.closed = true;
    for (const socket of [...this.sockets]) socket.die('client closed');
  }
}
