import type * as Port from '../../../domain/ports/ledger.ts';
import { parseTokenAccount } from '../../../domain/shared/token-account.ts';
import type { HistoryEntry } from './history.ts';
import type { LandedTransaction, SimulateWireResult, SimulateWireOptions, TransactionRecord } from './ledger.ts';
import { toLedgerTransaction } from './ledger-messages.ts';

const RANK: Record<Port.Commitment, number> = { processed: 0, confirmed: 1, finalized: 2 };

/** Whether a status has reached a commitment level. */
export const reached = (status: Port.SignatureStatus | null, level: Port.Commitment): boolean =>
  status !== null && RANK[status.confirmationStatus] >= RANK[level];

// The Ledger port over the embedded ledger's synchronous methods (which the JSON-RPC server and the ledger thread
// call directly): each port method is one of them, answered as a promise in the port's shapes.

export abstract class EmbeddedLedgerPort implements Port.Ledger {
  abstract latestBlockhash(): Port.LatestBlockhash;
  abstract blockhashValid(blockhash: string): boolean;
  abstract slot(): number;
  abstract readAccount(address: string): Port.LedgerAccount | null;
  abstract balance(address: string): bigint;
  abstract decimalsOf(mint: string): number | undefined;
  abstract tokenAccountsOf(owner: string, filter?: { mint?: string | undefined; programId?: string | undefined }): Port.LedgerAccount[];
  abstract simulateWire(bytes: Uint8Array, options?: SimulateWireOptions): SimulateWireResult;
  abstract sendWire(bytes: Uint8Array, options?: Port.SendOptions): Port.SendResult;
  abstract signatureStatus(signature: string): (Port.SignatureStatus & { seq: number }) | null;
  abstract signaturesFor(address: string, options?: Port.SignaturesForAddressOptions): HistoryEntry[];
  abstract transactionRecord(signature: string): TransactionRecord | null;

  async getLatestBlockhash(): Promise<Port.LatestBlockhash> {
    return this.latestBlockhash();
  }

  async isBlockhashValid(blockhash: string): Promise<boolean> {
    return this.blockhashValid(blockhash);
  }

  async getBlockHeight(): Promise<number> {
    return this.slot();
  }

  async getSlot(): Promise<number> {
    return this.slot();
  }

  async getAccount(address: string): Promise<Port.LedgerAccount | null> {
    return this.readAccount(address);
  }

  async getMultipleAccounts(addresses: string[]): Promise<(Port.LedgerAccount | null)[]> {
    return addresses.map((a) => this.readAccount(a));
  }

  async getBalance(address: string): Promise<bigint> {
    return this.balance(address);
  }

  async getTokenBalances(owner: string, filter: { mint?: string } = {}): Promise<Port.TokenAccountBalance[]> {
    return this.tokenAccountsOf(owner, { mint: filter.mint }).map((account) => {
      const t = parseTokenAccount(account.data);
      return { address: account.address, mint: t.mint, owner: t.owner, amount: t.amount, decimals: this.decimalsOf(t.mint) ?? 0, tokenProgram: account.owner };
    });
  }

  async simulateTransaction(wire: Uint8Array, options: Port.SimulateOptions = {}): Promise<Port.SimulationResult> {
    const { err, logs, unitsConsumed } = this.simulateWire(wire, options);
    return { err, logs, unitsConsumed };
  }

  async sendTransaction(wire: Uint8Array, options: Port.SendOptions = {}): Promise<Port.SendResult> {
    return this.sendWire(wire, options);
  }

  async getSignatureStatuses(signatures: string[]): Promise<(Port.SignatureStatus | null)[]> {
    return signatures.map((s) => {
      const status = this.signatureStatus(s);
      return status && { slot: status.slot, confirmationStatus: status.confirmationStatus, err: status.err };
    });
  }

  /** Resolves on the commit (history write or fsync) that brings the signature to `commitment`, or at the deadline. */
  async waitForSignature(signature: string, options: Port.WaitForSignatureOptions): Promise<Port.SignatureStatus | null> {
    const wanted = options.commitment ?? 'confirmed';
    const current = (): Port.SignatureStatus | null => {
      const status = this.signatureStatus(signature);
      return status && { slot: status.slot, confirmationStatus: status.confirmationStatus, err: status.err };
    };
    const now = current();
    if (reached(now, wanted) || options.timeoutMs <= 0) return now;
    return new Promise((resolve) => {
      const finish = () => {
        clearTimeout(timer);
        stop();
        resolve(current());
      };
      const stop = this.onCommit(() => {
        if (reached(current(), wanted)) finish();
      });
      const timer = setTimeout(finish, options.timeoutMs);
    });
  }

  abstract onCommit(listener: (level: 'confirmed' | 'finalized', seq: number) => void): () => void;
  abstract onTransaction(listener: (landed: LandedTransaction) => void): () => void;

  /**
   * The ledger's own events: a landed transaction touching a followed address is held until the commit that makes it
   * confirmed (its history write, within the same turn of the event loop), then delivered. In-process, so there is no
   * gap: onLive right after each follow.
   */
  followAddresses(handlers: Port.ActivityHandlers): Port.ActivityFeed {
    let followed = new Set<string>();
    let started = false;
    let held: { seq: number; activity: Port.AddressActivity }[] = [];
    const safe = (f: () => void) => {
      try {
        f();
      } catch {
        // the follower's fault stays the follower's
      }
    };
    const stopLanded = this.onTransaction((landed) => {
      if (followed.size === 0) return;
      const addresses = landed.keys.filter((key) => followed.has(key));
      if (addresses.length)
        held.push({
          seq: landed.seq,
          activity: { signature: landed.signature, slot: landed.slot, err: landed.err, addresses, feePayer: landed.keys[0] ?? null },
        });
    });
    const stopCommit = this.onCommit((level, seq) => {
      if (level !== 'confirmed' || held.length === 0) return;
      const ready = held.filter((h) => h.seq <= seq);
      held = held.filter((h) => h.seq > seq);
      for (const h of ready) safe(() => handlers.onActivity(h.activity));
    });
    return {
      follow: (addresses) => {
        const first = !started;
        started = true;
        const widened = addresses.some((a) => !followed.has(a));
        followed = new Set(addresses);
        // followed from here on: a new address's past is the follower's catch-up
        if (first || widened) queueMicrotask(() => safe(() => handlers.onLive()));
      },
      close: () => {
        stopLanded();
        stopCommit();
        held = [];
      },
    };
  }

  async getSignaturesForAddress(address: string, options: Port.SignaturesForAddressOptions = {}): Promise<Port.SignatureInfo[]> {
    return this.signaturesFor(address, options).map((e) => ({ signature: e.sig, slot: e.slot, blockTime: e.time, err: e.err, memo: e.memo }));
  }

  async getTransaction(signature: string): Promise<Port.LedgerTransaction | null> {
    const record = this.transactionRecord(signature);
    return record ? toLedgerTransaction(record) : null;
  }
}
