import { z } from 'zod';
import { MPL_CORE_PROGRAM_ID } from '../treasury/derive.ts';

// The programs an embedded ledger runs besides LiteSVM's built-ins. "Well-known" = the ones the gateway's
// own transactions call; SVC_LEDGER_CLONE_URL copies exactly these (when missing) from a Solana JSON-RPC.

export const AGENT_REGISTRY_IDENTITY_PROGRAM_ID = '1DREGFgysWYxLnRnKQnwrxnJQeSMk2HmGaC6whw2B2p';
export const AGENT_REGISTRY_TOOLS_PROGRAM_ID = 'TLREGni9ZEyGC3vnPZtqUh95xQ8oPqJSvNjvB7FGK8S';

/**
 * the one list of programs the gateway needs on a ledger, by id, with a short name for logs, /v1/health and
 * `npm run programs`, and the title errors give it (program_unavailable)
 */
export const WELL_KNOWN_PROGRAMS: readonly { id: string; name: string; title: string }[] = [
  { id: MPL_CORE_PROGRAM_ID, name: 'mpl-core', title: 'Metaplex Core' },
  { id: AGENT_REGISTRY_IDENTITY_PROGRAM_ID, name: 'mpl-agent-registry-identity', title: 'Metaplex Agent Registry identity' },
  { id: AGENT_REGISTRY_TOOLS_PROGRAM_ID, name: 'mpl-agent-registry-tools', title: 'Metaplex Agent Registry tools' },
];

/** the short name of a well-known program, else null (a program loaded from the directory that the gateway does not call) */
export function programName(id: string): string | null {
  return WELL_KNOWN_PROGRAMS.find((p) => p.id === id)?.name ?? null;
}

/**
 * where a program's ELF came from: SVC_LEDGER_PROGRAMS, a copy cloned from SVC_LEDGER_CLONE_URL (cached), or — for a
 * well-known program neither gave at this start — the ledger's saved state (it was loaded at an earlier start)
 */
export const ProgramSource = z.enum(['directory', 'clone', 'state']);
export type ProgramSource = z.infer<typeof ProgramSource>;

/** one program an embedded ledger loaded at start, e.g. { id: 'CoRE…', name: 'mpl-core', source: 'directory' } */
export const LoadedProgram = z
  .object({
    id: z.string().describe('program address'),
    name: z.string().nullable().describe('program name; null when unknown'),
    source: ProgramSource.describe('directory (SVC_LEDGER_PROGRAMS), clone (SVC_LEDGER_CLONE_URL) or state (saved ledger state)'),
  })
  .describe('A program an embedded ledger loaded.');
export type LoadedProgram = z.infer<typeof LoadedProgram>;
