import type { TransactionMetadata } from 'litesvm/dist/internal.js';
import type { LedgerTransaction, TransactionTokenBalance } from '../../../domain/ports/ledger.ts';
import { decodeAddress, decodeBase58, encodeBase58 } from '../../../domain/shared/base58.ts';
import type { RawInner, StoredTokenBalance } from './history.ts';
import {
  ASSOCIATED_TOKEN_PROGRAM_ID,
  COMPUTE_BUDGET_PROGRAM_ID,
  LOOKUP_TABLE_PROGRAM_ID,
  MEMO_PROGRAM_ID,
  MEMO_V1_PROGRAM_ID,
  SYSTEM_PROGRAM_ID,
  TOKEN_2022_PROGRAM_ID,
  TOKEN_PROGRAM_ID,
} from './token.ts';
import { shortU16, type WireTransaction } from '../../../domain/ledger/wire.ts';
import type { TransactionRecord } from './ledger.ts';

// Pure helpers over transactions and messages for the embedded ledger: the port's LedgerTransaction from a history
// record, the memo summary, the priority fee, which accounts a transaction cannot reassign, and the legacy messages
// the ledger compiles for its own faucet and mint transactions.

export function toLedgerTransaction({ stored, wire, accountKeys }: TransactionRecord): LedgerTransaction {
  const tokenBalance = (b: StoredTokenBalance): TransactionTokenBalance => ({
    accountIndex: b.index,
    account: accountKeys[b.index]!,
    mint: b.mint,
    owner: b.owner,
    amount: b.amount,
    decimals: b.decimals,
    tokenProgram: b.program,
  });
  return {
    signature: stored.sig,
    slot: stored.slot,
    blockTime: stored.time,
    version: wire.version,
    err: stored.err,
    fee: stored.fee,
    accountKeys,
    signers: accountKeys.slice(0, wire.numRequiredSignatures),
    recentBlockhash: encodeBase58(wire.bytes.subarray(wire.blockhashOffset, wire.blockhashOffset + 32)),
    wire: new Uint8Array(wire.bytes),
    preBalances: stored.pre,
    postBalances: stored.post,
    preTokenBalances: stored.preTok.map(tokenBalance),
    postTokenBalances: stored.postTok.map(tokenBalance),
    instructions: wire.instructions.map((ix) => ({
      programId: accountKeys[ix.programIndex]!,
      accounts: Array.from(ix.accounts, (i) => accountKeys[i]!),
      data: new Uint8Array(ix.data),
    })),
    innerInstructions: stored.inner.map(([index, list]) => ({
      index,
      instructions: list.map(([programIndex, accounts, data]) => ({
        programId: accountKeys[programIndex]!,
        accounts: accounts.map((i) => accountKeys[i]!),
        data: new Uint8Array(data),
      })),
    })),
    logs: stored.logs,
    unitsConsumed: stored.cu,
  };
}

export function innerInstructionsOf(meta: TransactionMetadata): RawInner | undefined {
  const groups = meta.innerInstructions();
  let out: RawInner | undefined;
  for (let i = 0; i < groups.length; i++) {
    const group = groups[i]!;
    if (group.length === 0) continue;
    const list: RawInner[number][1] = [];
    for (const inner of group) {
      const c = inner.instruction();
      list.push([c.programIdIndex(), c.accounts(), c.data(), inner.stackHeight()]);
    }
    out ??= [];
    out.push([i, list]);
  }
  return out;
}

/** Programs whose instructions never reassign an account that is a signer or already a token account. */
export const OWNER_STABLE_PROGRAMS = new Set([
  COMPUTE_BUDGET_PROGRAM_ID,
  TOKEN_PROGRAM_ID,
  TOKEN_2022_PROGRAM_ID,
  ASSOCIATED_TOKEN_PROGRAM_ID,
  MEMO_PROGRAM_ID,
  MEMO_V1_PROGRAM_ID,
]);

export const UNSTABLE = 0;
/** no instruction changes an account's owner program except by creating a new account */
export const OWNERS_STABLE = 1;
/** … and none moves lamports into or out of an existing token account */
export const TOKEN_LAMPORTS_STABLE = 2;

/** What the transaction's top-level instructions can do to existing accounts (their CPIs included). */
export function ownersStable(tx: WireTransaction, names: string[]): number {
  let result = TOKEN_LAMPORTS_STABLE;
  for (const ix of tx.instructions) {
    const program = names[ix.programIndex]!;
    if (program === TOKEN_PROGRAM_ID || program === TOKEN_2022_PROGRAM_ID) {
      const kind = ix.dataLength > 0 ? ix.bytesOf()[ix.dataOffset] : -1;
      if (kind === 9 || (kind === 38 && program === TOKEN_2022_PROGRAM_ID)) result = OWNERS_STABLE; // CloseAccount, WithdrawExcessLamports
      continue;
    }
    if (OWNER_STABLE_PROGRAMS.has(program)) continue;
    if (program === SYSTEM_PROGRAM_ID) {
      const d = ix.data;
      const kind = d.length >= 4 && d[1] === 0 && d[2] === 0 && d[3] === 0 ? d[0] : -1;
      if (kind === 4) continue; // AdvanceNonceAccount
      if (kind === 2 || kind === 11) {
        result = OWNERS_STABLE; // Transfer, TransferWithSeed: lamports may go to a token account
        continue;
      }
    }
    return UNSTABLE;
  }
  return result;
}

/** The RPC's memo summary: "[len] text" per memo instruction, joined by "; ". */
export function memoSummary(tx: Pick<WireTransaction, 'instructions'>, names: string[]): string | null {
  let out: string | null = null;
  for (const ix of tx.instructions) {
    const program = names[ix.programIndex];
    if (program !== MEMO_PROGRAM_ID && program !== MEMO_V1_PROGRAM_ID) continue;
    const text = `[${ix.dataLength}] ${ix.bytesOf().toString('utf8', ix.dataOffset, ix.dataOffset + ix.dataLength)}`;
    out = out === null ? text : `${out}; ${text}`;
  }
  return out;
}

export const BUILTIN_PROGRAMS = new Set([
  SYSTEM_PROGRAM_ID,
  'ComputeBudget111111111111111111111111111111',
  LOOKUP_TABLE_PROGRAM_ID,
  'BPFLoaderUpgradeab1e11111111111111111111111',
  'BPFLoader2111111111111111111111111111111111',
  'BPFLoader1111111111111111111111111111111111',
  'LoaderV411111111111111111111111111111111111',
  'Vote111111111111111111111111111111111111111',
  'Stake11111111111111111111111111111111111111',
  'Config1111111111111111111111111111111111111',
]);

/** ceil(unit price × unit limit / 1e6), with the runtime's default limits when no SetComputeUnitLimit is given. */
export function priorityFee(instructions: { programIndex: number; data: Uint8Array }[], names: string[]): bigint {
  let limit: bigint | null = null;
  let price = 0n;
  let defaultLimit = 0n;
  for (const ix of instructions) {
    const program = names[ix.programIndex];
    if (program === 'ComputeBudget111111111111111111111111111111') {
      const d = Buffer.from(ix.data);
      if (d[0] === 2 && d.length === 5) limit = BigInt(d.readUInt32LE(1));
      else if (d[0] === 3 && d.length === 9) price = d.readBigUInt64LE(1);
    }
    defaultLimit += program !== undefined && BUILTIN_PROGRAMS.has(program) ? 3_000n : 200_000n;
  }
  const units = (limit ?? defaultLimit) > 1_400_000n ? 1_400_000n : (limit ?? defaultLimit);
  return (price * units + 999_999n) / 1_000_000n;
}

export interface LocalInstruction {
  programId: string;
  accounts: { address: string; signer: boolean; writable: boolean }[];
  data: Uint8Array;
}

/** A legacy message: payer first, then writable signers, readonly signers, writable and readonly others. */
export function compileLegacyMessage(payer: string, instructions: LocalInstruction[], blockhash: string): Buffer {
  const metas = new Map<string, { signer: boolean; writable: boolean }>();
  const note = (address: string, signer: boolean, writable: boolean) => {
    const m = metas.get(address);
    if (m) {
      m.signer ||= signer;
      m.writable ||= writable;
    } else metas.set(address, { signer, writable });
  };
  note(payer, true, true);
  for (const ix of instructions) {
    for (const a of ix.accounts) note(a.address, a.signer, a.writable);
    note(ix.programId, false, false);
  }
  const rank = (m: { signer: boolean; writable: boolean }) => (m.signer ? (m.writable ? 0 : 1) : m.writable ? 2 : 3);
  const ordered = [...metas.entries()].sort(([a, ma], [b, mb]) => (a === payer ? -1 : b === payer ? 1 : rank(ma) - rank(mb)));
  const keys = ordered.map(([address]) => address);
  const index = new Map(keys.map((k, i) => [k, i]));
  const header = [
    ordered.filter(([, m]) => m.signer).length,
    ordered.filter(([, m]) => m.signer && !m.writable).length,
    ordered.filter(([, m]) => !m.signer && !m.writable).length,
  ];
  const parts: Buffer[] = [Buffer.from(header), Buffer.from(shortU16(keys.length)), ...keys.map((k) => Buffer.from(decodeAddress(k)!))];
  parts.push(Buffer.from(decodeBase58(blockhash)!), Buffer.from(shortU16(instructions.length)));
  for (const ix of instructions) {
    parts.push(Buffer.from([index.get(ix.programId)!]), Buffer.from(shortU16(ix.accounts.length)), Buffer.from(ix.accounts.map((a) => index.get(a.address)!)));
    parts.push(Buffer.from(shortU16(ix.data.length)), Buffer.from(ix.data));
  }
  return Buffer.concat(parts);
}
