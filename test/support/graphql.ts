import { createClient } from 'graphql-ws';
import WebSocket from 'ws';
import { graphqlEnumName } from '../../interfaces/graphql/enums.ts';
// Selection sets for the GraphQL types every wire field of which the tests compare with REST.

export const LINK_FIELDS = `
  id network label ownerAgent payTo payToTokenAccount method path price currency acceptsCurrencies protocol
  response { status mimeType body } webhookUrl webhookSecretSet webhookSecret wrapReceipt settlePolicy accessWindow requestBinding disabled facilitator shareUrl
  accepts { scheme network payTo payToTokenAccount payToReady asset amount currency }
  counters { callCount settledCount lastCalledAt lastSettledAt lastTxSig }
  metadata createdAt updatedAt`;

export const EVENT_FIELDS = `id kind phase phases { phase at signature } network agentAsset signature blockTime confirmedAt slot errorCode errorLogs metadata clientReference createdAt`;

/** An event as the live subscriptions of the tests select it. */
export interface WatchedEvent {
  id: string;
  kind: string;
  phase: string;
  /** every phase the event entered, oldest first (GraphQL enum values) */
  phases: { phase: string; at: string; signature: string | null }[];
  agentAsset: string | null;
  signature: string | null;
  slot: number | null;
  metadata: Record<string, unknown>;
  errorCode: string | null;
  errorLogs: string[] | null;
}

/**
 * Every event the key may read, live over graphql-ws, collected in `seen`; resolves once the socket is connected.
 * `close` unsubscribes and disposes the client.
 */
export async function watchEvents(app: { url: string }, key: string): Promise<{ seen: WatchedEvent[]; close: () => Promise<void> }> {
  const client = createClient({
    url: `${app.url.replace(/^http/, 'ws')}/graphql`,
    webSocketImpl: WebSocket,
    connectionParams: { authorization: key },
    retryAttempts: 0,
  });
  const seen: WatchedEvent[] = [];
  const connected = new Promise<void>((resolve) => client.on('connected', () => resolve()));
  const stop = client.subscribe<{ events: WatchedEvent }>(
    { query: 'subscription { events { id kind phase phases { phase at signature } agentAsset signature slot metadata errorCode errorLogs } }' },
    { next: (r) => void (r.data?.events && seen.push(r.data.events)), error: () => {}, complete: () => {} },
  );
  await connected;
  return {
    seen,
    close: async () => {
      stop();
      await client.dispose();
    },
  };
}

/**
 * A REST answer as GraphQL answers it: the wire values of a domain enum at the named paths (dotted; arrays are walked
 * through: `tokens.tokenProgram`) written as the GraphQL enum values (`chain-devnet` → CHAIN_DEVNET, `token-2022` →
 * TOKEN_2022); nulls, other keys and JSON values (metadata) unchanged.
 */
export function asGraphqlEnums<T>(value: T, paths: readonly string[]): T {
  const at = (v: unknown, path: readonly string[]): unknown => {
    if (Array.isArray(v)) return v.map((item) => at(item, path));
    if (path.length === 0) return typeof v === 'string' ? graphqlEnumName(v) : v;
    if (v === null || typeof v !== 'object' || !(path[0]! in v)) return v;
    const [head, ...rest] = path as [string, ...string[]];
    return { ...(v as Record<string, unknown>), [head]: at((v as Record<string, unknown>)[head], rest) };
  };
  return paths.reduce<unknown>((v, path) => at(v, path.split('.')), value) as T;
}
