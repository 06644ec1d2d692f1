// The gateway never holds your key: every ledger action is prepare → sign → submit → track.
// This mints an agent (a Metaplex Core asset whose treasury can receive payments) with web3.js signing.
//
//   SVC_API_KEY=svc_test_… node --import tsx examples/sign-and-submit-web3.ts
import { Keypair, VersionedTransaction } from '@solana/web3.js';

const url = process.env.SVC_URL ?? 'http://localhost:8080';
const apiKey = process.env.SVC_API_KEY;
if (!apiKey) throw new Error('Set SVC_API_KEY (npm run keys -- create --network chain-devnet).');

/** REST /v1: JSON in, JSON out; an error answers { error, message, details, request_id }. */
async function api<T = any>(method: string, path: string, body?: unknown): Promise<T> {
  const res = await fetch(`${url}/v1${path}`, {
    method,
    headers: { authorization: `Bearer ${apiKey}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const json: any = await res.json();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${json.error}: ${json.message}`);
  return json as T;
}

// The owner pays the fee and the asset's rent: a fresh wallet funded from the devnet faucet.
const owner = Keypair.generate();
await api('POST', '/dev/faucet', { address: owner.publicKey.toBase58(), sol: '1' });

// 1. prepare: the gateway builds the transaction and records an event in phase "prepared".
const prepared = await api('POST', '/agents/prepare', { owner: owner.publicKey.toBase58(), name: 'My first agent' });
console.log(`prepared event ${prepared.event_id}: asset ${prepared.echo.asset}, signers ${prepared.transaction.signers.join(', ')}`);

// 2. sign: the new asset's slot is already signed by the gateway (a fresh key only it held, for this one account).
// `sign` fills the owner's slot and keeps every other signature; a fresh Transaction would drop the gateway's.
const tx = VersionedTransaction.deserialize(Buffer.from(prepared.transaction.base64, 'base64'));
tx.sign([owner]);

// 3. submit: the gateway checks the signed bytes against what it prepared and broadcasts them.
const submitted = await api('POST', '/submit', { event_id: prepared.event_id, transaction_base64: Buffer.from(tx.serialize()).toString('base64') });
console.log(`submitted ${submitted.signature}`);

// 4. track: the event moves to "confirmed" or "failed" (or subscribe: examples/subscribe.ts, or a webhook).
for (;;) {
  const event = await api('GET', `/events/${prepared.event_id}`);
  if (event.phase === 'confirmed') {
    console.log(`confirmed in slot ${event.slot}: agent ${prepared.echo.asset}`);
    break;
  }
  if (event.phase === 'failed') {
    console.error(`failed: ${event.error_code}\n${(event.error_logs ?? []).join('\n')}`);
    process.exitCode = 1;
    break;
  }
  await new Promise((r) => setTimeout(r, 500));
}
