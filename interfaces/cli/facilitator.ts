import { loadConfigOrExit } from '../config.ts';
import { createFacilitatorApp } from '../facilitator/app.ts';
import { onShutdownSignal } from '../shutdown.ts';

// npm run facilitator: the x402 facilitator as its own HTTP service (fee-facilitator-mpp-tools §2.5, §4.1).

async function main(): Promise<void> {
  const config = loadConfigOrExit();
  const app = await createFacilitatorApp(config);
  const health = await app.service.health();
  console.log(
    [
      `svc facilitator ready at ${app.url}`,
      `  POST /verify  POST /settle  GET /supported  GET /health  POST /accounts (${config.facilitator.accountsSecret ? 'bearer SVC_FACILITATOR_ACCOUNTS_SECRET' : 'closed: no SVC_FACILITATOR_ACCOUNTS_SECRET'})`,
      `  fee payer   ${health.fee_payer}`,
      `  networks    ${health.networks.map((n) => `${n} (${app.rpcUrls[n]})`).join(', ')}`,
      `  fee         ${health.protocol_fee.bps} bps, ${health.protocol_fee.enforcement}`,
    ].join('\n'),
  );
  onShutdownSignal(async () => {
    await app.close();
  });
}

main().catch((e) => {
  console.error('svc facilitator failed to start:', e instanceof Error ? e.message : e);
  process.exit(1);
});
