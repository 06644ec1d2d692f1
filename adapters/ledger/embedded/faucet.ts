import { decimalToAtomic } from '../../../domain/shared/money.ts';
import type { Faucet, FaucetRequest, FaucetResult } from '../../../domain/ports/faucet.ts';
import { DomainError } from '../../../domain/shared/errors.ts';
import { findStable, NETWORKS, type Network } from '../../../domain/shared/chains.ts';
import { decodeAddress } from '../../../domain/shared/base58.ts';
import type { MintResult } from './ledger.ts';
import { ADMIN_HEADER } from './keys.ts';

// The faucet of the embedded ledgers: SOL from the local faucet key, curated stables minted by the local mint
// authority. Two front ends share this shape: in-process (the gateway, its dev route) and over a running ledger's
// JSON-RPC (requestAirdrop + svc_mintStable), which is how the CLI reaches a ledger another process has open.

export type { Faucet, FaucetRequest, FaucetResult };

const MAX_SOL_LAMPORTS = 1_000_000n * 1_000_000_000n;

/** "10.5" with 6 decimals → 10_500_000n; null when not a non-negative decimal with at most `decimals` places. */
export function parseDecimal(text: string, decimals: number): bigint | null {
  const trimmed = text.trim();
  // at most 20 whole digits: a faucet request is never near u64 overflow
  if (!/^\d{1,20}(\.\d+)?$/.test(trimmed)) return null;
  return decimalToAtomic(trimmed, decimals);
}

interface Plan {
  lamports: bigint | null;
  token: { symbol: string | null; mint: string | null; amountText: string } | null;
}

function invalid(path: string, message: string): DomainError {
  return DomainError.invalid([{ path, message, code: 'invalid' }], message);
}

function plan(request: FaucetRequest): Plan {
  if (!(NETWORKS as readonly string[]).includes(request.network)) throw invalid('network', `unknown network ${String(request.network)}`);
  if (!decodeAddress(request.to)) throw invalid('to', 'to must be a base-58 Solana address');
  let lamports: bigint | null = null;
  if (request.sol !== undefined) {
    lamports = parseDecimal(String(request.sol), 9);
    if (lamports === null || lamports <= 0n || lamports > MAX_SOL_LAMPORTS) throw invalid('sol', 'sol must be a positive decimal up to 1000000');
  }
  let token: Plan['token'] = null;
  if (request.token !== undefined) {
    if (request.amount === undefined) throw invalid('amount', 'amount is required with token');
    const stable = findStable(request.network, request.token);
    if (!stable && !decodeAddress(request.token)) throw invalid('token', `token must be a stable of ${request.network} or a mint address`);
    token = { symbol: stable?.symbol ?? null, mint: stable?.mint ?? request.token, amountText: String(request.amount) };
  } else if (request.amount !== undefined) throw invalid('token', 'token is required with amount');
  if (lamports === null && token === null) lamports = 1_000_000_000n; // nothing asked: 1 SOL
  return { lamports, token };
}

/** What the faucet needs of an embedded ledger: an EmbeddedLedger, or a LedgerThread running one. */
export interface FaucetLedger {
  airdrop(to: string, lamports: bigint): string | Promise<string>;
  decimalsOf(mint: string): number | undefined | Promise<number | undefined>;
  mintTo(owner: string, mint: string, amount: bigint): MintResult | Promise<MintResult>;
}

/** Faucet over the embedded ledgers of this process (networks without one are refused). */
export function createFaucet(ledgers: Partial<Record<Network, FaucetLedger>>): Faucet {
  return async (request) => {
    const p = plan(request);
    const ledger = ledgers[request.network];
    if (!ledger) throw new DomainError('invalid_request', `${request.network} is not an embedded ledger: the faucet is only for embedded ledgers`);
    const result: FaucetResult = { network: request.network, to: request.to };
    if (p.lamports !== null) result.airdrop = { signature: await ledger.airdrop(request.to, p.lamports), lamports: p.lamports };
    if (p.token) {
      const decimals = await ledger.decimalsOf(p.token.mint!);
      if (decimals === undefined) throw invalid('token', `no mint ${p.token.mint} on ${request.network}`);
      const amount = parseDecimal(p.token.amountText, decimals);
      if (amount === null || amount <= 0n || amount >= 1n << 64n)
        throw invalid('amount', `amount must be a positive decimal with at most ${decimals} decimals`);
      const minted = await ledger.mintTo(request.to, p.token.mint!, amount);
      result.mint = {
        signature: minted.signature,
        symbol: p.token.symbol,
        mint: minted.mint,
        tokenAccount: minted.tokenAccount,
        amount: minted.amount,
        decimals: minted.decimals,
      };
    }
    return result;
  };
}

async function rpcCall(url: string, method: string, params: unknown[], adminSecret: string | null): Promise<unknown> {
  let res: Response;
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (adminSecret) headers[ADMIN_HEADER] = adminSecret;
  try {
    res = await fetch(url, { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }), signal: AbortSignal.timeout(15_000) });
  } catch (e) {
    throw new DomainError('rpc_unavailable', `cannot reach the ledger at ${url}: ${(e as Error).message}`);
  }
  const body = (await res.json().catch(() => null)) as { result?: unknown; error?: { code: number; message: string } } | null;
  if (!body) throw new DomainError('rpc_unavailable', `${url} answered ${res.status} without JSON-RPC`);
  if (body.error) throw new DomainError(body.error.code === -32602 ? 'invalid_request' : 'upstream_failed', `${method}: ${body.error.message}`);
  return body.result;
}

/**
 * Faucet over the JSON-RPC of running embedded ledgers (requestAirdrop and svc_mintStable, with the installation's
 * ledger-admin secret from `SVC_DATA_DIR/keys`).
 */
export function createRemoteFaucet(urls: Partial<Record<Network, string>>, adminSecret: string | null): Faucet {
  return async (request) => {
    const p = plan(request);
    const url = urls[request.network];
    if (!url) throw new DomainError('invalid_request', `no running embedded ledger for ${request.network}`);
    const result: FaucetResult = { network: request.network, to: request.to };
    if (p.lamports !== null) {
      if (p.lamports > BigInt(Number.MAX_SAFE_INTEGER)) throw invalid('sol', 'sol is too large');
      result.airdrop = { signature: String(await rpcCall(url, 'requestAirdrop', [request.to, Number(p.lamports)], adminSecret)), lamports: p.lamports };
    }
    if (p.token) {
      const minted = (await rpcCall(url, 'svc_mintStable', [request.to, p.token.mint, p.token.amountText], adminSecret)) as {
        signature: string;
        mint: string;
        tokenAccount: string;
        amount: string;
        decimals: number;
      };
      result.mint = {
        signature: minted.signature,
        symbol: p.token.symbol,
        mint: minted.mint,
        tokenAccount: minted.tokenAccount,
        amount: BigInt(minted.amount),
        decimals: minted.decimals,
      };
    }
    return result;
  };
}
