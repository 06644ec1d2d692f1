import { decodeAddress, decodeBase58 } from '../../../domain/shared/base58.ts';
import type { EmbeddedLedger } from './ledger.ts';
import { invalidParams, RpcError, type AccountEncoding, type DataSlice } from './rpc-encode.ts';

// Parameters of the embedded ledger's JSON-RPC methods (rpc-methods.ts, rpc-blocks.ts, rpc-cluster.ts, pubsub.ts),
// read and refused the way agave refuses them (-32602 Invalid params).

export const API_VERSION = '2.2.7';
export const FEATURE_SET = 3_640_012_085;

/**
 * agave's JSON_RPC_SCAN_ERROR: a result past this server's size limits (getProgramAccounts and the scans built on it,
 * getBlock with full transactions); the message names the narrower request that fits
 */
export const RESULT_TOO_LARGE = -32012;

export type Params = unknown[];

export function config(params: Params, index: number): Record<string, unknown> {
  const c = params[index];
  if (c === undefined || c === null) return {};
  if (typeof c !== 'object' || Array.isArray(c)) throw invalidParams('Invalid params: config must be an object');
  return c as Record<string, unknown>;
}

export function address(value: unknown): string {
  if (typeof value !== 'string') throw invalidParams('Invalid params: expected a base-58 address');
  if (!decodeAddress(value)) throw invalidParams('Invalid param: Invalid');
  return value;
}

export function signature(value: unknown): string {
  if (typeof value !== 'string') throw invalidParams('Invalid params: expected a base-58 signature');
  const bytes = decodeBase58(value);
  if (bytes?.length !== 64) throw invalidParams('Invalid param: Invalid');
  return value;
}

/** a slot number (u64 on agave; a safe integer here) */
export function slotParam(value: unknown, what = 'slot'): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) throw invalidParams(`Invalid params: ${what} must be a non-negative integer`);
  return value;
}

/** an optional whole-number limit in [1, max] */
export function limitParam(value: unknown, max: number, fallback: number): number {
  if (value === undefined || value === null) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > max) throw invalidParams(`Invalid params: limit must be 1..${max}`);
  return value;
}

export function accountEncoding(c: Record<string, unknown>): AccountEncoding {
  const e = c.encoding ?? 'binary';
  if (e === 'binary' || e === 'base58' || e === 'base64' || e === 'jsonParsed') return e;
  if (e === 'base64+zstd') throw invalidParams('Invalid params: base64+zstd is not supported by this ledger; use base64');
  throw invalidParams(`Invalid params: unknown variant \`${String(e)}\``);
}

export function dataSlice(c: Record<string, unknown>): DataSlice | undefined {
  const s = c.dataSlice as { offset?: unknown; length?: unknown } | undefined;
  if (s === undefined || s === null) return undefined;
  if (!Number.isInteger(s.offset) || !Number.isInteger(s.length) || (s.offset as number) < 0 || (s.length as number) < 0)
    throw invalidParams('Invalid params: dataSlice needs offset and length');
  return { offset: s.offset as number, length: s.length as number };
}

/** agave refuses `processed` for the block methods (getBlock, getBlocks, …): a block is at least confirmed */
export function atLeastConfirmed(c: Record<string, unknown>): void {
  if (c.commitment === 'processed' || c.commitment === 'recent') throw invalidParams('Method does not support commitment below `confirmed`');
}

/** The RpcResponse context (`{ apiVersion, slot }`), refusing a `minContextSlot` ahead of the ledger (-32016). */
export function contextOf(ledger: EmbeddedLedger, c: Record<string, unknown> = {}) {
  const slot = ledger.slot();
  if (c.minContextSlot !== undefined && typeof c.minContextSlot === 'number' && c.minContextSlot > slot) {
    throw new RpcError(-32016, 'Minimum context slot has not been reached', { contextSlot: slot });
  }
  return { apiVersion: API_VERSION, slot };
}

export const withContext = (ledger: EmbeddedLedger, c: Record<string, unknown>, value: unknown) => ({ context: contextOf(ledger, c), value });

export const VERSION_0_REFUSED = () =>
  new RpcError(
    -32015,
    'Transaction version (0) is not supported by the requesting client. Please try the request again with the following configuration parameter: "maxSupportedTransactionVersion": 0',
  );
