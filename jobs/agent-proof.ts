import { z } from 'zod';
import type { TaskHandler } from '../domain/ports/job-queue.ts';
import type { AgentProof } from '../domain/agents/proof.ts';
import type { JobLogger } from './maintenance.ts';

// DECISIONS "Agents, submissions and events": agents recorded before records were checked against the ledger are
// unproven, and take no payments, until their Metaplex Core asset is seen with their recorded owner. This job looks
// for it, never-looked-at rows first; a first use (a link naming the agent, a paid call, a buyer payment) looks too.

export const PROVE_AGENTS_TASK = 'prove_agents';

/** An agent looked at is looked at again after this long (the job runs every minute). */
const RECHECK_MS = 10 * 60 * 1000;
const BATCH = 200;

const Payload = z.looseObject({ limit: z.number().int().min(1).max(10_000).optional() });

/** Idempotent: a look only ever sets proven_at (once) or ledger_checked_at. */
export const proveAgents =
  (deps: { proof: Pick<AgentProof, 'proveUnproven'>; log: JobLogger; now: () => Date }): TaskHandler =>
  async (payload) => {
    const parsed = Payload.safeParse(payload ?? {});
    const limit = (parsed.success ? parsed.data.limit : undefined) ?? BATCH;
    const tally = await deps.proof.proveUnproven({ limit, checkedBefore: new Date(deps.now().getTime() - RECHECK_MS) });
    if (tally.checked + tally.failed) deps.log.info(tally, 'unproven agents looked up on the ledger');
  };
