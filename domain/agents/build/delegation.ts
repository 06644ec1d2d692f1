import { PublicKey, type TransactionInstruction } from '@solana/web3.js';
import { createApproveInstruction, createAssociatedTokenAccountIdempotentInstruction, createRevokeInstruction } from '@solana/spl-token';
import { DomainError } from '../../shared/errors.ts';
import { decodeTokenAccount } from '../../shared/token-account.ts';
import { feeFor, U64_MAX } from '../../shared/money.ts';
import type { Stable } from '../../shared/network.ts';
import { treasuryOf } from '../../treasury/derive.ts';
import { ataOf as associatedTokenAccount } from '../../facilitator/ata.ts';
import type { AgentBuildContext, BuildContext, PlanOutcome } from '../../transactions/plan.ts';
import type { PrepareDelegationInput, PrepareDelegationRevokeInput } from '../prepare-schema.ts';
import { executeFor, wholeUnitsToAtomic } from './execute.ts';

// delegation/prepare and delegation/revoke/prepare: SPL Approve / Revoke of the treasury's token account, signed by
// the asset-signer PDA through Core `execute` (the owner authorises it).

/** The curated stable of the context's network, or `invalid_request` naming what exists. */
export function stableOf(ctx: BuildContext, symbol: string, path = 'stable_symbol'): Stable {
  const stable = ctx.stables.find((s) => s.symbol === symbol.toUpperCase());
  if (!stable) {
    const message = `${symbol} is not available on ${ctx.network}; known: ${ctx.stables.map((s) => s.symbol).join(', ')}`;
    throw DomainError.invalid([{ path, message, code: 'unknown_stable' }], message);
  }
  return stable;
}

/**
 * The allowance an approval must carry: `amount`, or with `pad` amount + ceil(amount × bps / 10000) so the
 * executive can pay `amount` worth of seller legs and their fee legs (fee-facilitator-mpp-tools §2.2.6).
 */
export function paddedAllowance(amount: bigint, bps: number, pad: boolean): { allowance: bigint; padding: bigint } {
  const padding = pad ? feeFor(amount, bps) : 0n;
  return { allowance: amount + padding, padding };
}

export async function buildDelegation(input: PrepareDelegationInput, ctx: AgentBuildContext): Promise<PlanOutcome> {
  const stable = stableOf(ctx, input.stable_symbol);
  const amount = wholeUnitsToAtomic(input.allowance, stable.decimals, 'allowance', stable.symbol);
  const pad = input.pad_for_protocol_fee ?? false;
  const { allowance, padding } = paddedAllowance(amount, ctx.fee.bps, pad);
  if (allowance > U64_MAX) {
    // An SPL amount is a u64: a larger allowance would be encoded wrapped (a tiny approval), never refused by the ledger.
    throw DomainError.invalid([
      {
        path: 'allowance',
        message: `The allowance${pad ? ' with its fee padding' : ''} is ${allowance} atomic units, above the largest token amount (u64)`,
        code: 'too_large',
      },
    ]);
  }
  const owner = ctx.agent.owner;
  const payer = input.payer ?? owner;
  const treasury = treasuryOf(input.mint);
  const account = associatedTokenAccount(treasury, stable.mint, stable.tokenProgramId);
  const program = new PublicKey(stable.tokenProgramId);

  const instructions: TransactionInstruction[] = [];
  // An approval needs the account: a treasury that never received this stable gets it created first (idempotent).
  const missing = (await ctx.reads.getAccount(account)) === null;
  if (missing) {
    instructions.push(
      createAssociatedTokenAccountIdempotentInstruction(
        new PublicKey(payer),
        new PublicKey(account),
        new PublicKey(treasury),
        new PublicKey(stable.mint),
        program,
      ),
    );
  }
  const approve = createApproveInstruction(new PublicKey(account), new PublicKey(input.executive), new PublicKey(treasury), allowance, [], program);
  instructions.push(...(await executeFor(ctx, { asset: input.mint, authority: owner, payer, inner: [approve] })));

  const echo = {
    asset: input.mint,
    treasury,
    token_account: account,
    stable_symbol: stable.symbol,
    delegate: input.executive,
    allowance_atomic: allowance.toString(),
    will_create_token_account: missing,
  };
  return {
    kind: 'agent.delegation.set',
    agent: input.mint,
    feePayer: payer,
    instructions,
    echo,
    metadata: { echo, stable_symbol: stable.symbol, allowance_atomic: allowance.toString(), delegate: input.executive },
    extras: pad ? { fee_padding_atoms: padding.toString() } : {},
  };
}

export async function buildDelegationRevoke(input: PrepareDelegationRevokeInput, ctx: AgentBuildContext): Promise<PlanOutcome> {
  const stable = stableOf(ctx, input.stable_symbol);
  const owner = ctx.agent.owner;
  const payer = input.payer ?? owner;
  const treasury = treasuryOf(input.mint);
  const account = associatedTokenAccount(treasury, stable.mint, stable.tokenProgramId);
  const state = decodeTokenAccount(await ctx.reads.getAccount(account));
  if (state === null) {
    const message = `The treasury has no ${stable.symbol} token account (${account}): there is no delegation to revoke`;
    throw DomainError.invalid([{ path: 'stable_symbol', message, code: 'token_account_missing' }], message);
  }
  // the delegate being revoked, for the agent record (null: none is set; the revoke is then harmless)
  const delegate = state.delegate;
  const revoke = createRevokeInstruction(new PublicKey(account), new PublicKey(treasury), [], new PublicKey(stable.tokenProgramId));
  const instructions = await executeFor(ctx, { asset: input.mint, authority: owner, payer, inner: [revoke] });
  const echo = { asset: input.mint, treasury, token_account: account, stable_symbol: stable.symbol, delegate };
  return {
    kind: 'agent.delegation.revoke',
    agent: input.mint,
    feePayer: payer,
    instructions,
    echo,
    metadata: { echo, stable_symbol: stable.symbol, delegate, allowance_atomic: '0' },
  };
}
