import type { LatestBlockhash, LedgerAccount, SendResult } from '../../../domain/ports/ledger.ts';
import { decodeAddress } from '../../../domain/shared/base58.ts';
import { shortU16 } from '../../../domain/ledger/wire.ts';
import { isMintData, readMintDecimals } from '../../../domain/shared/token-account.ts';
import { associatedTokenAccount } from '../../../domain/treasury/derive.ts';
import type { LocalSigner } from './keys.ts';
import { compileLegacyMessage, type LocalInstruction } from './ledger-messages.ts';
import { ASSOCIATED_TOKEN_PROGRAM_ID, MEMO_PROGRAM_ID, SYSTEM_PROGRAM_ID } from './token.ts';

// The faucet: real transactions signed by the ledger's local faucet and mint authority keys, sent like any other.

export interface MintResult {
  signature: string;
  mint: string;
  tokenAccount: string;
  amount: bigint;
  decimals: number;
}

/** What the faucet needs of its ledger. */
export interface FaucetLedger {
  readonly faucet: LocalSigner;
  readonly mintAuthority: LocalSigner;
  readAccount(address: string): LedgerAccount | null;
  latestBlockhash(): LatestBlockhash;
  sendWire(bytes: Uint8Array): SendResult;
  /** how many transactions have landed */
  readonly transactionCount: number;
}

/** Transfers `lamports` from the faucet; returns the signature. */
export function airdrop(ledger: FaucetLedger, to: string, lamports: bigint): string {
  const toKey = decodeAddress(to);
  if (!toKey) throw new RangeError(`not an address: ${to}`);
  if (lamports <= 0n || lamports > 0xffff_ffff_ffff_ffffn) throw new RangeError('lamports must be a positive u64');
  const data = Buffer.alloc(12);
  data.writeUInt32LE(2, 0);
  data.writeBigUInt64LE(lamports, 4);
  const { faucet } = ledger;
  return sendLocal(
    ledger,
    [faucet],
    [
      {
        programId: SYSTEM_PROGRAM_ID,
        accounts: [
          { address: faucet.address, signer: true, writable: true },
          { address: to, signer: false, writable: true },
        ],
        data,
      },
    ],
  );
}

/** Mints `amount` (atomic units) of a curated stable or any mint of the local authority to `owner`'s ATA. */
export function mintTo(ledger: FaucetLedger, owner: string, mint: string, amount: bigint): MintResult {
  if (!decodeAddress(owner)) throw new RangeError(`not an address: ${owner}`);
  const mintAccount = ledger.readAccount(mint);
  if (!mintAccount || !isMintData(mintAccount.owner, mintAccount.data)) throw new RangeError(`no mint at ${mint}`);
  if (amount <= 0n || amount > 0xffff_ffff_ffff_ffffn) throw new RangeError('amount must be a positive u64');
  const tokenProgram = mintAccount.owner;
  const decimals = readMintDecimals(mintAccount.data);
  const ata = associatedTokenAccount(owner, mint, tokenProgram);
  const mintData = Buffer.alloc(10);
  mintData[0] = 14; // MintToChecked
  mintData.writeBigUInt64LE(amount, 1);
  mintData[9] = decimals;
  const { faucet, mintAuthority } = ledger;
  const signature = sendLocal(
    ledger,
    [faucet, mintAuthority],
    [
      {
        programId: ASSOCIATED_TOKEN_PROGRAM_ID,
        accounts: [
          { address: faucet.address, signer: true, writable: true },
          { address: ata, signer: false, writable: true },
          { address: owner, signer: false, writable: false },
          { address: mint, signer: false, writable: false },
          { address: SYSTEM_PROGRAM_ID, signer: false, writable: false },
          { address: tokenProgram, signer: false, writable: false },
        ],
        data: Buffer.from([1]), // CreateIdempotent
      },
      {
        programId: tokenProgram,
        accounts: [
          { address: mint, signer: false, writable: true },
          { address: ata, signer: false, writable: true },
          { address: mintAuthority.address, signer: true, writable: false },
        ],
        data: mintData,
      },
    ],
  );
  return { signature, mint, tokenAccount: ata, amount, decimals };
}

function sendLocal(ledger: FaucetLedger, signers: LocalSigner[], instructions: LocalInstruction[]): string {
  // Two equal requests in one slot would be the same bytes, a duplicate: a memo with the sequence keeps them apart.
  const memo = { programId: MEMO_PROGRAM_ID, accounts: [], data: Buffer.from(`faucet #${ledger.transactionCount + 1}`) };
  const message = compileLegacyMessage(signers[0]!.address, [...instructions, memo], ledger.latestBlockhash().blockhash);
  const signatures = signers.map((s) => s.sign(message));
  const wire = Buffer.concat([Buffer.from(shortU16(signatures.length)), ...signatures, message]);
  const result = ledger.sendWire(wire);
  if (!result.ok) throw new Error(`faucet transaction failed: ${JSON.stringify(result.err)} ${result.logs.join(' | ')}`);
  return result.signature;
}
