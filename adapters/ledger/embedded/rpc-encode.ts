import type { LedgerAccount } from '../../../domain/ports/ledger.ts';
import { encodeBase58 } from '../../../domain/shared/base58.ts';
import type { StoredTokenBalance } from './history.ts';
import type { EmbeddedLedger, TransactionRecord } from './ledger.ts';
import {
  ASSOCIATED_TOKEN_PROGRAM_ID,
  MEMO_PROGRAM_ID,
  MEMO_V1_PROGRAM_ID,
  SYSTEM_PROGRAM_ID,
  TOKEN_2022_PROGRAM_ID,
  TOKEN_PROGRAM_ID,
  parsedTokenData,
  uiTokenAmount,
} from './token.ts';
import { isStaticWritable } from '../../../domain/ledger/wire.ts';

// Solana JSON-RPC response shapes (agave's UiAccount, EncodedConfirmedTransactionWithStatusMeta) for the server.

export class RpcError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
  }
}

export const invalidParams = (message: string) => new RpcError(-32602, message);

const RENT_EPOCH_EXEMPT = 18_446_744_073_709_551_615n;

export type AccountEncoding = 'binary' | 'base58' | 'base64' | 'base64+zstd' | 'jsonParsed';

export interface DataSlice {
  offset: number;
  length: number;
}

export function encodeAccount(ledger: EmbeddedLedger, account: LedgerAccount, encoding: AccountEncoding = 'binary', slice?: DataSlice) {
  const full = account.data;
  const data = slice ? full.subarray(slice.offset, slice.offset + slice.length) : full;
  const bytes = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  let encoded: unknown;
  switch (encoding) {
    case 'binary':
    case 'base58':
      if (bytes.length > 128) throw new RpcError(-32600, 'Encoded binary (base 58) data should be less than 128 bytes, please use Base64 encoding.');
      encoded = encoding === 'binary' ? encodeBase58(bytes) : [encodeBase58(bytes), 'base58'];
      break;
    case 'base64':
      encoded = [bytes.toString('base64'), 'base64'];
      break;
    case 'jsonParsed':
      encoded = (!slice && (parsedTokenData(account.owner, full, (mint) => ledger.decimalsOf(mint)) ?? parsedUpgradeableLoaderData(account.owner, full))) || [
        bytes.toString('base64'),
        'base64',
      ];
      break;
    default:
      throw invalidParams(`Invalid params: unsupported encoding ${String(encoding)}`);
  }
  return { data: encoded, executable: account.executable, lamports: account.lamports, owner: account.owner, rentEpoch: RENT_EPOCH_EXEMPT, space: full.length };
}

const UPGRADEABLE_LOADER = 'BPFLoaderUpgradeab1e11111111111111111111111';

/**
 * jsonParsed of an upgradeable-loader account, as agave's account decoder writes it (loaded programs), e.g.
 * { program: 'bpf-upgradeable-loader', parsed: { type: 'program', info: { programData: '9ZC2…' } }, space: 36 };
 * null for any other account.
 */
export function parsedUpgradeableLoaderData(owner: string, data: Uint8Array) {
  if (owner !== UPGRADEABLE_LOADER || data.length < 4) return null;
  const view = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  // Option<Pubkey> as bincode writes it; the loader reserves its 33 bytes either way
  const authority = (at: number) => (view[at] === 1 ? encodeBase58(view.subarray(at + 1, at + 33)) : null);
  const tag = view.readUInt32LE(0);
  let parsed: Record<string, unknown>;
  if (tag === 0) parsed = { type: 'uninitialized' };
  else if (tag === 1 && view.length >= 37)
    parsed = { type: 'buffer', info: { authority: authority(4), data: [view.subarray(37).toString('base64'), 'base64'] } };
  else if (tag === 2 && view.length >= 36) parsed = { type: 'program', info: { programData: encodeBase58(view.subarray(4, 36)) } };
  else if (tag === 3 && view.length >= 45) {
    parsed = {
      type: 'programData',
      info: { slot: Number(view.readBigUInt64LE(4)), authority: authority(12), data: [view.subarray(45).toString('base64'), 'base64'] },
    };
  } else return null;
  return { program: 'bpf-upgradeable-loader', parsed, space: data.length };
}

function tokenBalanceJson(b: StoredTokenBalance) {
  return { accountIndex: b.index, mint: b.mint, owner: b.owner, programId: b.program, uiTokenAmount: uiTokenAmount(b.amount, b.decimals) };
}

export type TransactionEncoding = 'json' | 'jsonParsed' | 'base64' | 'base58';

/** The account keys of a landed transaction as jsonParsed (and getBlock's `accounts` details) list them. */
export function parsedAccountKeys({ stored, wire, accountKeys }: TransactionRecord) {
  return accountKeys.map((pubkey, i) => ({
    pubkey,
    signer: i < wire.numRequiredSignatures,
    source: i < wire.numStaticKeys ? 'transaction' : 'lookupTable',
    writable: i < wire.numStaticKeys ? isStaticWritable(wire, i) : i < wire.numStaticKeys + stored.lw.length,
  }));
}

/** The signatures of a landed transaction, base58, in order. */
export function signaturesOf({ wire }: TransactionRecord): string[] {
  const out: string[] = [];
  for (let i = 0; i < wire.numSignatures; i++)
    out.push(encodeBase58(wire.bytes.subarray(wire.signaturesOffset + i * 64, wire.signaturesOffset + (i + 1) * 64)));
  return out;
}

/**
 * One transaction of getBlock's `transactions`: `full` is getTransaction's { meta, transaction } without slot and
 * blockTime; `accounts` is agave's account-keys-only form (signatures, parsed account keys, and a meta without
 * instructions, logs or loaded addresses). `version` is named only when the client said which versions it reads.
 */
export function encodeBlockTransaction(
  record: TransactionRecord,
  options: { details: 'full' | 'accounts'; encoding: TransactionEncoding; withVersion: boolean },
) {
  const version = options.withVersion ? record.wire.version : undefined;
  const { meta, transaction } = encodeTransaction(record, options.encoding);
  if (options.details === 'full') return { meta, transaction, version };
  const { innerInstructions: _i, logMessages: _l, loadedAddresses: _a, computeUnitsConsumed: _c, ...slim } = meta;
  return { meta: slim, transaction: { accountKeys: parsedAccountKeys(record), signatures: signaturesOf(record) }, version };
}

/** getTransaction's result for one landed transaction. */
export function encodeTransaction(record: TransactionRecord, encoding: TransactionEncoding) {
  const { stored, wire, accountKeys } = record;
  const staticKeys = accountKeys.slice(0, wire.numStaticKeys);
  const loaded = { writable: stored.lw, readonly: stored.lr };
  const signatures = signaturesOf(record);
  const parsed = encoding === 'jsonParsed';
  const instructionJson = (programIndex: number, accounts: ArrayLike<number>, data: Uint8Array, stackHeight: number | null) =>
    parsed
      ? parseInstruction(
          accountKeys[programIndex]!,
          Array.from(accounts, (i) => accountKeys[i]!),
          data,
          stackHeight,
        )
      : { programIdIndex: programIndex, accounts: Array.from(accounts), data: encodeBase58(data), stackHeight };
  const inner = stored.inner.map(([index, list]) => ({
    index,
    instructions: list.map(([programIndex, accounts, data, stackHeight]) => instructionJson(programIndex, accounts, data, stackHeight)),
  }));
  const meta = {
    computeUnitsConsumed: stored.cu,
    err: stored.err,
    fee: stored.fee,
    innerInstructions: inner,
    loadedAddresses: loaded,
    logMessages: stored.logs,
    postBalances: stored.post,
    postTokenBalances: stored.postTok.map(tokenBalanceJson),
    preBalances: stored.pre,
    preTokenBalances: stored.preTok.map(tokenBalanceJson),
    rewards: [],
    status: stored.err === null ? { Ok: null } : { Err: stored.err },
  };
  let transaction: unknown;
  if (encoding === 'base64') transaction = [stored.tx.toString('base64'), 'base64'];
  else if (encoding === 'base58') transaction = [encodeBase58(wire.bytes), 'base58'];
  else {
    const message: Record<string, unknown> = {
      accountKeys: parsed ? parsedAccountKeys(record) : staticKeys,
      header: parsed
        ? undefined
        : {
            numReadonlySignedAccounts: wire.numReadonlySigned,
            numReadonlyUnsignedAccounts: wire.numReadonlyUnsigned,
            numRequiredSignatures: wire.numRequiredSignatures,
          },
      instructions: wire.instructions.map((ix) => instructionJson(ix.programIndex, ix.accounts, ix.data, null)),
      recentBlockhash: encodeBase58(wire.bytes.subarray(wire.blockhashOffset, wire.blockhashOffset + 32)),
    };
    if (wire.version === 0) {
      message.addressTableLookups = wire.lookups.map((l) => ({
        accountKey: encodeBase58(wire.bytes.subarray(l.keyOffset, l.keyOffset + 32)),
        readonlyIndexes: Array.from(l.readonly),
        writableIndexes: Array.from(l.writable),
      }));
    }
    transaction = { message, signatures };
  }
  return { blockTime: stored.time, meta, slot: stored.slot, transaction, version: wire.version };
}

// jsonParsed instructions for the programs a payment touches; others stay partially decoded, as agave does.
function parseInstruction(programId: string, accounts: string[], data: Uint8Array, stackHeight: number | null) {
  const d = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  const parsedAs = (program: string, type: string, info: Record<string, unknown>) => ({ parsed: { info, type }, program, programId, stackHeight });
  try {
    if (programId === SYSTEM_PROGRAM_ID && d.length >= 4) {
      const kind = d.readUInt32LE(0);
      if (kind === 2 && d.length === 12)
        return parsedAs('system', 'transfer', { destination: accounts[1], lamports: d.readBigUInt64LE(4), source: accounts[0] });
      if (kind === 0 && d.length === 52) {
        return parsedAs('system', 'createAccount', {
          lamports: d.readBigUInt64LE(4),
          newAccount: accounts[1],
          owner: encodeBase58(d.subarray(20, 52)),
          source: accounts[0],
          space: d.readBigUInt64LE(12),
        });
      }
    }
    if ((programId === TOKEN_PROGRAM_ID || programId === TOKEN_2022_PROGRAM_ID) && d.length >= 1) {
      const program = programId === TOKEN_2022_PROGRAM_ID ? 'spl-token-2022' : 'spl-token';
      switch (d[0]) {
        case 3:
          return parsedAs(program, 'transfer', {
            amount: d.readBigUInt64LE(1).toString(),
            authority: accounts[2],
            destination: accounts[1],
            source: accounts[0],
          });
        case 12:
          return parsedAs(program, 'transferChecked', {
            authority: accounts[3],
            destination: accounts[2],
            mint: accounts[1],
            source: accounts[0],
            tokenAmount: uiTokenAmount(d.readBigUInt64LE(1), d[9]!),
          });
        case 7:
          return parsedAs(program, 'mintTo', { account: accounts[1], amount: d.readBigUInt64LE(1).toString(), mint: accounts[0], mintAuthority: accounts[2] });
        case 14:
          return parsedAs(program, 'mintToChecked', {
            account: accounts[1],
            mint: accounts[0],
            mintAuthority: accounts[2],
            tokenAmount: uiTokenAmount(d.readBigUInt64LE(1), d[9]!),
          });
        case 18:
          return parsedAs(program, 'initializeAccount3', { account: accounts[0], mint: accounts[1], owner: encodeBase58(d.subarray(1, 33)) });
        case 22:
          return parsedAs(program, 'initializeImmutableOwner', { account: accounts[0] });
        case 21:
          return parsedAs(program, 'getAccountDataSize', { mint: accounts[0] });
      }
    }
    if (programId === ASSOCIATED_TOKEN_PROGRAM_ID && (d.length === 0 || d[0] === 0 || d[0] === 1)) {
      return parsedAs('spl-associated-token-account', d[0] === 1 ? 'createIdempotent' : 'create', {
        account: accounts[1],
        mint: accounts[3],
        source: accounts[0],
        systemProgram: accounts[4],
        tokenProgram: accounts[5],
        wallet: accounts[2],
      });
    }
    if (programId === MEMO_PROGRAM_ID || programId === MEMO_V1_PROGRAM_ID) {
      return { parsed: d.toString('utf8'), program: 'spl-memo', programId, stackHeight };
    }
  } catch {
    // short data: fall through to the partially decoded form
  }
  return { accounts, data: encodeBase58(data), programId, stackHeight };
}
