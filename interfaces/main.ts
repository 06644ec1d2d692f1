import { performance } from 'node:perf_hooks';
import { loadConfigOrExit, programsCommand } from './config.ts';
import { createApp } from './app.ts';
import { onShutdownSignal } from './shutdown.ts';
import { announceGateway, localUrl } from './announce.ts';

// npm start: embedded PostgreSQL under SVC_DATA_DIR (or DATABASE_URL), migrations, one HTTP port.

async function main(): Promise<void> {
  const started = performance.now();
  const config = loadConfigOrExit();
  const app = await createApp(config);
  const base = app.services.settings.baseUrl;
  const db = app.database.embedded
    ? `embedded PostgreSQL in ${config.dataDir}/pg${app.database.reused ? ' (already running, reused)' : ''}`
    : 'PostgreSQL at DATABASE_URL';
  const lines = [
    `svc gateway ${app.services.settings.version} ready in ${Math.round(performance.now() - started)} ms`,
    `  Home        ${base}/   (in a browser: what runs here and a link to every page)`,
    `  REST        ${base}/v1   (e.g. GET ${base}/v1/health with Authorization: Bearer <key>)`,
    `  OpenAPI     ${base}/openapi.json   (rendered as the API reference at ${base}/docs)`,
    `  tRPC        ${base}/trpc`,
    `  GraphQL     ${base}/graphql   (GraphiQL in a browser; graphql-ws and SSE subscriptions on the same path)`,
    `  Explorer    ${base}/explorer  (live events, links, treasuries and receipts in a browser)`,
    `  database    ${db}`,
    ...Object.entries(app.ledgers.rpcUrls).map(
      ([network, url]) => `  ledger      ${network}: ${app.ledgers.embedded[network as 'chain-devnet'] ? 'embedded, JSON-RPC at ' : ''}${url}`,
    ),
    ...Object.entries(app.ledgers.programs ?? {}).map(
      ([network, p]) =>
        `  programs    ${network}: ${p.programs.map((x) => `${x.name ?? x.id} (${x.source})`).join(', ') || 'none'}${p.missing.length ? `; missing ${p.missing.map((x) => x.name ?? x.id).join(', ')}` : ''}`,
    ),
    // agents are Core assets: without the programs, minting one answers program_unavailable — say how to get them
    ...(Object.values(app.ledgers.programs ?? {}).some((p) => p.missing.length)
      ? [`              to add the missing programs: ${programsCommand(config)} (copies them from Solana devnet), then restart`]
      : []),
    `  API key     npm run keys -- create --network chain-devnet [--admin]`,
  ];
  console.log(lines.join('\n'));
  // npm run keys / demo / pay find this gateway through its data directory (interfaces/announce.ts).
  const announced = await announceGateway(config.dataDir, {
    url: localUrl(config.host, Number(new URL(app.url).port) || config.port),
    rpcUrls: app.ledgers.rpcUrls,
  });

  onShutdownSignal(async (signal) => {
    app.log.info({ signal }, 'shutting down');
    await announced.remove();
    await app.close();
  });
}

main().catch((e) => {
  console.error('svc gateway failed to start:', e instanceof Error ? e.message : e);
  if (e instanceof Error && e.cause) console.error(e.cause);
  process.exit(1);
});
