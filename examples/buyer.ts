// Pay a payment link once with the buyer kit: it reads the 402, signs the settlement transaction with your wallet
// and retries the request with the payment. The facilitator pays the network fee; the wallet only needs the stable.
//
//   SVC_API_KEY=svc_test_… node --import tsx examples/buyer.ts 'http://localhost:8080/x/<id>?network=chain-devnet'
//
// SVC_RPC_URL is the ledger's JSON-RPC the transaction is built against (npm start's embedded devnet:
// http://127.0.0.1:8899). The API key is used only to fund this example's fresh wallet from the devnet faucet.
import { Keypair } from '@solana/web3.js';
import { createPayingFetch, decodePaymentResponse, PaymentError } from 'svc-gateway/client/pay';

const url = process.env.SVC_URL ?? 'http://localhost:8080';
const rpcUrl = process.env.SVC_RPC_URL ?? 'http://127.0.0.1:8899';
const shareUrl = process.argv[2] ?? process.env.SVC_SHARE_URL;
if (!shareUrl) throw new Error('Pass the share URL of a payment link (argument or SVC_SHARE_URL).');

// A fresh wallet for the example; a real buyer loads its own key.
const buyer = Keypair.generate();
const funded = await fetch(`${url}/v1/dev/faucet`, {
  method: 'POST',
  headers: { authorization: `Bearer ${process.env.SVC_API_KEY}`, 'content-type': 'application/json' },
  body: JSON.stringify({ address: buyer.publicKey.toBase58(), token: 'USDC', amount: '1' }),
});
if (!funded.ok) throw new Error(`faucet: ${funded.status} ${await funded.text()}`);

// maxAmountAtomic caps what the kit will sign (price + protocol fee, in the stable's atomic units: 1 USDC here).
const pay = createPayingFetch({ signer: buyer, rpcUrl, network: 'chain-devnet', maxAmountAtomic: 1_000_000n });
try {
  const res = await pay(shareUrl);
  console.log(`${res.status} ${await res.text()}`);
  const settlement = res.headers.get('PAYMENT-RESPONSE');
  if (settlement) console.log(`Paid in transaction ${decodePaymentResponse(settlement).transaction}`);
  else process.exitCode = 1;
} catch (e) {
  // The kit refuses before signing when the offer is not what it should be: branch on e.code.
  if (e instanceof PaymentError) console.error(`Not paid (${e.code}): ${e.message}`);
  else throw e;
  process.exitCode = 1;
}
