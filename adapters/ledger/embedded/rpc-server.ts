import { timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import { findStable } from '../../../domain/shared/network.ts';
import { decodeAddress, decodeBase58 } from '../../../domain/shared/base58.ts';
import { describeTransactionError } from './errors.ts';
import { announceRpc, withdrawRpc } from './files.ts';
import { ADMIN_HEADER } from './keys.ts';
import { toJson } from './json.ts';
import type { EmbeddedLedger } from './ledger.ts';
import { encodeAccount, encodeTransaction, invalidParams, RpcError, type AccountEncoding, type DataSlice, type TransactionEncoding } from './rpc-encode.ts';
import { parseTokenAccount, isTokenAccountData, TOKEN_2022_PROGRAM_ID, TOKEN_PROGRAM_ID, uiTokenAmount, isMintData, parseMint } from './token.ts';
import { parseDecimal } from './faucet.ts';

// The standard Solana JSON-RPC (HTTP POST, batches) and PubSub (WebSocket on the same port and on port + 1, as
// agave does) for one embedded ledger, so wallets, @solana/web3.js, @solana/kit and x402 clients work unchanged.
// Commitment: a transaction is processed when it executes, confirmed once its history record is written and
// finalized once that is on disk (ledger.ts, history.ts) — a turn of the event loop and one fdatasync later.
// Signature subscriptions notify at the level asked; reads answer from the latest state whatever level is asked.

export const API_VERSION = '2.2.7';
const FEATURE_SET = 3_640_012_085;
const MAX_BODY = 256 * 1024;
const MAX_SIGNATURE_STATUSES = 256;
const MAX_MULTIPLE_ACCOUNTS = 100;
/** JSON-RPC server-error range: an admin method called without the right secret */
export const ADMIN_REFUSED = -32099;
/** JSON-RPC server-error range: a PubSub cap was reached (subscriptions per socket, sockets per client) */
export const LIMIT_REACHED = -32098;

/** Caps of the PubSub server, so one client cannot make the ledger's thread work for everyone's subscriptions. */
export interface PubSubLimits {
  /** subscriptions one WebSocket may hold at once (default 256) */
  subscriptionsPerSocket?: number | undefined;
  /** WebSockets open at once from one client address (default 64) */
  socketsPerClient?: number | undefined;
}
const DEFAULT_LIMITS: Required<PubSubLimits> = { subscriptionsPerSocket: 256, socketsPerClient: 64 };

export interface LedgerRpcServerOptions {
  ledger: EmbeddedLedger;
  /** 0 = any free port (with a free port + 1 for the WebSocket, when one is found) */
  port: number;
  host?: string;
  /** WebSocket port besides the HTTP port's own upgrade; default port + 1; false = only the HTTP port */
  wsPort?: number | false;
  /** write `rpc.json` in the ledger directory so the faucet CLI finds this server (default true) */
  announce?: boolean;
  /**
   * the ledger-admin secret (`SVC_DATA_DIR/keys/ledger-admin.secret`, keys.ts) callers send in the
   * `x-svc-ledger-admin` header; unset, or a listener not bound to loopback: the admin methods do not exist
   */
  adminSecret?: string | null | undefined;
  limits?: PubSubLimits | undefined;
}

export interface LedgerRpcServer {
  /** e.g. http://127.0.0.1:8899 */
  url: string;
  /** e.g. ws://127.0.0.1:8900 (the HTTP port accepts WebSocket upgrades too) */
  wsUrl: string;
  close(): Promise<void>;
}

interface JsonRpcRequest {
  jsonrpc?: unknown;
  id?: unknown;
  method?: unknown;
  params?: unknown;
}

type Params = unknown[];
/** `admin`: the request may call the ledger-admin methods (loopback listener and the admin secret). */
interface CallContext {
  admin: boolean;
}
type Handler = (params: Params, context: CallContext) => unknown;

export async function startLedgerRpcServer(options: LedgerRpcServerOptions): Promise<LedgerRpcServer> {
  const { ledger } = options;
  const host = options.host ?? '127.0.0.1';
  const pubsub = new PubSub(ledger, {
    subscriptionsPerSocket: options.limits?.subscriptionsPerSocket ?? DEFAULT_LIMITS.subscriptionsPerSocket,
    socketsPerClient: options.limits?.socketsPerClient ?? DEFAULT_LIMITS.socketsPerClient,
  });

  // Ledger-admin methods (svc_mintStable; requestAirdrop on mainnet) exist only on a loopback listener that was
  // given the admin secret, and answer only loopback callers presenting it (header ADMIN_HEADER).
  const adminSecret = options.adminSecret && isLoopbackHost(host) ? Buffer.from(options.adminSecret) : null;
  const isAdmin = (req: IncomingMessage) => {
    if (!adminSecret || !isLoopback(req.socket.remoteAddress)) return false;
    const given = req.headers[ADMIN_HEADER];
    return typeof given === 'string' && given.length === adminSecret.length && timingSafeEqual(Buffer.from(given), adminSecret);
  };
  const methods = rpcMethods(ledger, { admin: adminSecret !== null });

  const handle = (req: IncomingMessage, res: ServerResponse) => {
    // last resort: nothing a client sends may throw out of this listener (the process serves others)
    req.on('error', () => res.destroy());
    res.on('error', () => res.destroy());
    if (req.method === 'GET' && (req.url === '/health' || req.url === '/health/')) return void res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
    if (req.method !== 'POST') return void res.writeHead(405, { allow: 'POST' }).end();
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY) {
        if (!res.headersSent) res.writeHead(413).end();
        req.destroy();
      } else chunks.push(c);
    });
    req.on('end', () => {
      if (res.writableEnded) return;
      let body: string;
      try {
        body = dispatch(methods, Buffer.concat(chunks).toString('utf8'), { admin: isAdmin(req) });
      } catch {
        body = toJson(errorObject(null, new RpcError(-32603, 'Internal error')));
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end(body);
    });
  };

  const wss = new WebSocketServer({ noServer: true, maxPayload: MAX_BODY });
  wss.on('error', () => {});
  wss.on('connection', (socket: WebSocket, req: IncomingMessage) => pubsub.attach(socket, req.socket.remoteAddress ?? ''));
  const upgrade = (req: IncomingMessage, socket: Duplex, head: Buffer) => wss.handleUpgrade(req, socket, head, (ws) => wss.emit('connection', ws, req));

  const listen = (server: Server, port: number) =>
    new Promise<number>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => {
        server.off('error', reject);
        resolve((server.address() as AddressInfo).port);
      });
    });
  const close = (server: Server) =>
    new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  const newServer = () => {
    const s = createServer({ keepAliveTimeout: 60_000 }, handle);
    s.on('upgrade', upgrade);
    return s;
  };

  let http: Server | undefined;
  let ws: Server | undefined;
  let port = 0;
  let wsPort = 0;
  for (let attempt = 0; ; attempt++) {
    http = newServer();
    port = await listen(http, options.port);
    if (options.wsPort === false) break;
    const wanted = options.wsPort ?? port + 1;
    ws = newServer();
    try {
      wsPort = await listen(ws, wanted);
      break;
    } catch (e) {
      ws = undefined;
      // a random port whose neighbour is taken: try another pair; a fixed port: serve WebSocket on it alone
      if (options.port === 0 && options.wsPort === undefined && attempt < 20) {
        await close(http);
        continue;
      }
      if ((e as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw e;
      break;
    }
  }
  const shownHost = host.includes(':') ? `[${host}]` : host === '0.0.0.0' ? '127.0.0.1' : host;
  const url = `http://${shownHost}:${port}`;
  const wsUrl = `ws://${shownHost}:${ws ? wsPort : port}`;
  if (options.announce !== false) announceRpc(ledger.dir, url);

  return {
    url,
    wsUrl,
    async close() {
      if (options.announce !== false) withdrawRpc(ledger.dir);
      pubsub.close();
      for (const client of wss.clients) client.terminate();
      wss.close();
      await Promise.all([close(http!), ws ? close(ws) : Promise.resolve()]);
    },
  };
}

function isLoopback(address: string | undefined): boolean {
  return address === '127.0.0.1' || address === '::1' || address === '::ffff:127.0.0.1';
}

/** A bind address only this machine can reach. */
export function isLoopbackHost(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}

// ---- JSON-RPC dispatch ----

const errorObject = (id: unknown, e: RpcError) => ({ jsonrpc: '2.0', error: e.data === undefined ? { code: e.code, message: e.message } : { code: e.code, message: e.message, data: e.data }, id });

/** JSON-RPC 2.0 §4: an id is a string, a number or null; anything else makes the request invalid. */
function validId(id: unknown): id is string | number | null {
  return id === null || typeof id === 'string' || (typeof id === 'number' && Number.isFinite(id));
}

function callOne(methods: Map<string, Handler>, raw: unknown, context: CallContext): unknown {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) return errorObject(null, new RpcError(-32600, 'Invalid request'));
  const request = raw as JsonRpcRequest;
  const id = request.id ?? null;
  if (!validId(id)) return errorObject(null, new RpcError(-32600, 'Invalid request'));
  if (request.jsonrpc !== '2.0' || typeof request.method !== 'string') return errorObject(id, new RpcError(-32600, 'Invalid request'));
  const handler = methods.get(request.method);
  if (!handler) return errorObject(id, new RpcError(-32601, 'Method not found'));
  const params = request.params === undefined || request.params === null ? [] : request.params;
  if (!Array.isArray(params)) return errorObject(id, invalidParams('Invalid params: expected an array'));
  try {
    return { jsonrpc: '2.0', result: handler(params, context), id };
  } catch (e) {
    if (e instanceof RpcError) return errorObject(id, e);
    return errorObject(id, new RpcError(-32603, `Internal error: ${(e as Error).message}`));
  }
}

/**
 * One HTTP body → one response body (batches answered in order; notifications without id answered too). Never
 * throws: whatever the body, the answer is a JSON-RPC response or error (-32700 unparsable, -32600 not a request).
 */
export function dispatch(methods: Map<string, Handler>, body: string, context: CallContext): string {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return toJson(errorObject(null, new RpcError(-32700, 'Parse error')));
  }
  try {
    if (Array.isArray(parsed)) {
      if (parsed.length === 0) return toJson(errorObject(null, new RpcError(-32600, 'Invalid request')));
      return toJson(parsed.map((r) => callOne(methods, r, context)));
    }
    return toJson(callOne(methods, parsed, context));
  } catch {
    // last resort (a result that cannot be encoded, say): the caller still gets a JSON-RPC error
    return toJson(errorObject(null, new RpcError(-32603, 'Internal error')));
  }
}

// ---- parameter helpers ----

function config(params: Params, index: number): Record<string, unknown> {
  const c = params[index];
  if (c === undefined || c === null) return {};
  if (typeof c !== 'object' || Array.isArray(c)) throw invalidParams('Invalid params: config must be an object');
  return c as Record<string, unknown>;
}

function address(value: unknown): string {
  if (typeof value !== 'string') throw invalidParams('Invalid params: expected a base-58 address');
  if (!decodeAddress(value)) throw invalidParams('Invalid param: Invalid');
  return value;
}

function signature(value: unknown): string {
  if (typeof value !== 'string') throw invalidParams('Invalid params: expected a base-58 signature');
  const bytes = decodeBase58(value);
  if (!bytes || bytes.length !== 64) throw invalidParams('Invalid param: Invalid');
  return value;
}

function accountEncoding(c: Record<string, unknown>): AccountEncoding {
  const e = c.encoding ?? 'binary';
  if (e === 'binary' || e === 'base58' || e === 'base64' || e === 'jsonParsed') return e;
  if (e === 'base64+zstd') throw invalidParams('Invalid params: base64+zstd is not supported by this ledger; use base64');
  throw invalidParams(`Invalid params: unknown variant \`${String(e)}\``);
}

function dataSlice(c: Record<string, unknown>): DataSlice | undefined {
  const s = c.dataSlice as { offset?: unknown; length?: unknown } | undefined;
  if (s === undefined || s === null) return undefined;
  if (!Number.isInteger(s.offset) || !Number.isInteger(s.length)) throw invalidParams('Invalid params: dataSlice needs offset and length');
  return { offset: s.offset as number, length: s.length as number };
}

function wireBytes(value: unknown, encoding: unknown): Uint8Array {
  if (typeof value !== 'string') throw invalidParams('Invalid params: expected an encoded transaction');
  if (encoding === 'base64') {
    if (value.length > 1644) throw invalidParams(`base64 encoded solana_transaction::versioned::VersionedTransaction too large: ${value.length} bytes (max: encoded/raw 1644/1232)`);
    return Buffer.from(value, 'base64');
  }
  if (encoding === undefined || encoding === null || encoding === 'base58') {
    if (value.length > 1683) throw invalidParams(`base58 encoded solana_transaction::versioned::VersionedTransaction too large: ${value.length} bytes (max: encoded/raw 1683/1232)`);
    const bytes = decodeBase58(value);
    if (!bytes) throw invalidParams('invalid base58 encoding');
    return bytes;
  }
  throw invalidParams(`Invalid params: unsupported encoding: ${String(encoding)}. Supported encodings: base58, base64`);
}

// ---- methods ----

function rpcMethods(ledger: EmbeddedLedger, options: { admin: boolean }): Map<string, Handler> {
  const context = (c: Record<string, unknown> = {}) => {
    const slot = ledger.slot();
    if (c.minContextSlot !== undefined && typeof c.minContextSlot === 'number' && c.minContextSlot > slot) {
      throw new RpcError(-32016, 'Minimum context slot has not been reached', { contextSlot: slot });
    }
    return { apiVersion: API_VERSION, slot };
  };
  const withContext = (c: Record<string, unknown>, value: unknown) => ({ context: context(c), value });
  const account = (a: string, c: Record<string, unknown>) => {
    const found = ledger.readAccount(a);
    return found ? encodeAccount(ledger, found, accountEncoding(c), dataSlice(c)) : null;
  };

  const m = new Map<string, Handler>();
  m.set('getHealth', () => 'ok');
  m.set('getVersion', () => ({ 'feature-set': FEATURE_SET, 'solana-core': API_VERSION }));
  m.set('getGenesisHash', () => ledger.genesisHash);
  m.set('getIdentity', () => ({ identity: ledger.faucet.address }));
  m.set('getSlot', (p) => context(config(p, 0)).slot);
  m.set('getBlockHeight', (p) => context(config(p, 0)).slot);
  m.set('getEpochInfo', (p) => (context(config(p, 0)), ledger.epochInfo()));
  m.set('getTransactionCount', () => ledger.transactionCount);
  m.set('getFirstAvailableBlock', () => 0);
  m.set('getRecentPrioritizationFees', () => []);
  m.set('getLatestBlockhash', (p) => {
    const c = config(p, 0);
    const { blockhash, lastValidBlockHeight } = ledger.latestBlockhash();
    return withContext(c, { blockhash, lastValidBlockHeight });
  });
  m.set('isBlockhashValid', (p) => {
    if (typeof p[0] !== 'string') throw invalidParams('Invalid params: expected a blockhash');
    const c = config(p, 1);
    return withContext(c, ledger.blockhashValid(p[0]));
  });
  m.set('getMinimumBalanceForRentExemption', (p) => {
    const length = p[0] ?? 0;
    if (!Number.isInteger(length) || (length as number) < 0 || (length as number) > 10 * 1024 * 1024) throw invalidParams('Invalid params: data length');
    return ledger.minimumBalanceForRentExemption(length as number);
  });
  m.set('getFeeForMessage', (p) => {
    if (typeof p[0] !== 'string') throw invalidParams('Invalid params: expected a base64 message');
    const c = config(p, 1);
    return withContext(c, ledger.feeForMessage(Buffer.from(p[0], 'base64')));
  });
  m.set('getAccountInfo', (p) => {
    const a = address(p[0]);
    const c = config(p, 1);
    return withContext(c, account(a, c));
  });
  m.set('getMultipleAccounts', (p) => {
    if (!Array.isArray(p[0])) throw invalidParams('Invalid params: expected an array of addresses');
    if (p[0].length > MAX_MULTIPLE_ACCOUNTS) throw invalidParams(`Too many inputs provided; max ${MAX_MULTIPLE_ACCOUNTS}`);
    const addresses = p[0].map(address);
    const c = config(p, 1);
    return withContext(c, addresses.map((a) => account(a, c)));
  });
  m.set('getBalance', (p) => {
    const a = address(p[0]);
    return withContext(config(p, 1), ledger.balance(a));
  });
  m.set('getTokenAccountBalance', (p) => {
    const a = address(p[0]);
    const c = config(p, 1);
    const found = ledger.readAccount(a);
    if (!found || !isTokenAccountData(found.owner, found.data)) throw invalidParams('Invalid param: not a Token account');
    const t = parseTokenAccount(found.data);
    const decimals = ledger.decimalsOf(t.mint);
    if (decimals === undefined) throw invalidParams('Invalid param: could not find mint');
    return withContext(c, uiTokenAmount(t.amount, decimals));
  });
  m.set('getTokenSupply', (p) => {
    const a = address(p[0]);
    const found = ledger.readAccount(a);
    if (!found || !isMintData(found.owner, found.data)) throw invalidParams('Invalid param: not a Token mint');
    const mint = parseMint(found.data);
    return withContext(config(p, 1), uiTokenAmount(mint.supply, mint.decimals));
  });
  m.set('getTokenAccountsByOwner', (p) => {
    const owner = address(p[0]);
    const filter = p[1] as { mint?: unknown; programId?: unknown } | undefined;
    if (!filter || typeof filter !== 'object' || (filter.mint === undefined) === (filter.programId === undefined)) {
      throw invalidParams('Invalid params: expected { mint } or { programId }');
    }
    const mint = filter.mint === undefined ? undefined : address(filter.mint);
    const programId = filter.programId === undefined ? undefined : address(filter.programId);
    if (programId && programId !== TOKEN_PROGRAM_ID && programId !== TOKEN_2022_PROGRAM_ID) throw invalidParams('Invalid param: unrecognized Token program id');
    const c = config(p, 2);
    const encoding = accountEncoding(c);
    const slice = dataSlice(c);
    return withContext(
      c,
      ledger.tokenAccountsOf(owner, { mint, programId }).map((a) => ({ account: encodeAccount(ledger, a, encoding, slice), pubkey: a.address })),
    );
  });
  m.set('getSignatureStatuses', (p) => {
    if (!Array.isArray(p[0])) throw invalidParams('Invalid params: expected an array of signatures');
    if (p[0].length > MAX_SIGNATURE_STATUSES) throw invalidParams(`Too many inputs provided; max ${MAX_SIGNATURE_STATUSES}`);
    const sigs = p[0].map(signature);
    return withContext(
      config(p, 1),
      sigs.map((s) => {
        const status = ledger.signatureStatus(s);
        if (!status) return null;
        const confirmations = status.confirmationStatus === 'finalized' ? null : Math.max(0, ledger.slot() - status.slot);
        return { confirmationStatus: status.confirmationStatus, confirmations, err: status.err, slot: status.slot, status: status.err === null ? { Ok: null } : { Err: status.err } };
      }),
    );
  });
  m.set('getSignaturesForAddress', (p) => {
    const a = address(p[0]);
    const c = config(p, 1);
    context(c);
    if (c.limit !== undefined && (!Number.isInteger(c.limit) || (c.limit as number) < 1 || (c.limit as number) > 1000)) throw invalidParams('Invalid params: limit must be 1..1000');
    const before = c.before === undefined || c.before === null ? undefined : signature(c.before);
    const until = c.until === undefined || c.until === null ? undefined : signature(c.until);
    return ledger
      .signaturesFor(a, { before, until, limit: (c.limit as number | undefined) ?? 1000 })
      .map((e) => ({ blockTime: e.time, confirmationStatus: ledger.commitmentOf(e.seq), err: e.err, memo: e.memo, signature: e.sig, slot: e.slot }));
  });
  m.set('getTransaction', (p) => {
    const s = signature(p[0]);
    const c = typeof p[1] === 'string' ? { encoding: p[1] } : config(p, 1);
    const encoding = (c.encoding ?? 'json') as TransactionEncoding;
    if (!['json', 'jsonParsed', 'base64', 'base58'].includes(encoding)) throw invalidParams(`Invalid params: unknown variant \`${String(encoding)}\``);
    const record = ledger.transactionRecord(s);
    if (!record) return null;
    if (record.wire.version === 0 && (c.maxSupportedTransactionVersion === undefined || c.maxSupportedTransactionVersion === null)) {
      throw new RpcError(
        -32015,
        'Transaction version (0) is not supported by the requesting client. Please try the request again with the following configuration parameter: "maxSupportedTransactionVersion": 0',
      );
    }
    return encodeTransaction(record, encoding);
  });
  m.set('sendTransaction', (p) => {
    const c = config(p, 1);
    const bytes = wireBytes(p[0], c.encoding);
    context(c);
    const skipPreflight = c.skipPreflight === true;
    const result = ledger.sendWire(bytes, { skipPreflight });
    if (result.ok) return result.signature;
    if (result.err === 'SignatureFailure') throw new RpcError(-32003, 'Transaction signature verification failure');
    if (result.signature === null || result.err === 'SanitizeFailure') throw invalidParams(`invalid transaction: ${result.logs[0] ?? describeTransactionError(result.err)}`);
    throw new RpcError(-32002, `Transaction simulation failed: ${describeTransactionError(result.err)}`, {
      accounts: null,
      err: result.err,
      innerInstructions: null,
      loadedAccountsDataSize: 0,
      logs: result.logs,
      replacementBlockhash: null,
      returnData: null,
      unitsConsumed: 0,
    });
  });
  m.set('simulateTransaction', (p) => {
    const c = config(p, 1);
    const bytes = wireBytes(p[0], c.encoding);
    if (c.sigVerify === true && c.replaceRecentBlockhash === true) throw invalidParams('sigVerify may not be used with replaceRecentBlockhash');
    const accountsConfig = c.accounts as { addresses?: unknown; encoding?: unknown } | undefined;
    const addresses = accountsConfig ? (Array.isArray(accountsConfig.addresses) ? accountsConfig.addresses.map(address) : []) : undefined;
    const accountsEncoding = accountsConfig ? accountEncoding({ encoding: accountsConfig.encoding ?? 'base64' }) : 'base64';
    const ctx = context(c);
    const result = ledger.simulateWire(bytes, { sigVerify: c.sigVerify === true, replaceRecentBlockhash: c.replaceRecentBlockhash === true, accounts: addresses });
    if (result.err === 'SanitizeFailure' && result.unitsConsumed === 0 && result.logs.length === 1) throw invalidParams(`invalid transaction: ${result.logs[0]}`);
    if (result.err === 'SignatureFailure') throw new RpcError(-32003, 'Transaction signature verification failure');
    return {
      context: ctx,
      value: {
        accounts: result.accounts ? result.accounts.map((a) => (a ? encodeAccount(ledger, a, accountsEncoding) : null)) : null,
        err: result.err,
        innerInstructions: null,
        loadedAccountsDataSize: 0,
        logs: result.logs,
        replacementBlockhash: result.replacementBlockhash ? { blockhash: result.replacementBlockhash.blockhash, lastValidBlockHeight: result.replacementBlockhash.lastValidBlockHeight } : null,
        returnData: null,
        unitsConsumed: result.unitsConsumed,
      },
    };
  });
  const airdrop: Handler = (p) => {
    const to = address(p[0]);
    const lamports = p[1];
    if (typeof lamports !== 'number' || !Number.isSafeInteger(lamports) || lamports <= 0) throw invalidParams('Invalid params: lamports must be a positive integer');
    try {
      return ledger.airdrop(to, BigInt(lamports));
    } catch (e) {
      throw new RpcError(-32603, `airdrop request failed: ${(e as Error).message}`);
    }
  };
  // Not standard: the faucet mints a curated stable through the running ledger. An admin method.
  const mintStable: Handler = (p) => {
    const owner = address(p[0]);
    if (typeof p[1] !== 'string') throw invalidParams('Invalid params: expected a stable symbol or mint');
    const stable = findStable(ledger.network, p[1]);
    const mint = stable?.mint ?? address(p[1]);
    const decimals = ledger.decimalsOf(mint);
    if (decimals === undefined) throw invalidParams(`Invalid params: no mint ${p[1]} on ${ledger.network}`);
    const amount = typeof p[2] === 'string' ? parseDecimal(p[2], decimals) : null;
    if (amount === null || amount <= 0n) throw invalidParams('Invalid params: amount must be a positive decimal string, e.g. "10.5"');
    try {
      const r = ledger.mintTo(owner, mint, amount);
      return { amount: r.amount.toString(), decimals: r.decimals, mint: r.mint, signature: r.signature, tokenAccount: r.tokenAccount };
    } catch (e) {
      throw new RpcError(-32603, `mint failed: ${(e as Error).message}`);
    }
  };
  const adminOnly =
    (handler: Handler): Handler =>
    (p, context) => {
      if (!context.admin) throw new RpcError(ADMIN_REFUSED, 'Unauthorized: a ledger-admin method needs the admin secret');
      return handler(p, context);
    };
  // requestAirdrop is public on devnet, as on Solana's devnet; mainnet has no faucet but the admin's
  if (ledger.network === 'chain-devnet') m.set('requestAirdrop', airdrop);
  if (options.admin) {
    if (ledger.network !== 'chain-devnet') m.set('requestAirdrop', adminOnly(airdrop));
    m.set('svc_mintStable', adminOnly(mintStable));
  }
  return m;
}

// ---- PubSub over WebSocket ----

type Level = 'processed' | 'confirmed' | 'finalized';
const RANK: Record<Level, number> = { processed: 0, confirmed: 1, finalized: 2 };
const level = (value: unknown): Level => (value === 'processed' || value === 'confirmed' ? value : value === 'recent' ? 'processed' : value === 'single' || value === 'singleGossip' ? 'confirmed' : 'finalized');

type Subscription =
  | { kind: 'signature'; socket: WebSocket; signature: string; level: Level }
  | { kind: 'account'; socket: WebSocket; address: string; encoding: AccountEncoding }
  | { kind: 'slot' | 'root'; socket: WebSocket };

class PubSub {
  private nextId = 1;
  private readonly subs = new Map<number, Subscription>();
  private readonly bySignature = new Map<string, Set<number>>();
  private readonly byAccount = new Map<string, Set<number>>();
  private readonly slotSubs = new Set<number>();
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
            const value = account ? encodeAccount(ledger, account, sub.encoding) : { data: ['', 'base64'], executable: false, lamports: 0, owner: '11111111111111111111111111111111', rentEpoch: 0, space: 0 };
            this.notify(sub.socket, 'accountNotification', id, { context: { slot: landed.slot }, value });
          }
        }
      }
    });
    this.unlistenCommit = ledger.onCommit((reached, seq) => this.onCommit(reached, seq));
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
      this.send(socket, errorObject(null, new RpcError(LIMIT_REACHED, `Too many WebSocket connections from this client (max ${this.limits.socketsPerClient})`)));
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
      return this.send(socket, errorObject(null, new RpcError(-32700, 'Parse error')));
    }
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) return this.send(socket, errorObject(null, new RpcError(-32600, 'Invalid request')));
    const request = parsed as JsonRpcRequest;
    if (request.id === undefined) return; // notifications (pings)
    if (!validId(request.id)) return this.send(socket, errorObject(null, new RpcError(-32600, 'Invalid request')));
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
        throw new RpcError(LIMIT_REACHED, `Too many subscriptions on this socket (max ${this.limits.subscriptionsPerSocket}); unsubscribe or open another socket`);
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
        if (!set) this.bySignature.set(s, (set = new Set()));
        set.add(id);
        return id;
      }
      case 'accountSubscribe': {
        const a = address(params[0]);
        const id = add({ kind: 'account', socket, address: a, encoding: accountEncoding({ encoding: config(params, 1).encoding ?? 'base64' }) });
        let set = this.byAccount.get(a);
        if (!set) this.byAccount.set(a, (set = new Set()));
        set.add(id);
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
    this.slotTimer = setInterval(() => {
      const slot = this.ledger.slot();
      if (slot === this.lastSlot) return;
      this.lastSlot = slot;
      for (const id of this.slotSubs) {
        const sub = this.subs.get(id);
        if (!sub) continue;
        if (sub.kind === 'slot') this.notify(sub.socket, 'slotNotification', id, { parent: Math.max(slot - 1, 0), root: slot, slot });
        else this.notify(sub.socket, 'rootNotification', id, slot);
      }
    }, Math.min(this.ledger.slotMs || 100, 400));
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
