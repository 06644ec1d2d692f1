import { PublicKey, SystemProgram, type TransactionInstruction } from '@solana/web3.js';
import { createAssociatedTokenAccountIdempotentInstruction, createTransferCheckedInstruction } from '@solana/spl-token';
import { DomainError } from '../../shared/errors.ts';
import { decodeMint, decodeTokenAccount } from '../../shared/token-account.ts';
import { TOKEN_2022_PROGRAM_ID, TOKEN_PROGRAM_ID, type TokenProgramName } from '../../shared/network.ts';
import { treasuryOf } from '../../treasury/derive.ts';
import { ataOf as associatedTokenAccount } from '../../facilitator/ata.ts';
import type { AgentBuildContext, NoOpPlan, PlanOutcome } from '../../transactions/plan.ts';
import type {
  PrepareProvisionInput,
  PrepareWithdrawAllInput,
  PrepareWithdrawInput,
  PrepareWithdrawSolAllInput,
  PrepareWithdrawSolInput,
} from '../prepare-schema.ts';
import { atomic, executeFor, requireOwner } from './execute.ts';

// treasury/provision, withdraw, withdraw-all, withdraw-sol, withdraw-sol-all (hosted-api §4.3). The treasury is the
// asset-signer PDA; what leaves it goes through Core `execute`, which only the asset owner may authorise.

/** Rent-exempt minimum of an account without data (the treasury PDA): (128 + 0) bytes × 3480 lamports × 2 years. */
export const RENT_EXEMPT_EMPTY_ACCOUNT_LAMPORTS = 890_880n;

const programIdOf = (name: TokenProgramName): string => (name === 'spl' ? TOKEN_PROGRAM_ID : TOKEN_2022_PROGRAM_ID);

const invalid = (path: string, code: string, message: string, details: Record<string, unknown> = {}): DomainError =>
  new DomainError('invalid_request', message, { issues: [{ path, message, code }], ...details });

const programName = (id: string): TokenProgramName => (id === TOKEN_PROGRAM_ID ? 'spl' : 'token-2022');

/**
 * A token mint's program: a curated stable must be named with its own (USDG: token-2022); any other mint is read from
 * the ledger, and a given token_program must be the one that owns it. `invalid_request` naming the field otherwise.
 */
async function resolveMint(
  ctx: AgentBuildContext,
  mint: string,
  given: TokenProgramName | undefined,
  paths: { mint: string; program: string },
): Promise<{ program: string; decimals: number }> {
  const stable = ctx.stables.find((s) => s.mint === mint);
  if (stable && given && given !== stable.tokenProgram) {
    throw invalid(
      paths.program,
      'wrong_token_program',
      `${stable.symbol} (${mint}) is a ${stable.tokenProgram} mint: token_program must be '${stable.tokenProgram}'`,
    );
  }
  const account = await ctx.reads.getAccount(mint);
  const state = decodeMint(account);
  if (!account || !state) {
    throw invalid(paths.mint, 'unknown_mint', `${mint} is not a token mint on ${ctx.network}`);
  }
  if (given && programIdOf(given) !== account.owner) {
    throw invalid(
      paths.program,
      'wrong_token_program',
      `${mint} is a ${programName(account.owner)} mint: token_program must be '${programName(account.owner)}'`,
    );
  }
  return { program: account.owner, decimals: state.decimals };
}

export async function buildProvision(input: PrepareProvisionInput, ctx: AgentBuildContext): Promise<PlanOutcome> {
  const payer = input.payer ?? ctx.agent.owner;
  const treasury = treasuryOf(input.mint);
  const wanted = input.mints
    ? await Promise.all(
        input.mints.map(async (m, i) => ({
          mint: m.mint,
          program: (await resolveMint(ctx, m.mint, m.token_program, { mint: `mints.${i}.mint`, program: `mints.${i}.token_program` })).program,
        })),
      )
    : ctx.stables.map((s) => ({ mint: s.mint, program: s.tokenProgramId }));
  const unique = [...new Map(wanted.map((w) => [`${w.mint}:${w.program}`, w])).values()];
  const accounts = unique.map((w) => ({ ...w, account: associatedTokenAccount(treasury, w.mint, w.program) }));
  const found = await ctx.reads.getMultipleAccounts(accounts.map((a) => a.account));
  const missing = accounts.filter((_, i) => found[i] === null);
  const echo = {
    asset: input.mint,
    treasury,
    token_accounts: accounts.map((a) => ({ mint: a.mint, token_program: a.program, token_account: a.account, exists: !missing.includes(a) })),
  };
  if (missing.length === 0) return { kind: 'agent.treasury.provision', agent: input.mint, noOp: true, echo } satisfies NoOpPlan;
  const instructions = missing.map((a) =>
    createAssociatedTokenAccountIdempotentInstruction(
      new PublicKey(payer),
      new PublicKey(a.account),
      new PublicKey(treasury),
      new PublicKey(a.mint),
      new PublicKey(a.program),
    ),
  );
  return { kind: 'agent.treasury.provision', agent: input.mint, feePayer: payer, instructions, echo, metadata: { echo } };
}

interface TokenWithdrawal {
  input: PrepareWithdrawAllInput;
  ctx: AgentBuildContext;
  /** the amount, or null: the whole balance */
  amount: bigint | null;
}

async function buildTokenWithdrawal({ input, ctx, amount: wanted }: TokenWithdrawal): Promise<PlanOutcome> {
  requireOwner(ctx.agent, input.authority);
  const { program, decimals } = await resolveMint(ctx, input.spl_mint, input.token_program, { mint: 'spl_mint', program: 'token_program' });
  if (input.decimals !== undefined && input.decimals !== decimals) {
    throw invalid('decimals', 'wrong_decimals', `${input.spl_mint} has ${decimals} decimals, not ${input.decimals}`);
  }
  const treasury = treasuryOf(input.mint);
  const source = associatedTokenAccount(treasury, input.spl_mint, program);
  const destination = associatedTokenAccount(input.destination, input.spl_mint, program);
  const [sourceAccount, destinationAccount] = await ctx.reads.getMultipleAccounts([source, destination]);
  const balance = decodeTokenAccount(sourceAccount)?.amount ?? 0n;

  let amount = wanted;
  if (amount === null) {
    if (balance === 0n)
      return { kind: 'agent.treasury.withdraw', agent: input.mint, noOp: true, echo: withdrawEcho(input, { treasury, source, destination, amount: 0n }) };
    amount = balance;
  } else if (amount > balance) {
    throw invalid('amount', 'insufficient_funds', `The treasury holds ${balance} atomic units of ${input.spl_mint} (${source}); asked ${amount}`, {
      balance_atomic: balance.toString(),
    });
  }

  const instructions: TransactionInstruction[] = [];
  const willCreate = destinationAccount === null;
  if (willCreate) {
    if (!input.create_destination_ata_if_missing) {
      throw invalid(
        'destination',
        'destination_token_account_missing',
        `The destination ${input.destination} has no token account for ${input.spl_mint} (${destination}) and create_destination_ata_if_missing is false`,
      );
    }
    instructions.push(
      createAssociatedTokenAccountIdempotentInstruction(
        new PublicKey(input.payer),
        new PublicKey(destination),
        new PublicKey(input.destination),
        new PublicKey(input.spl_mint),
        new PublicKey(program),
      ),
    );
  }
  const transfer = createTransferCheckedInstruction(
    new PublicKey(source),
    new PublicKey(input.spl_mint),
    new PublicKey(destination),
    new PublicKey(treasury),
    amount,
    decimals,
    [],
    new PublicKey(program),
  );
  instructions.push(...(await executeFor(ctx, { asset: input.mint, authority: input.authority, payer: input.payer, inner: [transfer] })));
  const echo = withdrawEcho(input, { treasury, source, destination, amount });
  return {
    kind: 'agent.treasury.withdraw',
    agent: input.mint,
    feePayer: input.payer,
    instructions,
    echo,
    metadata: { echo, mint: input.spl_mint, amount_atomic: amount.toString(), destination: input.destination },
    extras: { will_create_destination_ata: willCreate },
  };
}

function withdrawEcho(input: PrepareWithdrawAllInput, moved: { treasury: string; source: string; destination: string; amount: bigint }) {
  const { treasury, source, destination, amount } = moved;
  return {
    asset: input.mint,
    treasury,
    mint: input.spl_mint,
    source_token_account: source,
    destination: input.destination,
    destination_token_account: destination,
    amount_atomic: amount.toString(),
  };
}

/** withdraw: the owner moves `amount` atomic units of a token from the treasury to a wallet's token account. */
export function buildWithdraw(input: PrepareWithdrawInput, ctx: AgentBuildContext): Promise<PlanOutcome> {
  return buildTokenWithdrawal({ input, ctx, amount: atomic(input.amount) });
}

/** withdraw-all: the whole token balance; no-op at zero. */
export function buildWithdrawAll(input: PrepareWithdrawAllInput, ctx: AgentBuildContext): Promise<PlanOutcome> {
  return buildTokenWithdrawal({ input, ctx, amount: null });
}

async function solWithdrawal(
  input: PrepareWithdrawSolInput,
  ctx: AgentBuildContext,
  moved: { lamports: bigint; treasury: string; echo: Record<string, unknown> },
): Promise<PlanOutcome> {
  const { lamports, treasury, echo } = moved;
  const transfer = SystemProgram.transfer({ fromPubkey: new PublicKey(treasury), toPubkey: new PublicKey(input.destination), lamports });
  return {
    kind: 'agent.treasury.withdraw_sol',
    agent: input.mint,
    feePayer: input.payer,
    instructions: await executeFor(ctx, { asset: input.mint, authority: input.authority, payer: input.payer, inner: [transfer] }),
    echo,
    metadata: { echo, lamports: lamports.toString(), destination: input.destination },
  };
}

/**
 * withdraw-sol: lamports out of the treasury. The treasury must stay rent-exempt (a transfer leaving it between 1 and
 * 890,879 lamports fails on the ledger), so at most balance − 890,880 is spendable; more is refused naming it.
 */
export async function buildWithdrawSol(input: PrepareWithdrawSolInput, ctx: AgentBuildContext): Promise<PlanOutcome> {
  requireOwner(ctx.agent, input.authority);
  const lamports = atomic(input.lamports);
  const treasury = treasuryOf(input.mint);
  const balance = await ctx.reads.getBalance(treasury);
  const spendable = balance > RENT_EXEMPT_EMPTY_ACCOUNT_LAMPORTS ? balance - RENT_EXEMPT_EMPTY_ACCOUNT_LAMPORTS : 0n;
  if (lamports > spendable) {
    throw invalid(
      'lamports',
      'insufficient_funds',
      `The treasury can spend ${spendable} lamports (balance ${balance}, rent-exempt reserve ${RENT_EXEMPT_EMPTY_ACCOUNT_LAMPORTS}); asked ${lamports}`,
      {
        spendable_lamports: spendable.toString(),
        balance_lamports: balance.toString(),
      },
    );
  }
  const echo = { asset: input.mint, treasury, destination: input.destination, lamports: lamports.toString(), balance_lamports: balance.toString() };
  return solWithdrawal(input, ctx, { lamports, treasury, echo });
}

/** withdraw-sol-all: everything above `reserve_lamports` (default 1,000,000); no-op at or below it. */
export async function buildWithdrawSolAll(input: PrepareWithdrawSolAllInput, ctx: AgentBuildContext): Promise<PlanOutcome> {
  requireOwner(ctx.agent, input.authority);
  const reserve = atomic(input.reserve_lamports);
  if (reserve > 0n && reserve < RENT_EXEMPT_EMPTY_ACCOUNT_LAMPORTS) {
    throw invalid(
      'reserve_lamports',
      'reserve_below_rent',
      `reserve_lamports must be 0 (empty the treasury) or at least ${RENT_EXEMPT_EMPTY_ACCOUNT_LAMPORTS} (rent-exempt); the ledger refuses anything between`,
    );
  }
  const treasury = treasuryOf(input.mint);
  const balance = await ctx.reads.getBalance(treasury);
  const lamports = balance > reserve ? balance - reserve : 0n;
  const echo = {
    asset: input.mint,
    treasury,
    destination: input.destination,
    lamports: lamports.toString(),
    reserve_lamports: reserve.toString(),
    balance_lamports: balance.toString(),
  };
  if (lamports === 0n) return { kind: 'agent.treasury.withdraw_sol', agent: input.mint, noOp: true, echo };
  return solWithdrawal({ ...input, lamports: lamports.toString() }, ctx, { lamports, treasury, echo });
}
