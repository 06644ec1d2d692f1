import { connect, createServer, type Server, type Socket } from 'node:net';

// A fault-injecting TCP proxy in front of a Solana node (STYLE habit 13: fakes only to inject faults): every byte
// passes unchanged until the test cuts the connections or refuses new ones, as a node restart, a load balancer or a
// dropped link would. Nothing of the protocol is read or answered here.

export interface TcpProxy {
  readonly port: number;
  /** connections accepted so far */
  readonly accepted: number;
  /** ends every open connection at once (both sides), as a dropped link does */
  cut(): void;
  /** true: new connections are closed as soon as they arrive (a node that is down); false: relayed again */
  refuse(on: boolean): void;
  close(): Promise<void>;
}

function listen(server: Server, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      server.off('error', reject);
      resolve((server.address() as { port: number }).port);
    });
  });
}

function proxyServer(target: { host: string; port: number }): { server: Server; state: { accepted: number; refusing: boolean; open: Set<Socket> } } {
  const state = { accepted: 0, refusing: false, open: new Set<Socket>() };
  const server = createServer((client) => {
    state.accepted++;
    if (state.refusing) return void client.destroy();
    const upstream = connect(target.port, target.host);
    for (const [a, b] of [
      [client, upstream],
      [upstream, client],
    ] as const) {
      state.open.add(a);
      a.on('error', () => b.destroy());
      a.on('close', () => {
        state.open.delete(a);
        b.destroy();
      });
      a.pipe(b);
    }
  });
  return { server, state };
}

function handle(server: Server, port: number, state: { accepted: number; refusing: boolean; open: Set<Socket> }): TcpProxy {
  return {
    port,
    get accepted() {
      return state.accepted;
    },
    cut() {
      for (const socket of [...state.open]) socket.destroy();
    },
    refuse(on) {
      state.refusing = on;
    },
    close() {
      for (const socket of [...state.open]) socket.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

export async function startTcpProxy(target: { host: string; port: number }, port = 0): Promise<TcpProxy> {
  const { server, state } = proxyServer(target);
  return handle(server, await listen(server, port), state);
}

/**
 * A node at `rpcUrl` (the embedded ledger's JSON-RPC, which takes WebSocket upgrades on its HTTP port as well) behind
 * two proxies laid out as agave's: JSON-RPC on port P, PubSub on P + 1, so an rpc adapter given `url` finds the
 * WebSocket where it looks by default.
 */
export async function startNodeProxy(rpcUrl: string): Promise<{ url: string; wsUrl: string; http: TcpProxy; ws: TcpProxy; close(): Promise<void> }> {
  const node = new URL(rpcUrl);
  const target = { host: node.hostname, port: Number(node.port) };
  for (let attempt = 0; ; attempt++) {
    const http = await startTcpProxy(target);
    try {
      const ws = await startTcpProxy(target, http.port + 1);
      return {
        url: `http://127.0.0.1:${http.port}`,
        wsUrl: `ws://127.0.0.1:${ws.port}`,
        http,
        ws,
        close: async () => {
          await Promise.all([http.close(), ws.close()]);
        },
      };
    } catch (e) {
      await http.close();
      if (attempt >= 20) throw e;
    }
  }
}
