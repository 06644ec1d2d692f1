import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { WELL_KNOWN_PROGRAMS } from '../../domain/ledger/programs.ts';
import { NETWORKS, type Network } from '../../domain/shared/network.ts';
import type { Services } from '../services.ts';
import { asset, FAVICON } from './assets.ts';
import { escapeHtml, PAGE_CSP, prefersHtml } from './html.ts';

// GET / : what runs here, for a person (an HTML page) or a program (a small JSON index, docs/pages.md). Public, no key:
// it shows what the start-up lines print (version, networks, the programs each embedded ledger loaded) and where
// each door is; nothing a key guards.

export const GATEWAY_NAME = 'svc-gateway';

/** The JSON index of GET / (docs/pages.md); absolute URLs under the configured base URL. */
export const GatewayIndex = z.object({
  name: z.literal(GATEWAY_NAME),
  version: z.string(),
  commit: z.string(),
  /** the networks this gateway serves, e.g. ["chain-devnet", "chain-mainnet"] */
  networks: z.array(z.enum(NETWORKS)),
  links: z.object({
    explorer: z.string(),
    graphql: z.string(),
    docs: z.string(),
    openapi: z.string(),
    health: z.string(),
  }),
});
export type GatewayIndex = z.infer<typeof GatewayIndex>;

const LINKS: Record<keyof GatewayIndex['links'], { path: string; title: string; what: string }> = {
  explorer: { path: '/explorer', title: 'Explorer', what: 'live events, payment links and their counters, 402 offers, treasuries and receipt chains' },
  graphql: { path: '/graphql', title: 'GraphiQL', what: 'queries, mutations and subscriptions over GraphQL' },
  docs: { path: '/docs', title: 'API reference', what: 'every REST operation under /v1, rendered from /openapi.json' },
  openapi: { path: '/openapi.json', title: 'OpenAPI document', what: 'OpenAPI 3.1, for code generators and API tools' },
  health: { path: '/v1/health', title: 'Health', what: 'the protocol fee and the ledgers’ programs (needs an API key)' },
};

interface NetworkState {
  network: Network;
  ledger: 'embedded' | 'rpc';
  /** the embedded ledger's Solana JSON-RPC, for wallets */
  rpcUrl?: string | undefined;
  programs?: { name: string; title: string; id: string; loaded: boolean }[];
  /** how to get the missing well-known programs (`npm run programs`), when some are missing */
  command?: string | undefined;
}

function networksOf(services: Services, rpcUrls: Partial<Record<Network, string>>): NetworkState[] {
  const embedded = services.meta.health().ledger;
  return NETWORKS.filter((network) => services.ledgers[network]).map((network): NetworkState => {
    const health = embedded[network];
    if (!health) return { network, ledger: 'rpc' };
    const loaded = new Set(health.programs.map((p) => p.id));
    const programs = WELL_KNOWN_PROGRAMS.map((p) => ({ ...p, loaded: loaded.has(p.id) }));
    return {
      network,
      ledger: 'embedded',
      rpcUrl: rpcUrls[network],
      programs,
      command: programs.every((p) => p.loaded) ? undefined : (services.settings.programsCommand?.[network] ?? 'npm run programs'),
    };
  });
}

function index(services: Services): GatewayIndex {
  const { baseUrl, version, commit } = services.settings;
  const base = baseUrl.replace(/\/+$/, '');
  const links = Object.fromEntries(Object.entries(LINKS).map(([name, link]) => [name, `${base}${link.path}`])) as GatewayIndex['links'];
  return { name: GATEWAY_NAME, version, commit, networks: NETWORKS.filter((n) => services.ledgers[n]), links };
}

function networkHtml(n: NetworkState): string {
  if (n.ledger === 'rpc')
    return `<section class="network" data-network="${n.network}"><h3>${n.network}</h3><p>a Solana JSON-RPC node (configured, not embedded)</p></section>`;
  const rows = (n.programs ?? [])
    .map(
      (p) =>
        `<tr data-program="${p.name}" data-loaded="${p.loaded}"><td>${escapeHtml(p.title)}</td><td><code>${p.id}</code></td><td class="${p.loaded ? 'ok' : 'missing'}">${p.loaded ? 'loaded' : 'missing'}</td></tr>`,
    )
    .join('');
  const rpc = n.rpcUrl ? ` Wallets and Solana clients reach it at <code>${escapeHtml(n.rpcUrl)}</code>.` : '';
  // program_unavailable names the same command (domain/ledger/programs.ts): routes needing a missing program refuse
  const command = n.command
    ? `<p class="missing">Routes that call a missing program answer <code>program_unavailable</code>. Copy them once from Solana's public devnet, then restart the gateway: <code class="command">${escapeHtml(n.command)}</code></p>`
    : '';
  return (
    `<section class="network" data-network="${n.network}"><h3>${n.network}</h3><p>embedded ledger (LiteSVM, simulated on this machine).${rpc}</p>` +
    `<table class="programs"><thead><tr><th>program</th><th>id</th><th>state</th></tr></thead><tbody>${rows}</tbody></table>${command}</section>`
  );
}

function pageHtml(services: Services, networks: NetworkState[]): string {
  const { version, commit } = services.settings;
  const links = Object.entries(LINKS)
    .map(([name, l]) => `<li><a data-link="${name}" href="${l.path}">${escapeHtml(l.title)}</a> <code>${l.path}</code> — ${escapeHtml(l.what)}</li>`)
    .join('');
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>svc gateway</title>
<link rel="icon" type="image/svg+xml" href="${FAVICON}">
<link rel="stylesheet" href="${asset('pages', 'pages.css')}">
</head>
<body>
<main>
<h1><img src="${FAVICON}" alt="" width="32" height="32"> svc gateway</h1>
<p>A payment gateway for AI agents on Solana: payment links answering HTTP 402 (x402 and MPP), hash-chained receipts and one stream of on-chain events.</p>
<p class="version">version <code id="version">${escapeHtml(version)}</code>, commit <code id="commit">${escapeHtml(commit)}</code></p>
<h2>Pages and documents</h2>
<ul class="links">${links}</ul>
<p>Programs read <code>GET /</code> with <code>Accept: application/json</code> for these links; REST is under <code>/v1</code>, tRPC under <code>/trpc</code>.</p>
<h2>Networks</h2>
${networks.length ? networks.map(networkHtml).join('\n') : '<p>No ledger is open in this process.</p>'}
</main>
</body>
</html>
`;
}

export function registerLandingRoutes(app: FastifyInstance, deps: { services: Services; rpcUrls: Partial<Record<Network, string>> }): void {
  const { services } = deps;
  app.get('/', (req: FastifyRequest, reply: FastifyReply) => {
    void reply.header('vary', 'Accept').header('cache-control', 'no-cache');
    if (!prefersHtml(req.headers.accept)) return reply.type('application/json; charset=utf-8').send(index(services));
    return reply
      .type('text/html; charset=utf-8')
      .headers({ 'content-security-policy': PAGE_CSP, 'x-content-type-options': 'nosniff' })
      .send(pageHtml(services, networksOf(services, deps.rpcUrls)));
  });
}
