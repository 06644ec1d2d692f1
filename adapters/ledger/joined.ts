import { join } from 'node:path';
import type {
  ActivityFeed,
  ActivityHandlers,
  Ledger,
  SendOptions,
  SignaturesForAddressOptions,
  SimulateOptions,
  WaitForSignatureOptions,
} from '../../domain/ports/ledger.ts';
import { DomainError } from '../../domain/shared/errors.ts';
import { NETWORKS, type Network } from '../../domain/shared/network.ts';
import { announcedRpc, lockHolder } from './embedded/files.ts';
import { RpcLedger } from './rpc/rpc-ledger.ts';

// Ledgers for a process that works beside the gateway without ever holding its files (`npm run jobs`): a remote node
// as configured, or an embedded ledger reached through the JSON-RPC of whichever process holds it, looked up on each
// call. Nothing is opened here, so the job runner never keeps the gateway from starting; while no process holds the
// ledger, calls fail with rpc_unavailable and the work waits for the next run. The runner's indexer follows the
// holder's notifications (followAddresses below) as the gateway's own does, and polls only while there is none.

/** while no process serves the ledger, a feed looks for one again after this long (doubling up to REATTACH_MAX_MS) */
const REATTACH_MS = 500;
const REATTACH_MAX_MS = 10_000;

/** An embedded ledger under `dir`, through the JSON-RPC its holder announces (found again when the holder changes). */
export class JoinedLedger implements Ledger {
  private current: RpcLedger | undefined;

  constructor(
    private readonly network: Network,
    private readonly dir: string,
  ) {}

  private at(method: string): RpcLedger {
    const holder = lockHolder(this.dir);
    const announced = holder !== null ? announcedRpc(this.dir) : null;
    if (!announced || announced.pid !== holder) {
      throw new DomainError('rpc_unavailable', `The embedded ${this.network} ledger is not served by any running process (start the gateway).`, { method });
    }
    if (this.current?.url !== announced.url) {
      this.current?.close();
      // the embedded server takes WebSocket upgrades on its HTTP port: sure to be it, where port + 1 may not be
      this.current = new RpcLedger({ url: announced.url, wsUrl: announced.url.replace(/^http/, 'ws') });
    }
    return this.current;
  }

  getLatestBlockhash() {
    return this.at('getLatestBlockhash').getLatestBlockhash();
  }
  isBlockhashValid(blockhash: string) {
    return this.at('isBlockhashValid').isBlockhashValid(blockhash);
  }
  getBlockHeight() {
    return this.at('getBlockHeight').getBlockHeight();
  }
  getSlot() {
    return this.at('getSlot').getSlot();
  }
  getAccount(address: string) {
    return this.at('getAccount').getAccount(address);
  }
  getMultipleAccounts(addresses: string[]) {
    return this.at('getMultipleAccounts').getMultipleAccounts(addresses);
  }
  getBalance(address: string) {
    return this.at('getBalance').getBalance(address);
  }
  getTokenBalances(owner: string, filter?: { mint?: string }) {
    return this.at('getTokenBalances').getTokenBalances(owner, filter);
  }
  simulateTransaction(wire: Uint8Array, options?: SimulateOptions) {
    return this.at('simulateTransaction').simulateTransaction(wire, options);
  }
  sendTransaction(wire: Uint8Array, options?: SendOptions) {
    return this.at('sendTransaction').sendTransaction(wire, options);
  }
  getSignatureStatuses(signatures: string[]) {
    return this.at('getSignatureStatuses').getSignatureStatuses(signatures);
  }
  waitForSignature(signature: string, options: WaitForSignatureOptions) {
    return this.at('waitForSignature').waitForSignature(signature, options);
  }
  getSignaturesForAddress(address: string, options?: SignaturesForAddressOptions) {
    return this.at('getSignaturesForAddress').getSignaturesForAddress(address, options);
  }
  getTransaction(signature: string) {
    return this.at('getTransaction').getTransaction(signature);
  }

  /**
   * The notifications of whichever process serves the ledger (its PubSub WebSocket, through the rpc adapter). A gap
   * there — the holder stopped, or was replaced by one on another port — is passed on, and the feed attaches to the
   * holder announced next (the follower catches up on the onLive that follows). While none serves it, onGap once and
   * a look every few seconds (an unref'd timer, ended by close).
   */
  followAddresses(handlers: ActivityHandlers): ActivityFeed {
    let addresses: readonly string[] | null = null;
    let inner: { feed: ActivityFeed; url: string } | undefined;
    let retry: NodeJS.Timeout | undefined;
    let wait = REATTACH_MS;
    let gap = false;
    let closed = false;
    const safe = (f: () => void) => {
      try {
        f();
      } catch {
        // the follower's fault stays the follower's
      }
    };
    const gapOnce = (reason: string) => {
      if (gap) return;
      gap = true;
      safe(() => handlers.onGap(reason));
    };
    const later = () => {
      if (closed || retry) return;
      retry = setTimeout(() => {
        retry = undefined;
        attach();
      }, wait);
      retry.unref();
      wait = Math.min(wait * 2, REATTACH_MAX_MS);
    };
    const attach = () => {
      if (closed || inner) return;
      let ledger: RpcLedger;
      try {
        ledger = this.at('followAddresses');
      } catch (e) {
        gapOnce((e as Error).message);
        return later();
      }
      const url = ledger.url;
      const feed = ledger.followAddresses({
        onActivity: (activity) => handlers.onActivity(activity),
        onLive: () => {
          wait = REATTACH_MS;
          gap = false;
          safe(() => handlers.onLive());
        },
        onGap: (reason) => {
          gapOnce(reason);
          // the same holder comes back on its own (the rpc adapter subscribes again); another one is attached anew
          let current: string | null = null;
          try {
            current = this.at('followAddresses').url;
          } catch {
            // none serves it now
          }
          if (current === url || inner?.feed !== feed) return;
          inner = undefined;
          feed.close();
          later();
        },
      });
      inner = { feed, url };
      if (addresses) feed.follow(addresses);
    };
    return {
      follow: (next) => {
        if (closed) return;
        addresses = next;
        if (inner) inner.feed.follow(next);
        else attach();
      },
      close: () => {
        closed = true;
        clearTimeout(retry);
        inner?.feed.close();
        inner = undefined;
      },
    };
  }

  close(): void {
    this.current?.close();
    this.current = undefined;
  }
}

/** Both networks' ledgers for a process that must not hold the embedded files: remote URLs as they are, embedded ones joined. */
export function joinLedgersLazily(options: { dataDir: string; devnet: string; mainnet: string }): {
  ledgers: Record<Network, Ledger>;
  close(): Promise<void>;
} {
  const ledgers = {} as Record<Network, Ledger>;
  const closers: (() => void)[] = [];
  for (const network of NETWORKS) {
    const source = network === 'chain-devnet' ? options.devnet : options.mainnet;
    const ledger = source === 'embedded' ? new JoinedLedger(network, join(options.dataDir, 'ledger', network)) : new RpcLedger({ url: source });
    ledgers[network] = ledger;
    closers.push(() => ledger.close());
  }
  return {
    ledgers,
    async close() {
      for (const close of closers) close();
    },
  };
}
