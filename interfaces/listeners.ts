import { ConfigError, type Config } from './config.ts';

// A listener that cannot bind stops start-up with the variable to change, not the system's bare "listen EADDRINUSE
// 127.0.0.1:8900": the gateway's HTTP port (PORT/HOST), each embedded ledger's JSON-RPC and WebSocket ports
// (SVC_DEVNET_RPC_PORT/SVC_MAINNET_RPC_PORT, SVC_LEDGER_RPC_HOST) and `npm run facilitator`'s (SVC_FACILITATOR_PORT/_HOST).

export interface ListenerSetting {
  /** the port's variable and its value, e.g. "PORT", 8080 */
  portVariable: string;
  portValue: number;
  /** the bind address's variable and its value, e.g. "HOST", "0.0.0.0" */
  hostVariable: string;
  host: string;
  /** the port that failed when it is not the variable's own (a JSON-RPC server's WebSocket: the next one) */
  port?: number;
  /** what listens there, e.g. "the chain-devnet ledger's WebSocket (SVC_DEVNET_RPC_PORT + 1)" */
  what?: string;
  /** who usually holds the port already, e.g. "another gateway" */
  usual: string;
  /** what the port must satisfy besides being free, e.g. "whose next port is free too" */
  needs?: string;
}

/** A ConfigError naming the setting to change when `error` is a bind failure; otherwise `error` itself. */
export function listenFailure(error: unknown, s: ListenerSetting): unknown {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  const port = s.port ?? s.portValue;
  const where = `${s.host}:${port}${s.what ? ` (${s.what})` : ''}`;
  const setting = `${s.portVariable}=${s.portValue}`;
  const free = `Set ${s.portVariable} to a free port${s.needs ? ` ${s.needs}` : ''}, or 0 for any.`;
  switch (code) {
    case 'EADDRINUSE':
      return new ConfigError(`${setting}: ${where} is already in use (is ${s.usual} running?). ${free}`);
    case 'EACCES':
      return new ConfigError(`${setting}: ${where} needs privileges this process does not have (ports below 1024). ${free}`);
    case 'EADDRNOTAVAIL':
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return new ConfigError(
        `${s.hostVariable}=${s.host}: ${s.host} is not an address of this machine, so ${setting} cannot listen there. Set ${s.hostVariable} to one of its addresses, 127.0.0.1 for this machine only, or 0.0.0.0 for all.`,
      );
    default:
      return error;
  }
}

/** An embedded ledger's JSON-RPC server that could not bind, as RpcListenError (adapters/ledger) describes it. */
export interface LedgerListener {
  network: string;
  host: string;
  port: number;
  role: 'json-rpc' | 'websocket';
  code: string;
}

/** The ledger's bind failure as a ConfigError naming SVC_DEVNET_RPC_PORT / SVC_MAINNET_RPC_PORT (or the host). */
export function ledgerListenFailure(error: Error & { listener: LedgerListener }, config: Config): unknown {
  const { listener } = error;
  const devnet = listener.network === 'chain-devnet';
  const portVariable = devnet ? 'SVC_DEVNET_RPC_PORT' : 'SVC_MAINNET_RPC_PORT';
  const portValue = devnet ? config.ledgers.devnetRpcPort : config.ledgers.mainnetRpcPort;
  return listenFailure(Object.assign(error, { code: listener.code }), {
    portVariable,
    portValue,
    hostVariable: 'SVC_LEDGER_RPC_HOST',
    host: listener.host,
    port: listener.port,
    what: listener.role === 'websocket' ? `the ${listener.network} ledger's WebSocket, ${portVariable} + 1` : `the ${listener.network} ledger's JSON-RPC`,
    usual: 'another gateway or a solana-test-validator',
    needs: 'whose next port is free too (its WebSocket)',
  });
}
