import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gunzipSync } from 'node:zlib';
import { FailedTransactionMetadata, LiteSVM } from 'litesvm';
import { address, getTransactionDecoder, lamports as kitLamports } from '@solana/kit';
import { Keypair, Transaction } from '@solana/web3.js';
import { createV1, Key, mplCore, pluginAuthorityPair } from '@metaplex-foundation/mpl-core';
import { createUmi } from '@metaplex-foundation/umi-bundle-defaults';
import { toWeb3JsInstruction } from '@metaplex-foundation/umi-web3js-adapters';
// The generated AssetV1 layout serializer (the package's index exports only the hooked one, which deserializes only).
import { getAssetV1AccountDataSerializer } from '@metaplex-foundation/mpl-core/dist/src/generated/types/assetV1AccountData.js';
import { createNoopSigner, none, publicKey, signerIdentity } from '@metaplex-foundation/umi';
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

/**
 * The Metaplex Core program binary (`<program-id>.so` or `.so.gz`) from SVC_LEDGER_PROGRAMS, else `../shared/programs`
 * beside the repository (where the session keeps it). Throws saying how to enable the tests that need it.
 */
export function coreProgramBytes(): Uint8Array {
  const root = fileURLToPath(new URL('../..', import.meta.url));
  const dirs = [process.env.SVC_LEDGER_PROGRAMS, join(root, '..', 'shared', 'programs')].filter((d): d is string => !!d);
  for (const dir of dirs) {
    for (const name of [`${MPL_CORE_PROGRAM_ID}.so`, `${MPL_CORE_PROGRAM_ID}.so.gz`]) {
      const path = resolve(dir, name);
      if (existsSync(path)) return name.endsWith('.gz') ? gunzipSync(readFileSync(path)) : readFileSync(path);
    }
  }
  throw new Error(
    `The Metaplex Core program binary ${MPL_CORE_PROGRAM_ID}.so[.gz] is not in ${dirs.join(' or ')}: ` +
      'set SVC_LEDGER_PROGRAMS to the directory holding it (e.g. SVC_LEDGER_PROGRAMS=../shared/programs).',
  );
}

/**
 * Runs the real Core program's CreateV1 (built by mpl-core's `createV1`, with an Attributes plugin) in a LiteSVM of its
 * own and returns the asset account it wrote: what an agent minted on a cluster holds.
 */
export function createRealCoreAsset(fields: { owner: string; name: string; uri: string }): { mint: string; lamports: bigint; data: Uint8Array; owner: string } {
  const svm = new LiteSVM();
  svm.addProgram(address(MPL_CORE_PROGRAM_ID), coreProgramBytes());
  const payer = Keypair.generate();
  const asset = Keypair.generate();
  svm.airdrop(address(payer.publicKey.toBase58()), kitLamports(1_000_000_000n));
  const umi = createUmi('http://127.0.0.1:9')
    .use(mplCore())
    .use(signerIdentity(createNoopSigner(publicKey(payer.publicKey.toBase58()))));
  const instructions = createV1(umi, {
    asset: createNoopSigner(publicKey(asset.publicKey.toBase58())),
    owner: publicKey(fields.owner),
    name: fields.name,
    uri: fields.uri,
    plugins: [pluginAuthorityPair({ type: 'Attributes', data: { attributeList: [{ key: 'role', value: 'weather' }] } })],
  })
    .getInstructions()
    .map(toWeb3JsInstruction);
  const tx = new Transaction({ feePayer: payer.publicKey, recentBlockhash: svm.latestBlockhash() }).add(...instructions);
  tx.sign(payer, asset);
  const result = svm.sendTransaction(getTransactionDecoder().decode(tx.serialize()));
  if (result instanceof FailedTransactionMetadata) throw new Error(`CreateV1 failed: ${result.toString()}`);
  const account = svm.getAccount(address(asset.publicKey.toBase58()));
  if (!account.exists) throw new Error('CreateV1 wrote no asset account');
  return { mint: asset.publicKey.toBase58(), lamports: account.lamports, data: account.data, owner: account.programAddress };
}
