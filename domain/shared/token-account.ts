import { encodeBase58 } from './base58.ts';
import { TOKEN_2022_PROGRAM_ID, TOKEN_PROGRAM_ID } from './program-ids.ts';

// SPL Token / Token-2022 account and mint layouts: the one reader of both, for the domain (facilitator, builders,
// treasury reads), the paying client and the embedded ledger (whose hot path reads an amount per transfer). Offsets,
// not spl-token's buffer-layout decoders: those allocate a PublicKey per key and cost the ledger its throughput;
// test/domain/token-account.test.ts checks this reader against spl-token's `unpackAccount`/`unpackMint`.
//
// Account: mint 0..32 | owner 32..64 | amount 64..72 | delegate COption 72..108 | state 108 | is_native COption
//          109..121 | delegated_amount 121..129 | close_authority COption 129..165 | (Token-2022) account type 165, TLV
// Mint:    mint_authority COption 0..36 | supply 36..44 | decimals 44 | is_initialized 45 | freeze_authority COption
//          46..82 | (Token-2022) padding to 165, account type 165, TLV

export const TOKEN_ACCOUNT_SIZE = 165;
export const MINT_SIZE = 82;
const ACCOUNT_TYPE_MINT = 1;
const ACCOUNT_TYPE_ACCOUNT = 2;

export function isTokenProgram(owner: string): owner is typeof TOKEN_PROGRAM_ID | typeof TOKEN_2022_PROGRAM_ID {
  return owner === TOKEN_PROGRAM_ID || owner === TOKEN_2022_PROGRAM_ID;
}

/** e.g. { mint: "4zMM…", owner: "…", amount: 5_000_000n, delegate: "Ex…", delegatedAmount: 1_000_000n, state: "initialized", … } */
export interface TokenAccountState {
  mint: string;
  owner: string;
  amount: bigint;
  delegate: string | null;
  delegatedAmount: bigint;
  state: 'uninitialized' | 'initialized' | 'frozen';
  /** the rent-exempt reserve of a native (wrapped SOL) account; null otherwise */
  isNative: bigint | null;
  closeAuthority: string | null;
  /** Token-2022 extension type ids present after the base layout */
  extensions: number[];
}

/** e.g. { mintAuthority: "…", supply: 1_000_000n, decimals: 6, isInitialized: true, freezeAuthority: null, extensions: [] } */
export interface MintState {
  mintAuthority: string | null;
  supply: bigint;
  decimals: number;
  isInitialized: boolean;
  freezeAuthority: string | null;
  extensions: number[];
}

/** What a ledger answers for an account, as far as the layout needs it (a `LedgerAccount` fits). */
export interface OwnedData {
  /** the program that owns the account */
  owner: string;
  data: Uint8Array;
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

/** The data is a token account of one of the two token programs (Token-2022: account type byte 2 after the base). */
export function isTokenAccountData(owner: string, data: Uint8Array): boolean {
  if (!isTokenProgram(owner)) return false;
  if (data.length === TOKEN_ACCOUNT_SIZE) return true;
  return owner === TOKEN_2022_PROGRAM_ID && data.length > TOKEN_ACCOUNT_SIZE && data[TOKEN_ACCOUNT_SIZE] === ACCOUNT_TYPE_ACCOUNT;
}

/** The data is a mint of one of the two token programs (Token-2022: account type byte 1 after the padding). */
export function isMintData(owner: string, data: Uint8Array): boolean {
  if (!isTokenProgram(owner)) return false;
  if (data.length === MINT_SIZE) return true;
  return owner === TOKEN_2022_PROGRAM_ID && data.length > TOKEN_ACCOUNT_SIZE && data[TOKEN_ACCOUNT_SIZE] === ACCOUNT_TYPE_MINT;
}

/** A mint's decimals (byte 44), without parsing the rest; the caller knows the data is a mint. */
export function readMintDecimals(data: Uint8Array): number {
  return data[44]!;
}

/** A token account's amount (bytes 64..72) only: the ledger's hot path; the caller knows the data is a token account. */
export function readTokenAmount(data: Uint8Array): bigint {
  return view(data).getBigUint64(64, true);
}

/** Every field of token account data the caller has checked with isTokenAccountData. */
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

/** Every field of mint data the caller has checked with isMintData. */
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

/** An account read from a ledger as a token account of SPL Token or Token-2022 (extensions included); null when it is none. */
export function decodeTokenAccount(account: OwnedData | null | undefined): TokenAccountState | null {
  return account && isTokenAccountData(account.owner, account.data) ? parseTokenAccount(account.data) : null;
}

/** An account read from a ledger as a mint of SPL Token or Token-2022; null when it is none. */
export function decodeMint(account: OwnedData | null | undefined): MintState | null {
  return account && isMintData(account.owner, account.data) ? parseMint(account.data) : null;
}
