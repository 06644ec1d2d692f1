import { DomainError } from '../shared/errors.ts';
import type { GatewaySettings } from '../shared/settings.ts';
import type { Clock } from '../ports/clock.ts';
import type { Store } from '../ports/store.ts';
import { callFromKept, type PaidCalls } from './call.ts';

// DECISIONS "x402 on the paywall": a payment that landed is always recorded. Run by the job
// resolve_paid_calls (every minute, in any process that runs jobs).

export interface ReconcileTally {
  /** recorded (or found recorded) */
  resolved: number;
  /** refused: nothing landed, the claim was dropped */
  refused: number;
  /** outcome still unknown, or cannot be finished yet: the next run tries again */
  pending: number;
  /** claims that never reached settlement, whose owner is gone (nothing moved) */
  forgotten: number;
}

export class PaidCallReconciler {
  constructor(
    private readonly deps: { store: Store; clock: Clock; settings: GatewaySettings; onWarning?: (message: string, context: Record<string, unknown>) => void },
    private readonly calls: PaidCalls,
  ) {}

  /**
   * Paid calls nobody answered — a settle outcome that was unknown, or a process that died with the claim — and whose
   * buyer has not come back within `olderThanMs` are settled again from their kept request: recorded (receipt,
   * counters, events, webhook, the response a replay will get) when they landed, forgotten when they were refused,
   * left pending when the outcome is still unknown. A claim that never reached settlement (nothing moved) is forgotten.
   */
  async resolvePending(options: { olderThanMs?: number; limit?: number } = {}): Promise<ReconcileTally> {
    const { store, clock, onWarning } = this.deps;
    const now = clock.now();
    const before = new Date(now.getTime() - (options.olderThanMs ?? 60_000));
    const tally: ReconcileTally = { resolved: 0, refused: 0, pending: 0, forgotten: 0 };
    for (const row of await store.paidCalls.listUnresolved({ before, now, limit: options.limit ?? 20 })) {
      if (!row.attempted || !row.request) {
        if (await store.paidCalls.forgetUnattempted(row.network, row.paymentKey, now)) tally.forgotten++;
        else if (row.status === 'pending') {
          onWarning?.('a pending paid call cannot be resolved: its request was not kept', { network: row.network, payment_key: row.paymentKey });
          tally.pending++;
        }
        continue;
      }
      const link = await store.paymentLinks.get(row.network, row.linkId);
      if (!link || link.pk !== row.linkPk) {
        onWarning?.('a pending paid call cannot be resolved: its link is gone', {
          network: row.network,
          payment_key: row.paymentKey,
          signature: row.signature,
        });
        tally.pending++;
        continue;
      }
      try {
        const result = await this.calls.pay(callFromKept(this.deps.settings.baseUrl, link, row.paymentKey, row.request), 0);
        if (result.kind === 'refused') tally.refused++;
        else tally.resolved++;
      } catch (e) {
        // Still settling is the normal case; anything else (a failure, or a call this process cannot settle) is shown.
        if (!(e instanceof DomainError && e.code === 'payment_pending' && e.details?.reason === undefined)) {
          onWarning?.('resolving a pending paid call failed; will retry', { payment_key: row.paymentKey, error: (e as Error).message });
        }
        tally.pending++;
      }
    }
    return tally;
  }
}
