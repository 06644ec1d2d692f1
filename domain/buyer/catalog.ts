import type { Facilitator } from '../ports/facilitator.ts';
import type { FacilitatorHealth, SupportedResponse } from '../facilitator/wire.ts';
import { bpsToPct } from '../shared/money.ts';
import { CAIP2, NETWORKS, STABLES, X402_V1_NETWORK, type Network, type Stable } from '../shared/network.ts';
import type { GatewaySettings } from '../shared/settings.ts';
import { bounded } from '../shared/pagination.ts';
import type { BuyerCurrencies, FacilitatorInfo, NetworkCatalogue, StableInfo } from './schema.ts';

// What a buyer (and a seller) needs to know before paying: the networks and their curated stables — from
// the one STABLES definition the seller side answers from too — and the facilitator that settles (GET
// /v1/seller/facilitator: its URL, fee payer per network and its own /health).

export const stableInfo = (s: Stable): StableInfo => ({
  symbol: s.symbol,
  mint: s.mint,
  decimals: s.decimals,
  token_program: s.tokenProgram,
  token_program_id: s.tokenProgramId,
});

export interface BuyerCatalogDeps {
  settings: GatewaySettings;
  /** the facilitator the paywall settles through; absent in a process without ledgers */
  facilitator: Facilitator | undefined;
}

export class BuyerCatalog {
  constructor(private readonly deps: BuyerCatalogDeps) {}

  /** GET /v1/buyer/networks and GET /v1/seller/networks: both networks, the caller's marked current. */
  networks(current: Network): NetworkCatalogue {
    const { fee, facilitatorUrl } = this.deps.settings;
    return bounded(
      NETWORKS.map((network) => ({
        network,
        caip2: CAIP2[network],
        x402_network: X402_V1_NETWORK[network],
        current: network === current,
        rails: ['x402', 'mpp'],
        facilitator: facilitatorUrl,
        protocol_fee: { bps: fee.bps, pct: bpsToPct(fee.bps), authority: fee.authorities[network] },
        stables: STABLES[network].map(stableInfo),
      })),
    );
  }

  currencies(network: Network): BuyerCurrencies {
    return { network, ...bounded(STABLES[network].map(stableInfo)) };
  }

  /** GET /v1/seller/facilitator: never fails on the facilitator's account — an unanswered /health is reported. */
  async facilitator(): Promise<FacilitatorInfo> {
    const f = this.deps.facilitator;
    let health: FacilitatorHealth | null = null;
    let supported: SupportedResponse | null = null;
    let error: string | null = f ? null : 'No facilitator is configured in this process.';
    if (f) {
      try {
        [health, supported] = await Promise.all([f.health(), f.supported()]);
      } catch (e) {
        error = e instanceof Error ? e.message : String(e);
      }
    }
    return {
      url: this.deps.settings.facilitatorUrl,
      networks: NETWORKS.map((network) => {
        const caip2 = CAIP2[network];
        const signer = supported?.signers[caip2]?.[0] ?? supported?.signers['solana:*']?.[0] ?? null;
        const kinds = supported?.kinds.some((k) => k.network === caip2 || k.network === X402_V1_NETWORK[network]) ?? false;
        return {
          network,
          caip2,
          fee_payer: signer ?? (health?.networks.includes(network) ? health.fee_payer : null),
          supported: kinds || (health?.networks.includes(network) ?? false),
        };
      }),
      health: health
        ? {
            ok: health.ok,
            fee_payer: health.fee_payer,
            networks: health.networks,
            protocol_fee: {
              bps: health.protocol_fee.bps,
              enforcement: health.protocol_fee.enforcement,
              authority: health.protocol_fee.authority,
              authorities: health.protocol_fee.authorities,
            },
          }
        : null,
      health_error: error,
    };
  }
}
