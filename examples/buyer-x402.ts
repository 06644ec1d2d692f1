// Pay a payment link with the official x402 client (@x402/fetch). The gateway charges a protocol fee in the same
// transaction as the price; the stock "exact" scheme does not add that leg, so register the fee-layout scheme the
// package publishes — one line — and the official client pays the gateway's links unmodified.
//
//   SVC_API_KEY=svc_test_… node --import tsx examples/buyer-x402.ts 'http://localhost:8080/x/<id>?network=chain-devnet'
import { createKeyPairSignerFromBytes } from '@solana/kit';
import { Keypair } from '@solana/web3.js';
import { decodePaymentResponseHeader, wrapFetchWithPayment, x402Client } from '@x402/fetch';
import { ExactSvmFeeScheme } from 'svc-gateway/x402';

const url = process.env.SVC_URL ?? 'http://localhost:8080';
const rpcUrl = process.env.SVC_RPC_URL ?? 'http://127.0.0.1:8899';
const shareUrl = process.argv[2] ?? process.env.SVC_SHARE_URL;
if (!shareUrl) throw new Error('Pass the share URL of a payment link (argument or SVC_SHARE_URL).');

// A fresh wallet funded from the devnet faucet; the official clients take a @solana/kit signer.
const wallet = Keypair.generate();
const funded = await fetch(`${url}/v1/dev/faucet`, {
  method: 'POST',
  headers: { authorization: `Bearer ${process.env.SVC_API_KEY}`, 'content-type': 'application/json' },
  body: JSON.stringify({ address: wallet.publicKey.toBase58(), token: 'USDC', amount: '1' }),
});
if (!funded.ok) throw new Error(`faucet: ${funded.status} ${await funded.text()}`);
const signer = await createKeyPairSignerFromBytes(wallet.secretKey);

// The one line: ExactSvmFeeScheme for every Solana network (it checks the offer's fee terms against the
// facilitator's published ones before signing).
const client = new x402Client().register('solana:*', new ExactSvmFeeScheme(signer, { rpcUrl }));
const res = await wrapFetchWithPayment(fetch, client)(shareUrl);
console.log(`${res.status} ${await res.text()}`);
const header = res.headers.get('PAYMENT-RESPONSE');
if (header) console.log(`Paid in transaction ${decodePaymentResponseHeader(header).transaction}`);
else process.exitCode = 1;
