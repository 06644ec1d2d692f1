import { DEFAULT_RESERVE_LAMPORTS } from '../agents/prepare-schema.ts';
import { decodeTokenAccount } from '../shared/token-account.ts';
import { DomainError } from '../shared/errors.ts';
import { STABLES, TOKEN_2022_PROGRAM_ID, TOKEN_PROGRAM_ID, type Network, type StableSymbol, type TokenProgramName } from '../shared/network.ts';
import type { Ledger } from '../ports/ledger.ts';
import type { Caller } from '../access/ownership.ts';
import type { AgentRecord } from '../agents/schema.ts';
import { payToFor, treasuryOf } from './derive.ts';
import type { AgentPayTo, TreasuryBalances, TreasuryToken } from './schema.ts';
import type { Watchlist } from '../indexer/watchlist.ts';

// hosted-api §4.4: what an agent's treasury holds and where to pay it, read from the network's ledger.

/**
 * Lamports a treasury keeps: the default reserve of withdraw-sol-all (DECISIONS "Prepare / submit / events":
 * 1,000,000). It covers the rent-exempt minimum of the 0-byte asset-signer PDA (890,880 lamports: a transfer leaving
 * it between 0 and that fails with InsufficientFundsForRent) with a margin, so `spendable_lamports` is what
 * withdraw-sol-all moves by default.
 */
export const TREASURY_RESERVE_LAMPORTS = DEFAULT_RESERVE_LAMPORTS;

/** max(0, lamports − TREASURY_RESERVE_LAMPORTS) */
export function spendableLamports(lamports: bigint): bigint {
  return lamports > TREASURY_RESERVE_LAMPORTS ? lamports - TREASURY_RESERVE_LAMPORTS : 0n;
}

const PROGRAM_NAMES: Record<string, TokenProgramName> = { [TOKEN_PROGRAM_ID]: 'spl', [TOKEN_2022_PROGRAM_ID]: 'token-2022' };

/** 'spl' | 'token-2022' for the two token programs; null for any other program id. */
export function tokenProgramName(programId: string): TokenProgramName | null {
  return PROGRAM_NAMES[programId] ?? null;
}

/** The treasury token accounts of the network's curated stables, in STABLES order: ATA(treasury, mint, program). */
export function stableAccounts(network: Network, asset: string): { symbol: StableSymbol; mint: string; address: string }[] {
  return STABLES[network].map((s) => ({ symbol: s.symbol, mint: s.mint, address: payToFor(asset, s) }));
}

/**
 * The network's ledger, with every failure of a read answered as `rpc_unavailable` (502): the adapters throw it
 * themselves for a node that fails; anything else thrown by a ledger (a stopped embedded thread) is mapped here.
 */
export async function readLedger<T>(ledgers: Partial<Record<Network, Ledger>>, network: Network, read: (ledger: Ledger) => Promise<T>): Promise<T> {
  const ledger = ledgers[network];
  if (!ledger) throw new DomainError('rpc_unavailable', `No ledger for ${network} in this process.`, { network });
  try {
    return await read(ledger);
  } catch (e) {
    if (e instanceof DomainError) throw e;
    throw new DomainError('rpc_unavailable', `The ${network} ledger failed: ${(e as Error).message}`, { network });
  }
}

export interface TreasuryServiceDeps {
  /** the agent the caller may see (404 agent_not_found otherwise): AgentService.requireVisible */
  agents: { requireVisible(caller: Caller, mint: string): Promise<AgentRecord> };
  ledgers: Partial<Record<Network, Ledger>>;
  /** hosted-api §4.4: the treasury and every token account it holds join the indexer's watchlist */
  watchlist?: Pick<Watchlist, 'watchTreasury'> | undefined;
}

export class TreasuryService {
  constructor(private readonly deps: TreasuryServiceDeps) {}

  /**
   * hosted-api §4.4 GET /v1/agents/{mint}/treasury/balances: lamports, reserve, spendable and every token account the
   * treasury owns under SPL Token and Token-2022 (symbol null for a mint outside the curated stables).
   */
  async balances(caller: Caller, mint: string): Promise<TreasuryBalances> {
    const agent = await this.deps.agents.requireVisible(caller, mint);
    const treasury = treasuryOf(agent.mint);
    const [lamports, held, slot] = await readLedger(this.deps.ledgers, agent.network, (ledger) =>
      Promise.all([ledger.getBalance(treasury), ledger.getTokenBalances(treasury), ledger.getSlot()]),
    );
    await this.deps.watchlist?.watchTreasury(
      agent.network,
      agent.mint,
      agent.ownerPrincipal,
      held.filter((t) => t.owner === treasury).map((t) => ({ address: t.address, mint: t.mint })),
    );
    const curated = new Map(STABLES[agent.network].map((s) => [s.mint, s.symbol]));
    const tokens: TreasuryToken[] = [];
    for (const t of held) {
      const program = tokenProgramName(t.tokenProgram);
      // the RPC filters by owner already; the check keeps an adapter's stale index from answering someone else's
      if (program === null || t.owner !== treasury) continue;
      tokens.push({
        symbol: curated.get(t.mint) ?? null,
        mint: t.mint,
        token_program: program,
        token_account: t.address,
        amount_atomic: t.amount.toString(),
        decimals: t.decimals,
      });
    }
    // Curated stables first (STABLES order), then other mints by address; one mint's accounts by address.
    const rank = (t: TreasuryToken) => (t.symbol === null ? STABLES[agent.network].length : STABLES[agent.network].findIndex((s) => s.symbol === t.symbol));
    tokens.sort((a, b) => rank(a) - rank(b) || compare(a.mint, b.mint) || compare(a.token_account, b.token_account));
    return {
      agent: agent.mint,
      treasury,
      network: agent.network,
      lamports: lamports.toString(),
      reserve_lamports: TREASURY_RESERVE_LAMPORTS.toString(),
      spendable_lamports: spendableLamports(lamports).toString(),
      tokens,
      slot,
    };
  }

  /**
   * hosted-api §4.4 GET /v1/agents/{mint}/pay-to: per curated stable, the x402 payTo (the treasury) and the token
   * account a payment credits — the same derivation as a payment link's accepts (payToFor) — and whether it exists.
   */
  async payTo(caller: Caller, mint: string): Promise<AgentPayTo> {
    const agent = await this.deps.agents.requireVisible(caller, mint);
    const treasury = treasuryOf(agent.mint);
    const stables = STABLES[agent.network];
    const accounts = stables.map((s) => payToFor(agent.mint, s));
    const found = await readLedger(this.deps.ledgers, agent.network, (ledger) => ledger.getMultipleAccounts(accounts));
    return {
      agent: agent.mint,
      network: agent.network,
      treasury,
      pay_to: stables.map((s, i) => {
        const account = found[i] ?? null;
        const state = account && decodeTokenAccount(account);
        return {
          currency: s.symbol,
          asset: s.mint,
          token_program: s.tokenProgram,
          pay_to: treasury,
          token_account: accounts[i]!,
          // a token account of this mint that the treasury still owns (an SPL Token ATA's owner can be reassigned)
          ready: !!state && state.owner === treasury && state.mint === s.mint,
        };
      }),
    };
  }
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
