// Watch your events live over GraphQL subscriptions (graphql-ws on /graphql): payment links created and paid,
// receipts, and every prepare → submit → confirm of your agents, as they happen.
//
//   SVC_API_KEY=svc_test_… node --import tsx examples/subscribe.ts [how many events, then exit]
//   SVC_EVENT_KINDS='payment_link.*,receipt.published' …   only these kinds (wildcards allowed)
import { createClient } from 'graphql-ws';
import WebSocket from 'ws';

const url = process.env.SVC_URL ?? 'http://localhost:8080';
const apiKey = process.env.SVC_API_KEY;
if (!apiKey) throw new Error('Set SVC_API_KEY (npm run keys -- create --network chain-devnet).');
const limit = Number(process.argv[2] ?? Infinity);
const kinds = process.env.SVC_EVENT_KINDS?.split(',');

// The key travels in connectionParams (a browser would exchange it for a short-lived stream token first).
// Node 20 has no global WebSocket: hand graphql-ws the `ws` package's.
const client = createClient({ url: `${url.replace(/^http/, 'ws')}/graphql`, webSocketImpl: WebSocket, connectionParams: { authorization: apiKey } });
client.on('connected', () => console.log('Subscribed; waiting for events…'));

const subscription = client.iterate<{ events: { id: string; kind: string; phase: string; agentAsset: string | null; signature: string | null } }>({
  query: `subscription ($kinds: [String!]) { events(kinds: $kinds) { id kind phase agentAsset signature } }`,
  variables: { kinds },
});
let seen = 0;
for await (const result of subscription) {
  if (result.errors) throw new Error(result.errors.map((e) => e.message).join('; '));
  const e = result.data!.events;
  // Each phase of a ledger action arrives as its own message: PREPARED, SUBMITTED, CONFIRMED (or FAILED).
  console.log(`${e.kind} ${e.phase} ${e.agentAsset ?? ''} ${e.signature ?? ''}`.trim());
  if (++seen >= limit) break; // leaving the loop unsubscribes
}
await client.dispose();
