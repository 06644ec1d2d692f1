import { TOKEN_2022_PROGRAM_ID, TOKEN_PROGRAM_ID } from '../../../domain/shared/network.ts';
import { atomicToDecimal } from '../../../domain/shared/money.ts';
import { encodeBase58 } from '../../../domain/shared/base58.ts';
import { ASSOCIATED_TOKEN_PROGRAM_ID, COMPUTE_BUDGET_PROGRAM_ID, MEMO_PROGRAM_ID, SYSTEM_PROGRAM_ID } from '../../../domain/facilitator/schema.ts';

// SPL Token / Token-2022 account layouts: enough to read balances and answer jsonParsed like the RPC does.

export const MEMO_V1_PROGRAM_ID = 'Memo1UhkJRfHyvLMcVucJwxXeuD728EqVDDwQDxFMNo';
export const LOOKUP_TABLE_PROGRAM_ID = 'AddressLookupTab1e1111111111111111111111111';
// one definition of the program ids: the domain's
export { ASSOCIATED_TOKEN_PROGRAM_ID, COMPUTE_BUDGET_PROGRAM_ID, MEMO_PROGRAM_ID, SYSTEM_PROGRAM_ID, TOKEN_PROGRAM_ID, TOKEN_2022_PROGRAM_ID };

export const TOKEN_ACCOUNT_SIZE = 165;
export const MINT_SIZE = 82;
const ACCOUNT_TYPE_MINT = 1;
const ACCOUNT_TYPE_ACCOUNT = 2;

export function isTokenProgram(owner: string): boolean {
  return owner === TOKEN_PROGRAM_ID || owner === TOKEN_2022_PROGRAM_ID;
}

export interface TokenAccountState {
  mint: string;
  owner: string;
  amount: bigint;
  delegate: string | null;
  delegatedAmount: bigint;
  state: 'uninitialized' | 'initialized' | 'frozen';
  isNative: bigint | null;
  closeAuthority: string | null;
  /** Token-2022 extension type ids present after the base layout */
  extensions: number[];
}

export interface MintState {
  mintAuthority: string | null;
  supply: bigint;
  decimals: number;
  isInitialized: boolean;
  freezeAuthority: string | null;
  extensions: number[];
}

const view = (data: Uint8Array) => new DataView(data.buffer, data.byteOffset, data.byteLength);

function optionalKey(data: Uint8Array, at: number): string | null {
  return view(data).getUint32(at, true) === 1 ? encodeBase58(data.subarray(at + 4, at + 36)) : null;
}

function extensionTypes(data: Uint8Array): number[] {
  const out: number[] = [];
  const dv = view(data);
  // TLV after the 165-byte base (mints are padded to 165) and the account-type byte
  for (let at = TOKEN_ACCOUNT_SIZE + 1; at + 4 <= data.length; ) {
    const type = dv.getUint16(at, true);
    const length = dv.getUint16(at + 2, true);
    if (type === 0 && length === 0) break;
    out.push(type);
    at += 4 + length;
  }
  return out;
}

export function isTokenAccountData(owner: string, data: Uint8Array): boolean {
  if (!isTokenProgram(owner)) return false;
  if (data.length === TOKEN_ACCOUNT_SIZE) return true;
  return owner === TOKEN_2022_PROGRAM_ID && data.length > TOKEN_ACCOUNT_SIZE && data[TOKEN_ACCOUNT_SIZE] === ACCOUNT_TYPE_ACCOUNT;
}

export function isMintData(owner: string, data: Uint8Array): boolean {
  if (!isTokenProgram(owner)) return false;
  if (data.length === MINT_SIZE) return true;
  return owner === TOKEN_2022_PROGRAM_ID && data.length > TOKEN_ACCOUNT_SIZE && data[TOKEN_ACCOUNT_SIZE] === ACCOUNT_TYPE_MINT;
}

/** A mint's decimals (byte 44 of the Mint layout), without parsing the rest. */
export function readMintDecimals(data: Uint8Array): number {
  return data[44]!;
}

/** Mint (0..32), owner (32..64) and amount (64..72) only: the hot path. */
export function readTokenAmount(data: Uint8Array): bigint {
  return view(data).getBigUint64(64, true);
}

export function parseTokenAccount(data: Uint8Array): TokenAccountState {
  const dv = view(data);
  const stateByte = data[108]!;
  return {
    mint: encodeBase58(data.subarray(0, 32)),
    owner: encodeBase58(data.subarray(32, 64)),
    amount: dv.getBigUint64(64, true),
    delegate: optionalKey(data, 72),
    state: stateByte === 2 ? 'frozen' : stateByte === 1 ? 'initialized' : 'uninitialized',
    isNative: dv.getUint32(109, true) === 1 ? dv.getBigUint64(113, true) : null,
    delegatedAmount: dv.getBigUint64(121, true),
    closeAuthority: optionalKey(data, 129),
    extensions: data.length > TOKEN_ACCOUNT_SIZE ? extensionTypes(data) : [],
  };
}

export function parseMint(data: Uint8Array): MintState {
  const dv = view(data);
  return {
    mintAuthority: optionalKey(data, 0),
    supply: dv.getBigUint64(36, true),
    decimals: readMintDecimals(data),
    isInitialized: data[45] === 1,
    freezeAuthority: optionalKey(data, 46),
    extensions: data.length > TOKEN_ACCOUNT_SIZE ? extensionTypes(data) : [],
  };
}

/** The 82-byte base mint, initialized, with `authority` as mint authority and no freeze authority. */
export function encodeMint(authority: Uint8Array, decimals: number, supply = 0n): Uint8Array {
  const data = new Uint8Array(MINT_SIZE);
  const dv = view(data);
  dv.setUint32(0, 1, true);
  data.set(authority, 4);
  dv.setBigUint64(36, supply, true);
  data[44] = decimals;
  data[45] = 1;
  return data;
}

/** The RPC's `uiTokenAmount` / getTokenAccountBalance value. */
export function uiTokenAmount(amount: bigint, decimals: number) {
  const text = atomicToDecimal(amount, decimals); // the RPC's uiAmountString: no trailing zeros
  return { amount: amount.toString(), decimals, uiAmount: Number(text), uiAmountString: text };
}

const EXTENSION_NAMES: Record<number, string> = {
  1: 'transferFeeConfig',
  2: 'transferFeeAmount',
  3: 'mintCloseAuthority',
  4: 'confidentialTransferMint',
  5: 'confidentialTransferAccount',
  6: 'defaultAccountState',
  7: 'immutableOwner',
  8: 'memoTransfer',
  9: 'nonTransferable',
  10: 'interestBearingConfig',
  11: 'cpiGuard',
  12: 'permanentDelegate',
  13: 'nonTransferableAccount',
  14: 'transferHook',
  15: 'transferHookAccount',
  18: 'metadataPointer',
  19: 'tokenMetadata',
  20: 'groupPointer',
  21: 'tokenGroup',
  22: 'groupMemberPointer',
  23: 'tokenGroupMember',
};

function extensionsJson(types: number[]) {
  // Only the flag-like ones carry no state; the rest are named without their fields (not needed by our clients).
  return types.map((t) => (t === 7 || t === 9 || t === 13 ? { extension: EXTENSION_NAMES[t] } : { extension: EXTENSION_NAMES[t] ?? 'unparseableExtension' }));
}

/** jsonParsed account data for token programs, as the RPC's `parse_token` emits; null when not a token account or mint. */
export function parsedTokenData(owner: string, data: Uint8Array, decimalsOf: (mint: string) => number | undefined) {
  const program = owner === TOKEN_2022_PROGRAM_ID ? 'spl-token-2022' : 'spl-token';
  if (isTokenAccountData(owner, data)) {
    const a = parseTokenAccount(data);
    const decimals = decimalsOf(a.mint);
    if (decimals === undefined) return null;
    const info: Record<string, unknown> = {
      isNative: a.isNative !== null,
      mint: a.mint,
      owner: a.owner,
      state: a.state,
      tokenAmount: uiTokenAmount(a.amount, decimals),
    };
    if (a.delegate) {
      info.delegate = a.delegate;
      info.delegatedAmount = uiTokenAmount(a.delegatedAmount, decimals);
    }
    if (a.isNative !== null) info.rentExemptReserve = uiTokenAmount(a.isNative, 9);
    if (a.closeAuthority) info.closeAuthority = a.closeAuthority;
    if (a.extensions.length) info.extensions = extensionsJson(a.extensions);
    return { program, parsed: { info, type: 'account' }, space: data.length };
  }
  if (isMintData(owner, data)) {
    const m = parseMint(data);
    const info: Record<string, unknown> = {
      decimals: m.decimals,
      freezeAuthority: m.freezeAuthority,
      isInitialized: m.isInitialized,
      mintAuthority: m.mintAuthority,
      supply: m.supply.toString(),
    };
    if (m.extensions.length) info.extensions = extensionsJson(m.extensions);
    return { program, parsed: { info, type: 'mint' }, space: data.length };
  }
  return null;
}
