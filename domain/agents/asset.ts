import { encodeBase58 } from '../shared/base58.ts';
import type { LedgerAccount } from '../ports/ledger.ts';
import { MPL_CORE_PROGRAM_ID } from '../treasury/derive.ts';

/** Metaplex Core `Key` discriminator of an AssetV1 account. */
const ASSET_V1 = 1;

/**
 * The owner recorded in a Metaplex Core AssetV1 account: data = key (1 byte, 1 = AssetV1), owner (32 bytes),
 * update authority, name, uri, … Null when the account is not a Core asset (another program's account, another kind
 * of Core account, too short).
 */
export function coreAssetOwner(account: LedgerAccount): string | null {
  if (account.owner !== MPL_CORE_PROGRAM_ID || account.data.length < 33 || account.data[0] !== ASSET_V1) return null;
  return encodeBase58(account.data.subarray(1, 33));
}
