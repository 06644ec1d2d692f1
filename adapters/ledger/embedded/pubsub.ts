import type { WebSocket } from 'ws';
import type { Commitment } from '../../../domain/ports/ledger.ts';
import { toJson } from './json.ts';
import type { EmbeddedLedger, LandedTransaction } from './ledger.ts';
import { accountEncoding, address, config, errorObject, signature, validId, type JsonRpcRequest } from './rpc-methods.ts';
import { encodeAccount, invalidParams, RpcError, type AccountEncoding } from './rpc-encode.ts';
import { parseFilters, type AccountFilter } from './rpc-filters.ts';

// Solana PubSub over WebSocket for the embedded ledger: signature, account, program, logs, slot and root
// subscriptions, with caps per socket and per client (rpc-server.ts attaches each accepted socket). Account, program
// and logs notifications go out as the transaction executes (processed), whatever commitment was asked; signature
// notifications wait for the level asked.

/** JSON-RPC server-error range: a PubSub cap was reached (subscriptions per socket, sockets per client) */
export const LIMIT_REACHED = -32098;

/** Caps of the PubSub server, so one client cannot make the ledger's thread work for everyone's subscriptions. */
export interface PubSubLimits {
  /** subscriptions one WebSocket may hold at once (default 256) */
  subscriptionsPerSocket?: number | undefined;
  /** WebSockets open at once from one client address (default 64) */
  socketsPerClient?: number | undefined;
}
export const DEFAULT_LIMITS: Required<PubSubLimits> = { subscriptionsPerSocket: 256, socketsPerClient: 64 };

// ---- PubSub over WebSocket ----

type Level = Commitment;
const RANK: Record<Level, number> = { processed: 0, confirmed: 1, finalized: 2 };
const level = (value: unknown): Level =>
  value === 'processed' || value === 'confirmed'
    ? value
    : value === 'recent'
      ? 'processed'
      : value === 'single' || value === 'singleGossip'
        ? 'confirmed'
        : 'finalized';

type Subscription =
  | { kind: 'signature'; socket: WebSocket; signature: string; level: Level }
  | { kind: 'account'; socket: WebSocket; address: string; encoding: AccountEncoding }
  | { kind: 'program'; socket: WebSocket; program: string; encoding: AccountEncoding; filter: AccountFilter }
  /** mentions: null = every transaction ('all', 'allWithVotes': this ledger has no votes) */
  | { kind: 'logs'; socket: WebSocket; mentions: string | null }
  | { kind: 'slot' | 'root'; socket: WebSocket };

export class PubSub {
  private nextId = 1;
  private readonly subs = new Map<number, Subscription>();
  private readonly bySignature = new Map<string, Set<number>>();
  private readonly byAccount = new Map<string, Set<number>>();
  private readonly slotSubs = new Set<number>();
  private readonly byProgram = new Map<string, Set<number>>();
  private readonly logSubs = new Set<number>();
  /** landed signatures whose subscribers wait for a higher commitment */
  private waiting: { id: number; seq: number; slot: number; err: unknown }[] = [];
  private slotTimer: NodeJS.Timeout | undefined;
  private lastSlot = -1;
  private readonly unlisten: () => void;
  private readonly unlistenCommit: () => void;

  /** each socket's subscription ids */
  private readonly ofSocket = new WeakMap<WebSocket, Set<number>>();
  /** open sockets per client address */
  private readonly sockets = new Map<string, number>();

  constructor(
    private readonly ledger: EmbeddedLedger,
    private readonly limits: Required<PubSubLimits>,
  ) {
    this.unlisten = ledger.onTransaction((landed) => {
      const sigSubs = this.bySignature.get(landed.signature);
      if (sigSubs) {
        for (const id of sigSubs) {
          const sub = this.subs.get(id);
          if (sub?.kind !== 'signature') continue;
          if (sub.level === 'processed') this.notifySignature(id, landed.slot, landed.err);
          else this.waiting.push({ id, seq: landed.seq, slot: landed.slot, err: landed.err });
        }
        this.bySignature.delete(landed.signature);
      }
      if (this.byAccount.size) {
        for (const address of landed.writable) {
          const ids = this.byAccount.get(address);
          if (!ids) continue;
          const account = ledger.readAccount(address);
          for (const id of ids) {
            const sub = this.subs.get(id);
            if (sub?.kind !== 'account') continue;
            const value = account
              ? encodeAccount(ledger, account, sub.encoding)
              : { data: ['', 'base64'], executable: false, lamports: 0, owner: '11111111111111111111111111111111', rentEpoch: 0, space: 0 };
            this.notify(sub.socket, 'accountNotification', id, { context: { slot: landed.slot }, value });
          }
        }
      }
      if (this.byProgram.size) this.notifyPrograms(landed.slot, landed.writable);
      if (this.logSubs.size) this.notifyLogs(landed);
    });
    this.unlistenCommit = ledger.onCommit((reached, seq) => this.onCommit(reached, seq));
  }

  /** programNotification for each written account a subscribed program owns (and that passes the filters) */
  private notifyPrograms(slot: number, writable: string[]): void {
    for (const address of writable) {
      const account = this.ledger.readAccount(address);
      if (!account) continue;
      const ids = this.byProgram.get(account.owner);
      if (!ids) continue;
      for (const id of ids) {
        const sub = this.subs.get(id);
        if (sub?.kind !== 'program' || !sub.filter(account.data)) continue;
        let value: unknown;
        try {
          value = { account: encodeAccount(this.ledger, account, sub.encoding), pubkey: address };
        } catch {
          continue; // data too long for the base58 the subscription asked for: agave skips it as well
        }
        this.notify(sub.socket, 'programNotification', id, { context: { slot }, value });
      }
    }
  }

  private notifyLogs(landed: LandedTransaction): void {
    let keys: Set<string> | undefined;
    for (const id of this.logSubs) {
      const sub = this.subs.get(id);
      if (sub?.kind !== 'logs') continue;
      if (sub.mentions !== null) {
        keys ??= new Set(landed.keys);
        if (!keys.has(sub.mentions)) continue;
      }
      this.notify(sub.socket, 'logsNotification', id, {
        context: { slot: landed.slot },
        value: { err: landed.err, logs: landed.logs, signature: landed.signature },
      });
    }
  }

  private onCommit(reached: Level, seq: number): void {
    if (!this.waiting.length) return;
    const still: typeof this.waiting = [];
    for (const w of this.waiting) {
      const sub = this.subs.get(w.id);
      if (sub?.kind !== 'signature') continue;
      if (w.seq <= seq && RANK[sub.level] <= RANK[reached]) this.notifySignature(w.id, w.slot, w.err);
      else still.push(w);
    }
    this.waiting = still;
  }

  private notifySignature(id: number, slot: number, err: unknown): void {
    const sub = this.subs.get(id);
    if (!sub) return;
    this.notify(sub.socket, 'signatureNotification', id, { context: { slot }, value: { err } });
    this.subs.delete(id);
    this.ofSocket.get(sub.socket)?.delete(id); // a signature subscription ends with its notification
  }

  attach(socket: WebSocket, client: string): void {
    const open = this.sockets.get(client) ?? 0;
    if (open >= this.limits.socketsPerClient) {
      socket.on('error', () => socket.terminate());
      this.send(
        socket,
        errorObject(null, new RpcError(LIMIT_REACHED, `Too many WebSocket connections from this client (max ${this.limits.socketsPerClient})`)),
      );
      return void socket.close(1008, 'too many connections');
    }
    this.sockets.set(client, open + 1);
    socket.once('close', () => {
      const left = (this.sockets.get(client) ?? 1) - 1;
      if (left > 0) this.sockets.set(client, left);
      else this.sockets.delete(client);
    });
    const mine = new Set<number>();
    this.ofSocket.set(socket, mine);
    // a bad frame (invalid UTF-8, over maxPayload) is an 'error' on the socket: close it, never throw
    socket.on('error', () => socket.terminate());
    socket.on('message', (raw) => {
      try {
        this.onMessage(socket, raw.toString(), mine);
      } catch {
        this.send(socket, errorObject(null, new RpcError(-32603, 'Internal error')));
      }
    });
    socket.on('close', () => {
      for (const id of mine) this.remove(id);
    });
  }

  private onMessage(socket: WebSocket, text: string, mine: Set<number>): void {
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      this.send(socket, errorObject(null, new RpcError(-32700, 'Parse error')));
      return;
    }
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
      this.send(socket, errorObject(null, new RpcError(-32600, 'Invalid request')));
      return;
    }
    const request = parsed as JsonRpcRequest;
    if (request.id === undefined) return; // notifications (pings)
    if (!validId(request.id)) {
      this.send(socket, errorObject(null, new RpcError(-32600, 'Invalid request')));
      return;
    }
    try {
      const result = this.call(socket, request, mine);
      this.send(socket, { jsonrpc: '2.0', result, id: request.id });
      this.afterSubscribe(result, request);
    } catch (e) {
      this.send(socket, errorObject(request.id, e instanceof RpcError ? e : new RpcError(-32603, (e as Error).message)));
    }
  }

  private send(socket: WebSocket, message: unknown): void {
    if (socket.readyState === socket.OPEN) socket.send(toJson(message));
  }

  private call(socket: WebSocket, request: JsonRpcRequest, mine: Set<number>): unknown {
    const params = Array.isArray(request.params) ? request.params : [];
    const add = (sub: Subscription) => {
      if (mine.size >= this.limits.subscriptionsPerSocket) {
        throw new RpcError(
          LIMIT_REACHED,
          `Too many subscriptions on this socket (max ${this.limits.subscriptionsPerSocket}); unsubscribe or open another socket`,
        );
      }
      const id = this.nextId++;
      this.subs.set(id, sub);
      mine.add(id);
      return id;
    };
    switch (request.method) {
      case 'signatureSubscribe': {
        const s = signature(params[0]);
        const id = add({ kind: 'signature', socket, signature: s, level: level(config(params, 1).commitment) });
        let set = this.bySignature.get(s);
        if (!set) {
          set = new Set();
          this.bySignature.set(s, set);
        }
        set.add(id);
        return id;
      }
      case 'accountSubscribe': {
        const a = address(params[0]);
        const id = add({ kind: 'account', socket, address: a, encoding: accountEncoding({ encoding: config(params, 1).encoding ?? 'base64' }) });
        let set = this.byAccount.get(a);
        if (!set) {
          set = new Set();
          this.byAccount.set(a, set);
        }
        set.add(id);
        return id;
      }
      case 'programSubscribe': {
        const program = address(params[0]);
        const c = config(params, 1);
        const id = add({ kind: 'program', socket, program, encoding: accountEncoding({ encoding: c.encoding ?? 'base64' }), filter: parseFilters(c.filters) });
        let set = this.byProgram.get(program);
        if (!set) {
          set = new Set();
          this.byProgram.set(program, set);
        }
        set.add(id);
        return id;
      }
      case 'logsSubscribe': {
        const filter = params[0];
        let mentions: string | null = null;
        if (filter === 'all' || filter === 'allWithVotes') mentions = null;
        else if (filter !== null && typeof filter === 'object' && Array.isArray((filter as { mentions?: unknown }).mentions)) {
          const list = (filter as { mentions: unknown[] }).mentions;
          if (list.length !== 1) throw invalidParams('Invalid Request: Only 1 address supported');
          mentions = address(list[0]);
        } else throw invalidParams('Invalid params: expected "all", "allWithVotes" or { mentions: [address] }');
        config(params, 1);
        const id = add({ kind: 'logs', socket, mentions });
        this.logSubs.add(id);
        return id;
      }
      case 'slotSubscribe':
      case 'rootSubscribe': {
        const id = add({ kind: request.method === 'slotSubscribe' ? 'slot' : 'root', socket });
        this.slotSubs.add(id);
        this.startSlots();
        return id;
      }
      case 'signatureUnsubscribe':
      case 'accountUnsubscribe':
      case 'programUnsubscribe':
      case 'logsUnsubscribe':
      case 'slotUnsubscribe':
      case 'rootUnsubscribe': {
        const id = params[0];
        if (typeof id !== 'number' || !mine.has(id)) throw invalidParams('Invalid subscription id.');
        this.remove(id);
        mine.delete(id);
        return true;
      }
      default:
        throw new RpcError(-32601, 'Method not found');
    }
  }

  /** A signature that already landed is notified right after its subscription. */
  private afterSubscribe(result: unknown, request: JsonRpcRequest): void {
    if (request.method !== 'signatureSubscribe' || typeof result !== 'number') return;
    const sub = this.subs.get(result);
    if (sub?.kind !== 'signature') return;
    const status = this.ledger.signatureStatus(sub.signature);
    if (!status) return;
    this.bySignature.get(sub.signature)?.delete(result);
    if (RANK[status.confirmationStatus] >= RANK[sub.level]) this.notifySignature(result, status.slot, status.err);
    else this.waiting.push({ id: result, seq: status.seq, slot: status.slot, err: status.err });
  }

  private remove(id: number): void {
    const sub = this.subs.get(id);
    if (!sub) return;
    this.subs.delete(id);
    if (sub.kind === 'signature') {
      const set = this.bySignature.get(sub.signature);
      set?.delete(id);
      if (set?.size === 0) this.bySignature.delete(sub.signature);
    } else if (sub.kind === 'account') {
      const set = this.byAccount.get(sub.address);
      set?.delete(id);
      if (set?.size === 0) this.byAccount.delete(sub.address);
    } else if (sub.kind === 'program') {
      const set = this.byProgram.get(sub.program);
      set?.delete(id);
      if (set?.size === 0) this.byProgram.delete(sub.program);
    } else if (sub.kind === 'logs') {
      this.logSubs.delete(id);
    } else {
      this.slotSubs.delete(id);
      if (this.slotSubs.size === 0 && this.slotTimer) {
        clearInterval(this.slotTimer);
        this.slotTimer = undefined;
      }
    }
  }

  private startSlots(): void {
    if (this.slotTimer) return;
    this.lastSlot = this.ledger.slot();
    this.slotTimer = setInterval(
      () => {
        const slot = this.ledger.slot();
        if (slot === this.lastSlot) return;
        this.lastSlot = slot;
        for (const id of this.slotSubs) {
          const sub = this.subs.get(id);
          if (!sub) continue;
          if (sub.kind === 'slot') this.notify(sub.socket, 'slotNotification', id, { parent: Math.max(slot - 1, 0), root: slot, slot });
          else this.notify(sub.socket, 'rootNotification', id, slot);
        }
      },
      Math.min(this.ledger.slotMs || 100, 400),
    );
    this.slotTimer.unref();
  }

  private notify(socket: WebSocket, method: string, subscription: number, result: unknown): void {
    if (socket.readyState === socket.OPEN) socket.send(toJson({ jsonrpc: '2.0', method, params: { result, subscription } }));
  }

  close(): void {
    this.unlisten();
    this.unlistenCommit();
    if (this.slotTimer) clearInterval(this.slotTimer);
    this.subs.clear();
  }
}
