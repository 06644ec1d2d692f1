import { z } from 'zod';
import { bpsToPct } from '../shared/money.ts';
import { FeeEnforcement, type GatewaySettings } from '../shared/settings.ts';
import type { Clock } from '../ports/clock.ts';

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
});
export type Health = z.infer<typeof Health>;

export const Version = z.object({
  version: z.string(),
  commit: z.string(),
  api: z.literal('v1'),
  openapi: z.literal('3.1.0'),
});

export class MetaService {
  constructor(private readonly deps: { settings: GatewaySettings; clock: Clock }) {}

  /** hosted-api §4.8 health, with the protocol_fee block of fee-facilitator-mpp-tools §2.4. */
  health(): Health {
    const { fee, version } = this.deps.settings;
    return {
      ok: true,
      time: this.deps.clock.now().toISOString(),
      version,
      protocol_fee: { bps: fee.bps, pct: bpsToPct(fee.bps), enforcement: fee.enforcement, authorities: { ...fee.authorities } },
    };
  }

  version(): z.infer<typeof Version> {
    return { version: this.deps.settings.version, commit: this.deps.settings.commit, api: 'v1', openapi: '3.1.0' };
  }
}
