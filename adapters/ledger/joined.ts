import { join } from 'node:path';
import type { Ledger, SendOptions, SignaturesForAddressOptions, SimulateOptions, WaitForSignatureOptions } from '../../domain/ports/ledger.ts';
import { DomainError } from '../../domain/shared/errors.ts';
import { NETWORKS, type Network } from '../../domain/shared/network.ts';
import { announcedRpc, lockHolder } from './embedded/files.ts';
import { RpcLedger } from './rpc/rpc-ledger.ts';

// Ledgers for a process that works beside the gateway without ever holding its files (`npm run jobs`): a remote node
// as configured, or an embedded ledger reached through the JSON-RPC of whichever process holds it, looked up on each
// call. Nothing is opened here, so the job runner never keeps the gateway from starting; while no process holds the
// ledger, calls fail with rpc_unavailable and the work waits for the next run.

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
      this.current = new RpcLedger({ url: announced.url });
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
