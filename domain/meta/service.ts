import { z } from 'zod';
import { bpsToPct } from '../shared/money.ts';
import { FeeEnforcement, type GatewaySettings } from '../shared/settings.ts';
import type { Clock } from '../ports/clock.ts';
import { LoadedProgram } from '../ledger/programs.ts';
import type { Network } from '../shared/network.ts';

/** What one embedded ledger loaded at start, e.g. { programs: [{ id: 'CoRE…', name: 'mpl-core', source: 'directory' }], missing: [] } */
export const LedgerHealth = z.object({
  programs: z.array(LoadedProgram),
  /** well-known programs (domain/ledger/programs.ts) this ledger does not run: their routes answer program_unavailable */
  missing: z.array(z.object({ id: z.string(), name: z.string().nullable() })),
});
export type LedgerHealth = z.infer<typeof LedgerHealth>;

export const Health = z.object({
  ok: z.boolean(),
  time: z.string(),
  version: z.string(),
  protocol_fee: z.object({
    bps: z.number().int(),
    pct: z.string(),
    enforcement: FeeEnforcement,
    authorities: z.object({ 'chain-mainnet': z.string(), 'chain-devnet': z.string() }),
  }),
  /** the embedded ledgers (a network on a remote JSON-RPC node is absent) */
  ledger: z.object({ 'chain-devnet': LedgerHealth.optional(), 'chain-mainnet': LedgerHealth.optional() }),
});
export type Health = z.infer<typeof Health>;

export const Version = z.object({
  version: z.string(),
  commit: z.string(),
  api: z.literal('v1'),
  openapi: z.literal('3.1.0'),
});

export class MetaService {
  constructor(private readonly deps: { settings: GatewaySettings; clock: Clock; ledgers?: Partial<Record<Network, LedgerHealth>> | undefined }) {}

  /** hosted-api §4.8 health, with the protocol_fee block of fee-facilitator-mpp-tools §2.4. */
  health(): Health {
    const { fee, version } = this.deps.settings;
    return {
      ok: true,
      time: this.deps.clock.now().toISOString(),
      version,
      protocol_fee: { bps: fee.bps, pct: bpsToPct(fee.bps), enforcement: fee.enforcement, authorities: { ...fee.authorities } },
      ledger: { ...this.deps.ledgers },
    };
  }

  version(): z.infer<typeof Version> {
    return { version: this.deps.settings.version, commit: this.deps.settings.commit, api: 'v1', openapi: '3.1.0' };
  }
}
