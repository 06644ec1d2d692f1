import { decodeBase58 } from '../../../domain/shared/base58.ts';
import { invalidParams } from './rpc-encode.ts';

// getProgramAccounts' and programSubscribe's `filters`, as agave reads them (RpcFilterType): at most 4 of
// { dataSize: n } and { memcmp: { offset, bytes, encoding?: 'base58' | 'base64' } }, all of which an account must
// match. An account's raw data is tested before anything is copied or encoded.

const MAX_FILTERS = 4;
/** agave's MAX_DATA_SIZE: memcmp bytes compare at most 128 bytes */
const MAX_MEMCMP = 128;

export type AccountFilter = (data: Uint8Array) => boolean;

export function parseFilters(value: unknown): AccountFilter {
  if (value === undefined || value === null) return () => true;
  if (!Array.isArray(value)) throw invalidParams('Invalid params: filters must be an array');
  if (value.length > MAX_FILTERS) throw invalidParams(`Too many filters provided; max ${MAX_FILTERS}`);
  const tests = value.map(parseFilter);
  return (data) => tests.every((test) => test(data));
}

function parseFilter(filter: unknown): AccountFilter {
  if (filter === null || typeof filter !== 'object' || Array.isArray(filter)) throw invalidParams('Invalid params: a filter must be an object');
  const f = filter as { dataSize?: unknown; memcmp?: unknown; tokenAccountState?: unknown };
  if (f.dataSize !== undefined) {
    const size = f.dataSize;
    if (typeof size !== 'number' || !Number.isSafeInteger(size) || size < 0) throw invalidParams('Invalid params: dataSize must be a non-negative integer');
    return (data) => data.length === size;
  }
  if (f.memcmp !== undefined) {
    const m = f.memcmp as { offset?: unknown; bytes?: unknown; encoding?: unknown } | null;
    if (m === null || typeof m !== 'object') throw invalidParams('Invalid params: memcmp must be an object');
    const offset = m.offset;
    if (typeof offset !== 'number' || !Number.isSafeInteger(offset) || offset < 0)
      throw invalidParams('Invalid params: memcmp offset must be a non-negative integer');
    if (typeof m.bytes !== 'string') throw invalidParams('Invalid params: memcmp bytes must be a string');
    const encoding = m.encoding ?? 'base58';
    let bytes: Uint8Array | null;
    if (encoding === 'base58') {
      bytes = m.bytes.length > 175 ? null : decodeBase58(m.bytes);
      if (!bytes) throw invalidParams('Invalid param: invalid base58 memcmp bytes, or more than 128 bytes');
    } else if (encoding === 'base64') {
      if (m.bytes.length > 172 || !/^[A-Za-z0-9+/]*={0,2}$/.test(m.bytes))
        throw invalidParams('Invalid param: invalid base64 memcmp bytes, or more than 128 bytes');
      bytes = Buffer.from(m.bytes, 'base64');
    } else throw invalidParams(`Invalid params: unknown memcmp encoding \`${String(encoding)}\``);
    if (bytes.length > MAX_MEMCMP) throw invalidParams('Invalid param: encoded binary data should be less than 129 bytes');
    const want = bytes;
    return (data) => {
      if (offset + want.length > data.length) return false;
      for (let i = 0; i < want.length; i++) if (data[offset + i] !== want[i]) return false;
      return true;
    };
  }
  if (f.tokenAccountState !== undefined) {
    // agave: a token account (165 bytes, or longer with Token-2022's account-type byte 2) that is initialized
    return (data) => (data.length === 165 || (data.length > 165 && data[165] === 2)) && data[108] !== 0;
  }
  throw invalidParams('Invalid params: unknown filter; expected dataSize or memcmp');
}
