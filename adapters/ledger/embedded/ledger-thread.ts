import type { RawAccount } from './ledger.ts';
import { mkdirSync } from 'node:fs';
import { Worker } from 'node:worker_threads';
import type {
  ActivityFeed,
  ActivityHandlers,
  AddressActivity,
  LatestBlockhash,
  Ledger,
  LedgerAccount,
  LedgerTransaction,
  SendOptions,
  SendResult,
  SignatureInfo,
  SignaturesForAddressOptions,
  SignatureStatus,
  SimulateOptions,
  SimulationResult,
  TokenAccountBalance,
  WaitForSignatureOptions,
} from '../../../domain/ports/ledger.ts';
import { DomainError } from '../../../domain/shared/errors.ts';
import type { RequestBounds } from '../../../domain/shared/request-bounds.ts';
import type { Network } from '../../../domain/shared/network.ts';
import type { FaucetLedger } from './faucet.ts';
import { acquireLock } from './files.ts';
import type { MintResult } from './ledger.ts';
import type { PubSubLimits } from './pubsub.ts';
import { bundledWorker } from './thread-bundle.ts';
import { deserializeError, type FromThread, type LedgerThreadData, type Reply, type ThreadMethod, type ToThread } from './thread-protocol.ts';

// An embedded ledger run off the main thread (200 sockets × 100 accountSubscribe stalled /v1/health for
// 4.5 s when LiteSVM and its JSON-RPC server shared the gateway's event loop). The worker (thread-worker.ts) owns
// the EmbeddedLedger, its files under SVC_DATA_DIR/ledger/<network>/ and its JSON-RPC/PubSub server; this side is
// the Ledger port for the gateway and the faucet's operations, each call one message.

export interface LedgerThreadOptions {
  network: Network;
  /** this network's directory, e.g. `${dataDir}/ledger/chain-devnet` */
  dir: string;
  slotMs?: number | undefined;
  /** serve its JSON-RPC from the thread on this port (PubSub on port + 1), bound to host; omit = no server */
  rpc?:
    | { port: number; host?: string | undefined; adminSecret: string | null; limits?: PubSubLimits | undefined; bounds?: RequestBounds | undefined }
    | undefined;
  onWarning?: ((message: string) => void) | undefined;
  /** programs loaded into LiteSVM at open, in the worker (EmbeddedLedgerOptions.programs) */
  programs?: readonly { id: string; elf: Uint8Array }[] | undefined;
}

/**
 * The worker. From TypeScript sources it runs a bundle of thread-worker.ts (thread-bundle.ts: ~0.2 s of CPU to start
 * instead of ~1.5 s), else through tsx (workers do not inherit its hooks).
 */
async function startWorker(data: LedgerThreadData): Promise<Worker> {
  const entry = new URL(`./thread-worker${import.meta.url.endsWith('.ts') ? '.ts' : '.js'}`, import.meta.url).href;
  if (!entry.endsWith('.ts')) return new Worker(new URL(entry), { workerData: data });
  const bundle = await bundledWorker(entry);
  if (bundle) return new Worker(bundle, { workerData: data });
  const tsx = import.meta.resolve('tsx/esm/api');
  const code = `import(${JSON.stringify(tsx)}).then((tsx) => { tsx.register(); return import(${JSON.stringify(entry)}); })`;
  return new Worker(code, { eval: true, workerData: data });
}

/** One follower's share of the thread's activity. */
class ThreadFeed {
  addresses = new Set<string>();
  closed = false;
  private started = false;

  constructor(private readonly handlers: ActivityHandlers) {}

  /** true when the set gained addresses (they are followed once the worker has the new union) */
  set(addresses: readonly string[]): boolean {
    const widened = !this.started || addresses.some((a) => !this.addresses.has(a));
    this.started = true;
    this.addresses = new Set(addresses);
    return widened;
  }

  deliver(activities: AddressActivity[]): void {
    if (this.closed) return;
    for (const activity of activities) {
      const mine = activity.addresses.filter((a) => this.addresses.has(a));
      if (mine.length) this.safe(() => this.handlers.onActivity(mine.length === activity.addresses.length ? activity : { ...activity, addresses: mine }));
    }
  }

  live(): void {
    if (!this.closed) this.safe(() => this.handlers.onLive());
  }

  gap(reason: string): void {
    if (!this.closed) this.safe(() => this.handlers.onGap(reason));
  }

  private safe(f: () => void): void {
    try {
      f();
    } catch {
      // the follower's fault stays the follower's
    }
  }
}

export class LedgerThread implements Ledger, FaucetLedger {
  readonly network: Network;
  readonly dir: string;
  /** the thread's JSON-RPC, e.g. http://127.0.0.1:8899 and ws://127.0.0.1:8900; null without a server */
  readonly rpcUrl: string | null;
  readonly wsUrl: string | null;

  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (value: unknown) => void; reject: (e: Error) => void }>();
  private stopped: Error | null = null;
  private readonly exited: Promise<void>;

  private constructor(
    private readonly worker: Worker,
    options: LedgerThreadOptions,
    ready: { url: string | null; wsUrl: string | null },
    exited: Promise<void>,
  ) {
    this.network = options.network;
    this.dir = options.dir;
    this.rpcUrl = ready.url;
    this.wsUrl = ready.wsUrl;
    this.exited = exited;
  }

  /** Starts the thread and opens the ledger in it; rejects as EmbeddedLedger.open does (LedgerLockedError, …). */
  static async open(options: LedgerThreadOptions): Promise<LedgerThread> {
    // The LOCK is taken here, not in the worker: this thread's registry of held directories is the one that
    // lockHolder() (joinLedgers, runFaucet) consults, and the lock must outlive a crashed worker until it is gone.
    mkdirSync(options.dir, { recursive: true, mode: 0o700 });
    const releaseLock = acquireLock(options.dir);
    let worker: Worker;
    try {
      worker = await startWorker({
        network: options.network,
        dir: options.dir,
        slotMs: options.slotMs,
        lockHeld: true,
        rpc: options.rpc ?? null,
        programs: options.programs ?? [],
      });
    } catch (e) {
      releaseLock();
      throw e;
    }
    const warn = options.onWarning ?? (() => {});
    let thread: LedgerThread | undefined;
    let settle: { resolve: (t: LedgerThread) => void; reject: (e: Error) => void };
    const opened = new Promise<LedgerThread>((resolve, reject) => (settle = { resolve, reject }));
    const exited = new Promise<void>((resolve) =>
      worker.once('exit', () => {
        releaseLock();
        resolve();
      }),
    );
    worker.on('message', (message: FromThread) => {
      if (message.type === 'ready') {
        thread = new LedgerThread(worker, options, message, exited);
        settle.resolve(thread);
      } else if (message.type === 'failed') settle.reject(deserializeError(message.error));
      else if (message.type === 'warning') warn(message.message);
      else if (message.type === 'activity') thread?.deliver(message.activities);
      else for (const reply of message.replies) thread?.settle(reply);
    });
    worker.on('error', (e) => {
      warn(`the ${options.network} ledger thread failed: ${e.message}`);
      settle.reject(e);
      thread?.stop(e);
    });
    worker.once('exit', (code) => {
      const e = new Error(`the ${options.network} ledger thread exited (${code})`);
      settle.reject(e);
      thread?.stop(e);
    });
    return opened;
  }

  private settle(message: Reply): void {
    const call = this.pending.get(message.id);
    if (!call) return;
    this.pending.delete(message.id);
    if (message.ok) call.resolve(message.value);
    else call.reject(deserializeError(message.error));
  }

  private stop(cause: Error): void {
    const first = this.stopped === null;
    this.stopped ??= cause;
    if (first) for (const feed of this.feeds) feed.gap(`the ${this.network} ledger thread stopped`);
    for (const call of this.pending.values()) call.reject(this.unavailable());
    this.pending.clear();
  }

  private unavailable(): DomainError {
    return new DomainError('rpc_unavailable', `the ${this.network} ledger is not running: ${this.stopped?.message ?? 'closed'}`);
  }

  /** the calls made in this turn of the event loop, posted together at its end (thread-protocol.ts) */
  private outbox: ToThread = [];

  private readonly flush = (): void => {
    const calls = this.outbox;
    this.outbox = [];
    if (calls.length && !this.stopped) this.worker.postMessage(calls);
  };

  private call<T>(method: ThreadMethod | 'close' | 'follow', args: unknown[] = []): Promise<T> {
    if (this.stopped) return Promise.reject(this.unavailable());
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (value: unknown) => void, reject });
      if (this.outbox.length === 0) setImmediate(this.flush);
      this.outbox.push(method === 'close' ? { id, method } : method === 'follow' ? { id, method, args: [args[0] as string[]] } : { id, method, args });
    });
  }

  // ---- the Ledger port ----

  getLatestBlockhash(): Promise<LatestBlockhash> {
    return this.call('getLatestBlockhash');
  }
  isBlockhashValid(blockhash: string): Promise<boolean> {
    return this.call('isBlockhashValid', [blockhash]);
  }
  getBlockHeight(): Promise<number> {
    return this.call('getBlockHeight');
  }
  getSlot(): Promise<number> {
    return this.call('getSlot');
  }
  getAccount(address: string): Promise<LedgerAccount | null> {
    return this.call('getAccount', [address]);
  }
  getMultipleAccounts(addresses: string[]): Promise<(LedgerAccount | null)[]> {
    return this.call('getMultipleAccounts', [addresses]);
  }
  getBalance(address: string): Promise<bigint> {
    return this.call('getBalance', [address]);
  }
  getTokenBalances(owner: string, filter: { mint?: string } = {}): Promise<TokenAccountBalance[]> {
    return this.call('getTokenBalances', [owner, filter]);
  }
  simulateTransaction(wire: Uint8Array, options: SimulateOptions = {}): Promise<SimulationResult> {
    return this.call('simulateTransaction', [wire, options]);
  }
  sendTransaction(wire: Uint8Array, options: SendOptions = {}): Promise<SendResult> {
    return this.call('sendTransaction', [wire, options]);
  }
  getSignatureStatuses(signatures: string[]): Promise<(SignatureStatus | null)[]> {
    return this.call('getSignatureStatuses', [signatures]);
  }
  /** Answered by the thread when the signature's commit happens there (one message each way, no polling). */
  waitForSignature(signature: string, options: WaitForSignatureOptions): Promise<SignatureStatus | null> {
    return this.call('waitForSignature', [signature, options]);
  }
  getSignaturesForAddress(address: string, options: SignaturesForAddressOptions = {}): Promise<SignatureInfo[]> {
    return this.call('getSignaturesForAddress', [address, options]);
  }
  getTransaction(signature: string): Promise<LedgerTransaction | null> {
    return this.call('getTransaction', [signature]);
  }

  // ---- notifications: the worker posts the activity of the union of the feeds' addresses ----

  private readonly feeds = new Set<ThreadFeed>();

  /** Each feed gets the activity of its own addresses; onLive once the worker follows what it asked for. */
  followAddresses(handlers: ActivityHandlers): ActivityFeed {
    const feed = new ThreadFeed(handlers);
    this.feeds.add(feed);
    return {
      follow: (addresses) => {
        const widened = feed.set(addresses);
        const union = new Set<string>();
        for (const f of this.feeds) for (const a of f.addresses) union.add(a);
        this.call('follow', [[...union]]).then(
          () => {
            if (widened) feed.live();
          },
          (e: Error) => feed.gap(e.message),
        );
      },
      close: () => {
        this.feeds.delete(feed);
        feed.closed = true;
        if (!this.stopped) {
          const union = new Set<string>();
          for (const f of this.feeds) for (const a of f.addresses) union.add(a);
          this.call('follow', [[...union]]).catch(() => undefined);
        }
      },
    };
  }

  private deliver(activities: AddressActivity[]): void {
    for (const feed of this.feeds) feed.deliver(activities);
  }

  // ---- the faucet and dev tooling ----

  airdrop(to: string, lamports: bigint): Promise<string> {
    return this.call('airdrop', [to, lamports]);
  }
  mintTo(owner: string, mint: string, amount: bigint): Promise<MintResult> {
    return this.call('mintTo', [owner, mint, amount]);
  }
  decimalsOf(mint: string): Promise<number | undefined> {
    return this.call('decimalsOf', [mint]);
  }
  /** moves the slot clock forward (tests, dev tooling) */
  advance(slots: number): Promise<void> {
    return this.call('advance', [slots]);
  }
  /** writes an account outside any transaction, as genesis or a program deployment does (tests, dev tooling) */
  setAccount(address: string, account: RawAccount): Promise<void> {
    return this.call('setAccount', [address, account]);
  }

  /** Stops the server, saves a final snapshot, releases the directory and ends the thread. */
  async close(): Promise<void> {
    if (!this.stopped) {
      await this.call('close').catch(() => {});
      this.stop(new Error('closed'));
    }
    const cut = setTimeout(() => void this.worker.terminate(), 10_000);
    await this.exited;
    clearTimeout(cut);
  }
}
