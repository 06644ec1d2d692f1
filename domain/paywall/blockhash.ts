import type { LatestBlockhash, Ledger } from '../ports/ledger.ts';
import type { Network } from '../shared/network.ts';

// The server-provided blockhash of x402's exact scheme on Solana (x402 PR #2693: extra.recentBlockhash and
// extra.lastValidBlockHeight): the buyer builds its payment on a blockhash the gateway's ledger has seen, with no RPC
// round trip of its own. One value per network at a time, read from the ledger once per REFRESH_MS at most — never
// once per 402 — so the unpaid 402 stays an answer from memory.

/** A blockhash lives 150 blocks (~60 s at 400 ms slots); an offer's is replaced after this long. */
export const REFRESH_MS = 15_000;
/** Past this age an offered blockhash may die before a buyer who takes maxTimeoutSeconds uses it: offer none. */
export const MAX_AGE_MS = 30_000;
/** After a failed read, the ledger is asked again no sooner than this (offers go without the fields meanwhile). */
const RETRY_MS = 1_000;

/** What an offer states: the blockhash and its last valid block height (a decimal string, as x402 sends it). */
export interface OfferBlockhash {
  blockhash: string;
  lastValidBlockHeight: string;
}

interface Entry {
  value: OfferBlockhash;
  at: number;
}

export interface OfferBlockhashesDeps {
  ledgers: Partial<Record<Network, Pick<Ledger, 'getLatestBlockhash'>>>;
  /**
   * Milliseconds of a monotonic clock. Blocks are produced in real time whatever the application's clock says (the
   * embedded ledger's slots follow wall time, a remote node's too), so the age of a blockhash is measured in it.
   */
  monotonicMs?: () => number;
}

/**
 * The blockhash each network's offers carry. `peek` is synchronous (the unpaid 402 without I/O): the current value
 * while it is young enough, starting a background read once it ages; `current` waits for a read only when there is no
 * usable value. Best effort, as the reference: when the ledger does not answer, offers omit the fields and buyers fall
 * back to their own getLatestBlockhash.
 */
export class OfferBlockhashes {
  private readonly entries = new Map<Network, Entry>();
  private readonly reading = new Map<Network, Promise<Entry | undefined>>();
  private readonly failedAt = new Map<Network, number>();
  private readonly now: () => number;

  constructor(private readonly deps: OfferBlockhashesDeps) {
    this.now = deps.monotonicMs ?? (() => performance.now());
  }

  /** The value to offer now, or undefined (none read yet, or too old); a read starts in the background when due. */
  peek(network: Network): OfferBlockhash | undefined {
    const entry = this.entries.get(network);
    const age = entry ? this.now() - entry.at : Number.POSITIVE_INFINITY;
    if (age >= REFRESH_MS) void this.read(network);
    return entry && age < MAX_AGE_MS ? entry.value : undefined;
  }

  /** `peek`, waiting for the ledger only when no usable value is at hand. */
  async current(network: Network): Promise<OfferBlockhash | undefined> {
    const held = this.peek(network);
    if (held) return held;
    return (await this.read(network))?.value;
  }

  /** One read per network at a time; a failure leaves the last value (until it is too old) and is retried later. */
  private read(network: Network): Promise<Entry | undefined> {
    const pending = this.reading.get(network);
    if (pending) return pending;
    const ledger = this.deps.ledgers[network];
    const failed = this.failedAt.get(network);
    if (!ledger || (failed !== undefined && this.now() - failed < RETRY_MS)) return Promise.resolve(undefined);
    const started = this.now();
    const read = ledger
      .getLatestBlockhash()
      .then((latest: LatestBlockhash): Entry => {
        const entry = { value: { blockhash: latest.blockhash, lastValidBlockHeight: String(latest.lastValidBlockHeight) }, at: started };
        this.entries.set(network, entry);
        this.failedAt.delete(network);
        return entry;
      })
      .catch(() => {
        this.failedAt.set(network, this.now());
        return undefined;
      })
      .finally(() => this.reading.delete(network));
    this.reading.set(network, read);
    return read;
  }
}
