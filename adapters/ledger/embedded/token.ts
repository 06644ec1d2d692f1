import { atomicToDecimal } from '../../../domain/shared/money.ts';
import { isMintData, isTokenAccountData, MINT_SIZE, parseMint, parseTokenAccount } from '../../../domain/shared/token-account.ts';
import {
  ASSOCIATED_TOKEN_PROGRAM_ID,
  COMPUTE_BUDGET_PROGRAM_ID,
  MEMO_PROGRAM_ID,
  SYSTEM_PROGRAM_ID,
  TOKEN_2022_PROGRAM_ID,
  TOKEN_PROGRAM_ID,
} from '../../../domain/shared/program-ids.ts';

// SPL Token / Token-2022 as the RPC renders them (jsonParsed) and the ledger writes them (curated mints); reading the
// layouts is domain/shared/token-account.ts, the one reader.

export const MEMO_V1_PROGRAM_ID = 'Memo1UhkJRfHyvLMcVucJwxXeuD728EqVDDwQDxFMNo';
export const LOOKUP_TABLE_PROGRAM_ID = 'AddressLookupTab1e1111111111111111111111111';
// one definition of the program ids: the domain's
export { ASSOCIATED_TOKEN_PROGRAM_ID, COMPUTE_BUDGET_PROGRAM_ID, MEMO_PROGRAM_ID, SYSTEM_PROGRAM_ID, TOKEN_PROGRAM_ID, TOKEN_2022_PROGRAM_ID };

const view = (data: Uint8Array) => new DataView(data.buffer, data.byteOffset, data.byteLength);

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
