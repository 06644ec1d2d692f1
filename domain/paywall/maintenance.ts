import type { Clock } from '../ports/clock.ts';
import type { Store } from '../ports/store.ts';

/**
 * Clean-up of paid_calls; run by a recurring job. Answered payments are kept for their 24 h replay window (a later
 * replay is refused by the facilitator's duplicate guard either way); calls whose settle outcome is still unknown
 * are kept, as the only trace of a payment that may have landed.
 */
export class PaidCallMaintenance {
  constructor(private readonly deps: { store: Store; clock: Clock }) {}

  /** Answered calls past their window, and the payment ids bound for as long (payment-id.ts); returns the calls. */
  async prune(): Promise<number> {
    const now = this.deps.clock.now();
    const [calls] = await Promise.all([this.deps.store.paidCalls.deleteExpired(now), this.deps.store.paymentIds.deleteExpired(now)]);
    return calls;
  }
}
