import { findStable } from '../../../domain/shared/chains.ts';
import { decodeBase58 } from '../../../domain/shared/base58.ts';
import { describeTransactionError } from './errors.ts';
import { parseDecimal } from './faucet.ts';
import { toJson } from './json.ts';
import type { EmbeddedLedger } from './ledger.ts';
import { accountMethods } from './rpc-accounts.ts';
import { blockMethods } from './rpc-blocks.ts';
import { clusterMethods, type Endpoints } from './rpc-cluster.ts';
import { historyMethods } from './rpc-history.ts';
import { encodeAccount, encodeTransaction, invalidParams, RpcError, type TransactionEncoding } from './rpc-encode.ts';
import {
  accountEncoding,
  address,
  API_VERSION,
  config,
  contextOf,
  dataSlice,
  FEATURE_SET,
  signature,
  VERSION_0_REFUSED,
  withContext as withContextOf,
  type Params,
} from './rpc-params.ts';
import { TOKEN_2022_PROGRAM_ID, TOKEN_PROGRAM_ID, uiTokenAmount } from './token.ts';
import { isMintData, isTokenAccountData, parseMint, parseTokenAccount } from '../../../domain/shared/token-account.ts';

// The JSON-RPC methods of the embedded ledger and the dispatch of one HTTP body to them (rpc-server.ts serves them).

export { accountEncoding, address, API_VERSION, config, signature } from './rpc-params.ts';
export type { Params } from './rpc-params.ts';
export type { Endpoints } from './rpc-cluster.ts';
const MAX_SIGNATURE_STATUSES = 256;
const MAX_MULTIPLE_ACCOUNTS = 100;

/** JSON-RPC server-error range: an admin method called without the right secret */
export const ADMIN_REFUSED = -32099;

export interface JsonRpcRequest {
  jsonrpc?: unknown;
  id?: unknown;
  method?: unknown;
  params?: unknown;
}

/** `admin`: the request may call the ledger-admin methods (loopback listener and the admin secret). */
export interface CallContext {
  admin: boolean;
}
export type Handler = (params: Params, context: CallContext) => unknown;

// ---- JSON-RPC dispatch ----

export const errorObject = (id: unknown, e: RpcError) => ({
  jsonrpc: '2.0',
  error: e.data === undefined ? { code: e.code, message: e.message } : { code: e.code, message: e.message, data: e.data },
  id,
});

/** JSON-RPC 2.0 §4: an id is a string, a number or null; anything else makes the request invalid. */
export function validId(id: unknown): id is string | number | null {
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

function wireBytes(value: unknown, encoding: unknown): Uint8Array {
  if (typeof value !== 'string') throw invalidParams('Invalid params: expected an encoded transaction');
  if (encoding === 'base64') {
    if (value.length > 1644)
      throw invalidParams(`base64 encoded solana_transaction::versioned::VersionedTransaction too large: ${value.length} bytes (max: encoded/raw 1644/1232)`);
    return Buffer.from(value, 'base64');
  }
  if (encoding === undefined || encoding === null || encoding === 'base58') {
    if (value.length > 1683)
      throw invalidParams(`base58 encoded solana_transaction::versioned::VersionedTransaction too large: ${value.length} bytes (max: encoded/raw 1683/1232)`);
    const bytes = decodeBase58(value);
    if (!bytes) throw invalidParams('invalid base58 encoding');
    return bytes;
  }
  throw invalidParams(`Invalid params: unsupported encoding: ${String(encoding)}. Supported encodings: base58, base64`);
}

// ---- methods ----

/**
 * Every method the embedded ledger answers: those here, the scans (rpc-accounts.ts), the blocks (rpc-blocks.ts) and
 * the cluster's facts (rpc-cluster.ts). `endpoints`: this server's host:port pairs for getClusterNodes.
 */
export function rpcMethods(ledger: EmbeddedLedger, options: { admin: boolean; endpoints?: Endpoints | undefined }): Map<string, Handler> {
  const context = (c: Record<string, unknown> = {}) => contextOf(ledger, c);
  const withContext = (c: Record<string, unknown>, value: unknown) => withContextOf(ledger, c, value);
  const account = (a: string, c: Record<string, unknown>) => {
    const found = ledger.readAccount(a);
    return found ? encodeAccount(ledger, found, accountEncoding(c), dataSlice(c)) : null;
  };

  const m = new Map<string, Handler>();
  m.set('getHealth', () => 'ok');
  m.set('getVersion', () => ({ 'feature-set': FEATURE_SET, 'solana-core': API_VERSION }));
  for (const [name, handler] of [
    ...accountMethods(ledger),
    ...blockMethods(ledger),
    ...historyMethods(ledger),
    ...clusterMethods(ledger, options.endpoints ?? { rpc: null, pubsub: null }),
  ])
    m.set(name, handler);
  m.set('getGenesisHash', () => ledger.genesisHash);
  m.set('getIdentity', () => ({ identity: ledger.faucet.address }));
  m.set('getSlot', (p) => context(config(p, 0)).slot);
  m.set('getBlockHeight', (p) => context(config(p, 0)).slot);
  m.set('getEpochInfo', (p) => {
    context(config(p, 0)); // validates the config (minContextSlot) before answering
    return ledger.epochInfo();
  });
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
    return withContext(
      c,
      addresses.map((a) => account(a, c)),
    );
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
        return {
          confirmationStatus: status.confirmationStatus,
          confirmations,
          err: status.err,
          slot: status.slot,
          status: status.err === null ? { Ok: null } : { Err: status.err },
        };
      }),
    );
  });
  m.set('getSignaturesForAddress', (p) => {
    const a = address(p[0]);
    const c = config(p, 1);
    context(c);
    if (c.limit !== undefined && (!Number.isInteger(c.limit) || (c.limit as number) < 1 || (c.limit as number) > 1000))
      throw invalidParams('Invalid params: limit must be 1..1000');
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
    if (record.wire.version === 0 && (c.maxSupportedTransactionVersion === undefined || c.maxSupportedTransactionVersion === null)) throw VERSION_0_REFUSED();
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
    if (result.signature === null || result.err === 'SanitizeFailure')
      throw invalidParams(`invalid transaction: ${result.logs[0] ?? describeTransactionError(result.err)}`);
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
    const result = ledger.simulateWire(bytes, {
      sigVerify: c.sigVerify === true,
      replaceRecentBlockhash: c.replaceRecentBlockhash === true,
      accounts: addresses,
    });
    if (result.err === 'SanitizeFailure' && result.unitsConsumed === 0 && result.logs.length === 1)
      throw invalidParams(`invalid transaction: ${result.logs[0]}`);
    if (result.err === 'SignatureFailure') throw new RpcError(-32003, 'Transaction signature verification failure');
    return {
      context: ctx,
      value: {
        accounts: result.accounts ? result.accounts.map((a) => (a ? encodeAccount(ledger, a, accountsEncoding) : null)) : null,
        err: result.err,
        innerInstructions: null,
        loadedAccountsDataSize: 0,
        logs: result.logs,
        replacementBlockhash: result.replacementBlockhash
          ? { blockhash: result.replacementBlockhash.blockhash, lastValidBlockHeight: result.replacementBlockhash.lastValidBlockHeight }
          : null,
        returnData: null,
        unitsConsumed: result.unitsConsumed,
      },
    };
  });
  // agave 1.x names, still sent by older clients
  m.set('getConfirmedSignaturesForAddress2', m.get('getSignaturesForAddress')!);
  m.set('getConfirmedTransaction', m.get('getTransaction')!);
  const airdrop: Handler = (p) => {
    const to = address(p[0]);
    const lamports = p[1];
    if (typeof lamports !== 'number' || !Number.isSafeInteger(lamports) || lamports <= 0)
      throw invalidParams('Invalid params: lamports must be a positive integer');
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
