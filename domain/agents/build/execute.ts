import { createNoopSigner, publicKey, type Signer, type TransactionBuilder, type Umi } from '@metaplex-foundation/umi';
import { createUmi } from '@metaplex-foundation/umi-bundle-defaults';
import { fromWeb3JsInstruction, toWeb3JsInstruction } from '@metaplex-foundation/umi-web3js-adapters';
import { deserializeAssetV1, execute, mplCore } from '@metaplex-foundation/mpl-core';
import { mplAgentIdentity, mplAgentTools } from '@metaplex-foundation/mpl-agent-registry';
import type { TransactionInstruction } from '@solana/web3.js';
import { DomainError } from '../../shared/errors.ts';
import { memoize } from '../../shared/memo.ts';
import { parseAtomic } from '../../shared/money.ts';
import { MPL_CORE_PROGRAM_ID } from '../../treasury/derive.ts';
import { AGENT_REGISTRY_IDENTITY_PROGRAM_ID, AGENT_REGISTRY_TOOLS_PROGRAM_ID, WELL_KNOWN_PROGRAMS } from '../../ledger/programs.ts';
import type { AgentRecord } from '../schema.ts';
import type { BuildContext, LedgerReads } from '../../transactions/plan.ts';

// What every builder shares: one offline umi (Metaplex instructions only through the official clients), noop signers
// for users' keys (the gateway never holds them), Core `execute` around an inner instruction, and the checks that keep
// a prepare route from handing out a transaction that must fail.

/** The identity program of the Metaplex Agent Registry (agents/prepare, identity, token set). */
export const IDENTITY_PROGRAM_ID = AGENT_REGISTRY_IDENTITY_PROGRAM_ID;
/** The tools program of the Metaplex Agent Registry (executive register, delegate, revoke). */
export const TOOLS_PROGRAM_ID = AGENT_REGISTRY_TOOLS_PROGRAM_ID;

let instance: Umi | undefined;

/**
 * One umi for every build, made on first use (~17 ms cold). It never calls its RPC: the endpoint is only a placeholder
 * the bundle needs; builders take their state from the ledger reads of their context.
 */
export function umi(): Umi {
  if (instance) return instance;
  const made = createUmi('http://127.0.0.1:1').use(mplCore()).use(mplAgentIdentity()).use(mplAgentTools());
  // Program-address searches cost ~1 ms each and every build makes a few (asset signer, identity, profiles) for the
  // same agents again and again: the clients' own derivations, memoised (same inputs, same answer).
  const findPda = made.eddsa.findPda.bind(made.eddsa);
  const cached = memoize((key) => {
    const [program, ...seeds] = key.split(':');
    return findPda(
      publicKey(program!),
      seeds.map((s) => Buffer.from(s, 'hex')),
    );
  });
  made.eddsa = { ...made.eddsa, findPda: (program, seeds) => cached([program, ...seeds.map((s) => Buffer.from(s).toString('hex'))].join(':')) };
  instance = made;
  return made;
}

/** A user's key as umi wants a signer: the transaction is signed later, by the user. */
export const signer = (address: string): Signer => createNoopSigner(publicKey(address));

/** A umi builder's instructions for web3.js, in order. */
export function toInstructions(builder: TransactionBuilder): TransactionInstruction[] {
  return builder.getInstructions().map(toWeb3JsInstruction);
}

export interface ExecuteInput {
  /** the agent asset */
  asset: string;
  /** the asset owner (signs Execute) */
  authority: string;
  /** pays for any storage Execute needs; signs */
  payer: string;
  /** instructions the asset-signer PDA signs for (one Execute each) */
  inner: TransactionInstruction[];
  /** the asset's collection, when it is in one: Core then needs it on Execute (assetCollection reads it) */
  collection?: string | undefined;
}

/**
 * Wraps instructions in Metaplex Core `execute`: the asset-signer PDA (the treasury) signs them in the CPI. The
 * client's helper carries each inner instruction's accounts as remaining accounts (the PDA unsigned: Core signs for it).
 */
export function executeInstructions(input: ExecuteInput): TransactionInstruction[] {
  const builder = execute(umi(), {
    asset: { publicKey: publicKey(input.asset) },
    ...(input.collection ? { collection: { publicKey: publicKey(input.collection) } } : {}),
    authority: signer(input.authority),
    payer: signer(input.payer),
    instructions: input.inner.map(fromWeb3JsInstruction),
  });
  return toInstructions(builder);
}

/** What the ledger says of a Core asset: its owner and its collection (when its update authority is one). */
export interface AssetOnLedger {
  owner: string;
  collection: string | undefined;
}

/**
 * The Core asset as the ledger holds it, or null: not (yet) on this ledger, or not a Core asset. An asset minted
 * elsewhere (a recorded agent) may be in a collection, and then Execute and the identity registration must name it.
 */
export async function readAsset(reads: LedgerReads, asset: string): Promise<AssetOnLedger | null> {
  const account = await reads.getAccount(asset);
  if (!account || account.owner !== MPL_CORE_PROGRAM_ID) return null;
  try {
    const decoded = deserializeAssetV1({
      publicKey: publicKey(asset),
      data: account.data,
      executable: account.executable,
      owner: publicKey(account.owner),
      lamports: { basisPoints: account.lamports, identifier: 'SOL', decimals: 9 },
    });
    return { owner: decoded.owner, collection: decoded.updateAuthority.type === 'Collection' ? decoded.updateAuthority.address : undefined };
  } catch {
    return null; // another kind of Core account: Core refuses it as an asset either way
  }
}

export async function assetCollection(reads: LedgerReads, asset: string): Promise<string | undefined> {
  return (await readAsset(reads, asset))?.collection;
}

/**
 * Core `execute` around `inner` for the asset, naming its collection when it has one. The ledger must run Core
 * (`program_unavailable` otherwise), and when it holds the asset, its owner there must be the authority (a record can
 * lag a transfer): `forbidden` otherwise, never a failing Execute.
 */
export async function executeFor(ctx: BuildContext, input: Omit<ExecuteInput, 'collection'>): Promise<TransactionInstruction[]> {
  await requireProgram(ctx, MPL_CORE_PROGRAM_ID);
  const onLedger = await requireLedgerOwner(ctx.reads, input.asset, input.authority);
  return executeInstructions({ ...input, collection: onLedger?.collection });
}

/** The asset's owner on the ledger must be `authority` when the ledger holds the asset; returns what it read. */
export async function requireLedgerOwner(reads: LedgerReads, asset: string, authority: string): Promise<AssetOnLedger | null> {
  const onLedger = await readAsset(reads, asset);
  if (onLedger && onLedger.owner !== authority) {
    throw new DomainError('forbidden', `${authority} does not own asset ${asset} on the ledger (its owner is ${onLedger.owner})`, {
      authority,
      owner: onLedger.owner,
    });
  }
  return onLedger;
}

/** Only the asset owner may authorise Execute (hosted-api §4.3 withdraw): anything else is refused before building. */
export function requireOwner(agent: AgentRecord, authority: string): void {
  if (authority !== agent.owner) {
    throw new DomainError(
      'forbidden',
      `authority ${authority} is not the owner of agent ${agent.mint}; only the owner (${agent.owner}) may authorise Execute`,
      {
        authority,
        owner: agent.owner,
      },
    );
  }
}

/**
 * The ledger must run the well-known `program` (an executable account), or the route answers program_unavailable
 * naming it — and, where this installation can add it to its own ledger, the command that does
 * (settings.programsCommand: the domain does not know how the gateway is run). Builders call it after their input
 * checks and before anything is signed or stored, so a bad body is `invalid_request` first.
 */
export async function requireProgram(ctx: Pick<BuildContext, 'reads' | 'network' | 'programsCommand'>, program: string): Promise<void> {
  if (await hasProgram(ctx.reads, program)) return;
  const known = WELL_KNOWN_PROGRAMS.find((p) => p.id === program);
  const title = known?.title ?? program;
  const remedy = ctx.programsCommand
    ? ` Run \`${ctx.programsCommand}\` to copy it into this installation's ledgers, then restart the gateway.`
    : ` Point ${ctx.network} at a ledger that runs it.`;
  throw new DomainError('program_unavailable', `The ${ctx.network} ledger does not run ${title} (${program}): the transaction could only fail.${remedy}`, {
    program,
    program_name: known?.name ?? null,
    ...(ctx.programsCommand ? { command: ctx.programsCommand } : {}),
  });
}

export async function hasProgram(reads: LedgerReads, program: string): Promise<boolean> {
  const account = await reads.getAccount(program);
  return account?.executable === true;
}

/** A validated atomic decimal string (the input schemas check digits and u64) as bigint. */
export const atomic = (text: string): bigint => BigInt(text);

/** Whole units ("12.5") → atomic with the given decimals; `invalid_request` naming the field otherwise. */
export function wholeUnitsToAtomic(text: string, decimals: number, field: string, symbol: string): bigint {
  const parsed = parseAtomic(text, decimals);
  if ('problem' in parsed) {
    const message =
      parsed.problem === 'precision'
        ? `${field}: at most ${decimals} decimal places for ${symbol}`
        : parsed.problem === 'range'
          ? `${field}: exceeds the largest token amount`
          : `${field}: expected a decimal amount in whole units, e.g. "12.5"`;
    throw DomainError.invalid([{ path: field, message, code: `invalid_${field}` }], message);
  }
  return parsed.amount;
}
