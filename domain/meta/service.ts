import { z } from 'zod';
import { bpsToPct } from '../shared/money.ts';
import { FeeEnforcement, type GatewaySettings } from '../shared/settings.ts';
import type { Clock } from '../ports/clock.ts';
import { LoadedProgram } from '../ledger/programs.ts';
import type { Network } from '../shared/network.ts';

/** What one embedded ledger loaded at start, e.g. { programs: [{ id: 'CoRE…', name: 'mpl-core', source: 'directory' }], missing: [] } */
export const LedgerHealth = z.object({
  programs: z.array(LoadedProgram).describe('programs the ledger runs besides the built-in ones'),
  missing: z
    .array(z.object({ id: z.string().describe('program address'), name: z.string().nullable().describe('program name; null when unknown') }))
    .describe('well-known programs (domain/ledger/programs.ts) this ledger does not run: their routes answer program_unavailable'),
});
export type LedgerHealth = z.infer<typeof LedgerHealth>;

export const Health = z
  .object({
    ok: z.boolean().describe('true when the gateway is up'),
    time: z.string().describe('ISO 8601 server time'),
    version: z.string().describe('the gateway’s version'),
    protocol_fee: z
      .object({
        bps: z.number().int().describe('fee rate in basis points'),
        pct: z.string().describe('the same rate in percent, decimal string'),
        enforcement: FeeEnforcement.describe('enforce, warn or off (SVC_FEE_ENFORCE)'),
        authorities: z
          .object({
            'chain-mainnet': z.string().describe('fee authority on chain-mainnet'),
            'chain-devnet': z.string().describe('fee authority on chain-devnet'),
          })
          .describe('the fee authority per network: buyers refuse to sign when theirs differs'),
      })
      .describe('the protocol fee block (fee-facilitator-mpp-tools §2.4)'),
    ledger: z
      .object({
        'chain-devnet': LedgerHealth.describe('the chain-devnet embedded ledger').optional(),
        'chain-mainnet': LedgerHealth.describe('the chain-mainnet embedded ledger').optional(),
      })
      .describe('the embedded ledgers (a network on a remote JSON-RPC node is absent)'),
  })
  .describe('Health of the gateway (hosted-api §4.8).');
export type Health = z.infer<typeof Health>;

export const Version = z
  .object({
    version: z.string().describe('the gateway’s version'),
    commit: z.string().describe('the source commit'),
    api: z.literal('v1').describe("'v1'"),
    openapi: z.literal('3.1.0').describe("'3.1.0'"),
  })
  .describe('Versions (DECISIONS "Wire conventions").');

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
