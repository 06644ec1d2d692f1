import type { Network } from '../shared/network.ts';
import type { GatewaySettings } from '../shared/settings.ts';
import { iso } from '../shared/settings.ts';
import { bounded } from '../shared/pagination.ts';
import { newId } from '../shared/ids.ts';
import type { Clock } from '../ports/clock.ts';
import type { ActivityFeed, ActivityHandlers, AddressActivity, Ledger, LedgerTransaction, SignatureInfo } from '../ports/ledger.ts';
import type { Store } from '../ports/store.ts';
import type { WatchedAddress } from '../ports/indexer-store.ts';
import type { Caller } from '../access/ownership.ts';
import { addressesOf, findingsOf } from './rules.ts';
import type { IndexerStatus } from './schema.ts';

// The indexer (hosted-api §6; fee-facilitator-mpp-tools §6; ARCHITECTURE "Scale-out"). One run per network:
// for each watched address the signatures since its cursor (newest first, paged with before/until), then the new
// transactions oldest first; each finding is appended with its (network, signature, key) row in indexer_seen in one
// transaction, so a rescan, a crash between the events and the cursors, or two runners at once report it once.

/** getSignaturesForAddress page size; an address scanned for the first time reads one page (its recent history). */
const PAGE = 1000;
const WATCH_PAGE = 500;
/** a notified transaction not readable yet (a node's notification before its confirmed read) is waited for this long */
const NOTIFIED_READ_MS = 5_000;

export interface IndexerDeps {
  store: Store;
  clock: Clock;
  ledgers: Partial<Record<Network, Ledger>>;
  settings: GatewaySettings;
  /**
   * Fee payers whose transactions the gateway records itself: its facilitator's (paywall settlements → payment_link.settled
   * and the earn receipt with its protocol.fee.collected; sponsored treasury token accounts). The indexer skips them.
   */
  ownFeePayers?: readonly string[] | undefined;
  /** getSignaturesForAddress page size (default 1000, the RPC's maximum) */
  pageSize?: number | undefined;
}

export interface IndexRun {
  watched: number;
  signatures: number;
  events: number;
}

export class IndexerService {
  constructor(private readonly deps: IndexerDeps) {}

  /** the networks this process can follow */
  networks(): Network[] {
    return Object.keys(this.deps.ledgers) as Network[];
  }

  /** One pass over the network's watchlist. A failure is recorded on the network's status and thrown. */
  async run(network: Network): Promise<IndexRun> {
    const ledger = this.deps.ledgers[network];
    if (!ledger) return { watched: 0, signatures: 0, events: 0 };
    const at = this.deps.clock.now();
    try {
      const ledgerSlot = await ledger.getSlot();
      const watched = await this.watched(network);
      const found = new Map<string, SignatureInfo>();
      const newest = new Map<string, { signature: string; slot: number }>();
      for (const w of watched) {
        const signatures = await this.signaturesSince(
          ledger,
          w.address,
          w.cursorSignature === null ? null : { signature: w.cursorSignature, slot: w.cursorSlot },
        );
        if (signatures[0]) newest.set(w.address, { signature: signatures[0].signature, slot: signatures[0].slot });
        for (const s of signatures) if (!found.has(s.signature)) found.set(s.signature, s);
      }
      // oldest first (the ledger lists newest first: reverse keeps the order within a slot)
      const ordered = [...found.values()].reverse().sort((a, b) => a.slot - b.slot);
      let events = 0;
      for (const s of ordered) if (s.err === null) events += await this.index(network, ledger, s.signature);
      for (const [address, cursor] of newest) await this.deps.store.indexer.advanceCursor(network, address, cursor);
      await this.deps.store.indexer.recordRun(network, { at, syncedSlot: ledgerSlot, error: null });
      return { watched: watched.length, signatures: ordered.length, events };
    } catch (e) {
      const message = e instanceof Error ? e.message : String(e);
      await this.deps.store.indexer.recordRun(network, { at, syncedSlot: null, error: message.slice(0, 500) }).catch(() => undefined);
      throw e;
    }
  }

  /** The network's ledger notifications of `handlers`' addresses; undefined where the ledger has none (polled then). */
  feed(network: Network, handlers: ActivityHandlers): ActivityFeed | undefined {
    return this.deps.ledgers[network]?.followAddresses?.(handlers);
  }

  /** the ledger's current slot (a follower's sync point) */
  async ledgerSlot(network: Network): Promise<number | null> {
    const ledger = this.deps.ledgers[network];
    return ledger ? ledger.getSlot() : null;
  }

  /** the addresses the network's follower listens to (the whole watchlist) */
  async watchedAddresses(network: Network): Promise<string[]> {
    return (await this.watched(network)).map((w) => w.address);
  }

  /**
   * One transaction the ledger notified (a follower's feed of the watched addresses): its events, each once (the same
   * indexer_seen record as a run). A failed transaction or one paid by the gateway's own facilitator is nothing, known
   * from the notification alone where it names the fee payer. Throws when the ledger cannot answer it: the follower
   * then catches up by listing signatures.
   */
  async indexNotified(network: Network, activity: AddressActivity): Promise<number> {
    const ledger = this.deps.ledgers[network];
    if (!ledger || activity.err !== null) return 0;
    if (activity.feePayer !== null && this.deps.ownFeePayers?.includes(activity.feePayer)) return 0;
    let tx = await ledger.getTransaction(activity.signature);
    if (!tx && (await ledger.waitForSignature(activity.signature, { timeoutMs: NOTIFIED_READ_MS }))) tx = await ledger.getTransaction(activity.signature);
    if (!tx) throw new Error(`notified transaction ${activity.signature} is not readable`);
    return this.record(network, tx);
  }

  /** The follower's sync point: every watched address is indexed up to `slot` (GET /v1/indexer/status cursor_slot). */
  async recordSynced(network: Network, slot: number): Promise<void> {
    await this.deps.store.indexer.recordRun(network, { at: this.deps.clock.now(), syncedSlot: slot, error: null });
  }

  /** Moves the cursors a follower has covered (every transaction up to each was indexed by it). */
  async advanceCursors(network: Network, cursors: ReadonlyMap<string, { signature: string; slot: number }>): Promise<void> {
    for (const [address, cursor] of cursors) await this.deps.store.indexer.advanceCursor(network, address, cursor);
  }

  private async watched(network: Network): Promise<WatchedAddress[]> {
    const all: WatchedAddress[] = [];
    for (;;) {
      const page = await this.deps.store.indexer.listWatched(network, { afterAddress: all.at(-1)?.address, limit: WATCH_PAGE });
      all.push(...page);
      if (page.length < WATCH_PAGE) return all;
    }
  }

  /** Newest first: every signature of `address` after the cursor (paged with before/until); without one, the newest page. */
  async signaturesSince(ledger: Ledger, address: string, cursor: { signature: string; slot: number | null } | null): Promise<SignatureInfo[]> {
    const limit = this.deps.pageSize ?? PAGE;
    const out: SignatureInfo[] = [];
    for (;;) {
      const before = out.at(-1)?.signature;
      const page = await ledger.getSignaturesForAddress(address, {
        limit,
        ...(cursor !== null ? { until: cursor.signature } : {}),
        ...(before !== undefined ? { before } : {}),
      });
      out.push(...page);
      if (page.length < limit || cursor === null) return out;
      // a node that no longer holds the cursor's signature would list back to genesis: stop once past its slot
      const floor = cursor.slot;
      if (floor !== null && page.at(-1)!.slot < floor) return out.filter((s) => s.slot >= floor);
    }
  }

  /** The events of one transaction; returns how many were new. */
  private async index(network: Network, ledger: Ledger, signature: string): Promise<number> {
    const tx = await ledger.getTransaction(signature);
    // listed but not readable yet: fail the run so the cursors stay and the next run reads it again
    if (!tx) throw new Error(`transaction ${signature} is listed but not readable yet`);
    return this.record(network, tx);
  }

  private async record(network: Network, tx: LedgerTransaction): Promise<number> {
    const { signature } = tx;
    if (tx.err !== null || this.deps.ownFeePayers?.includes(tx.accountKeys[0]!)) return 0;
    const watched = await this.deps.store.indexer.lookup(network, addressesOf(tx));
    let findings = findingsOf(tx, { network, feeAuthority: this.deps.settings.fee.authorities[network] ?? null, watched });
    if (!findings.length) return 0;
    // A transaction submitted through /v1/submit is its prepared event already: not reported again for that agent.
    const preparedAgent = await this.deps.store.indexer.preparedAgentOf(network, signature);
    if (preparedAgent !== null) findings = findings.filter((f) => f.agent !== preparedAgent);
    const owners = new Map<string, string | null>();
    for (const f of findings) {
      if (f.agent === null || owners.has(f.agent)) continue;
      // The agent's owner as recorded now (null: admin-only); the watch entry's principal only for an agent never recorded.
      const agent = await this.deps.store.agents.get(network, f.agent);
      owners.set(f.agent, agent ? agent.ownerPrincipal : f.ownerPrincipal);
    }
    const now = this.deps.clock.now();
    return this.deps.store.transaction(async (trx) => {
      let written = 0;
      for (const f of findings) {
        const id = newId(now.getTime());
        if (!(await trx.indexer.markSeen({ network, signature, key: f.key, eventId: id, at: now }))) continue;
        const owner = f.agent === null ? null : (owners.get(f.agent) ?? null);
        await trx.events.append(
          f.event({
            id,
            phase: 'confirmed',
            network,
            agentAsset: f.agent,
            owner,
            createdAt: now,
            confirmedAt: now,
            signature,
            slot: tx.slot,
            blockTime: tx.blockTime,
          }),
        );
        written++;
      }
      return written;
    });
  }

  /**
   * GET /v1/indexer/status: the caller's network (a key belongs to one). It carries no owned data — counts, slots and
   * the last error — so every key of the network reads it, admin or not.
   */
  async status(caller: Caller): Promise<IndexerStatus> {
    const { network } = caller;
    const s = await this.deps.store.indexer.status(network);
    const ledger = this.deps.ledgers[network];
    const ledgerSlot = ledger ? await ledger.getSlot().catch(() => null) : null;
    return bounded([
      {
        network,
        ledger_slot: ledgerSlot,
        cursor_slot: s.syncedSlot,
        newest_cursor_slot: s.maxCursorSlot,
        lag_slots: ledgerSlot !== null && s.syncedSlot !== null ? Math.max(0, ledgerSlot - s.syncedSlot) : null,
        watched_addresses: s.watched,
        last_run_at: s.lastRunAt ? iso(s.lastRunAt) : null,
        last_error: s.lastError,
        last_error_at: s.lastErrorAt ? iso(s.lastErrorAt) : null,
      },
    ]);
  }
}
