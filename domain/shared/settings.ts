import { z } from 'zod';
import type { Network } from './network.ts';

/** SVC_FEE_ENFORCE: what the facilitator does with a payment lacking the fee leg (fee-facilitator-mpp-tools §2.5). */
export const FeeEnforcement = z.enum(['enforce', 'warn', 'off']);
export type FeeEnforcement = z.infer<typeof FeeEnforcement>;

/** Values from configuration that domain rules need; built once by the composition root. */
export interface GatewaySettings {
  /** public base URL, e.g. "http://localhost:8080" */
  baseUrl: string;
  /** facilitator URL each link advertises, e.g. "http://localhost:8080/facilitator" */
  facilitatorUrl: string;
  version: string;
  commit: string;
  fee: {
    bps: number;
    enforcement: FeeEnforcement;
    authorities: Record<Network, string>;
  };
  /**
   * per network whose ledger this installation runs (embedded): the command that copies the well-known programs
   * into it, e.g. "npm run programs"; program_unavailable names it. Absent for a network on a remote node.
   */
  programsCommand?: Partial<Record<Network, string>>;
}

export const iso = (d: Date): string => d.toISOString();
export const isoOrNull = (d: Date | null): string | null => (d ? d.toISOString() : null);
