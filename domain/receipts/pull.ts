import { DomainError } from '../shared/errors.ts';
import { newId } from '../shared/ids.ts';
import { iso, isoOrNull } from '../shared/settings.ts';
import { parseInput } from '../shared/validation.ts';
import type { Clock } from '../ports/clock.ts';
import type { OutboundHttp } from '../ports/outbound-http.ts';
import type { Store } from '../ports/store.ts';
import { canAccess, type Caller } from '../access/ownership.ts';
import { CreatePullTargetInput, PULL_MAX_BYTES, PULL_MAX_ITEMS, nextPullDelaySeconds, type PullTarget, type PullTargetRecord } from './pull-targets.ts';
import type { ReceiptService } from './service.ts';

// hosted-api §2.9/§4.7, DECISIONS "Receipts": pull targets and the pull worker's run. The worker leases due targets
// (so two runners never fetch one target at once), fetches each through the SSRF-guarded outbound port, ingests the
// items in order through the same path as a push (idempotent on receipt_hash), and records the outcome — with backoff
// after a failed fetch — on the target.

export function toPullTarget(r: PullTargetRecord): PullTarget {
  return {
    id: r.id,
    network: r.network,
    agent: r.agent,
    url: r.url,
    format: r.format,
    interval_seconds: r.intervalSeconds,
    next_run_at: iso(r.nextRunAt),
    last_run_at: isoOrNull(r.lastRunAt),
    last_status: r.lastStatus,
    last_error: r.lastError,
    consecutive_failures: r.consecutiveFailures,
    accepted_total: r.acceptedTotal,
    rejected_total: r.rejectedTotal,
    created_at: iso(r.createdAt),
  };
}

/** One item the worker refused, e.g. { index: 3, code: "receipt_chain_invalid", message: "…" }. */
export interface PullRejection {
  index: number;
  code: string;
  message: string;
}

export interface PullRunResult {
  targetId: string;
  ok: boolean;
  error: string | null;
  accepted: number;
  duplicates: number;
  rejected: PullRejection[];
}

/** How long a run holds a target before another runner may take it over. */
const LEASE_MS = 120_000;
const FETCH_TIMEOUT_MS = 15_000;

export class PullService {
  constructor(
    private readonly deps: {
      store: Store;
      clock: Clock;
      outbound: OutboundHttp;
      receipts: ReceiptService;
      /** wakes the pull worker (the job queue), e.g. right after a target is created */
      wake?: ((at: Date) => Promise<void>) | undefined;
      onWarning?: ((message: string, context: Record<string, unknown>) => void) | undefined;
    },
  ) {}

  async create(caller: Caller, input: CreatePullTargetInput): Promise<PullTarget> {
    const parsed = parseInput(CreatePullTargetInput, input);
    const agent = await this.ownedAgent(caller, parsed.mint);
    // The same refusals as the fetch (scheme, allow-list, private addresses), answered now rather than at every run.
    const refused = await this.deps.outbound.check(parsed.url);
    if (refused) {
      throw DomainError.invalid([{ path: 'url', message: refused.message, code: refused.reason }], `The pull target URL cannot be fetched: ${refused.message}`);
    }
    const now = this.deps.clock.now();
    const record: PullTargetRecord = {
      id: newId(now.getTime()),
      network: caller.network,
      agent: parsed.mint,
      ownerPrincipal: agent.ownerPrincipal ?? caller.owner,
      url: parsed.url,
      format: parsed.format,
      intervalSeconds: parsed.interval_seconds,
      nextRunAt: now,
      lastRunAt: null,
      lastStatus: null,
      lastError: null,
      consecutiveFailures: 0,
      acceptedTotal: 0,
      rejectedTotal: 0,
      createdAt: now,
    };
    await this.deps.store.pullTargets.insert(record);
    await this.deps.wake?.(now).catch((err) => this.deps.onWarning?.('pull worker not woken; its next tick runs the target', { err: String(err) }));
    return toPullTarget(record);
  }

  async list(caller: Caller, mint: string): Promise<{ data: PullTarget[]; next_cursor: null; has_more: false }> {
    await this.ownedAgent(caller, mint);
    // One target per (network, agent, url): an agent's list is short; 200 is the list maximum of DECISIONS.
    const rows = await this.deps.store.pullTargets.listByAgent(caller.network, mint, { limit: 200 });
    return { data: rows.filter((r) => canAccess(caller, r.ownerPrincipal)).map(toPullTarget), next_cursor: null, has_more: false };
  }

  async delete(caller: Caller, mint: string, id: string): Promise<void> {
    await this.ownedAgent(caller, mint);
    const target = await this.deps.store.pullTargets.get(caller.network, id);
    if (!target || target.agent !== mint || !canAccess(caller, target.ownerPrincipal)) throw notFound(id);
    await this.deps.store.pullTargets.delete(caller.network, id);
  }

  /** One worker tick: runs every due target; returns what each did and when the next is due. */
  async runDue(limit = 20): Promise<{ runs: PullRunResult[]; nextDue: Date | null }> {
    const now = this.deps.clock.now();
    const targets = await this.deps.store.pullTargets.claimDue(now, new Date(now.getTime() + LEASE_MS), limit);
    const runs: PullRunResult[] = [];
    for (const target of targets) runs.push(await this.run(target));
    return { runs, nextDue: await this.deps.store.pullTargets.nextDue() };
  }

  private async run(target: PullTargetRecord): Promise<PullRunResult> {
    const fetched = await this.fetch(target);
    const at = this.deps.clock.now();
    if (!fetched.ok) {
      const failures = target.consecutiveFailures + 1;
      const nextRunAt = new Date(at.getTime() + nextPullDelaySeconds(target.intervalSeconds, failures) * 1000);
      await this.deps.store.pullTargets.recordRun(target.network, target.id, { at, ok: false, error: fetched.error, accepted: 0, rejected: 0, nextRunAt });
      return { targetId: target.id, ok: false, error: fetched.error, accepted: 0, duplicates: 0, rejected: [] };
    }
    const agent = await this.deps.store.agents.get(target.network, target.agent);
    let accepted = 0;
    let duplicates = 0;
    const rejected: PullRejection[] = [];
    for (const [index, item] of fetched.items.entries()) {
      if (item instanceof Error) {
        rejected.push({ index, code: 'invalid_request', message: item.message });
        continue;
      }
      try {
        const out = await this.deps.receipts.ingest({
          network: target.network,
          agent: target.agent,
          owner: agent?.ownerPrincipal ?? target.ownerPrincipal,
          body: item,
          via: { source: 'pull', pullTargetId: target.id },
        });
        if (out.duplicate) duplicates++;
        else accepted++;
      } catch (err) {
        if (!(err instanceof DomainError)) throw err;
        rejected.push({ index, code: err.code, message: err.message });
      }
    }
    const first = rejected[0];
    const error = first ? `${rejected.length} item(s) refused; first at index ${first.index}: ${first.code}: ${first.message}`.slice(0, 1000) : null;
    const nextRunAt = new Date(at.getTime() + target.intervalSeconds * 1000);
    await this.deps.store.pullTargets.recordRun(target.network, target.id, { at, ok: true, error, accepted, rejected: rejected.length, nextRunAt });
    return { targetId: target.id, ok: true, error, accepted, duplicates, rejected };
  }

  /** GET the target (no auth, SSRF-guarded, size-capped) and split it into items; an unparsable item is an Error. */
  private async fetch(target: PullTargetRecord): Promise<{ ok: true; items: (unknown | Error)[] } | { ok: false; error: string }> {
    const answer = await this.deps.outbound.request({
      url: target.url,
      method: 'GET',
      headers: { accept: target.format === 'json' ? 'application/json' : 'application/x-ndjson, application/jsonl, text/plain' },
      timeoutMs: FETCH_TIMEOUT_MS,
      maxResponseBytes: PULL_MAX_BYTES,
    });
    if (!answer.ok) return { ok: false, error: `${answer.reason}: ${answer.message}` };
    if (answer.status < 200 || answer.status > 299) return { ok: false, error: `The target answered HTTP ${answer.status}.` };
    const text = new TextDecoder('utf-8', { fatal: false }).decode(answer.body);
    let items: (unknown | Error)[];
    if (target.format === 'json') {
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch {
        return { ok: false, error: 'The body is not JSON (format json expects an array of receipts).' };
      }
      if (!Array.isArray(parsed)) return { ok: false, error: 'The body is not a JSON array (format json expects an array of receipts).' };
      items = parsed;
    } else {
      items = text
        .split('\n')
        .map((line) => line.trim())
        .filter((line) => line !== '')
        .map((line, i) => {
          try {
            return JSON.parse(line) as unknown;
          } catch {
            return new Error(`Line ${i + 1} is not JSON.`);
          }
        });
    }
    if (items.length > PULL_MAX_ITEMS) return { ok: false, error: `The body holds ${items.length} items; at most ${PULL_MAX_ITEMS} per fetch.` };
    return { ok: true, items };
  }

  private async ownedAgent(caller: Caller, mint: string) {
    const agent = await this.deps.store.agents.get(caller.network, mint);
    if (!agent || !canAccess(caller, agent.ownerPrincipal)) {
      throw new DomainError('agent_not_found', `No agent ${mint} on ${caller.network}.`, { mint, network: caller.network });
    }
    return agent;
  }
}

function notFound(id: string): DomainError {
  return new DomainError('not_found', `No pull target ${id}.`, { id });
}
