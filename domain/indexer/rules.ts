import type { Network } from '../shared/network.ts';
import { STABLES } from '../shared/network.ts';
import type { LedgerTransaction } from '../ports/ledger.ts';
import type { WatchedAddress } from '../ports/indexer-store.ts';
import type { NewEvent, NewEventFields } from '../events/schema.ts';
import { newEvent } from '../events/kinds.ts';
import { MPL_CORE_PROGRAM_ID, treasuryOf } from '../treasury/derive.ts';

// What one landed transaction means for the watched addresses (hosted-api §6; fee-facilitator-mpp-tools §6),
// derived from its pre/post balances and token balances and its instructions (inner ones for Execute's CPI). Pure:
// the job (service.ts) reads the transaction and writes the events.

/** hosted-api §6: native changes of a treasury under 5000 lamports are noise. */
export const FUND_SOL_MIN_LAMPORTS = 5_000n;

/** One event the transaction calls for; `key` is its subject within the signature, the exactly-once key. */
export interface Finding {
  key: string;
  kind: NewEvent['kind'];
  /** the agent the event is about; null for a fee */
  agent: string | null;
  /** the principal that watched the address (used when the agent is not recorded) */
  ownerPrincipal: string | null;
  event(fields: NewEventFields): NewEvent;
}

interface TokenChange {
  account: string;
  mint: string;
  owner: string;
  pre: bigint;
  post: bigint;
  /** the account was not a token account before the transaction */
  created: boolean;
}

/** The token accounts whose balance the transaction shows, with their owners. */
export function tokenChanges(tx: LedgerTransaction): TokenChange[] {
  const byIndex = new Map<number, TokenChange>();
  for (const b of tx.preTokenBalances)
    byIndex.set(b.accountIndex, { account: b.account, mint: b.mint, owner: b.owner, pre: b.amount, post: 0n, created: false });
  for (const b of tx.postTokenBalances) {
    const seen = byIndex.get(b.accountIndex);
    if (seen) seen.post = b.amount;
    else byIndex.set(b.accountIndex, { account: b.account, mint: b.mint, owner: b.owner, pre: 0n, post: b.amount, created: true });
  }
  return [...byIndex.values()];
}

/** The addresses whose watch entries decide what the transaction means: its keys and its token accounts' owners. */
export function addressesOf(tx: LedgerTransaction): string[] {
  return [...new Set([...tx.accountKeys, ...tokenChanges(tx).map((c) => c.owner)])];
}

export function findingsOf(tx: LedgerTransaction, ctx: { network: Network; feeAuthority: string | null; watched: readonly WatchedAddress[] }): Finding[] {
  if (tx.err !== null) return [];
  const symbolOf = new Map(STABLES[ctx.network].map((s) => [s.mint, s.symbol as string]));
  // treasury PDA → its agent, from any watch entry of the agent
  const treasuries = new Map<string, { agent: string; ownerPrincipal: string | null }>();
  for (const w of ctx.watched)
    if (w.agent !== null) treasuries.set(w.role === 'treasury' ? w.address : treasuryOf(w.agent), { agent: w.agent, ownerPrincipal: w.ownerPrincipal });

  const found: Finding[] = [];
  const changes = tokenChanges(tx);
  for (const c of changes) {
    const delta = c.post - c.pre;
    const treasury = treasuries.get(c.owner);
    const currency = symbolOf.get(c.mint) ?? null;
    if (treasury) {
      const about = { agent: treasury.agent, ownerPrincipal: treasury.ownerPrincipal };
      if (c.created) {
        found.push({
          ...about,
          key: `provision:${c.account}`,
          kind: 'agent.treasury.provision',
          event: (f) => newEvent('agent.treasury.provision', f, { source: 'indexer', token_account: c.account, mint: c.mint, currency }),
        });
      }
      if (delta > 0n) {
        const from = changes.find((o) => o.mint === c.mint && o.post < o.pre)?.owner ?? null;
        found.push({
          ...about,
          key: `fund:${c.account}`,
          kind: 'agent.treasury.fund',
          event: (f) =>
            newEvent('agent.treasury.fund', f, { source: 'indexer', token_account: c.account, mint: c.mint, currency, amount_atomic: delta.toString(), from }),
        });
      } else if (delta < 0n) {
        const destination = changes.find((o) => o.mint === c.mint && o.post > o.pre && o.account !== c.account)?.account ?? null;
        found.push({
          ...about,
          key: `withdraw:${c.account}`,
          kind: 'agent.treasury.withdraw',
          event: (f) =>
            newEvent('agent.treasury.withdraw', f, {
              source: 'indexer',
              token_account: c.account,
              mint: c.mint,
              currency,
              amount_atomic: (-delta).toString(),
              destination,
            }),
        });
      }
    }
    if (ctx.feeAuthority !== null && c.owner === ctx.feeAuthority && delta > 0n) {
      const feeAuthority = ctx.feeAuthority;
      found.push({
        agent: null,
        ownerPrincipal: null,
        key: `fee:${c.account}`,
        kind: 'protocol.fee.collected',
        event: (f) =>
          newEvent('protocol.fee.collected', f, {
            source: 'on_chain',
            tx_sig: tx.signature,
            mint: c.mint,
            currency: currency ?? c.mint,
            fee_atomic: delta.toString(),
            fee_authority: feeAuthority,
            token_account: c.account,
          }),
      });
    }
  }

  const deltas = tx.accountKeys.map((_, i) => (tx.postBalances[i] ?? 0n) - (tx.preBalances[i] ?? 0n));
  const instructions = [...tx.instructions, ...(tx.innerInstructions ?? []).flatMap((inner) => inner.instructions)];
  tx.accountKeys.forEach((address, i) => {
    const treasury = treasuries.get(address);
    if (!treasury) return;
    const delta = deltas[i]!;
    const about = { agent: treasury.agent, ownerPrincipal: treasury.ownerPrincipal };
    if (delta >= FUND_SOL_MIN_LAMPORTS) {
      const j = deltas.findIndex((d, k) => k !== i && d <= -delta);
      const from = j >= 0 ? tx.accountKeys[j]! : null;
      found.push({
        ...about,
        key: `fund_sol:${address}`,
        kind: 'agent.treasury.fund_sol',
        event: (f) => newEvent('agent.treasury.fund_sol', f, { source: 'indexer', treasury: address, lamports: delta.toString(), from }),
      });
    } else if (delta < 0n && instructions.some((ix) => ix.programId === MPL_CORE_PROGRAM_ID && ix.accounts.includes(address))) {
      // the asset-signer PDA signs only through Core's Execute: its lamports fell through one
      let j = deltas.findIndex((d, k) => k !== i && d === -delta);
      if (j < 0) j = deltas.reduce((best, d, k) => (k !== i && d > 0n && (best < 0 || d > deltas[best]!) ? k : best), -1);
      const destination = j >= 0 ? tx.accountKeys[j]! : null;
      found.push({
        ...about,
        key: `withdraw_sol:${address}`,
        kind: 'agent.treasury.withdraw_sol',
        event: (f) => newEvent('agent.treasury.withdraw_sol', f, { source: 'indexer', treasury: address, lamports: (-delta).toString(), destination }),
      });
    }
  });
  return found;
}
