import { Key } from '@metaplex-foundation/mpl-core';
// The generated AssetV1 layout serializer (the package's index exports only the hooked one, which deserializes only).
import { getAssetV1AccountDataSerializer } from '@metaplex-foundation/mpl-core/dist/src/generated/types/assetV1AccountData.js';
import { none, publicKey } from '@metaplex-foundation/umi';
import type { LedgerThread } from '../../adapters/ledger/embedded/ledger-thread.ts';
import { MPL_CORE_PROGRAM_ID } from '../../domain/treasury/derive.ts';

/** The data of a Metaplex Core AssetV1 account without plugins (update authority None), built by mpl-core's serializer. */
export function coreAssetData(fields: { owner: string; name?: string; uri?: string }): Uint8Array {
  return getAssetV1AccountDataSerializer().serialize({
    key: Key.AssetV1,
    owner: publicKey(fields.owner),
    updateAuthority: { __kind: 'None' },
    name: fields.name ?? 'agent',
    uri: fields.uri ?? 'https://example.com/agent.json',
    seq: none(),
  });
}

/** Writes a Core AssetV1 account at `mint` on an embedded ledger, as the Core program would leave it. */
export async function writeCoreAsset(ledger: LedgerThread, mint: string, fields: { owner: string; name?: string; uri?: string }): Promise<void> {
  await ledger.setAccount(mint, { lamports: 10_000_000n, data: coreAssetData(fields), owner: MPL_CORE_PROGRAM_ID });
}
