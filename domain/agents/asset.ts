import { deserializeAssetV1 } from '@metaplex-foundation/mpl-core';
import { lamports, publicKey } from '@metaplex-foundation/umi';
import type { LedgerAccount } from '../ports/ledger.ts';
import { MPL_CORE_PROGRAM_ID } from '../treasury/derive.ts';

/** What the gateway reads of a Metaplex Core AssetV1 account, e.g. { owner: "7Yk…", name: "Weather agent", uri: "https://…/agent.json" } */
export interface CoreAsset {
  owner: string;
  name: string;
  uri: string;
}

/**
 * A Metaplex Core AssetV1 account decoded with the official mpl-core deserializer (plugins included). Null when the
 * account is not one: another program's account, another kind of Core account (a collection), malformed data.
 */
export function decodeCoreAsset(account: LedgerAccount): CoreAsset | null {
  if (account.owner !== MPL_CORE_PROGRAM_ID) return null;
  try {
    const asset = deserializeAssetV1({
      publicKey: publicKey(account.address),
      owner: publicKey(account.owner),
      lamports: lamports(account.lamports),
      executable: account.executable,
      data: account.data,
    });
    return { owner: asset.owner.toString(), name: asset.name, uri: asset.uri };
  } catch {
    // the deserializer throws on another key (a collection is key 5) and on data that is not an AssetV1 layout
    return null;
  }
}

/** The owner recorded in a Metaplex Core AssetV1 account; null when the account is not one. */
export function coreAssetOwner(account: LedgerAccount): string | null {
  return decodeCoreAsset(account)?.owner ?? null;
}
