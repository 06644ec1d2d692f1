// Sell an endpoint: create a payment link that answers HTTP 402 until a buyer pays, then serves its response.
//
//   SVC_API_KEY=svc_test_… SVC_AGENT_MINT=<your agent> node --import tsx examples/seller.ts
//
// The link's money goes to an agent's treasury, so the link names an agent of yours (`owner_agent`): mint one with
// examples/sign-and-submit-web3.ts (or sign-and-submit-kit.ts) and pass the mint it prints.
import { createClient, errorCode } from 'svc-gateway/client';

const url = process.env.SVC_URL ?? 'http://localhost:8080';
const apiKey = process.env.SVC_API_KEY;
const ownerAgent = process.env.SVC_AGENT_MINT;
if (!apiKey || !ownerAgent) throw new Error('Set SVC_API_KEY (npm run keys -- create --network chain-devnet) and SVC_AGENT_MINT.');

// The typed tRPC client: the same procedures as REST /v1, with their inputs and outputs checked by the compiler.
const svc = createClient({ url, apiKey });

try {
  const link = await svc.paymentLinks.create.mutate({
    label: 'Weather report',
    owner_agent: ownerAgent,
    method: 'GET',
    price: '$0.01', // also "0.01 USDC"; the atomic amount is derived from the stable's decimals
    // Served verbatim once paid. Set metadata.upstream_url instead to forward paid calls to your own server.
    response: { status: 200, mimeType: 'application/json', body: { forecast: 'sunny', high_c: 24 } },
  });
  console.log(`Created ${link.id}: ${link.price} per call, paid into ${link.pay_to}`);
  console.log(`Share URL: ${link.share_url}`);
  console.log(`See the 402: curl -i '${link.share_url}'`);
} catch (e) {
  // Branch on the API's snake_case code, never on the message (e.g. agent_not_found, forbidden, invalid_request).
  console.error(`Could not create the link: ${errorCode(e) ?? 'error'}: ${(e as Error).message}`);
  process.exitCode = 1;
}
