import { isTokenProgram } from '../shared/token-account.ts';
import type { DecodedInstruction } from './decode.ts';
import { ASSOCIATED_TOKEN_PROGRAM_ID, COMPUTE_BUDGET_PROGRAM_ID, LIGHTHOUSE_PROGRAM_ID, MEMO_PROGRAM_ID } from './schema.ts';

// Readers for the few instruction kinds a settlement may hold, from their documented byte layouts. Written apart
// from the @solana/spl-token and web3.js builders on purpose: the tests build with those, so the two check each other.

const TRANSFER_CHECKED = 12;
const SET_COMPUTE_UNIT_LIMIT = 2;
const SET_COMPUTE_UNIT_PRICE = 3;
/** Associated Token Account program: empty data or [0] is Create, [1] CreateIdempotent, [2] RecoverNested. */
const ATA_CREATE_IDEMPOTENT = 1;

export const isMemo = (ix: DecodedInstruction) => ix.programId === MEMO_PROGRAM_ID;
export const isLighthouse = (ix: DecodedInstruction) => ix.programId === LIGHTHOUSE_PROGRAM_ID;
export const isAtaProgram = (ix: DecodedInstruction) => ix.programId === ASSOCIATED_TOKEN_PROGRAM_ID;

function readU64(data: Uint8Array, offset: number): bigint {
  return new DataView(data.buffer, data.byteOffset, data.byteLength).getBigUint64(offset, true);
}

/** SetComputeUnitLimit: [2, u32 LE]; null when the instruction is anything else. */
export function readComputeUnitLimit(ix: DecodedInstruction | undefined): number | null {
  if (!ix || ix.programId !== COMPUTE_BUDGET_PROGRAM_ID || ix.data.length !== 5 || ix.data[0] !== SET_COMPUTE_UNIT_LIMIT) return null;
  return new DataView(ix.data.buffer, ix.data.byteOffset, ix.data.byteLength).getUint32(1, true);
}

/** SetComputeUnitPrice: [3, u64 LE] micro-lamports; null when the instruction is anything else. */
export function readComputeUnitPrice(ix: DecodedInstruction | undefined): bigint | null {
  if (!ix || ix.programId !== COMPUTE_BUDGET_PROGRAM_ID || ix.data.length !== 9 || ix.data[0] !== SET_COMPUTE_UNIT_PRICE) return null;
  return readU64(ix.data, 1);
}

export interface TransferChecked {
  index: number;
  programId: string;
  source: string;
  mint: string;
  destination: string;
  authority: string;
  /** signer accounts after the authority: present only when the authority is a multisig */
  multisigSigners: string[];
  amount: bigint;
  decimals: number;
}

/** SPL Token / Token-2022 TransferChecked: data [12, u64 LE amount, u8 decimals]; accounts source, mint, destination, authority, …signers. */
export function readTransferChecked(ix: DecodedInstruction | undefined): TransferChecked | null {
  if (!ix || !isTokenProgram(ix.programId) || ix.data.length !== 10 || ix.data[0] !== TRANSFER_CHECKED || ix.accounts.length < 4) return null;
  const [source, mint, destination, authority, ...multisigSigners] = ix.accounts as [string, string, string, string, ...string[]];
  return {
    index: ix.index,
    programId: ix.programId,
    source,
    mint,
    destination,
    authority,
    multisigSigners,
    amount: readU64(ix.data, 1),
    decimals: ix.data[9]!,
  };
}

/** A token-program instruction that is not a well-formed TransferChecked (Transfer, Approve, a short TransferChecked …). */
export const isOtherTokenInstruction = (ix: DecodedInstruction) => isTokenProgram(ix.programId) && readTransferChecked(ix) === null;

export interface AtaCreation {
  index: number;
  idempotent: boolean;
  /** funding account, then the account created, its owner, the mint, the system program and the token program */
  payer: string | undefined;
  account: string | undefined;
  owner: string | undefined;
  mint: string | undefined;
  systemProgram: string | undefined;
  tokenProgram: string | undefined;
  accountCount: number;
}

/** Reads an Associated Token Account program instruction; RecoverNested reads as a non-idempotent creation (refused either way). */
export function readAtaCreation(ix: DecodedInstruction): AtaCreation {
  const idempotent = ix.data.length === 1 && ix.data[0] === ATA_CREATE_IDEMPOTENT;
  const [payer, account, owner, mint, systemProgram, tokenProgram] = ix.accounts;
  return { index: ix.index, idempotent, payer, account, owner, mint, systemProgram, tokenProgram, accountCount: ix.accounts.length };
}
