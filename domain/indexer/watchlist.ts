import type { Network } from '../shared/network.ts';
import { STABLES } from '../shared/network.ts';
import type { Clock } from '../ports/clock.ts';
import type { Repositories } from '../ports/store.ts';
import type { WatchEntry } from '../ports/indexer-store.ts';
import { associatedTokenAccount, payToFor, treasuryOf } from '../treasury/derive.ts';

// What the indexer follows (hosted-api §3.1, §4.4; fee-facilitator-mpp-tools §6). Adding is idempotent and
// cheap (one insert … on conflict do nothing); a new address wakes the network's indexer job at once.

/** The job that follows a network's ledger (jobs/indexer.ts); one job key per network. */
export const INDEX_TASK = 'index_ledger';
export const indexJobKey = (network: Network): string => `${INDEX_TASK}:${network}`;

export class Watchlist {
  constructor(private readonly deps: { store: Pick<Repositories, 'indexer' | 'jobs'>; clock: Clock }) {}

  /** An agent: its asset, its treasury PDA and the treasury's token accounts of the network's curated stables. */
  watchAgent(network: Network, agent: string, ownerPrincipal: string | null): Promise<number> {
    const base = { network, agent, ownerPrincipal };
    return this.add([
      { ...base, address: agent, role: 'agent_asset', mint: null },
      { ...base, address: treasuryOf(agent), role: 'treasury', mint: null },
      ...STABLES[network].map((s) => ({ ...base, address: payToFor(agent, s), role: 'treasury_token' as const, mint: s.mint })),
    ]);
  }

  /** The treasury and every token account it was seen to own (GET …/treasury/balances), with the curated ones. */
  async watchTreasury(
    network: Network,
    agent: string,
    ownerPrincipal: string | null,
    tokenAccounts: readonly { address: string; mint: string }[],
  ): Promise<number> {
    const base = { network, agent, ownerPrincipal };
    return (
      (await this.watchAgent(network, agent, ownerPrincipal)) +
      (await this.add(tokenAccounts.map((t) => ({ ...base, address: t.address, role: 'treasury_token' as const, mint: t.mint }))))
    );
  }

  /** The fee authority's token accounts of the network's curated stables (at start-up). */
  watchFeeAccounts(network: Network, feeAuthority: string): Promise<number> {
    return this.add(
      STABLES[network].map((s) => ({
        network,
        address: associatedTokenAccount(feeAuthority, s.mint, s.tokenProgramId),
        role: 'fee_token' as const,
        agent: null,
        ownerPrincipal: null,
        mint: s.mint,
      })),
    );
  }

  private async add(entries: WatchEntry[]): Promise<number> {
    const added = await this.deps.store.indexer.watch(entries, this.deps.clock.now());
    if (added > 0) {
      const networks = new Set(entries.map((e) => e.network));
      for (const network of networks) await this.deps.store.jobs.add(INDEX_TASK, { network }, { jobKey: indexJobKey(network) });
    }
    return added;
  }
}
