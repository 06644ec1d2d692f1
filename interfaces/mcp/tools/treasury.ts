import { z } from 'zod';
import { WholeUnits } from '../../../domain/agents/prepare-schema.ts';
import { Address } from '../../../domain/shared/address.ts';
import { atomicToDecimal, decimalToAtomic, SOL_DECIMALS, U64_MAX } from '../../../domain/shared/money.ts';
import { findStable, STABLE_SYMBOLS, StableSymbol } from '../../../domain/shared/network.ts';
import type { PreparedEnvelope } from '../../../domain/transactions/schema.ts';
import { defineTool, ToolError, type ActiveAgent, type ToolContext } from '../context.ts';

// fee-facilitator-mpp-tools §4.3: the treasury's balances, owner withdrawals and the executive's spend delegation.
// Every ledger action is prepare (API) → sign here with the executive (the asset's owner) → /v1/submit → track.

async function balances(ctx: ToolContext, agent: ActiveAgent) {
  return ctx.call((api) => api.agents.balances.query({ mint: agent.mint }));
}

export const checkTreasuryBalance = defineTool({
  name: 'svc_check_treasury_balance',
  title: 'Treasury balances',
  description: 'Native (SOL), USDC, USDG and USDT balances of the agent treasury account.',
  input: z.object({}),
  async run(ctx) {
    const agent = ctx.requireAgent();
    const b = await balances(ctx, agent);
    const stables = Object.fromEntries(
      STABLE_SYMBOLS.map((symbol) => {
        const stable = findStable(ctx.network, symbol);
        if (!stable) return [symbol, null];
        const atomic = b.tokens.filter((t) => t.mint === stable.mint).reduce((s, t) => s + BigInt(t.amount_atomic), 0n);
        return [symbol, { amount: atomicToDecimal(atomic, stable.decimals), amount_atomic: atomic.toString(), mint: stable.mint }];
      }),
    );
    return {
      agent: agent.mint,
      treasury_address: b.treasury,
      network: b.network,
      native: { sol: atomicToDecimal(BigInt(b.lamports), SOL_DECIMALS), lamports: b.lamports, spendable_lamports: b.spendable_lamports },
      ...stables,
      slot: b.slot,
    };
  },
});

const WithdrawInput = z.object({
  asset: z.enum(['SOL', ...STABLE_SYMBOLS]).describe('SOL (native coin) or a stable'),
  amount: z.union([WholeUnits, z.literal('all')]).describe('whole units, e.g. "1.5", or "all" (SOL "all" keeps the rent reserve)'),
  destination: Address.describe('receiving wallet (its token account is derived and created when missing)'),
});

export const withdrawTreasury = defineTool({
  name: 'svc_withdraw_treasury',
  title: 'Withdraw from the treasury',
  description:
    'Owner withdrawal of native coin (SOL) or a stable from the agent treasury to any wallet. Signed locally by the owner key; answers the transaction signature once confirmed.',
  input: WithdrawInput,
  async run(ctx, input) {
    const agent = ctx.requireAgent();
    const owner = agent.executive.publicKey.toBase58();
    const base = { mint: agent.mint, payer: owner, authority: owner, destination: input.destination };
    let envelope: PreparedEnvelope;
    if (input.asset === 'SOL') {
      if (input.amount === 'all') envelope = await ctx.call((api) => api.prepare.withdrawSolAll.mutate(base));
      else {
        const lamports = decimalToAtomic(input.amount, SOL_DECIMALS);
        if (lamports === null || lamports <= 0n)
          throw new ToolError('invalid_request', 'amount must be a positive SOL amount with at most 9 decimals.', { path: 'amount' });
        envelope = await ctx.call((api) => api.prepare.withdrawSol.mutate({ ...base, lamports: lamports.toString() }));
      }
    } else {
      const stable = findStable(ctx.network, input.asset);
      if (!stable) throw new ToolError('invalid_request', `${input.asset} is not available on ${ctx.network}.`, { path: 'asset' });
      const token = { ...base, spl_mint: stable.mint };
      if (input.amount === 'all') envelope = await ctx.call((api) => api.prepare.withdrawAll.mutate(token));
      else {
        const atomic = decimalToAtomic(input.amount, stable.decimals);
        if (atomic === null || atomic <= 0n)
          throw new ToolError('invalid_request', `amount must be a positive ${stable.symbol} amount with at most ${stable.decimals} decimals.`, {
            path: 'amount',
          });
        envelope = await ctx.call((api) => api.prepare.withdraw.mutate({ ...token, amount: atomic.toString() }));
      }
    }
    const done = await ctx.signSubmitTrack(envelope, [agent.executive]);
    if (!done) return { status: 'nothing_to_withdraw', asset: input.asset, destination: input.destination };
    return {
      status: 'confirmed',
      asset: input.asset,
      amount: input.amount,
      destination: input.destination,
      event_id: done.event_id,
      tx_signature: done.signature,
      explorer_url: ctx.explorerTx(done.signature),
    };
  },
});

const SetSpendLimitInput = z.object({
  symbol: StableSymbol,
  mode: z.enum(['unlimited', 'amount', 'revoke']).describe('unlimited (cap = the largest u64), amount (needs amount), or revoke the delegation'),
  amount: WholeUnits.optional().describe('positive decimal in whole units; required with mode amount'),
});

export const setSpendLimit = defineTool({
  name: 'svc_set_spend_limit',
  title: 'Set the executive’s spend limit',
  description:
    'Approve (or revoke) the executive as token delegate of the treasury for one stable: mode unlimited, amount (with a positive amount) or revoke. The cap is per mint.',
  input: SetSpendLimitInput,
  async run(ctx, input) {
    const agent = ctx.requireAgent();
    const stable = findStable(ctx.network, input.symbol);
    if (!stable) throw new ToolError('invalid_request', `${input.symbol} is not available on ${ctx.network}.`, { path: 'symbol' });
    const executive = agent.executive.publicKey.toBase58();
    if (input.mode === 'revoke') {
      if (input.amount !== undefined) throw new ToolError('invalid_request', 'amount is not taken with mode revoke.', { path: 'amount' });
      const envelope = await ctx.call((api) => api.prepare.delegationRevoke.mutate({ mint: agent.mint, stable_symbol: input.symbol, payer: executive }));
      const done = await ctx.signSubmitTrack(envelope, [agent.executive]);
      return { symbol: input.symbol, mode: 'revoke', delegate: null, tx_signature: done?.signature ?? null };
    }
    let allowance: string;
    if (input.mode === 'amount') {
      const atomic = input.amount === undefined ? null : decimalToAtomic(input.amount, stable.decimals);
      if (atomic === null || atomic <= 0n) {
        throw new ToolError('invalid_request', `mode amount needs amount: a decimal above zero with at most ${stable.decimals} decimals.`, { path: 'amount' });
      }
      allowance = input.amount!;
    } else {
      if (input.amount !== undefined) throw new ToolError('invalid_request', 'amount is only taken with mode amount.', { path: 'amount' });
      allowance = atomicToDecimal(U64_MAX, stable.decimals);
    }
    const envelope = await ctx.call((api) =>
      api.prepare.delegationSet.mutate({ mint: agent.mint, executive, stable_symbol: input.symbol, allowance, payer: executive }),
    );
    const done = await ctx.signSubmitTrack(envelope, [agent.executive]);
    return {
      symbol: input.symbol,
      mode: input.mode,
      delegate: executive,
      allowance_atomic: String(envelope.echo.allowance_atomic),
      tx_signature: done?.signature ?? null,
    };
  },
});

export const getSpendLimit = defineTool({
  name: 'svc_get_spend_limit',
  title: 'The executive’s spend limit',
  description:
    'The active delegation per stable: delegate, remaining cap, treasury balance, and whether the delegate is this executive (delegate_matches_executive).',
  input: z.object({ symbol: StableSymbol.optional().describe('one stable; default every stable of the network') }),
  async run(ctx, input) {
    const agent = ctx.requireAgent();
    const [recorded, b] = await Promise.all([ctx.call((api) => api.agents.get.query({ mint: agent.mint })), balances(ctx, agent)]);
    const executive = agent.executive.publicKey.toBase58();
    const symbols = input.symbol ? [input.symbol] : STABLE_SYMBOLS.filter((s) => findStable(ctx.network, s));
    const limits = symbols.map((symbol) => {
      const stable = findStable(ctx.network, symbol);
      if (!stable) return { symbol, available: false };
      const d = recorded.delegations.find((x) => x.stable_symbol === symbol) ?? null;
      const balance = b.tokens.filter((t) => t.mint === stable.mint).reduce((s, t) => s + BigInt(t.amount_atomic), 0n);
      const remaining = d ? BigInt(d.allowance_atomic) : 0n;
      return {
        symbol,
        delegate: d?.delegate ?? null,
        remaining_atomic: remaining.toString(),
        remaining: atomicToDecimal(remaining, stable.decimals),
        // an unlimited approval starts at u64 max and only ever shrinks by what was spent
        unlimited: d !== null && remaining > U64_MAX / 2n,
        treasury_balance: atomicToDecimal(balance, stable.decimals),
        treasury_balance_atomic: balance.toString(),
        delegate_matches_executive: d !== null && d.delegate === executive,
      };
    });
    return { agent: agent.mint, network: ctx.network, executive, limits };
  },
});
