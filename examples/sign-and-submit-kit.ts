// prepare → sign → submit → track with @solana/kit instead of web3.js: the same transaction, signed with
// partiallySignTransaction, which adds the owner's signature and keeps the gateway's for the new asset.
// This mints an agent (a Metaplex Core asset whose treasury can receive payments).
//
//   SVC_API_KEY=svc_test_… node --import tsx examples/sign-and-submit-kit.ts
import { generateKeyPairSigner, getBase64Encoder, getBase64EncodedWireTransaction, getTransactionDecoder, partiallySignTransaction } from '@solana/kit';

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
const owner = await generateKeyPairSigner();
await api('POST', '/dev/faucet', { address: owner.address, sol: '1' });

// 1. prepare
const prepared = await api('POST', '/agents/prepare', { owner: owner.address, name: 'My first agent' });
console.log(`prepared event ${prepared.event_id}: asset ${prepared.echo.asset}`);

// 2. sign: decode the wire bytes (signatures included), add the owner's signature to its slot.
const transaction = getTransactionDecoder().decode(getBase64Encoder().encode(prepared.transaction.base64));
const signed = await partiallySignTransaction([owner.keyPair], transaction);

// 3. submit
const submitted = await api('POST', '/submit', { event_id: prepared.event_id, transaction_base64: getBase64EncodedWireTransaction(signed) });
console.log(`submitted ${submitted.signature}`);

// 4. track until the ledger decided
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
