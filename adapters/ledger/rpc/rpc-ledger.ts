import { AsyncLocalStorage } from 'node:async_hooks';
import { Agent as HttpAgent, request as httpRequest } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { Connection, PublicKey, VersionedTransaction, type ParsedAccountData, type TokenBalance } from '@solana/web3.js';
import { getBase58Decoder, getBase58Encoder } from '@solana/kit';
import type {
  ActivityFeed,
  ActivityHandlers,
  Commitment,
  LatestBlockhash,
  Ledger,
  LedgerAccount,
  LedgerTransaction,
  LedgerTransactionError,
  SendOptions,
  SendResult,
  SignatureInfo,
  SignaturesForAddressOptions,
  SignatureStatus,
  SimulateOptions,
  SimulationResult,
  TokenAccountBalance,
  TransactionTokenBalance,
  WaitForSignatureOptions,
} from '../../../domain/ports/ledger.ts';
import { DomainError } from '../../../domain/shared/errors.ts';
import { TOKEN_2022_PROGRAM_ID, TOKEN_PROGRAM_ID } from '../../../domain/shared/network.ts';
import { PubSubClient, type PubSubSubscription } from './pubsub-client.ts';

// The Ledger port over any Solana JSON-RPC node (devnet, mainnet, a local validator, our embedded ledger's server)
// through @solana/web3.js's Connection. Every call has a deadline; transport failures become rpc_unavailable, a
// send without an answer in time becomes submit_timeout. Notifications (waitForSignature, followAddresses) come over
// the node's PubSub WebSocket (pubsub-client.ts), with polling over HTTP wherever the socket is not there.

export interface RpcLedgerOptions {
  /** e.g. https://api.devnet.solana.com */
  url: string;
  /** commitment of reads (default confirmed) */
  commitment?: Exclude<Commitment, 'processed'>;
  /** deadline of a read, default 10 s */
  readTimeoutMs?: number;
  /** deadline of sendTransaction, default 15 s */
  sendTimeoutMs?: number;
  httpHeaders?: Record<string, string>;
  /**
   * the node's PubSub WebSocket; default as web3.js derives it: ws(s) on the same host, port + 1 when the URL names a
   * port (agave's layout, which the embedded ledger's server follows), the same port otherwise
   */
  wsUrl?: string;
}

/** web3.js's rule (makeWebsocketUrl): http → ws, https → wss, an explicit port + 1. */
export function pubSubUrlOf(url: string): string {
  const u = new URL(url);
  u.protocol = u.protocol === 'https:' ? 'wss:' : 'ws:';
  if (u.port !== '') u.port = String(Number(u.port) + 1);
  return u.toString();
}

interface CallContext {
  failure?: { kind: 'timeout' | 'network' | 'http'; message: string };
}

interface RawRpcResponse {
  result?: unknown;
  error?: { code: number; message: string; data?: { err?: LedgerTransactionError; logs?: string[] | null } };
}

const base58Text = getBase58Decoder(); // bytes → text
const base58Bytes = getBase58Encoder(); // text → bytes

function isAddress(value: string): boolean {
  try {
    return typeof value === 'string' && value.length >= 32 && value.length <= 44 && base58Bytes.encode(value).length === 32;
  } catch {
    return false;
  }
}

function isSignature(value: string): boolean {
  try {
    return typeof value === 'string' && value.length >= 64 && value.length <= 88 && base58Bytes.encode(value).length === 64;
  } catch {
    return false;
  }
}

/** The transaction's own signature: the first of its signatures (a one-byte count, then 64-byte signatures). */
function firstSignature(wire: Uint8Array): string | null {
  return wire.length > 65 && wire[0]! >= 1 && wire[0]! < 0x80 ? base58Text.decode(wire.subarray(1, 65)) : null;
}

function chunks<T>(items: T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

/** how often waitForSignature asks the node while its WebSocket is not there */
const SIGNATURE_POLL_MS = 100;
/** after a dropped or refused address subscription, the first try again; doubling up to RESUBSCRIBE_MAX_MS */
const RESUBSCRIBE_MS = 250;
const RESUBSCRIBE_MAX_MS = 10_000;
const RANK: Record<Commitment, number> = { processed: 0, confirmed: 1, finalized: 2 };

export class RpcLedger implements Ledger {
  readonly url: string;
  private readonly connection: Connection;
  private readonly commitment: Exclude<Commitment, 'processed'>;
  private readonly context = new AsyncLocalStorage<CallContext>();
  private readonly rawRequest: (method: string, params: unknown[]) => Promise<RawRpcResponse>;
  private readonly agent: HttpAgent;
  readonly wsUrl: string;
  private pubsub: PubSubClient | undefined;

  constructor(options: RpcLedgerOptions) {
    this.url = options.url;
    this.wsUrl = options.wsUrl ?? pubSubUrlOf(options.url);
    this.commitment = options.commitment ?? 'confirmed';
    const readTimeoutMs = options.readTimeoutMs ?? 10_000;
    const sendTimeoutMs = options.sendTimeoutMs ?? 15_000;
    const context = this.context;
    const agent = options.url.startsWith('https:') ? new HttpsAgent({ keepAlive: true, maxSockets: 64 }) : new HttpAgent({ keepAlive: true, maxSockets: 64 });
    this.agent = agent;
    // web3.js's transport, over node:http with a keep-alive agent: every ledger read takes it, and Node's global fetch
    // costs several times more CPU per call. The deadline covers the whole exchange, body included.
    const timedFetch = (input: Parameters<typeof fetch>[0], init?: Parameters<typeof fetch>[1]): Promise<Response> => {
      const ctx = context.getStore();
      const body = typeof init?.body === 'string' ? init.body : '';
      const ms = body.includes('"method":"sendTransaction"') ? sendTimeoutMs : readTimeoutMs;
      return new Promise<Response>((resolve, reject) => {
        const fail = (kind: 'timeout' | 'network', e: Error) => {
          if (ctx && !ctx.failure) ctx.failure = { kind, message: kind === 'timeout' ? `no answer within ${ms} ms` : e.message };
          reject(e);
        };
        const url = new URL(String(input));
        const request = (url.protocol === 'https:' ? httpsRequest : httpRequest)(
          url,
          { method: 'POST', agent, headers: { ...(init?.headers as Record<string, string>), 'content-length': String(Buffer.byteLength(body)) } },
          (res) => {
            const chunks: Buffer[] = [];
            res.on('data', (c: Buffer) => chunks.push(c));
            res.on('error', (e) => fail('network', e));
            res.on('end', () => {
              clearTimeout(timer);
              const text = Buffer.concat(chunks).toString('utf8');
              const status = res.statusCode ?? 0;
              if ((status < 200 || status > 299) && ctx) ctx.failure = { kind: 'http', message: `HTTP ${status}` };
              // what web3.js reads of a Response
              resolve({
                ok: status >= 200 && status <= 299,
                status,
                statusText: res.statusMessage ?? '',
                text: async () => text,
                json: async () => JSON.parse(text),
              } as Response);
            });
          },
        );
        const timer = setTimeout(() => {
          fail('timeout', new Error(`no answer within ${ms} ms`));
          request.destroy();
        }, ms);
        request.on('error', (e) => {
          clearTimeout(timer);
          fail('network', e);
        });
        request.end(body);
      });
    };
    this.connection = new Connection(options.url, {
      commitment: this.commitment,
      fetch: timedFetch as typeof fetch,
      disableRetryOnRateLimit: true,
      httpHeaders: options.httpHeaders,
    });
    // web3.js's sendRawTransaction and simulateTransaction drop the RPC error's data.err; the raw request keeps it.
    const raw = (this.connection as unknown as { _rpcRequest?: (method: string, params: unknown[]) => Promise<RawRpcResponse> })._rpcRequest;
    if (typeof raw !== 'function') throw new Error('this @solana/web3.js Connection has no _rpcRequest');
    this.rawRequest = raw.bind(this.connection);
  }

  /** Runs one RPC exchange and maps its failure to the port's errors. */
  private async call<T>(method: string, work: () => Promise<T>, send?: { signature: string | null }): Promise<T> {
    const ctx: CallContext = {};
    try {
      return await this.context.run(ctx, work);
    } catch (e) {
      if (e instanceof DomainError) throw e;
      const failure = ctx.failure;
      if (send && failure?.kind === 'timeout') {
        throw new DomainError('submit_timeout', `The Solana RPC did not answer sendTransaction in time; the transaction may still land.`, {
          method,
          signature: send.signature,
        });
      }
      const reason = failure?.message ?? (e as Error).message;
      throw new DomainError('rpc_unavailable', `The Solana RPC failed on ${method}: ${reason}`, { method, reason: failure?.kind ?? 'error' });
    }
  }

  /**
   * Releases kept-alive sockets and the PubSub WebSockets: waits in flight answer the status as it is, feeds stop (no
   * reconnect, no timer left behind), so nothing keeps the process alive.
   */
  close(): void {
    this.closed = true;
    this.agent.destroy();
    this.pubsub?.close();
  }

  private closed = false;

  /** the PubSub client, opened on first use; a closed ledger's refuses every subscription ("client closed") */
  private subscriptions(): PubSubClient {
    this.pubsub ??= new PubSubClient(this.wsUrl);
    if (this.closed) this.pubsub.close();
    return this.pubsub;
  }

  getLatestBlockhash(): Promise<LatestBlockhash> {
    return this.call('getLatestBlockhash', async () => {
      const { context, value } = await this.connection.getLatestBlockhashAndContext({ commitment: this.commitment });
      return { blockhash: value.blockhash, lastValidBlockHeight: value.lastValidBlockHeight, slot: context.slot };
    });
  }

  async isBlockhashValid(blockhash: string): Promise<boolean> {
    if (!isAddress(blockhash)) return false;
    return this.call('isBlockhashValid', async () => (await this.connection.isBlockhashValid(blockhash, { commitment: this.commitment })).value);
  }

  getBlockHeight(): Promise<number> {
    return this.call('getBlockHeight', () => this.connection.getBlockHeight(this.commitment));
  }

  getSlot(): Promise<number> {
    return this.call('getSlot', () => this.connection.getSlot(this.commitment));
  }

  async getAccount(address: string): Promise<LedgerAccount | null> {
    return (await this.getMultipleAccounts([address]))[0] ?? null;
  }

  async getMultipleAccounts(addresses: string[]): Promise<(LedgerAccount | null)[]> {
    const valid = addresses.filter(isAddress);
    const found = new Map<string, LedgerAccount | null>();
    await this.call('getMultipleAccounts', async () => {
      for (const batch of chunks(valid, 100)) {
        const infos = await this.connection.getMultipleAccountsInfo(
          batch.map((a) => new PublicKey(a)),
          { commitment: this.commitment },
        );
        batch.forEach((address, i) => {
          const info = infos[i];
          found.set(
            address,
            info
              ? { address, lamports: BigInt(info.lamports), owner: info.owner.toBase58(), data: new Uint8Array(info.data), executable: info.executable }
              : null,
          );
        });
      }
    });
    return addresses.map((a) => found.get(a) ?? null);
  }

  async getBalance(address: string): Promise<bigint> {
    if (!isAddress(address)) return 0n;
    return this.call('getBalance', async () => BigInt(await this.connection.getBalance(new PublicKey(address), { commitment: this.commitment })));
  }

  async getTokenBalances(owner: string, filter: { mint?: string } = {}): Promise<TokenAccountBalance[]> {
    if (!isAddress(owner) || (filter.mint !== undefined && !isAddress(filter.mint))) return [];
    const ownerKey = new PublicKey(owner);
    const filters = filter.mint
      ? [{ mint: new PublicKey(filter.mint) }]
      : [{ programId: new PublicKey(TOKEN_PROGRAM_ID) }, { programId: new PublicKey(TOKEN_2022_PROGRAM_ID) }];
    const lists = await this.call('getTokenAccountsByOwner', () =>
      Promise.all(filters.map((f) => this.connection.getParsedTokenAccountsByOwner(ownerKey, f, this.commitment))),
    );
    const out: TokenAccountBalance[] = [];
    for (const { value } of lists) {
      for (const { pubkey, account } of value) {
        const data = account.data as ParsedAccountData;
        const info = (data.parsed as { info?: { mint: string; owner: string; tokenAmount: { amount: string; decimals: number } } })?.info;
        if (!info?.tokenAmount) continue;
        out.push({
          address: pubkey.toBase58(),
          mint: info.mint,
          owner: info.owner,
          amount: BigInt(info.tokenAmount.amount),
          decimals: info.tokenAmount.decimals,
          tokenProgram: account.owner.toBase58(),
        });
      }
    }
    return out.sort((a, b) => (a.address < b.address ? -1 : a.address > b.address ? 1 : 0));
  }

  async simulateTransaction(wire: Uint8Array, options: SimulateOptions = {}): Promise<SimulationResult> {
    const response = await this.call('simulateTransaction', () =>
      this.rawRequest('simulateTransaction', [
        Buffer.from(wire).toString('base64'),
        { encoding: 'base64', sigVerify: options.sigVerify ?? false, commitment: this.commitment },
      ]),
    );
    if (response.error) {
      if (response.error.code === -32602) return { err: 'SanitizeFailure', logs: [response.error.message], unitsConsumed: 0 };
      if (response.error.code === -32003) return { err: 'SignatureFailure', logs: [], unitsConsumed: 0 };
      throw new DomainError('rpc_unavailable', `The Solana RPC failed on simulateTransaction: ${response.error.message}`, {
        method: 'simulateTransaction',
        code: response.error.code,
      });
    }
    const value = (response.result as { value?: { err: LedgerTransactionError | null; logs: string[] | null; unitsConsumed?: number } } | undefined)?.value;
    if (!value) throw new DomainError('rpc_unavailable', 'The Solana RPC answered simulateTransaction without a value', { method: 'simulateTransaction' });
    return { err: value.err ?? null, logs: value.logs ?? [], unitsConsumed: value.unitsConsumed ?? 0 };
  }

  async sendTransaction(wire: Uint8Array, options: SendOptions = {}): Promise<SendResult> {
    const signature = firstSignature(wire);
    const response = await this.call(
      'sendTransaction',
      () =>
        this.rawRequest('sendTransaction', [
          Buffer.from(wire).toString('base64'),
          { encoding: 'base64', skipPreflight: options.skipPreflight ?? false, preflightCommitment: this.commitment, maxRetries: 0 },
        ]),
      { signature },
    );
    if (response.error) {
      const { code, message, data } = response.error;
      switch (code) {
        case -32002: // preflight simulation failed
          return { ok: false, signature, err: data?.err ?? 'SanitizeFailure', logs: data?.logs ?? [] };
        case -32003: // signature verification failure
          return { ok: false, signature, err: 'SignatureFailure', logs: [] };
        case -32602: // not a transaction, or one that fails to sanitize
        case -32013: // signature count mismatch
        case -32015: // unsupported version
          return { ok: false, signature, err: 'SanitizeFailure', logs: [message] };
        default:
          throw new DomainError('rpc_unavailable', `The Solana RPC failed on sendTransaction: ${message}`, { method: 'sendTransaction', code, signature });
      }
    }
    if (typeof response.result !== 'string')
      throw new DomainError('rpc_unavailable', 'The Solana RPC answered sendTransaction without a signature', { method: 'sendTransaction', signature });
    return { ok: true, signature: response.result };
  }

  async getSignatureStatuses(signatures: string[]): Promise<(SignatureStatus | null)[]> {
    const valid = signatures.filter(isSignature);
    const found = new Map<string, SignatureStatus | null>();
    await this.call('getSignatureStatuses', async () => {
      for (const batch of chunks(valid, 256)) {
        const { value } = await this.connection.getSignatureStatuses(batch, { searchTransactionHistory: true });
        batch.forEach((s, i) => {
          const v = value[i];
          found.set(
            s,
            v
              ? {
                  slot: v.slot,
                  confirmationStatus: v.confirmationStatus ?? (v.confirmations === null ? 'finalized' : 'confirmed'),
                  err: (v.err as LedgerTransactionError | null) ?? null,
                }
              : null,
          );
        });
      }
    });
    return signatures.map((s) => found.get(s) ?? null);
  }

  /**
   * signatureSubscribe over the node's WebSocket, with one status read once subscribed (a signature that reached the
   * level before the subscription is not notified by every node). Where the socket is not there (refused, dropped
   * mid-wait, subscription refused) the status is polled every SIGNATURE_POLL_MS until the deadline; a failed read is
   * retried at the next poll.
   */
  async waitForSignature(signature: string, options: WaitForSignatureOptions): Promise<SignatureStatus | null> {
    const wanted = options.commitment ?? 'confirmed';
    const deadline = Date.now() + options.timeoutMs;
    if (!isSignature(signature)) return null;
    if (!this.closed && options.timeoutMs > 0) {
      const notified = await this.notifiedSignature(signature, wanted, options.timeoutMs);
      if (notified !== 'dropped') return notified === 'deadline' ? ((await this.getSignatureStatuses([signature]).catch(() => [null]))[0] ?? null) : notified;
    }
    let last: SignatureStatus | null = null;
    for (;;) {
      last = (await this.getSignatureStatuses([signature]).catch(() => [last]))[0] ?? null;
      if ((last && RANK[last.confirmationStatus] >= RANK[wanted]) || Date.now() >= deadline || this.closed) return last;
      await new Promise((r) => setTimeout(r, Math.min(SIGNATURE_POLL_MS, Math.max(deadline - Date.now(), 0))));
    }
  }

  /** The status the node notifies, or 'dropped' (fall back to polling), or 'deadline'. */
  private notifiedSignature(signature: string, wanted: Exclude<Commitment, 'processed'>, timeoutMs: number): Promise<SignatureStatus | 'dropped' | 'deadline'> {
    return new Promise((resolve) => {
      let done = false;
      const finish = (outcome: SignatureStatus | 'dropped' | 'deadline') => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        sub.close();
        resolve(outcome);
      };
      const timer = setTimeout(() => finish('deadline'), timeoutMs);
      const sub: PubSubSubscription = this.subscriptions().subscribe('signatureSubscribe', [signature, { commitment: wanted }], 'signatureUnsubscribe', {
        onSubscribed: () => {
          void this.getSignatureStatuses([signature]).then(
            ([status]) => {
              if (status && RANK[status.confirmationStatus] >= RANK[wanted]) finish(status);
            },
            () => undefined,
          );
        },
        onNotification: (result) => {
          const { context, value } = (result ?? {}) as { context?: { slot?: number }; value?: { err?: LedgerTransactionError | null } | string };
          if (typeof value !== 'object' || value === null) return; // "receivedSignature": not asked for
          finish({ slot: context?.slot ?? 0, confirmationStatus: wanted, err: value.err ?? null });
        },
        onDrop: () => finish('dropped'),
      });
    });
  }

  /**
   * logsSubscribe ({ mentions: [address] }, one subscription per address: nodes take one address each) at the reads'
   * commitment. onLive once every address of the set is subscribed (at start, after a widening `follow`, after a
   * gap); a dropped or refused subscription reports onGap once and is tried again, sooner first. A closed feed stops
   * trying; a closed ledger reports onGap and stops (no timer is left behind).
   */
  followAddresses(handlers: ActivityHandlers): ActivityFeed {
    const subs = new Map<string, { sub: PubSubSubscription | null; live: boolean; retry: NodeJS.Timeout | undefined; wait: number }>();
    let closed = false;
    /** an onGap told and no onLive since */
    let gap = false;
    /** an onLive owed once every address is subscribed */
    let owed = true;
    const safe = (f: () => void) => {
      try {
        f();
      } catch {
        // the follower's fault stays the follower's
      }
    };
    const stopped = () => closed || this.closed;
    const checkLive = () => {
      if (stopped() || !owed) return;
      for (const s of subs.values()) if (!s.live) return;
      owed = false;
      gap = false;
      safe(() => handlers.onLive());
    };
    const subscribe = (address: string) => {
      const state = subs.get(address);
      if (!state || stopped()) return;
      state.retry = undefined;
      state.sub = this.subscriptions().subscribe('logsSubscribe', [{ mentions: [address] }, { commitment: this.commitment }], 'logsUnsubscribe', {
        onSubscribed: () => {
          state.live = true;
          state.wait = RESUBSCRIBE_MS;
          checkLive();
        },
        onNotification: (result) => {
          const { context, value } = (result ?? {}) as { context?: { slot?: number }; value?: { signature?: string; err?: LedgerTransactionError | null } };
          if (typeof value?.signature !== 'string') return;
          safe(() =>
            handlers.onActivity({ signature: value.signature!, slot: context?.slot ?? 0, err: value.err ?? null, addresses: [address], feePayer: null }),
          );
        },
        onDrop: (reason) => {
          if (subs.get(address) !== state) return;
          state.live = false;
          state.sub = null;
          if (closed) return;
          owed = true;
          if (!gap) {
            gap = true;
            safe(() => handlers.onGap(this.closed ? 'the ledger adapter was closed' : reason));
          }
          if (this.closed) return; // told once, never tried again
          state.retry = setTimeout(() => subscribe(address), state.wait);
          state.retry.unref();
          state.wait = Math.min(state.wait * 2, RESUBSCRIBE_MAX_MS);
        },
      });
    };
    return {
      follow: (addresses) => {
        if (stopped()) return;
        const wanted = new Set(addresses.filter(isAddress));
        for (const [address, state] of subs) {
          if (wanted.has(address)) continue;
          subs.delete(address);
          state.sub?.close();
          clearTimeout(state.retry);
        }
        for (const address of wanted) {
          if (subs.has(address)) continue;
          // a new address is followed from its subscription on: its past is the follower's catch-up (after onLive)
          owed = true;
          subs.set(address, { sub: null, live: false, retry: undefined, wait: RESUBSCRIBE_MS });
          subscribe(address);
        }
        checkLive();
      },
      close: () => {
        closed = true;
        const states = [...subs.values()];
        subs.clear();
        for (const state of states) {
          state.sub?.close();
          clearTimeout(state.retry);
        }
      },
    };
  }

  async getSignaturesForAddress(address: string, options: SignaturesForAddressOptions = {}): Promise<SignatureInfo[]> {
    if (!isAddress(address)) return [];
    const limit = Math.min(Math.max(Math.trunc(options.limit ?? 1000), 1), 1000);
    const list = await this.call('getSignaturesForAddress', () =>
      this.connection.getSignaturesForAddress(new PublicKey(address), { before: options.before, until: options.until, limit }, this.commitment),
    );
    return list.map((s) => ({
      signature: s.signature,
      slot: s.slot,
      blockTime: s.blockTime ?? null,
      err: (s.err as LedgerTransactionError | null) ?? null,
      memo: s.memo ?? null,
    }));
  }

  async getTransaction(signature: string): Promise<LedgerTransaction | null> {
    if (!isSignature(signature)) return null;
    const tx = await this.call('getTransaction', () =>
      this.connection.getTransaction(signature, { commitment: this.commitment, maxSupportedTransactionVersion: 0 }),
    );
    if (!tx?.meta) return null;
    const { message } = tx.transaction;
    const keys = message.getAccountKeys({ accountKeysFromLookups: tx.meta.loadedAddresses ?? { writable: [], readonly: [] } });
    const accountKeys = [...keys.staticAccountKeys, ...(keys.accountKeysFromLookups?.writable ?? []), ...(keys.accountKeysFromLookups?.readonly ?? [])].map(
      (k) => k.toBase58(),
    );
    const tokenBalances = (list: TokenBalance[] | null | undefined): TransactionTokenBalance[] =>
      (list ?? []).map((b) => ({
        accountIndex: b.accountIndex,
        account: accountKeys[b.accountIndex]!,
        mint: b.mint,
        owner: b.owner ?? '',
        amount: BigInt(b.uiTokenAmount.amount),
        decimals: b.uiTokenAmount.decimals,
        tokenProgram: b.programId ?? '',
      }));
    const meta = tx.meta;
    return {
      signature: tx.transaction.signatures[0] ?? signature,
      slot: tx.slot,
      blockTime: tx.blockTime ?? null,
      version: tx.version === 0 ? 0 : 'legacy',
      err: (meta.err as LedgerTransactionError | null) ?? null,
      fee: BigInt(meta.fee),
      accountKeys,
      signers: accountKeys.slice(0, message.header.numRequiredSignatures),
      recentBlockhash: message.recentBlockhash,
      wire: new VersionedTransaction(
        message,
        tx.transaction.signatures.map((sig) => new Uint8Array(base58Bytes.encode(sig))),
      ).serialize(),
      preBalances: meta.preBalances.map((n) => BigInt(n)),
      postBalances: meta.postBalances.map((n) => BigInt(n)),
      preTokenBalances: tokenBalances(meta.preTokenBalances),
      postTokenBalances: tokenBalances(meta.postTokenBalances),
      instructions: message.compiledInstructions.map((ix) => ({
        programId: accountKeys[ix.programIdIndex]!,
        accounts: ix.accountKeyIndexes.map((i) => accountKeys[i]!),
        data: new Uint8Array(ix.data),
      })),
      innerInstructions:
        meta.innerInstructions === null || meta.innerInstructions === undefined
          ? null
          : meta.innerInstructions.map((group) => ({
              index: group.index,
              instructions: group.instructions.map((ix) => ({
                programId: accountKeys[ix.programIdIndex]!,
                accounts: ix.accounts.map((i) => accountKeys[i]!),
                data: new Uint8Array(base58Bytes.encode(ix.data)),
              })),
            })),
      logs: meta.logMessages ?? [],
      unitsConsumed: meta.computeUnitsConsumed ?? null,
    };
  }
}

export function createRpcLedger(options: RpcLedgerOptions): RpcLedger {
  return new RpcLedger(options);
}
