// Receive the gateway's webhooks and check each delivery's signature before trusting it. The gateway signs with the
// Standard Webhooks scheme too (webhook-id, webhook-timestamp, webhook-signature), so any standardwebhooks library
// verifies it; svc-gateway/client/webhooks' verifyWebhook checks the Stripe-style X-Svc-Signature the same way.
//
//   SVC_API_KEY=svc_test_… PORT=3000 node --import tsx examples/webhook-receiver.ts [how many deliveries, then exit]
//
// The gateway calls only public https URLs unless told otherwise: for this local receiver start it with
// SVC_OUTBOUND_ALLOW=127.0.0.1:3000 (SVC_WEBHOOK_URL: the URL the gateway should call, default http://127.0.0.1:PORT/hooks).
import { createServer } from 'node:http';
import { Webhook } from 'standardwebhooks';

const url = process.env.SVC_URL ?? 'http://localhost:8080';
const apiKey = process.env.SVC_API_KEY;
if (!apiKey) throw new Error('Set SVC_API_KEY (npm run keys -- create --network chain-devnet).');
const port = Number(process.env.PORT ?? 3000);
const hookUrl = process.env.SVC_WEBHOOK_URL ?? `http://127.0.0.1:${port}/hooks`;
const limit = Number(process.argv[2] ?? Infinity);

async function api(method: string, path: string, body?: unknown): Promise<any> {
  const res = await fetch(`${url}/v1${path}`, {
    method,
    headers: { authorization: `Bearer ${apiKey}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  if (res.status === 204) return null;
  const json: any = await res.json();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${json.error}: ${json.message}`);
  return json;
}

let verifier: Webhook | undefined;
let received = 0;
const server = createServer((req, res) => {
  // Verify the raw bytes as they arrived: parsing and re-serialising JSON would change them and fail the check.
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    try {
      const payload = verifier!.verify(Buffer.concat(chunks), req.headers as Record<string, string>) as { id: string; type: string; data: unknown };
      // Deliveries are at least once: a real receiver deduplicates on payload.id (also the webhook-id header).
      console.log(`verified ${payload.type} (delivery ${payload.id})`);
      res.writeHead(204).end();
      if (++received >= limit) void stop();
    } catch (e) {
      console.error(`refused a delivery: ${(e as Error).message}`);
      res.writeHead(400).end(); // a non-2xx answer makes the gateway retry later
    }
  });
});
await new Promise<void>((resolve) => server.listen(port, resolve));

// Subscribe this receiver (the secret is shown once, in this answer) to payment-link events.
const webhook = await api('POST', '/webhooks', { url: hookUrl, events: ['payment_link.*'], description: 'examples/webhook-receiver.ts' });
verifier = new Webhook(webhook.secret);
console.log(`Registered webhook ${webhook.id} for ${hookUrl}; waiting for deliveries…`);

let stopping = false;
async function stop(): Promise<void> {
  if (stopping) return; // deliveries still in flight may reach the count again
  stopping = true;
  await api('DELETE', `/webhooks/${webhook.id}`); // an example leaves no subscription behind
  server.close();
  server.closeIdleConnections(); // the gateway's kept-alive connection would hold the process open a few seconds
}
process.once('SIGINT', () => void stop());
