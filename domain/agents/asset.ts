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

/**
 * What the ledger holds at an agent's address, e.g. { kind: "asset", asset: { owner: "7Yk…", … } },
 * { kind: "nothing" }, { kind: "account", program: "Tokenkeg…" } (another program's account) or
 * { kind: "not_asset_v1" } (a Core account that is not an AssetV1: a collection, malformed data).
 */
export type LedgerHolding = { kind: 'asset'; asset: CoreAsset } | { kind: 'nothing' } | { kind: 'account'; program: string } | { kind: 'not_asset_v1' };

export function holdingOf(account: LedgerAccount | null): LedgerHolding {
  if (!account) return { kind: 'nothing' };
  if (account.owner !== MPL_CORE_PROGRAM_ID) return { kind: 'account', program: account.owner };
  const asset = decodeCoreAsset(account);
  return asset ? { kind: 'asset', asset } : { kind: 'not_asset_v1' };
}

/**
 * Why `holding` does not prove an agent of `owner`, in words and as details (`found`, and `program` or `asset_owner`);
 * null when it does: a Core AssetV1 whose owner is `owner`.
 */
export function disproof(holding: LedgerHolding, owner: string): { said: string; details: Record<string, unknown> } | null {
  switch (holding.kind) {
    case 'asset':
      return holding.asset.owner === owner
        ? null
        : {
            said: `a Metaplex Core asset owned by ${holding.asset.owner}, not ${owner}`,
            details: { found: 'asset_of_another_owner', asset_owner: holding.asset.owner },
          };
    case 'nothing':
      return { said: 'no account', details: { found: 'nothing' } };
    case 'account':
      return {
        said: `an account of program ${holding.program}, not a Metaplex Core asset`,
        details: { found: 'account_of_another_program', program: holding.program },
      };
    case 'not_asset_v1':
      return {
        said: `a Metaplex Core account that is not an AssetV1 (a collection, or data that does not read as an asset)`,
        details: { found: 'not_asset_v1' },
      };
  }
}
